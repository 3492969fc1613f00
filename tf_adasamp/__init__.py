"""tf_adasamp: adaptive sampling SGD as graph-native TensorFlow ops.

London, "A PAC-Bayesian Analysis of Randomized Learning with Application to
SGD", NIPS 2017: sample training examples from a data-dependent distribution
kept in an in-graph sum-tree, and reweight the drawn examples by a utility.

The library's modules are imported on first use, so that `tf_adasamp.bounds`
(NumPy only) loads neither TensorFlow nor the op library; `tf_adasamp.keras`
is imported as soon as Keras is, so that `keras.models.load_model` finds its
classes after `import tf_adasamp`. The paper's experiment (data sets, models,
trainer, CLIs) is `tf_adasamp.experiment`.

The modules, the library's first:

  sampler           AdaptiveSampler: Algorithm 1
  sum_tree          SumTree: the tree in a tf.Variable
  ops               the op library, loaded on first use
  data              the tf.data stage and in-step drawing
  sources/          on-disk sources read by index, and their writer
  keras/            AdaptiveSamplingModel for model.fit
  distribute        replicated samplers and per-worker shares
  schedules         schedules of the amplitude and of beta
  utilities         the utility functions (Eq. 17)
  bounds            the paper's bounds (NumPy only)
  bound_tracker     BoundTracker: the bounds' sums updated in a step
  host_bound_tracker  KLBoundTracker: the same sums on the host (NumPy)
  diagnostics       what Q_t looks like, and its TensorBoard names
  defaults          the settings every entry point starts from
  datasets          data sets that need no download
  _validation       argument checks shared by the modules above
  _checkpointing    restores that validate before they assign
  _sampler_checkpoint  the checks a sampler's checkpoint passes
  _draws            the sampler's randomness: generator, uniforms, floor
  _bound_common     the checks and Theorem 5's formula both trackers share
  _keras_internals  the private Keras API that keras needs, in one place
  experiment/       the paper's experiment (the `experiment` extra)
"""

import importlib
import importlib.abc
import sys

__version__ = "0.1.0"

# Public name -> the module that defines it (or that it is).
_EXPORTS = {
    "AdaptiveSampler": "tf_adasamp.sampler",
    "SumTree": "tf_adasamp.sum_tree",
    "bounds": "tf_adasamp.bounds",
    "data": "tf_adasamp.data",
    "datasets": "tf_adasamp.datasets",
    "defaults": "tf_adasamp.defaults",
    "diagnostics": "tf_adasamp.diagnostics",
    "distribute": "tf_adasamp.distribute",
    "keras": "tf_adasamp.keras",
    "schedules": "tf_adasamp.schedules",
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


class _AfterKerasImport(importlib.abc.MetaPathFinder):
  """Imports `tf_adasamp.keras` right after Keras's own import completes.

  `tf_adasamp.keras` registers its classes with Keras's serialization.
  """

  def find_spec(self, fullname, path, target=None):
    if fullname != "keras":
      return None
    # Keras as the other finders find it; TensorFlow looks for it (without
    # importing it) before it imports it, so this finder stays until the
    # import itself runs.
    for finder in sys.meta_path:
      if finder is not self and hasattr(finder, "find_spec"):
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
          if spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader, self)
          return spec
    return None


class _ThenRegister(importlib.abc.Loader):
  """`loader`, then the import of `tf_adasamp.keras`."""

  def __init__(self, loader, finder):
    self.loader = loader
    self.finder = finder

  def create_module(self, spec):
    return self.loader.create_module(spec)

  def exec_module(self, module):
    module.__spec__.loader = self.loader
    self.loader.exec_module(module)
    if self.finder in sys.meta_path:
      sys.meta_path.remove(self.finder)
    importlib.import_module("tf_adasamp.keras")


if "keras" in sys.modules:
  importlib.import_module("tf_adasamp.keras")
else:
  sys.meta_path.insert(0, _AfterKerasImport())
