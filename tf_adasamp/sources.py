"""Random-access sources on disk for the adaptive stage (docs/data.md).

The stage draws a batch's indices in TensorFlow; a source then reads just
those records, inside `tf.numpy_function`, in the pipeline's parallel `map`.
Two readers are here: `MemmapSource` over NumPy arrays (memory-mapped with
`np.load(path, mmap_mode="r")`) and `ArrayRecordSource` over ArrayRecord
files, whose package (`array-record`, the `data` extra) is imported only
when one is opened. Any other object with `__len__` and `__getitem__` (and,
for batched reads, `__getitems__`) is read the same way, such as
`tfds.data_source(...)`.

A TFRecord file can only be read in order, so the stage refuses a dataset
that reads one (`refuse_record_streams`); `write_array_record`, or
`python -m tf_adasamp.sources INPUT.tfrecord... OUTPUT.array_record`, copies
its records once into an ArrayRecord file that can be read by index.
"""

import argparse
import collections.abc
import contextlib
import gzip
import io
import math
import numbers
import os
import secrets
import signal
import stat
import struct
import sys
import zlib

import numpy as np
from google.protobuf import message

from tf_adasamp import _validation

DATA_EXTRA = "pip install 'tf_adasamp[data]' (or pip install array-record)"


class _TensorFlow:
  """TensorFlow, imported where first used.

  So `python -m tf_adasamp.sources` checks its arguments and its files
  before TensorFlow loads (seconds).
  """

  def __getattr__(self, name):
    import tensorflow  # pylint: disable=import-outside-toplevel
    return getattr(tensorflow, name)


tf = _TensorFlow()


def _array_record_module():
  """The array-record package's reader and writer, imported on first use."""
  try:
    # pylint: disable-next=import-outside-toplevel
    from array_record.python import array_record_module
  except ImportError as error:
    raise ImportError(
        f"ArrayRecord files need the array-record package: {DATA_EXTRA}"
    ) from error
  return array_record_module


class MemmapSource:
  """Rows of NumPy arrays read by index, without loading the arrays.

  Example:
    images = np.load("images.npy", mmap_mode="r")
    labels = np.load("labels.npy", mmap_mode="r")
    dataset = stage.dataset(MemmapSource((images, labels)))
  """

  def __init__(self, arrays, decode=None):
    """Wraps `arrays`.

    Args:
      arrays: a nest (tuple, dict) of NumPy arrays with n rows each,
        typically memory-mapped.
      decode: if given, maps one row's nest to the nest of arrays the stage
        yields, called once per drawn row.

    Raises:
      TypeError: if `arrays` is not a nest of NumPy arrays, or `decode` is
        neither callable nor None.
      ValueError: if the arrays differ in their number of rows, or have
        none.
    """
    leaves = tf.nest.flatten(arrays)
    if not leaves or not all(isinstance(a, np.ndarray) for a in leaves):
      raise TypeError("arrays must be a nest of NumPy arrays, got "
                      f"{type(arrays).__name__}")
    lengths = {a.shape[0] if a.ndim else 0 for a in leaves}
    if len(lengths) != 1 or 0 in lengths:
      raise ValueError("arrays must all have the same number of rows, at "
                       f"least 1; got {sorted(lengths)}")
    _check_decode(decode)
    self._arrays = arrays
    self._length = lengths.pop()
    self._decode = decode

  def __len__(self):
    """The number of rows n."""
    return self._length

  def __getitem__(self, index):
    """Reads row `index`, decoded if the source has `decode`."""
    row = tf.nest.map_structure(lambda a: a[index], self._arrays)
    return self._decode(row) if self._decode else row

  def read_batch(self, indices):
    """Reads the rows at `indices`.

    Args:
      indices: an int64 NumPy array of row indices.

    Returns:
      The rows, each leaf of the nest stacked.
    """
    if self._decode:
      return stack_records([self[i] for i in indices])
    # One fancy index a leaf: NumPy touches only the pages of those rows.
    return tf.nest.map_structure(lambda a: np.asarray(a[indices]), self._arrays)


