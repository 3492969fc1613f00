"""write_array_record (tf_adasamp.sources._writer): whole or not at all."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import child_process
from source_files import file_bytes
from source_files import images_and_labels
from source_files import write_tfrecord
from tf_adasamp import sources

pytest.importorskip("array_record")


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


def test_write_array_record_refuses_records_that_are_not_bytes(tmp_path):
  with pytest.raises(TypeError, match="must be bytes"):
    sources.write_array_record([1, 2], tmp_path / "x.array_record")


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


def test_a_bytes_path_is_written(tmp_path):
  path = tmp_path / "x.array_record"
  assert sources.write_array_record([b"a"], os.fsencode(path)) == 1
  assert sources.ArrayRecordSource(path)[0] == b"a"


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
