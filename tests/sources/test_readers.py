"""The readers by index (tf_adasamp.sources._readers), under the stage."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import child_process
from source_files import BATCH_SIZE
from source_files import check_elements_hold_drawn_rows
from source_files import images_and_labels
from source_files import make_sampler
from source_files import NUM_EXAMPLES
from source_files import write_images
from tf_adasamp import data
from tf_adasamp import sources

pytest.importorskip("array_record")


def memmaps(tmp_path, *arrays):
  mapped = []
  for number, array in enumerate(arrays):
    np.save(tmp_path / f"{number}.npy", array)
    mapped.append(np.load(tmp_path / f"{number}.npy", mmap_mode="r"))
  return tuple(mapped)


def test_memmap_source_batches_hold_the_drawn_rows(tmp_path):
  images, labels = images_and_labels()
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE)
  source = sources.MemmapSource(memmaps(tmp_path, images, labels))
  check_elements_hold_drawn_rows(stage.dataset(source), sampler, lambda i:
                                 (images[i], labels[i]))


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


@pytest.mark.parametrize("arguments, error, message", [
    (((np.zeros(3), np.zeros(4)),), ValueError, "same number of rows"),
    (([1, 2, 3],), TypeError, "nest of NumPy arrays"),
    ((np.zeros(3), "decode"), TypeError, "decode must be callable"),
])
def test_memmap_source_names_bad_arguments(arguments, error, message):
  with pytest.raises(error, match=message):
    sources.MemmapSource(*arguments)


def test_a_missing_array_record_file_is_an_os_error_naming_it(tmp_path):
  with pytest.raises(OSError, match="missing.array_record"):
    sources.ArrayRecordSource(str(tmp_path / "missing.array_record"))


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