class ArrayRecordSource:
  """Records of ArrayRecord files read by index, batched.

  A record is bytes; `decode`, if given, maps one record to the nest of
  arrays the stage yields. Without it the stage yields the batch's records
  as a string tensor, to parse with TensorFlow after the stage (e.g.
  `tf.io.parse_example`, vectorised over the batch).
  """

  def __init__(self, paths, decode=None):
    """Opens ArrayRecord files.

    Args:
      paths: a path (str, bytes or os.PathLike) or a list of shards, read
        as one sequence of records; written by `write_array_record` or with
        a small `group_size`.
      decode: None, or a function from one record to the nest of arrays
        the stage yields.

    Raises:
      TypeError: if `paths` is not a path or a list of paths, or `decode` is
        not callable.
      ValueError: if `paths` names no file, or its files hold no records.
      OSError: if a file cannot be read as an ArrayRecord file.
      ImportError: if the array-record package is not installed.
    """
    _check_decode(decode)
    paths = _paths(paths)
    if not paths:
      raise ValueError("paths must name at least one file")
    module = _array_record_module()
    self._paths = paths
    # Each shard's os.stat as opened, to tell a record that the reader
    # returns empty because its file was cut short since.
    self._readers, self._opened_as = zip(
        *[_open_reader(module, path) for path in paths])
    # Record i is in the first shard whose end exceeds i.
    self._ends = np.cumsum([reader.num_records() for reader in self._readers])
    if self._ends[-1] < 1:
      raise ValueError(f"paths holds no records: {paths!r}")
    self._decode = decode

  def __len__(self):
    """The number of records n, over all shards."""
    return int(self._ends[-1])

  def __getitem__(self, index):
    """Reads record `index`, decoded if the source has `decode`."""
    (record,) = self._read(np.array([index], np.int64))
    return self._decoded(record, index) if self._decode else record

  def read_batch(self, indices):
    """Reads the records at `indices`.

    Args:
      indices: an int64 NumPy array of record indices.

    Returns:
      The decoded records stacked leaf by leaf, or without `decode` an
      object array of their bytes.

    Raises:
      IndexError: if an index is out of range.
    """
    records = self._read(indices)
    if self._decode:
      return stack_records([
          self._decoded(record, index)
          for record, index in zip(records, indices.tolist())
      ])
    return np.array(records, dtype=object)

  def _decoded(self, record, index):
    """`decode(record)`; its ValueError says which record of which file."""
    try:
      return self._decode(record)
    except ValueError as error:
      path = self._paths[np.searchsorted(self._ends, index, side="right")]
      raise ValueError(f"record {index} of ArrayRecord file {path!r}: "
                       f"{error}") from error

  def _read(self, indices):
    """Reads the records at `indices`, in one batched read a shard.

    The reader parallelises a batched read and runs it without the GIL.

    Args:
      indices: an int64 NumPy array of record indices.

    Returns:
      A list of the records' bytes.

    Raises:
      IndexError: if an index is out of range.
      OSError: if a shard cannot be read, or was cut since it was opened.
    """
    if np.any((indices < 0) | (indices >= len(self))):
      raise IndexError(f"indices out of range [0, {len(self)})")
    shards = np.searchsorted(self._ends, indices, side="right")
    records = [None] * len(indices)
    for shard in np.unique(shards):
      where = np.flatnonzero(shards == shard)
      first = self._ends[shard - 1] if shard else 0
      failure = f"cannot read ArrayRecord file {self._paths[shard]!r}"
      try:
        read = self._readers[shard].read((indices[where] - first).tolist())
      except RuntimeError as error:
        raise OSError(f"{failure}: {error}") from error
      for position, record in zip(where, read):
        # The reader returns the records of a cut file's missing chunks
        # empty, without an error; an empty record is valid data otherwise.
        if not record and self._resized_since_opened(shard):
          raise OSError(f"{failure}: it changed since it was opened, and "
                        f"record {indices[position]} can no longer be read")
        records[position] = record
    return records

  def _resized_since_opened(self, shard):
    """Whether the file the reader of `shard` reads has another size now.

    A file replaced (renamed over) or removed since has not: the reader
    still reads the file it opened, whole.

    Returns:
      True if the file the reader opened is there with another size.
    """
    opened = self._opened_as[shard]
    try:
      now = os.stat(self._paths[shard])
    except OSError:
      return False
    return ((now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino) and
            now.st_size != opened.st_size)


