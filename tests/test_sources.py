"""tf_adasamp.sources: the stage reads drawn examples from files by index."""

import gzip
import os
import re
import signal
import struct
import subprocess
import sys
import zlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import child_process
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import sources
from tf_adasamp.keras import AdaptiveSamplingModel

pytest.importorskip("array_record")

NUM_EXAMPLES = 200
BATCH_SIZE = 16
AMPLITUDE, DECAY = 1.0, 0.6


def make_sampler(seed=3, num_examples=NUM_EXAMPLES):
  return tf_adasamp.AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=seed)


def images_and_labels(num_examples=NUM_EXAMPLES, seed=0):
  rng = np.random.default_rng(seed)
  images = rng.integers(0, 256, (num_examples, 3, 2, 1), dtype=np.uint8)
  labels = np.arange(num_examples) % 5
  return images, labels


def write_images(path, images, labels):
  records = (sources.encode_image_example(image, label)
             for image, label in zip(images, labels))
  assert sources.write_array_record(records, path) == len(labels)
  return path


def memmaps(tmp_path, *arrays):
  mapped = []
  for number, array in enumerate(arrays):
    np.save(tmp_path / f"{number}.npy", array)
    mapped.append(np.load(tmp_path / f"{number}.npy", mmap_mode="r"))
  return tuple(mapped)


def check_elements_hold_drawn_rows(dataset, sampler, rows, steps=3):
  for element in dataset.take(steps):
    *batch, indices, probabilities = element
    assert indices.dtype == tf.int64 and indices.shape == (BATCH_SIZE,)
    np.testing.assert_allclose(probabilities,
                               sampler.probabilities().numpy()[indices],
                               rtol=1e-12)
    for got, expected in zip(batch, rows(indices.numpy())):
      np.testing.assert_array_equal(got, expected)


def test_memmap_source_batches_hold_the_drawn_rows(tmp_path):
  images, labels = images_and_labels()
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE)
  source = sources.MemmapSource(memmaps(tmp_path, images, labels))
  check_elements_hold_drawn_rows(stage.dataset(source), sampler, lambda i:
                                 (images[i], labels[i]))


def test_array_record_source_decodes_each_drawn_record(tmp_path):
  images, labels = images_and_labels()
  path = write_images(tmp_path / "images.array_record", images, labels)
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE)
  source = sources.open_image_classification(str(path))
  element_spec = stage.dataset(source).element_spec
  assert element_spec[0] == tf.TensorSpec([BATCH_SIZE, 3, 2, 1], tf.float32)
  assert element_spec[1] == tf.TensorSpec([BATCH_SIZE], tf.int32)
  check_elements_hold_drawn_rows(
      stage.dataset(source), sampler, lambda i:
      (images[i] / np.float32(255), labels[i]))


@pytest.mark.parametrize("group_size", [1, 3])
def test_records_without_decode_are_strings_whole_to_the_last_byte(
    tmp_path, group_size):
  records = [b"a\x00", b"\x00\x00", b"bc\x00\x00", b""] * 10
  path = tmp_path / "raw.array_record"
  sources.write_array_record(records, path, group_size=group_size)
  sampler = make_sampler(num_examples=len(records))
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE)
  expected = np.array(records, dtype=object)
  check_elements_hold_drawn_rows(
      stage.dataset(sources.ArrayRecordSource(str(path))), sampler,
      lambda i: [expected[i]])


def test_shards_read_as_one_sequence(tmp_path):
  images, labels = images_and_labels()
  half = NUM_EXAMPLES // 2
  paths = [
      str(
          write_images(tmp_path / "a.array_record", images[:half],
                       labels[:half])),
      str(
          write_images(tmp_path / "b.array_record", images[half:],
                       labels[half:])),
  ]
  source = sources.open_image_classification(paths)
  assert len(source) == NUM_EXAMPLES
  read = source.read_batch(np.array([half + 1, 0, NUM_EXAMPLES - 1]))
  np.testing.assert_array_equal(read[1], labels[[half + 1, 0, -1]])


