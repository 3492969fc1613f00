"""write_array_record: records into an ArrayRecord file, whole or not at all."""

import contextlib
import os
import secrets

from tf_adasamp import _validation
from tf_adasamp.sources._lazy import _array_record_module
from tf_adasamp.sources._lazy import tf
from tf_adasamp.sources._readers import _closed
from tf_adasamp.sources._readers import _opened
from tf_adasamp.sources._tfrecords import _check_tfrecord_lengths
from tf_adasamp.sources._tfrecords import _files_read


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