def _paths(paths):
  """`paths` as a list of str.

  Args:
    paths: a path (str, bytes or os.PathLike) or an iterable of paths.

  Returns:
    The paths, each as a str.

  Raises:
    TypeError: if `paths` is, or holds, something other than a path.
  """
  if isinstance(paths, (str, bytes, os.PathLike)):
    paths = [paths]
  elif not isinstance(paths, collections.abc.Iterable):
    paths = [paths]  # refused below, as not a path
  paths = list(paths)
  for path in paths:
    if not isinstance(path, (str, bytes, os.PathLike)):
      raise TypeError("paths must be a path or a list of paths, got "
                      f"{type(path).__name__}")
  return [os.fsdecode(path) for path in paths]


def _open_reader(module, path):
  """Opens an ArrayRecordReader of `path` for reads by index.

  Args:
    module: the array-record package's module.
    path: the file.

  Returns:
    (the reader, the file's os.stat from before it opened).

  Raises:
    OSError: if the file cannot be read as ArrayRecord.
  """
  failure = f"cannot read ArrayRecord file {path!r}"
  try:
    opened_as = os.stat(path)
  except OSError as error:
    raise OSError(f"{failure}: {error.strerror or error}") from error
  if not stat.S_ISREG(opened_as.st_mode):
    # Opening a FIFO would wait for a writer.
    raise OSError(f"{failure}: not a regular file")
  # Reads by index only: reading ahead would read what is not drawn.
  reader = module.ArrayRecordReader(path, "readahead_buffer_size:0")
  return _opened(reader, failure), opened_as


def _opened(handle, failure):
  """Checks that an ArrayRecord reader or writer opened.

  Args:
    handle: the reader or writer.
    failure: what the error says failed.

  Returns:
    `handle`, if it opened.

  Raises:
    OSError: `failure` with the handle's error, if it failed to open.
  """
  if handle.ok():
    return handle
  _closed(handle, failure)  # raises the handle's error, the only way to see it
  raise OSError(failure)


def _closed(handle, failure):
  """Closes `handle`, an ArrayRecord reader or writer.

  Raises:
    OSError: `failure` with the reason, if the handle failed, now or before.
  """
  try:
    handle.close()
  except RuntimeError as error:
    # array-record gives some failures (a file cut short) no message.
    reason = str(error) or "not a whole ArrayRecord file"
    raise OSError(f"{failure}: {reason}") from error


def _check_decode(decode):
  if decode is not None and not callable(decode):
    raise TypeError(f"decode must be callable or None, got {decode!r}")


def stack_records(records):
  """Stacks a list of equally structured records leaf by leaf.

  Args:
    records: a non-empty list of nests of arrays or bytes.

  Returns:
    One nest of the records' structure, each leaf stacked; bytes leaves
    become object arrays (NumPy's fixed-width bytes would drop trailing
    zeros).
  """
  columns = zip(*(tf.nest.flatten(record) for record in records))
  stacked = [
      np.array(column, dtype=object)
      if isinstance(column[0], bytes) else np.stack(column)
      for column in columns
  ]
  return tf.nest.pack_sequence_as(records[0], stacked)


def _batch_reader(source):
  """A function from int64 indices to the source's stacked nest."""
  if hasattr(source, "read_batch"):
    return source.read_batch
  if hasattr(source, "__getitems__"):
    return lambda indices: stack_records(source.__getitems__(indices.tolist()))
  return lambda indices: stack_records([source[i] for i in indices.tolist()])


def _tf_dtype(leaf):
  return tf.string if leaf.dtype.kind in "OSU" else tf.as_dtype(leaf.dtype)


