"""Loads the tf_adasamp op library once; every other module imports ops here.

The library `_sum_tree_ops.so` is built by `pip install` (next to this file)
or by `bazel build //tf_adasamp:sum_tree_ops` (under `bazel-bin/`).
"""

import os

import tensorflow as tf

_LIBRARY_NAME = "_sum_tree_ops.so"
_REBUILD_HINT = (
    "Rebuild it against the installed TensorFlow "
    f"({tf.__version__}): `pip install --no-build-isolation -e .` or "
    "`bazel build //tf_adasamp:sum_tree_ops`."
)


def _library_candidates():
  here = os.path.dirname(os.path.abspath(__file__))
  root = os.path.dirname(here)
  return [
      os.path.join(here, _LIBRARY_NAME),
      os.path.join(root, "bazel-bin", "tf_adasamp", _LIBRARY_NAME),
  ]


def _load():
  for path in _library_candidates():
    if os.path.exists(path):
      try:
        return tf.load_op_library(path)
      except tf.errors.NotFoundError as error:
        # An undefined symbol: built against another TensorFlow.
        raise ImportError(
            f"tf_adasamp's op library {path} does not match this TensorFlow: "
            f"{error}. {_REBUILD_HINT}") from error
  raise ImportError(
      "tf_adasamp's op library was not found (looked for "
      f"{', '.join(_library_candidates())}). {_REBUILD_HINT}")


_ops = _load()

sum_tree_build = _ops.ada_samp_sum_tree_build
sum_tree_set = _ops.ada_samp_sum_tree_set
sum_tree_sample = _ops.ada_samp_sum_tree_sample
adaptive_reweight = _ops.ada_samp_adaptive_reweight

draw_permits_handle = _ops.ada_samp_draw_permits_handle
release_draw_permits = _ops.ada_samp_release_draw_permits
draw_permit_dataset = _ops.ada_samp_draw_permit_dataset
