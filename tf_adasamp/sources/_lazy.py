"""TensorFlow and the array-record package, each imported where first used.

So that `python -m tf_adasamp.sources` checks its arguments and files before
TensorFlow loads, and array-record (the `data` extra) is needed only once an
ArrayRecord file is opened or written.
"""

DATA_EXTRA = "pip install 'tf_adasamp[data]' (or pip install array-record)"


class _TensorFlow:
  """TensorFlow, imported where first used.

  So `python -m tf_adasamp.sources` checks its arguments and its files
  before TensorFlow loads (seconds).
  """

  def __getattr__(self, name):
    import tensorflow
    return getattr(tensorflow, name)


tf = _TensorFlow()


def _array_record_module():
  """The array-record package's reader and writer, imported on first use."""
  try:
    from array_record.python import array_record_module
  except ImportError as error:
    raise ImportError(
        f"ArrayRecord files need the array-record package: {DATA_EXTRA}"
    ) from error
  return array_record_module