def _utf8(leaf):
  """`leaf`, its text encoded as UTF-8 where it is a unicode array.

  As in a string tensor made of it (`numpy_function` would encode it as
  ASCII, and fail on any other character).

  Returns:
    `leaf`, or its UTF-8 bytes where it is a unicode array.
  """
  if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "U":
    return np.char.encode(leaf, "utf-8")
  return leaf


def index_reader(source):
  """Reads the size of a random-access source and how to gather from it.

  Args:
    source: an object with `__len__` and `__getitem__` (and optionally
      `read_batch` or `__getitems__`) returning nests of equally shaped
      arrays.

  Returns:
    (n, gather): `gather` maps an int64 tensor of indices to the nest of
    tensors at those rows, read with `tf.numpy_function`, with the static
    shapes of record 0.

  Raises:
    TypeError: if `source` lacks `__len__` or `__getitem__`.
    ValueError: if `source` is empty.
  """
  if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
    raise TypeError("a source must be a nest of tensors, a tf.data.Dataset "
                    "or have __len__ and __getitem__; got "
                    f"{type(source).__name__}")
  num_examples = len(source)
  if num_examples < 1:
    raise ValueError("the source is empty")
  example = tf.nest.map_structure(np.asarray, source[0])
  leaves = tf.nest.flatten(example)
  dtypes = [_tf_dtype(leaf) for leaf in leaves]
  read_batch = _batch_reader(source)

  def read(indices):
    return [_utf8(leaf) for leaf in tf.nest.flatten(read_batch(indices))]

  def gather(indices):
    flat = tf.numpy_function(read, [indices], dtypes, stateful=False)
    for tensor, leaf in zip(flat, leaves):
      tensor.set_shape(indices.shape.concatenate(leaf.shape))
    return tf.nest.pack_sequence_as(example, flat)

  return num_examples, gather


def _record_streams(dataset):
  """The TFRecordDatasets that `dataset` is or is built on, one at a time."""
  pending = [dataset]
  while pending:
    current = pending.pop()
    if isinstance(current, tf.data.TFRecordDataset):
      yield current
    pending.extend(current._inputs())  # pylint: disable=protected-access


def _files_read(dataset):
  """The TFRecord files that `dataset` reads.

  Returns:
    [(path, its compression: "", "GZIP" or "ZLIB")].
  """
  files = []
  for stream in _record_streams(dataset):
    # pylint: disable=protected-access
    compression = stream._compression_type
    if tf.is_tensor(compression):
      compression = compression.numpy().decode()
    files += [(os.fsdecode(name), compression or "")
              for name in stream._filenames.as_numpy_iterator()]
  return files


def refuse_record_streams(dataset):
  """Refuses a dataset that reads TFRecord files.

  TFRecord files cannot be read by index, and stacking them into memory
  defeats keeping them on disk.

  Args:
    dataset: a `tf.data.Dataset`.

  Raises:
    TypeError: if `dataset`, or a dataset it is built on, reads TFRecord
      files.
  """
  if next(_record_streams(dataset), None) is not None:
    raise TypeError(
        "the source reads TFRecord files, which can only be read in order, "
        "not by index; convert them once with `python -m tf_adasamp.sources "
        "INPUT.tfrecord... OUTPUT.array_record` (or "
        "tf_adasamp.sources.write_array_record(dataset, path)) and pass "
        "tf_adasamp.sources.ArrayRecordSource(path, decode=...); data that "
        "fits in memory can be passed as arrays instead")


