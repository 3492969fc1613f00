"""tf_adasamp: adaptive sampling SGD as graph-native TensorFlow ops.

London, "A PAC-Bayesian Analysis of Randomized Learning with Application to
SGD", NIPS 2017: sample training examples from a data-dependent distribution
kept in an in-graph sum-tree, and reweight the drawn examples by a utility.

The library's modules are imported on first use, so that `tf_adasamp.bounds`
(NumPy only) loads neither TensorFlow nor the op library. The paper's
experiment (data sets, models, trainer, CLIs) is `tf_adasamp.experiment`.
"""

import importlib

__version__ = "0.1.0"

# Public name -> the module that defines it (or that it is).
_EXPORTS = {
    "AdaptiveSampler": "tf_adasamp.sampler",
    "SumTree": "tf_adasamp.sum_tree",
    "bounds": "tf_adasamp.bounds",
    "data": "tf_adasamp.data",
    "distribute": "tf_adasamp.distribute",
    "keras": "tf_adasamp.keras",
    "utilities": "tf_adasamp.utilities",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
  if name not in _EXPORTS:
    raise AttributeError(f"module 'tf_adasamp' has no attribute {name!r}")
  module = importlib.import_module(_EXPORTS[name])
  value = getattr(module, name) if name[0].isupper() else module
  globals()[name] = value  # Later lookups skip this function.
  return value


def __dir__():
  return sorted([*globals(), *_EXPORTS])
