"""The op library's ops, loaded on first use (TF Addons' `LazySO` pattern).

Importing this module costs no library load: the shared object
`_sum_tree_ops.so`, built by `pip install` (next to this file) or by
`bazel build //tf_adasamp:_sum_tree_ops.so` (under `bazel-bin/`), is loaded
by the first op call. Every other module calls the ops through here.
"""

import os
import threading

import tensorflow as tf

_LIBRARY_NAME = "_sum_tree_ops.so"


class LazySO:
  """A custom-op library that `tf.load_op_library` loads on first use."""

  def __init__(self, name):
    """Names the library; nothing is loaded yet.

    Args:
      name: the shared object's file name.
    """
    self._name = name
    self._ops = None
    self._lock = threading.Lock()

  def candidates(self):
    """Lists where the library may be, in the order they are tried.

    Returns:
      The paths beside this file, then under bazel-bin.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, self._name),
        os.path.join(os.path.dirname(here), "bazel-bin", "tf_adasamp",
                     self._name),
    ]

  @property
  def ops(self):
    """The loaded library's op functions, loading it on first use.

    Raises:
      ImportError: if the library is missing or built against another
        TensorFlow.
    """
    with self._lock:
      if self._ops is None:
        self._ops = self._load()
      return self._ops

  def _load(self):
    hint = ("Rebuild it against the installed TensorFlow "
            f"({tf.__version__}): `pip install --no-build-isolation .`, "
            "`python setup.py build_ext --inplace` in a checkout, or "
            "`bazel build //tf_adasamp:_sum_tree_ops.so`.")
    for path in self.candidates():
      if os.path.exists(path):
        try:
          return tf.load_op_library(path)
        except tf.errors.NotFoundError as error:
          # An undefined symbol: built against another TensorFlow.
          raise ImportError(
              f"tf_adasamp's op library {path} does not match this "
              f"TensorFlow: {error}. {hint}") from error
    raise ImportError("tf_adasamp's op library was not found (looked for "
                      f"{', '.join(self.candidates())}). {hint}")


_library = LazySO(_LIBRARY_NAME)


def load():
  """Loads the op library now, registering its ops and kernels with TensorFlow.

  The first op call does it anyway.

  Returns:
    The library's module of op functions.

  Raises:
    ImportError: if the library is missing or built against another
      TensorFlow.
  """
  return _library.ops


def _op(name):
  """The op function `name` of the library, resolved at call time."""

  def call(*args, **kwargs):
    return getattr(_library.ops, name)(*args, **kwargs)

  call.__name__ = call.__qualname__ = name
  return call


sum_tree_build = _op("ada_samp_sum_tree_build")
sum_tree_set = _op("ada_samp_sum_tree_set")
sum_tree_sample = _op("ada_samp_sum_tree_sample")
sum_tree_draw = _op("ada_samp_sum_tree_draw")
adaptive_reweight = _op("ada_samp_adaptive_reweight")

draw_permits_handle = _op("ada_samp_draw_permits_handle")
release_draw_permits = _op("ada_samp_release_draw_permits")
call_then_release_draw_permit = _op("ada_samp_call_then_release_draw_permit")
draw_permit_dataset = _op("ada_samp_draw_permit_dataset")

# Draws and reweights are not differentiable: gradients stop there, as for
# TF's own sampling ops, instead of a LookupError.
for _op_type in ("AdaSamp>SumTreeBuild", "AdaSamp>SumTreeSet",
                 "AdaSamp>SumTreeSample", "AdaSamp>SumTreeDraw",
                 "AdaSamp>AdaptiveReweight"):
  tf.no_gradient(_op_type)