def write_array_record(records,
                       path,
                       encode=None,
                       group_size=1,
                       batch_size=1024):
  """Writes `records` to the ArrayRecord file `path`, in order.

  The file is for `ArrayRecordSource`. It is written whole or not at all:
  the records go to a temporary file beside it, renamed over `path` once
  all are written, so an error or an interrupt while reading or encoding
  them leaves `path` as it was.

  Args:
    records: a finite `tf.data.Dataset` (a `TFRecordDataset` is copied
      record for record) or an iterable.
    path: the file to write (replaced if it exists; where it is a symbolic
      link, the file it links to).
    encode: maps an element to its record's bytes; None if the elements
      are bytes or scalar string tensors already.
    group_size: records a compressed chunk; a read by index decompresses
      its whole chunk, and array-record's batched read costs time in
      proportion to the file's number of chunks (docs/data.md), so 1 suits
      large records and small files, more suits many small records.
    batch_size: how many elements a dataset yields to Python at a time.

  Returns:
    How many records it wrote.

  Raises:
    TypeError: if `encode` is not callable, or a record is not bytes.
    ValueError: if `records` is an infinite dataset, or a dataset that reads
      the file `path` names (by device and inode: any spelling or link) or
      a TFRecord file whose records declare more bytes than it holds (which
      TensorFlow's reader would try to allocate, and crash), or
      `group_size` or `batch_size` is not a positive int.
    ImportError: if the array-record package is not installed.
    OSError: if `path` cannot be written, or is not a regular file, or a
      TFRecord file that `records` reads cannot be read.
  """
  group_size = _validation.positive_int(group_size, "group_size")
  batch_size = _validation.positive_int(batch_size, "batch_size")
  if encode is not None and not callable(encode):
    raise TypeError(f"encode must be callable or None, got {encode!r}")
  if isinstance(records, tf.data.Dataset):
    if records.cardinality() == tf.data.INFINITE_CARDINALITY:
      raise ValueError("records is an infinite dataset; pass a finite one")
    files = _files_read(records)
    _refuse_writing_over_an_input([name for name, _ in files], path)
    for name, compression in files:
      _check_tfrecord_lengths(name, compression)
    if encode is None:
      records = (record
                 for batch in records.batch(batch_size).as_numpy_iterator()
                 for record in batch)
    else:
      records = records.as_numpy_iterator()
  module = _array_record_module()
  failure = f"cannot write ArrayRecord file {os.fsdecode(path)!r}"
  with _written_whole(path, failure) as temporary:
    writer = _opened(
        module.ArrayRecordWriter(temporary, f"group_size:{group_size}"),
        failure)
    count = 0
    try:
      for record in records:
        record = encode(record) if encode else record
        if not isinstance(record, bytes):
          raise TypeError("each record must be bytes (pass encode), got "
                          f"{type(record).__name__}")
        try:
          writer.write(record)
        except RuntimeError as error:  # the disk is full, say
          raise OSError(f"{failure}: {error}") from error
        count += 1
    except BaseException:
      # The file is discarded: only the first error matters.
      with contextlib.suppress(RuntimeError):
        writer.close()
      raise
    _closed(writer, failure)
  return count


def _refuse_writing_over_an_input(inputs, output):
  """Refuses an `output` that is one of `inputs`.

  The same file (device and inode), however spelt or linked, which writing
  it would replace.

  Raises:
    ValueError: if `output` is one of `inputs`.
  """
  try:
    written = os.stat(output)
  except OSError:
    return  # not there (or not reachable): no input is it
  for path in inputs:
    try:
      read = os.stat(path)
    except OSError:
      continue  # a missing input fails as it is read
    if (read.st_dev, read.st_ino) == (written.st_dev, written.st_ino):
      raise ValueError(f"the output {os.fsdecode(output)!r} is the input "
                       f"{path!r}; write the ArrayRecord file to another path")


