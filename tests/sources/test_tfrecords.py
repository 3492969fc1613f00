"""TFRecord files (tf_adasamp.sources._tfrecords): refused, lengths checked."""

import gzip
import os
import struct
import subprocess
import sys
import zlib

import pytest
import tensorflow as tf

import child_process
from source_files import BATCH_SIZE
from source_files import file_bytes
from source_files import make_sampler
from source_files import NUM_EXAMPLES
from source_files import write_tfrecord
from tf_adasamp import data
from tf_adasamp import sources

pytest.importorskip("array_record")


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