class CountingSource:
  """A random-access source that records which indices it was asked for."""

  def __init__(self, values):
    self.values = values
    self.single_reads = []
    self.batched_reads = []

  def __len__(self):
    return len(self.values)

  def __getitem__(self, index):
    self.single_reads.append(index)
    return self.values[index]

  def __getitems__(self, indices):
    self.batched_reads.append(list(indices))
    return [self.values[i] for i in indices]


def test_only_the_drawn_indices_are_read_in_batched_reads():
  source = CountingSource(np.arange(NUM_EXAMPLES) * 10)
  stage = data.AdaptiveSampling(make_sampler(), BATCH_SIZE, max_lag=0)
  drawn = []
  for values, indices, _ in stage.dataset(source).take(4):
    np.testing.assert_array_equal(values, indices.numpy() * 10)
    drawn.append(indices.numpy().tolist())
    stage.update(indices, np.ones(BATCH_SIZE))
  assert source.single_reads == [0]  # record 0 gives the element's spec
  assert source.batched_reads == drawn


def test_on_disk_sources_draw_as_in_memory_arrays_with_zero_lag(tmp_path):
  images, labels = images_and_labels()
  on_disk = {
      "memmap":
          sources.MemmapSource(memmaps(tmp_path, images, labels)),
      "array_record":
          sources.open_image_classification(
              str(write_images(tmp_path / "i.array_record", images, labels))),
  }
  runs = {}
  for name, source in [("memory", (images, labels)), *on_disk.items()]:
    stage = data.AdaptiveSampling(make_sampler(seed=7), BATCH_SIZE, max_lag=0)
    run = []
    for *_, indices, probabilities in stage.dataset(source).prefetch(4).take(6):
      run.append((indices.numpy(), probabilities.numpy()))
      stage.update(indices, (indices.numpy() % 3 == 0).astype(np.float64))
    runs[name] = run
  for name in on_disk:
    for (indices, probabilities), (expected_indices,
                                   expected_probabilities) in zip(
                                       runs[name], runs["memory"]):
      np.testing.assert_array_equal(indices, expected_indices)
      np.testing.assert_array_equal(probabilities, expected_probabilities)


def test_sample_batch_reads_a_random_access_source_in_the_step(tmp_path):
  images, labels = images_and_labels()
  source = sources.MemmapSource(memmaps(tmp_path, images, labels))
  sampler = make_sampler()
  step = tf.function(lambda: data.sample_batch(sampler, source, BATCH_SIZE))
  x, y, indices, _ = step()
  np.testing.assert_array_equal(x, images[indices.numpy()])
  np.testing.assert_array_equal(y, labels[indices.numpy()])


def write_tfrecord(path, records):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return str(path)


@pytest.mark.parametrize("mapped", [False, True])
def test_a_dataset_reading_tfrecord_files_is_refused_naming_the_conversion(
    tmp_path, mapped):
  dataset = tf.data.TFRecordDataset(
      write_tfrecord(tmp_path / "a.tfrecord", [b"x"] * NUM_EXAMPLES))
  if mapped:
    dataset = dataset.map(tf.strings.length)
  stage = data.AdaptiveSampling(make_sampler(), BATCH_SIZE)
  with pytest.raises(TypeError, match="python -m tf_adasamp.sources"):
    stage.dataset(dataset)


def test_write_array_record_copies_a_tfrecord_dataset_in_order(tmp_path):
  records = [f"record {i}".encode() + b"\x00" for i in range(2500)]
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", records)
  path = tmp_path / "a.array_record"
  count = sources.write_array_record(tf.data.TFRecordDataset(tfrecord),
                                     path,
                                     batch_size=1000)
  assert count == len(records)
  source = sources.ArrayRecordSource(str(path))
  assert [source[i] for i in range(len(source))] == records


def test_write_array_record_encodes_elements_of_any_structure(tmp_path):
  images, labels = images_and_labels(num_examples=10)
  dataset = tf.data.Dataset.from_tensor_slices((images, labels))
  path = tmp_path / "e.array_record"
  sources.write_array_record(dataset,
                             path,
                             encode=lambda e: sources.encode_image_example(*e))
  image, label = sources.open_image_classification(str(path))[4]
  np.testing.assert_array_equal(image * 255, images[4])
  assert label == labels[4] and label.dtype == np.int32


