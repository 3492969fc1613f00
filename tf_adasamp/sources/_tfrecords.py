"""TFRecord files: the datasets that read them, and their records' lengths.

The stage refuses a dataset that reads TFRecord files (which can only be
read in order); the writer copies their records, once each record's length
is checked to fit in its file.
"""

import contextlib
import gzip
import io
import os
import stat
import struct
import zlib

from tf_adasamp.sources._lazy import tf


def _record_streams(dataset):
  """The TFRecordDatasets that `dataset` is or is built on, one at a time."""
  pending = [dataset]
  while pending:
    current = pending.pop()
    if isinstance(current, tf.data.TFRecordDataset):
      yield current
    pending.extend(current._inputs())


def _files_read(dataset):
  """The TFRecord files that `dataset` reads.

  Returns:
    [(path, its compression: "", "GZIP" or "ZLIB")].
  """
  files = []
  for stream in _record_streams(dataset):
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
