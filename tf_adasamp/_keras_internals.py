"""The Keras internals that `tf_adasamp.keras` needs, and no public API gives.

Everything private to Keras that the library touches is here, so that a Keras
release that moves one breaks one file; tests/test_keras_internals.py checks
each assumption below, and fails on a Keras minor version other than
`TESTED_KERAS_VERSION` until someone has rerun the checks and raised it.
"""

# What `compile` builds from the metrics it is given: it resolves "accuracy"
# to the accuracy that fits the labels' and predictions' shapes, which
# `keras.metrics.get("accuracy")` does not.
from keras.src.trainers.compile_utils import CompileMetrics
from keras.src.trainers.data_adapters import array_slicing

TESTED_KERAS_VERSION = "3.15"


def compiled_metrics(model):
  """(metrics, weighted_metrics), as the objects given to `model.compile`.

  `get_compile_config()` has them only serialized, and deserializing loses a
  metric function that is not registered with Keras.
  """
  config = model._compile_config.config
  return config["metrics"], config["weighted_metrics"]


def metrics_like_compile(metrics):
  """A Keras metric that runs `metrics` (as `compile` takes them), as
  `compile` would build them."""
  return CompileMetrics(None, metrics)


def train_validation_split(arrays, validation_split):
  """(training, validation) parts of `arrays`, as `fit` holds out
  `validation_split`: the last part, before any shuffle; refused (a
  ValueError) where a part would be empty."""
  return array_slicing.train_validation_split(arrays, validation_split)


class StageBatchBuild:
  """A `keras.Model` mixin: builds the model from a batch of its examples.

  Under a tf.distribute strategy, `fit` builds the model's, loss's and
  metrics' state from one training batch before the first step, through
  `Trainer._symbolic_build`, which takes the batch as (x, y, sample_weight);
  the stage's batches end with its indices and probabilities, and where the
  step draws its own batch the dataset holds placeholders. The class says
  which batch to build from with `_batch_to_build_from(data_batch)`, and
  builds its own state from it in `_after_symbolic_build(data_batch)`.
  """

  def _symbolic_build(self, iterator=None, data_batch=None):
    data_batch = self._batch_to_build_from(data_batch)
    super()._symbolic_build(iterator=iterator, data_batch=data_batch)
    self._after_symbolic_build(data_batch)