@contextlib.contextmanager
def _written_whole(path, failure):
  """Yields the name of a new temporary file beside the file `path` names.

  The block writes it; it is renamed over that file when the block ends,
  or removed if the block raises (KeyboardInterrupt included), so that
  a reader of `path`, or a crash, sees the old file or the new one whole.

  Raises:
    OSError: `failure` with the reason, where the file cannot be made or
      renamed.
  """
  # Through a symbolic link to the file it names, which the rename replaces
  # (renaming over the link would replace the link).
  target = os.path.realpath(os.fsdecode(path))
  if os.path.exists(target) and not os.path.isfile(target):
    # Renaming over a device or a FIFO (/dev/null, say) would replace it.
    raise OSError(f"{failure}: not a regular file")
  directory = os.path.dirname(target)
  # At most 50 characters of the name (200 bytes in UTF-8), so that the
  # temporary name fits NAME_MAX (255 bytes) where the name does.
  name = os.path.basename(target)[:50]
  temporary = os.path.join(directory, f".{name}.{secrets.token_hex(8)}.tmp")
  try:
    # Made here, not by tempfile, to take open()'s usual mode (0666 less the
    # umask, which the kernel applies: reading the umask means setting it,
    # for every thread at once).
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
  except OSError as error:
    raise OSError(f"{failure}: {error.strerror or error}") from error
  try:
    yield temporary
    os.fsync(fd)
    try:
      os.replace(temporary, target)
    except OSError as error:
      raise OSError(f"{failure}: {error.strerror or error}") from error
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temporary)
    raise
  finally:
    os.close(fd)
  # Makes the rename itself durable.
  directory_fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(directory_fd)
  finally:
    os.close(directory_fd)


# Labels are int32 where the record is read (decode_image_example).
_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def encode_image_example(image, label):
  """Encodes one image-classification record.

  Args:
    image: uint8 pixels [H, W, C].
    label: the class, an int.

  Returns:
    A serialized `tf.train.Example` with `image` (the pixels, row-major HWC
    bytes), `shape` ([H, W, C]) and `label`.

  Raises:
    TypeError: if `label` is not an int (a float is not rounded).
    ValueError: if `image` is not a uint8 array [H, W, C], or `label` does
      not fit int32, the label's type where the record is read.
  """
  image = np.asarray(image)
  if image.dtype != np.uint8 or image.ndim != 3:
    raise ValueError("image must be a uint8 array [H, W, C], got "
                     f"{image.dtype} {image.shape}")
  if isinstance(label,
                (bool, np.bool_)) or not isinstance(label, numbers.Integral):
    raise TypeError(f"label must be an int, got {label!r}")
  if not _INT32_MIN <= label <= _INT32_MAX:
    raise ValueError(f"label {label} does not fit int32")
  feature = {
      "image":
          tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[image.tobytes()])),
      "shape":
          tf.train.Feature(int64_list=tf.train.Int64List(value=image.shape)),
      "label":
          tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
  }
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def decode_image_example(record):
  """Decodes a record that `encode_image_example` wrote.

  Args:
    record: the record's bytes.

  Returns:
    (image, label): float32 [H, W, C] in [0, 1] and an int32, the
    trainer's in-memory form.

  Raises:
    ValueError: if `record` is not such a record, or its label does not fit
      int32.
  """
  try:
    example = tf.train.Example.FromString(record)
  except message.DecodeError as error:
    raise ValueError(f"not a tf.train.Example: {error}") from None
  feature = example.features.feature
  (pixels,) = _feature_values(feature, "image", "bytes_list", 1)
  shape = _feature_values(feature, "shape", "int64_list", 3)
  (label,) = _feature_values(feature, "label", "int64_list", 1)
  if min(shape) < 0 or math.prod(shape) != len(pixels):
    raise ValueError(f"its image has {len(pixels)} bytes, not the "
                     f"{'x'.join(map(str, shape))} of its shape")
  if not _INT32_MIN <= label <= _INT32_MAX:
    raise ValueError(f"its label {label} does not fit int32")
  image = np.frombuffer(pixels, np.uint8).reshape(shape)
  return image.astype(np.float32) / 255.0, np.int32(label)


def _feature_values(feature, name, kind, size):
  """The `size` values of `feature[name]`, a list of `kind`.

  Returns:
    The feature's values, as a list.

  Raises:
    ValueError: if the feature is missing, of another kind or size (naming
      `encode_image_example`, whose records these are meant to be).
  """
  if name not in feature or feature[name].WhichOneof("kind") != kind:
    raise ValueError(f"it has no {kind} feature {name!r}, so it is not an "
                     "encode_image_example record")
  values = getattr(feature[name], kind).value
  if len(values) != size:
    raise ValueError(f"its feature {name!r} holds {len(values)} values, "
                     f"not {size}")
  return list(values)


