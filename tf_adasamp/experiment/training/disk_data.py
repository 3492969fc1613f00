"""Image classification data in ArrayRecord files, for the trainer's
--data_path.

The records are `tf_adasamp.sources.encode_image_example`'s (docs/data.md,
"Image classification files"). The training file stays on disk: each step
reads only the records it drew, through the stage's reader
(`tf_adasamp.sources.index_reader`), and the evaluations read the training
examples they measure (`--train_eval_size` of them, else all) from it at
each evaluation point. `load` reads it through once, a chunk at a time,
to check every record before the run writes anything. The test file is
read into memory once, as the evaluations read all of it each time.

`DiskDataset` answers what the trainer asks of `datasets.Dataset`.
"""

import dataclasses
import os

from google.protobuf import message
import numpy as np

from tf_adasamp import sources
from tf_adasamp.experiment.training import run_files

# Records read at a time where a whole file is read.
READ_CHUNK = 4096
# What a record that is not encode_image_example's raises as it is decoded.
_BAD_RECORD_ERRORS = (message.DecodeError, IndexError, KeyError, ValueError)


@dataclasses.dataclass(frozen=True)
class DiskDataset:
  """Training records read by index from `source`; the test split in memory.

  source: the training file's `sources.ArrayRecordSource` of (image float32
  [H, W, C] in [0, 1], label int32); x_test, y_test: the test split;
  files: the two files' `run_files.data_files_identity`, taken before they
  were read.
  """
  name: str
  source: sources.ArrayRecordSource
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  files: dict

  def identity(self):
    """What tells this data from other data (run_files.check_data): the
    identity of its two files."""
    return self.files

  @property
  def image_shape(self):
    return self.x_test.shape[1:]

  @property
  def num_train(self):
    return len(self.source)

  def training_examples(self, indices):
    """The training (images, labels) at `indices`, read from the file."""
    return self.source.read_batch(np.asarray(indices, np.int64))

  def training_image_chunks(self):
    """The training images, all of them, a chunk at a time."""
    for start in range(0, self.num_train, READ_CHUNK):
      stop = min(start + READ_CHUNK, self.num_train)
      yield self.training_examples(np.arange(start, stop))[0]

  def batch_reader(self):
    """A function from int64 indices (a tensor) to the training (images,
    labels) there, read by the stage's reader inside the step."""
    return sources.index_reader(self.source)[1]


def load(data_path, test_data_path, num_classes):
  """The DiskDataset of the two files; run_files.RunError, in one line
  naming the file (and the record), where a file cannot be read or its
  records are not image-classification records of one image shape with
  labels in [0, num_classes).

  Every training record is checked here, as a bad one found where a step
  draws it would end the run in TensorFlow's traceback, after its first
  checkpoint."""
  files = run_files.data_files_identity(data_path, test_data_path)
  train = _open(data_path, "data_path")
  image_shape = _first_record(train, data_path, "data_path")
  _check_all_records(train, data_path, "data_path", image_shape, num_classes)
  test = _open(test_data_path, "test_data_path")
  x_test, y_test = _read_all(test, test_data_path)
  if x_test.shape[1:] != image_shape:
    raise run_files.RunError(
        f"test_data_path's images are {x_test.shape[1:]}, data_path's "
        f"{image_shape}: the two files must hold images of one shape")
  _check_labels(y_test, num_classes, "test_data_path", test_data_path)
  return DiskDataset(os.path.basename(data_path), train, x_test, y_test,
                     num_classes, files)


def _open(path, flag):
  """The image-classification source of `path`, or RunError naming `flag`."""
  try:
    return sources.open_image_classification(path)
  except (ImportError, OSError, ValueError) as error:
    # The reader's errors name the file.
    raise run_files.RunError(f"{flag}: {_first_line(error)}") from None


def _first_record(source, path, flag):
  """The image shape of `source`'s record 0, or RunError."""
  try:
    image, _ = source[0]
  except _BAD_RECORD_ERRORS as error:
    raise _not_image_records(path, flag, error) from None
  if image.ndim != 3:
    raise _not_image_records(path, flag,
                             f"its image shape {image.shape} is not [H, W, C]")
  return image.shape


def _read_all(source, path):
  """All of `source`'s (images, labels), stacked, or RunError."""
  image_shape = _first_record(source, path, "test_data_path")
  images, labels = zip(*_chunks(source, path, "test_data_path", image_shape))
  return np.concatenate(images), np.concatenate(labels)


def _check_all_records(source, path, flag, image_shape, num_classes):
  """RunError naming the first record of `source` that does not decode to
  an image of `image_shape` with a label in [0, num_classes)."""
  start = 0
  for _, labels in _chunks(source, path, flag, image_shape):
    _check_labels(labels, num_classes, flag, path, start)
    start += len(labels)


def _chunks(source, path, flag, image_shape):
  """`source`'s (images, labels), READ_CHUNK records at a time; RunError
  naming the first record that does not decode to an image of
  `image_shape`."""
  for start in range(0, len(source), READ_CHUNK):
    indices = np.arange(start, min(start + READ_CHUNK, len(source)))
    try:
      images, labels = source.read_batch(indices)
    except OSError as error:
      raise run_files.RunError(f"{flag}: {_first_line(error)}") from None
    except _BAD_RECORD_ERRORS as error:
      # A record that does not decode, or an image of another shape (which
      # cannot be stacked): found one by one, to name it.
      _check_one_by_one(source, path, flag, indices, image_shape)
      raise _not_image_records(path, flag, error) from None
    if images.shape[1:] != image_shape:
      _check_one_by_one(source, path, flag, indices, image_shape)
    yield images, labels


def _check_one_by_one(source, path, flag, indices, image_shape):
  """RunError naming the first of `indices` whose record does not decode
  to an image of `image_shape`."""
  for index in indices.tolist():
    try:
      image, _ = source[index]
    except _BAD_RECORD_ERRORS as error:
      # The source's errors name the record and the file.
      raise _not_image_records(path, flag, error) from None
    if image.shape != image_shape:
      raise run_files.RunError(
          f"{flag} {path!r} record {index} holds an image of shape "
          f"{image.shape}, record 0 one of {image_shape}: a file's images "
          "must share one shape")


def _check_labels(labels, num_classes, flag, path, first=0):
  """RunError naming the first of `labels` (those of the records from
  `first` on) outside [0, num_classes)."""
  (bad,) = np.nonzero((labels < 0) | (labels >= num_classes))
  if bad.size:
    raise run_files.RunError(
        f"{flag} {path!r} record {first + int(bad[0])} holds label "
        f"{int(labels[bad[0]])}, outside [0, num_classes={num_classes})")


def _not_image_records(path, flag, error):
  return run_files.RunError(
      f"{flag} {path!r} does not hold image-classification records "
      f"(tf_adasamp.sources.encode_image_example, docs/data.md): "
      f"{_first_line(error)}")


def _first_line(error):
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__
