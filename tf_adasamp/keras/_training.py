"""The train step's own pieces, and the logs `fit` adds to Keras's.

The placeholder dataset where the step draws its batch, class and importance
weights, the check that outputs taken as probabilities are, the training
set's estimated loss and metrics (`TrainingEstimates`), and the callback
that puts the distribution's state into each epoch's logs
(`SamplingReport`).
"""

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import _keras_internals
from tf_adasamp import diagnostics


def steps(unused_input_context):
  """A placeholder a step: Keras's loop pulls one, the step draws its batch."""
  return tf.data.Dataset.from_tensors(tf.constant(0, tf.int8)).repeat()


def weighted(importance, sample_weight):
  """Importance weights times the sample weights, if any."""
  if sample_weight is None:
    return importance
  return importance * tf.cast(sample_weight, importance.dtype)


def class_ids(y):
  """Class ids from labels: ids [B] or [B, 1], or one-hot [B, C]."""
  y = tf.convert_to_tensor(y)
  if y.shape.rank == 2 and y.shape[-1] != 1:
    return tf.argmax(y, axis=-1)
  if y.shape.rank == 2:
    y = tf.squeeze(y, axis=-1)
  return tf.cast(y, tf.int64)


def class_weights(class_weight, ids):
  """Each example's class weight; 1 for a class the dict leaves out."""
  table = np.ones(max(class_weight) + 1, np.float32)
  for class_id, weight in class_weight.items():
    table[class_id] = weight
  known = ids < len(table)
  return tf.where(known, tf.gather(table, tf.where(known, ids, 0)), 1.0)


def check_probabilities(y_pred):
  """Fails unless `y_pred` lies in [0, 1], as probabilities do."""
  y_pred = tf.cast(y_pred, tf.float32)
  tf.debugging.assert_equal(
      tf.reduce_all((y_pred >= 0) & (y_pred <= 1 + 1e-6)),
      True,
      message="the model's outputs are not probabilities (some lie outside "
      "[0, 1]), so utilities cannot be computed from them; for a model "
      "that outputs logits, compile with a loss that has from_logits=True "
      "or pass from_logits=True to AdaptiveSamplingModel")


class TrainingEstimates:
  """The training logs' own metrics.

  The drawn batches' loss (`adaptive_loss`), and the training set's loss and
  metrics under the uniform distribution (importance-weighted copies of the
  compiled ones).

  Kept out of the model's metrics so that evaluation and validation log
  only Keras's own.
  """

  def __init__(self, metrics, weighted_metrics):
    self.adaptive_loss = keras.metrics.Mean(name="adaptive_loss")
    self.loss = keras.metrics.Mean(name="loss")
    every = [*_flat(metrics), *_flat(weighted_metrics)]
    self.metrics = (_keras_internals.metrics_like_compile(
        [_clone(metric) for metric in every]) if every else None)

  def build(self, y, y_pred):
    if self.metrics is not None:
      self.metrics.build(y, y_pred)

  def update_state(self, adaptive_loss, uniform_loss, y, y_pred, weights):
    # Each batch's mean loss counts by its size, as in Keras's own logs.
    batch_size = tf.shape(y_pred)[0]
    self.adaptive_loss.update_state(adaptive_loss, sample_weight=batch_size)
    self.loss.update_state(uniform_loss, sample_weight=batch_size)
    if self.metrics is not None:
      self.metrics.update_state(y, y_pred, sample_weight=weights)

  def result(self):
    results = {
        "loss": self.loss.result(),
        "adaptive_loss": self.adaptive_loss.result()
    }
    if self.metrics is not None and self.metrics.built:
      # Named as Keras would the unweighted ones (no `weighted_` prefix).
      results.update((metric.name.removeprefix("weighted_"), metric.result())
                     for metric in self.metrics.metrics)
    return results

  def reset_state(self):
    self.adaptive_loss.reset_state()
    self.loss.reset_state()
    if self.metrics is not None:
      self.metrics.reset_state()


def _flat(metrics):
  if not metrics:
    return []
  if isinstance(metrics, dict):
    return list(metrics.values())
  return list(metrics)


def _clone(metric):
  if isinstance(metric, keras.metrics.Metric):
    return metric.__class__.from_config(metric.get_config())
  return metric


class SamplingReport(keras.callbacks.Callback):
  """Puts what the distribution looks like into each epoch's logs.

  The effective sample size and the heaviest examples' share of the draws
  (`tf_adasamp.diagnostics`), which the History keeps; at the end of fit,
  unless verbose is 0, a line that says them with the KL.
  """

  def __init__(self, verbose):
    super().__init__()
    self._verbose = verbose
    self._last = None

  def on_epoch_end(self, epoch, logs=None):
    sampler = self.model.stage.sampler
    log_q = diagnostics.log_probabilities(sampler)
    self._last = {
        "effective_sample_size":
            float(diagnostics.effective_sample_size(log_q)),
        "heaviest_share":
            float(
                diagnostics.heaviest_share(
                    log_q, diagnostics.heaviest_count(sampler.num_examples))),
    }
    if logs is not None:
      logs.update(self._last)

  def on_train_end(self, logs=None):
    if not self._verbose or self._last is None:
      return
    sampler = self.model.stage.sampler
    n = sampler.num_examples
    k = diagnostics.heaviest_count(n)
    print(f"Adaptive sampling: KL(Q || uniform) "
          f"{float(sampler.kl_divergence()):.4f}, effective sample size "
          f"{self._last['effective_sample_size']:.1%} of the {n} examples, "
          f"the heaviest {k} draw {self._last['heaviest_share']:.1%} "
          f"(uniform: {k / n:.1%})")