def open_image_classification(path):
  """Opens an image-classification ArrayRecord file as a source for the stage.

  Args:
    path: a file of `encode_image_example`'s records, or a list of shards.

  Returns:
    An `ArrayRecordSource` of (image, label), decoded by
    `decode_image_example`.

  Raises:
    ImportError: if the array-record package is not installed.
    OSError: if a file cannot be read as ArrayRecord.
    ValueError: if the files hold no records.
  """
  return ArrayRecordSource(path, decode=decode_image_example)


class _OneLineErrorParser(argparse.ArgumentParser):
  """Ends bad arguments in one line and exit status 1."""

  def error(self, message):
    self.exit(1, f"error: {message}\n")


# A TFRecord record: its length (uint64), the length's CRC (uint32), its
# bytes, their CRC (uint32).
_TFRECORD_HEADER = struct.Struct("<QI")
_TFRECORD_FOOTER_BYTES = 4


def _check_tfrecord_lengths(path, compression):
  """Checks that each record of a TFRecord file fits in the file.

  TensorFlow's reader allocates the length a record declares before it
  reads it: a crafted length (2**40 bytes in a 112-byte file) ends the
  process in a crash, not an error.

  Args:
    path: the TFRecord file.
    compression: "", "GZIP" or "ZLIB", as `tf.data.TFRecordDataset` takes
      it; the lengths are those of the decompressed stream.

  Raises:
    ValueError: naming the file, the record and its offset, if a record
      declares more bytes than remain, or the file ends inside a header.
    OSError: if the file cannot be read, or does not decompress.
  """
  with _tfrecord_stream(path, compression) as stream:
    offset = index = 0
    while header := stream.read(_TFRECORD_HEADER.size):
      where = f"record {index} of TFRecord file {path!r} (at byte {offset})"
      if len(header) < _TFRECORD_HEADER.size:
        raise ValueError(f"{where} is cut short inside its header")
      length, _ = _TFRECORD_HEADER.unpack(header)
      if not _skipped(stream, length + _TFRECORD_FOOTER_BYTES):
        raise ValueError(f"{where} declares {length} bytes, more than the "
                         "file holds: it is damaged or crafted")
      offset += _TFRECORD_HEADER.size + length + _TFRECORD_FOOTER_BYTES
      index += 1


def _is_url(path):
  """Whether `path` is a URL (gs://...), which only TensorFlow reads."""
  return "://" in path


@contextlib.contextmanager
def _tfrecord_stream(path, compression):
  """A binary stream of the TFRecord file's (decompressed) bytes."""
  if not _is_url(path) and not stat.S_ISREG(os.stat(path).st_mode):
    # Opening a FIFO would wait for a writer.
    raise ValueError(f"the TFRecord file {path!r} is not a regular file")
  with (tf.io.gfile.GFile(path, "rb")
        if _is_url(path) else open(path, "rb")) as f:
    if compression == "GZIP":
      with gzip.GzipFile(fileobj=f) as stream:
        yield stream
    elif compression == "ZLIB":
      yield _ZlibStream(f)
    else:
      yield f


class _ZlibStream:
  """The decompressed bytes of a zlib stream (TensorFlow's ZLIB)."""

  def __init__(self, f):
    self._file = f
    self._decompressor = zlib.decompressobj()
    self._buffer = b""

  def read(self, size):
    while len(self._buffer) < size and not self._decompressor.eof:
      chunk = self._file.read(1 << 16)
      if not chunk:
        break
      try:
        self._buffer += self._decompressor.decompress(chunk, size)
        while (len(self._buffer) < size and self._decompressor.unconsumed_tail):
          self._buffer += self._decompressor.decompress(
              self._decompressor.unconsumed_tail, size)
      except zlib.error as error:
        raise OSError(f"not a ZLIB stream: {error}") from error
    data, self._buffer = self._buffer[:size], self._buffer[size:]
    return data