def test_python_m_command_writes_an_array_record_file(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  output = str(tmp_path / "out.array_record")
  subprocess.run([sys.executable, "-m", "tf_adasamp.sources", tfrecord, output],
                 env=child_process.environment(),
                 check=True,
                 timeout=300)
  assert len(sources.ArrayRecordSource(output)) == 2


def test_command_converts_tfrecord_files(tmp_path, capsys):
  first = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  second = write_tfrecord(tmp_path / "b.tfrecord", [b"3"])
  output = str(tmp_path / "out.array_record")
  assert sources.main([first, second, output]) == 0
  assert "wrote 3 records" in capsys.readouterr().out
  source = sources.ArrayRecordSource(output)
  assert list(source.read_batch(np.array([2, 0, 1]))) == [b"3", b"1", b"2"]


@pytest.mark.parametrize("arguments", [
    ["{tmp}/missing.tfrecord", "{tmp}/out.array_record"],
    ["{tmp}/a.tfrecord", "{tmp}/no/such/dir/out.array_record"],
    ["{tmp}/a.tfrecord", "{tmp}/out.array_record", "--group_size=0"],
    ["{tmp}/out.array_record"],
])
def test_command_ends_bad_input_in_one_line(tmp_path, capsys, arguments):
  write_tfrecord(tmp_path / "a.tfrecord", [b"1"])
  arguments = [argument.format(tmp=tmp_path) for argument in arguments]
  try:
    status = sources.main(arguments)
  except SystemExit as exit_:
    status = exit_.code
  assert status == 1
  error = capsys.readouterr().err
  assert error.startswith("error: ") and error.count("\n") == 1


@pytest.mark.parametrize("arguments, error, message", [
    (((np.zeros(3), np.zeros(4)),), ValueError, "same number of rows"),
    (([1, 2, 3],), TypeError, "nest of NumPy arrays"),
    ((np.zeros(3), "decode"), TypeError, "decode must be callable"),
])
def test_memmap_source_names_bad_arguments(arguments, error, message):
  with pytest.raises(error, match=message):
    sources.MemmapSource(*arguments)


def test_write_array_record_refuses_records_that_are_not_bytes(tmp_path):
  with pytest.raises(TypeError, match="must be bytes"):
    sources.write_array_record([1, 2], tmp_path / "x.array_record")


def test_a_missing_array_record_package_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "array_record", None)
  monkeypatch.setitem(sys.modules, "array_record.python", None)
  with pytest.raises(ImportError, match=r"tf_adasamp\[data\]"):
    sources.ArrayRecordSource("unused.array_record")


def test_a_missing_array_record_file_is_an_os_error_naming_it(tmp_path):
  with pytest.raises(OSError, match="missing.array_record"):
    sources.ArrayRecordSource(str(tmp_path / "missing.array_record"))


