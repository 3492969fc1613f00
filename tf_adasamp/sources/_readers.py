"""The readers by index: MemmapSource, ArrayRecordSource and index_reader.

`index_reader` is how the stage reads any source: a batch of drawn indices
in, the records at them out, through `tf.numpy_function`.
"""

import collections.abc
import os
import stat

import numpy as np

from tf_adasamp.sources._lazy import _array_record_module
from tf_adasamp.sources._lazy import tf


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