def _skipped(stream, count):
  """Whether `count` more bytes of `stream` are there, which it skips."""
  if isinstance(stream, io.BufferedReader):
    # A file as it is on disk: compared with its size, not read.
    if os.fstat(stream.fileno()).st_size - stream.tell() < count:
      return False
    stream.seek(count, os.SEEK_CUR)
    return True
  while count:
    chunk = stream.read(min(count, 1 << 20))
    if not chunk:
      return False
    count -= len(chunk)
  return True


def _check_command(args):
  """Checks the command's arguments and files before TensorFlow loads.

  Raises:
    ValueError: naming the argument or file: a group_size below 1, an
      input that is not a regular file (a FIFO would wait for a writer),
      an output that is one of the inputs, is not a regular file, or whose
      directory is missing or not writable.
    OSError: an input that cannot be read.
  """
  _validation.positive_int(args.group_size, "group_size")
  for path in (path for path in args.inputs if not _is_url(path)):
    try:
      mode = os.stat(path).st_mode
    except OSError as error:
      raise OSError(
          f"cannot read {path!r}: {error.strerror or error}") from None
    if not stat.S_ISREG(mode):
      raise ValueError(f"the input {path!r} is not a regular file")
  _refuse_writing_over_an_input(args.inputs, args.output)
  target = os.path.realpath(args.output)
  if os.path.exists(target) and not os.path.isfile(target):
    raise ValueError(f"cannot write {args.output!r}: not a regular file")
  directory = os.path.dirname(target)
  if not os.path.isdir(directory):
    raise ValueError(f"cannot write {args.output!r}: its directory "
                     f"{directory!r} does not exist")
  if not os.access(directory, os.W_OK):
    raise ValueError(f"cannot write {args.output!r}: its directory "
                     f"{directory!r} is not writable")


class _Terminated(KeyboardInterrupt):
  """SIGTERM, which the command takes as Ctrl-C."""


def _terminated(signum, frame):
  del signum, frame
  raise _Terminated


def main(argv=None):
  """Runs `python -m tf_adasamp.sources INPUT.tfrecord... OUTPUT.array_record`.

  Args:
    argv: the command line's arguments; None for `sys.argv[1:]`.

  Returns:
    The exit status: 0 once the file is written, 1 on an error (printed in
    one line).
  """
  parser = _OneLineErrorParser(
      prog="python -m tf_adasamp.sources",
      description="Copies the records of TFRecord files, in order, into one "
      "ArrayRecord file that the adaptive stage reads by index.")
  parser.add_argument("inputs", nargs="+", help="TFRecord files")
  parser.add_argument("output", help="the ArrayRecord file to write")
  parser.add_argument("--compression",
                      default="",
                      choices=["", "GZIP", "ZLIB"],
                      help="the TFRecord files' compression")
  parser.add_argument("--group_size",
                      type=int,
                      default=1,
                      help="records a chunk (see write_array_record)")
  args = parser.parse_args(argv)
  # As Ctrl-C: the temporary file goes, the output stays as it was.
  previous = signal.signal(signal.SIGTERM, _terminated)
  try:
    _check_command(args)
    count = write_array_record(tf.data.TFRecordDataset(
        args.inputs, compression_type=args.compression),
                               args.output,
                               group_size=args.group_size)
  except (OSError, TypeError, ValueError) as error:
    print(f"error: {_first_line(error)}", file=sys.stderr)
    return 1
  except KeyboardInterrupt as stop:
    terminated = isinstance(stop, _Terminated)
    print(
        f"{'terminated' if terminated else 'interrupted'}: {args.output} "
        "is as it was",
        file=sys.stderr)
    return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
  # Last: an except clause is read only as an error reaches it, and this
  # one loads TensorFlow, which raised it.
  except tf.errors.OpError as error:
    print(f"error: {_first_line(error)}", file=sys.stderr)
    return 1
  finally:
    signal.signal(signal.SIGTERM, previous)
  print(f"wrote {count} records to {args.output}")
  return 0


def _first_line(error):
  text = (getattr(error, "message", None) or str(error)).strip()
  return text.splitlines()[0] if text else type(error).__name__


if __name__ == "__main__":
  sys.exit(main())