def test_fit_trains_a_keras_model_from_an_array_record_file(tmp_path):
  rng = np.random.default_rng(1)
  labels = rng.integers(0, 2, 400)
  # Class 1 is bright, class 0 dark: a linear model separates them.
  images = (rng.integers(0, 100,
                         (400, 4, 4, 1)) + 150 * labels[:, None, None, None])
  path = write_images(tmp_path / "train.array_record", images.astype(np.uint8),
                      labels)
  source = sources.open_image_classification(str(path))
  sampler = tf_adasamp.AdaptiveSampler(len(source), 0.5, 0.8, seed=0)
  stage = data.AdaptiveSampling(sampler, 32, max_lag=1)
  keras.utils.set_random_seed(0)
  net = keras.Sequential([
      keras.Input((4, 4, 1)),
      keras.layers.Flatten(),
      keras.layers.Dense(2, activation="softmax"),
  ])
  model = AdaptiveSamplingModel(net, stage, utility="zero_one")
  model.compile(optimizer=keras.optimizers.Adam(0.05),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"])
  history = model.fit(stage.dataset(source).prefetch(2),
                      steps_per_epoch=20,
                      epochs=3,
                      verbose=0)
  assert history.history["kl"][-1] > 0  # the updates reached the sampler
  x = images.astype(np.float32) / 255
  accuracy = np.mean(np.argmax(net.predict(x, verbose=0), axis=1) == labels)
  assert accuracy > 0.95


def test_array_record_is_imported_only_when_an_array_record_file_is_opened(
    tmp_path):
  np.save(tmp_path / "x.npy", np.arange(10))
  statement = (
      "import numpy as np, tf_adasamp; from tf_adasamp import data, sources; "
      "stage = data.AdaptiveSampling(tf_adasamp.AdaptiveSampler(10, 1.0, 0.5),"
      " 2); source = sources.MemmapSource(np.load("
      f"{str(tmp_path / 'x.npy')!r}, mmap_mode='r')); "
      "next(iter(stage.dataset(source)))")
  assert child_process.import_attempts(statement, ["array_record"]) == []


def file_bytes(directory):
  """{name: bytes} of the files in `directory`, links read through."""
  return {
      path.name: path.read_bytes()
      for path in sorted(directory.iterdir())
      if path.is_file()
  }


def command_error(arguments, capsys):
  """The one line of error that sources.main ends `arguments` with."""
  assert sources.main([str(argument) for argument in arguments]) == 1
  error = capsys.readouterr().err
  assert error.startswith("error: ") and error.count("\n") == 1, error
  return error


@pytest.mark.parametrize("spelling", [
    "same", "dot", "symlink", "hard_link", "linked_directory",
    "second_of_two_inputs"
])
def test_command_refuses_to_write_over_an_input_however_it_is_named(
    tmp_path, capsys, spelling):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  tfrecord = write_tfrecord(data_dir / "a.tfrecord", [b"1", b"2"])
  other = write_tfrecord(data_dir / "b.tfrecord", [b"3"])
  inputs = [tfrecord]
  if spelling == "symlink":
    (data_dir / "link").symlink_to("a.tfrecord")
    output = data_dir / "link"
  elif spelling == "hard_link":
    os.link(tfrecord, data_dir / "hard")
    output = data_dir / "hard"
  elif spelling == "linked_directory":
    (tmp_path / "alias").symlink_to("data")
    output = tmp_path / "alias" / ".." / "data" / "a.tfrecord"
  elif spelling == "second_of_two_inputs":
    inputs = [other, tfrecord]
    output = f"{data_dir}/./a.tfrecord"
  else:
    output = tfrecord if spelling == "same" else f"{data_dir}/./a.tfrecord"
  before = file_bytes(data_dir)
  names = sorted(os.listdir(data_dir))
  error = command_error([*inputs, output], capsys)
  assert "is the input" in error and "a.tfrecord" in error
  assert file_bytes(data_dir) == before
  assert sorted(os.listdir(data_dir)) == names


def test_python_m_command_given_its_input_as_output_leaves_it_whole(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  before = file_bytes(tmp_path)
  result = child_process.ran("tf_adasamp.sources",
                             tfrecord,
                             tfrecord,
                             timeout=300)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1].startswith("error: the output ")
  assert "wrote" not in result.stdout
  assert file_bytes(tmp_path) == before


def encode_until(failing_at, error):
  """An encode that raises `error` at element `failing_at`."""

  def encode(element):
    if element == failing_at:
      raise error
    return b"new %d" % element

  return encode


@pytest.mark.parametrize("error",
                         [RuntimeError("encoder broke"),
                          KeyboardInterrupt()])
def test_a_write_that_fails_part_way_leaves_the_old_file_whole(tmp_path, error):
  path = tmp_path / "x.array_record"
  sources.write_array_record([b"old"] * 64, path)
  before = file_bytes(tmp_path)
  with pytest.raises(type(error)):
    sources.write_array_record(range(64), path, encode=encode_until(3, error))
  assert file_bytes(tmp_path) == before  # no temporary file left either
  assert len(sources.ArrayRecordSource(path)) == 64


def test_a_write_that_fails_part_way_leaves_no_file_where_there_was_none(
    tmp_path):
  with pytest.raises(TypeError, match="must be bytes"):
    sources.write_array_record([b"a", b"b", "c"], tmp_path / "x.array_record")
  assert os.listdir(tmp_path) == []


def test_a_write_through_a_symbolic_link_replaces_the_file_it_names(tmp_path):
  sources.write_array_record([b"old"], tmp_path / "x.array_record")
  (tmp_path / "link").symlink_to("x.array_record")
  assert sources.write_array_record([b"new", b"er"], tmp_path / "link") == 2
  assert (tmp_path / "link").is_symlink()
  source = sources.ArrayRecordSource(tmp_path / "x.array_record")
  assert [source[0], source[1]] == [b"new", b"er"]


def test_a_written_file_has_the_mode_open_gives(tmp_path):
  umask = os.umask(0o027)
  try:
    sources.write_array_record([b"a"], tmp_path / "x.array_record")
  finally:
    os.umask(umask)
  assert (tmp_path / "x.array_record").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("input_state", ["missing", "cut_short"])
@pytest.mark.parametrize("output_exists", [False, True])
def test_command_with_an_input_it_cannot_read_leaves_the_output_as_it_was(
    tmp_path, capsys, input_state, output_exists):
  tfrecord = tmp_path / "a.tfrecord"
  if input_state == "cut_short":
    write_tfrecord(tfrecord, [b"%d" % i for i in range(100)])
    os.truncate(tfrecord, tfrecord.stat().st_size - 3)
  output = tmp_path / "out.array_record"
  if output_exists:
    sources.write_array_record([b"old"] * 5, output)
  before = file_bytes(tmp_path)
  error = command_error([tfrecord, output], capsys)
  assert "a.tfrecord" in error or "truncated" in error, error
  assert file_bytes(tmp_path) == before


def test_a_write_that_runs_out_of_space_is_an_os_error_leaving_the_old_file(
    tmp_path):
  # A file size limit stands in for a full disk: the write fails with EFBIG.
  path = tmp_path / "x.array_record"
  sources.write_array_record([b"old"] * 3, path)
  before = file_bytes(tmp_path)
  code = (
      "import os, resource, signal\n"
      "from tf_adasamp import sources\n"
      "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
      "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
      "try:\n"
      "  sources.write_array_record((os.urandom(4096) for _ in range(1024)),"
      f" {str(path)!r})\n"
      "except OSError as error:\n"
      "  print(error)\n")
  result = subprocess.run([sys.executable, "-c", code],
                          env=child_process.environment(),
                          capture_output=True,
                          text=True,
                          timeout=300,
                          check=True)
  assert result.stdout.startswith(
      f"cannot write ArrayRecord file {str(path)!r}: ")
  assert file_bytes(tmp_path) == before


def example(**features):
  """A serialized tf.train.Example of `features`: name -> list of ints (an
  int64 feature) or of bytes."""

  def feature(values):
    if isinstance(values[0], bytes):
      return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  return tf.train.Example(features=tf.train.Features(
      feature={
          name: feature(values) for name, values in features.items()
      })).SerializeToString()


GOOD = {"image": [b"abcd"], "shape": [2, 2, 1], "label": [3]}


def edited(**changes):
  """A record of the image-classification format, but for `changes`."""
  return example(**{**GOOD, **changes})


def without(name):
  """A record of the image-classification format, but for feature `name`."""
  return example(**{key: GOOD[key] for key in GOOD if key != name})


NOT_IMAGE_EXAMPLES = [
    (without("image"), "no bytes_list feature 'image'"),
    (without("shape"), "no int64_list feature 'shape'"),
    (without("label"), "no int64_list feature 'label'"),
    (edited(label=[b"1"]), "no int64_list feature 'label'"),
    (edited(label=[1, 2]), "'label' holds 2 values, not 1"),
    (edited(shape=[2, 2]), "'shape' holds 2 values, not 3"),
    (edited(image=[b"abc"]), "has 3 bytes, not the 2x2x1"),
    (edited(shape=[-2, -2, 1]), "has 4 bytes, not the -2x-2x1"),
    (edited(label=[2**62]), "label 4611686018427387904 does not fit int32"),
    (edited(label=[-2**31 - 1]), "label -2147483649 does not fit int32"),
    (b"\xff\xff", "not a tf.train.Example"),
    (b"", "no bytes_list feature 'image'"),
]


@pytest.mark.parametrize("record, reason",
                         NOT_IMAGE_EXAMPLES,
                         ids=[reason for _, reason in NOT_IMAGE_EXAMPLES])
def test_a_record_that_is_not_an_image_example_is_named_with_its_file(
    tmp_path, record, reason):
  path = str(tmp_path / "images.array_record")
  sources.write_array_record([example(**GOOD), record], path)
  source = sources.open_image_classification(path)
  image, label = source[0]
  assert image.shape == (2, 2, 1) and label == 3
  expected = f"record 1 of ArrayRecord file {path!r}: .*{reason}"
  with pytest.raises(ValueError, match=expected):
    source[1]
  with pytest.raises(ValueError, match=expected):
    source.read_batch(np.array([0, 1]))


def test_an_array_record_file_cut_short_is_refused_saying_why(tmp_path):
  path = write_images(tmp_path / "i.array_record", *images_and_labels())
  os.truncate(path, path.stat().st_size // 2)
  with pytest.raises(OSError) as raised:
    sources.ArrayRecordSource(str(path))
  message = str(raised.value)
  assert message.startswith(f"cannot read ArrayRecord file {str(path)!r}: ")
  assert not message.endswith(": ")


def test_a_file_cut_short_after_it_was_opened_names_the_file_and_record(
    tmp_path):
  images, labels = images_and_labels(num_examples=20000)
  path = str(write_images(tmp_path / "i.array_record", images, labels))
  source = sources.open_image_classification(path)
  os.truncate(path, os.path.getsize(path) // 2)
  expected = (f"cannot read ArrayRecord file {path!r}: it changed since it "
              "was opened, and record 19999 can no longer be read")
  with pytest.raises(OSError, match=re.escape(expected)):
    source[19999]
  with pytest.raises(OSError, match=re.escape(expected)):
    source.read_batch(np.array([0, 19999]))


def test_a_file_replaced_after_it_was_opened_reads_as_opened(tmp_path):
  path = tmp_path / "x.array_record"
  sources.write_array_record([b"", b"a"], path)
  source = sources.ArrayRecordSource(path)
  sources.write_array_record([b"b"], path)  # renamed over the opened file
  assert list(source.read_batch(np.array([0, 1]))) == [b"", b"a"]


@pytest.mark.parametrize("paths", [
    lambda path: os.fsencode(path), lambda path: [os.fsencode(path)],
    lambda path: (p for p in [path])
])
def test_paths_may_be_bytes_or_any_iterable(tmp_path, paths):
  path = tmp_path / "x.array_record"
  sources.write_array_record([b"a", b"b"], path)
  assert len(sources.ArrayRecordSource(paths(str(path)))) == 2


@pytest.mark.parametrize("paths", [3, [3], [b"x", None]])
def test_paths_that_are_not_paths_are_a_type_error(paths):
  with pytest.raises(TypeError,
                     match="paths must be a path or a list of paths, got"):
    sources.ArrayRecordSource(paths)


def test_a_memmap_source_of_text_yields_it_as_utf8_like_in_memory_text(
    tmp_path):
  words = np.array(["été", "ab", "", "naïve"] * 5)
  numbers = np.arange(len(words))
  on_disk = memmaps(tmp_path, words, numbers)
  runs = []
  for source in [sources.MemmapSource(on_disk), (words, numbers)]:
    stage = data.AdaptiveSampling(make_sampler(num_examples=len(words)),
                                  BATCH_SIZE)
    assert stage.dataset(source).element_spec[0].dtype == tf.string
    runs.append([(text.numpy().tolist(), rows.numpy().tolist())
                 for text, rows, *_ in stage.dataset(source).take(3)])
  assert runs[0] == runs[1]
  for text, rows in runs[0]:
    assert text == [words[row].encode() for row in rows]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_is(
    tmp_path, kind):
  output = tmp_path / "out"
  if kind == "fifo":
    os.mkfifo(output)
  else:
    output.mkdir()
  with pytest.raises(OSError, match="out': not a regular file"):
    sources.write_array_record([b"a"], output)
  assert output.is_fifo() if kind == "fifo" else output.is_dir()
  assert os.listdir(tmp_path) == ["out"]


def test_a_fifo_is_refused_as_an_array_record_file_without_waiting(tmp_path):
  fifo = str(tmp_path / "fifo")
  os.mkfifo(fifo)
  code = ("from tf_adasamp import sources\n"
          "try:\n"
          f"  sources.ArrayRecordSource({fifo!r})\n"
          "except OSError as error:\n"
          "  print(error)\n")
  # Opening a FIFO to read waits for a writer: a subprocess, not to hang.
  result = subprocess.run([sys.executable, "-c", code],
                          env=child_process.environment(),
                          capture_output=True,
                          text=True,
                          timeout=120,
                          check=True)
  assert result.stdout == (f"cannot read ArrayRecord file {fifo!r}: not a "
                           "regular file\n")


def test_a_bytes_path_is_written(tmp_path):
  path = tmp_path / "x.array_record"
  assert sources.write_array_record([b"a"], os.fsencode(path)) == 1
  assert sources.ArrayRecordSource(path)[0] == b"a"


@pytest.mark.parametrize("label, error, message", [
    (3.7, TypeError, "label must be an int, got 3.7"),
    (np.float32(2), TypeError, "label must be an int"),
    (True, TypeError, "label must be an int, got True"),
    ("1", TypeError, "label must be an int"),
    (2**31, ValueError, "label 2147483648 does not fit int32"),
    (-2**31 - 1, ValueError, "does not fit int32"),
    (2**62, ValueError, "label 4611686018427387904 does not fit int32"),
])
def test_encode_image_example_refuses_a_label_it_could_not_give_back(
    label, error, message):
  with pytest.raises(error, match=message):
    sources.encode_image_example(np.zeros([2, 2, 1], np.uint8), label)


@pytest.mark.parametrize("label", [0, np.int64(-2**31), np.uint8(7), 2**31 - 1])
def test_encode_image_example_labels_decode_as_written(label):
  record = sources.encode_image_example(np.zeros([2, 2, 1], np.uint8), label)
  assert sources.decode_image_example(record)[1] == label


def test_write_array_record_refuses_to_write_over_a_file_its_dataset_reads(
    tmp_path):
  tfrecord = write_tfrecord(tmp_path / "a.tfrecord", [b"1", b"2"])
  (tmp_path / "link").symlink_to("a.tfrecord")
  before = file_bytes(tmp_path)
  dataset = tf.data.TFRecordDataset([tfrecord]).map(tf.strings.upper)
  with pytest.raises(ValueError, match="is the input .*a.tfrecord"):
    sources.write_array_record(dataset, tmp_path / "link")
  assert file_bytes(tmp_path) == before


def test_a_file_named_with_the_longest_name_is_written(tmp_path):
  path = tmp_path / ("x" * os.pathconf(tmp_path, "PC_NAME_MAX"))
  assert sources.write_array_record([b"a"], path) == 1
  assert os.listdir(tmp_path) == [path.name]


def masked_crc32c(data):
  """TFRecord's checksum: CRC-32C, rotated and offset (its "masked" form)."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc ^= byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def crafted_tfrecord(path, declared, compression=""):
  """A TFRecord file of one 96-byte record whose header declares `declared`
  bytes, with that length's checksum valid: 112 bytes uncompressed."""
  length = struct.pack("<Q", declared)
  data = b"x" * 96
  contents = (length + struct.pack("<I", masked_crc32c(length)) + data +
              struct.pack("<I", masked_crc32c(data)))
  if compression == "GZIP":
    contents = gzip.compress(contents)
  elif compression == "ZLIB":
    contents = zlib.compress(contents)
  path.write_bytes(contents)
  return str(path)


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_a_tfrecord_declaring_more_bytes_than_it_holds_is_refused_not_read(
    tmp_path, compression):
  # TensorFlow's reader would allocate 2**40 bytes for it, and crash.
  crafted = crafted_tfrecord(tmp_path / "huge.tfrecord", 2**40, compression)
  before = file_bytes(tmp_path)
  result = child_process.ran("tf_adasamp.sources",
                             crafted,
                             str(tmp_path / "o.ar"),
                             f"--compression={compression}",
                             timeout=300)
  assert result.returncode == 1, result.stderr
  assert result.stderr.splitlines()[-1] == (
      f"error: record 0 of TFRecord file {crafted!r} (at byte 0) declares "
      "1099511627776 bytes, more than the file holds: it is damaged or "
      "crafted")
  assert file_bytes(tmp_path) == before  # no output, no temporary file
  # The library refuses it too, as write_array_record reads it.
  code = ("import sys, tensorflow as tf\n"
          "from tf_adasamp import sources\n"
          "try:\n"
          "  sources.write_array_record(tf.data.TFRecordDataset(sys.argv[1], "
          "compression_type=sys.argv[2]), sys.argv[3])\n"
          "except ValueError as error:\n"
          "  print(error)\n")
  result = subprocess.run([
      sys.executable, "-c", code, crafted, compression,
      str(tmp_path / "o.ar")
  ],
                          env=child_process.environment(),
                          capture_output=True,
                          text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr
  assert "declares 1099511627776 bytes" in result.stdout
  assert file_bytes(tmp_path) == before


@pytest.mark.parametrize("cut,reason", [(5, "is cut short inside its header"),
                                        (100, "declares 200 bytes")])
def test_a_tfrecord_cut_short_is_refused_naming_the_record(
    tmp_path, cut, reason):
  path = write_tfrecord(tmp_path / "a.tfrecord", [b"first", b"x" * 200])
  # Record 0 takes 12 + 5 + 4 bytes; the file is cut inside record 1.
  os.truncate(path, 21 + cut)
  with pytest.raises(ValueError,
                     match=r"record 1 of TFRecord file .* \(at byte 21\) " +
                     reason):
    sources.write_array_record(tf.data.TFRecordDataset(path), tmp_path / "o.ar")
  assert sorted(os.listdir(tmp_path)) == ["a.tfrecord"]


# The command, its write stopped by SIGTERM part way: after `sys.argv[1]`
# records, the process sends itself SIGTERM. The write is replaced where the
# command looks it up, in its own module (tf_adasamp/sources/_command.py).
TERMINATED = """
import os, signal, sys
from tf_adasamp import sources
from tf_adasamp.sources import _command
write = sources.write_array_record
stop_after = int(sys.argv.pop(1))

def terminated_part_way(records, path, **kwargs):
  def stream():
    for count, record in enumerate(records.as_numpy_iterator()):
      if count == stop_after:
        os.kill(os.getpid(), signal.SIGTERM)
      yield record
  return write(stream(), path, **kwargs)

_command.write_array_record = terminated_part_way
sys.exit(sources.main(sys.argv[1:]))
"""


def test_the_command_under_sigterm_leaves_the_output_as_it_was(tmp_path):
  tfrecord = write_tfrecord(tmp_path / "in.tfrecord",
                            [b"%d" % i for i in range(100)])
  output = tmp_path / "out.array_record"
  sources.write_array_record([b"old"], output)
  before = file_bytes(tmp_path)
  result = subprocess.run(
      [sys.executable, "-c", TERMINATED, "50", tfrecord,
       str(output)],
      env=child_process.environment(),
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 128 + signal.SIGTERM, result.stderr
  assert result.stderr.splitlines()[-1] == (
      f"terminated: {output} is as it was")
  assert file_bytes(tmp_path) == before  # no temporary file left
