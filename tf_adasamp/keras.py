"""Adaptive sampling for `keras.Model.fit` (Keras 3, TensorFlow backend).

`AdaptiveSamplingModel` wraps a model and trains it on batches from a
`tf_adasamp.data.AdaptiveSampling` stage: each step computes per-example
utilities from the predictions and reweights the drawn examples (London,
NIPS 2017, Algorithm 1), and logs KL(Q_t || uniform) as the metric `kl`
(the paper's Fig. 1e). Loss, compiled metrics, callbacks and validation work
as usual.

The sampler's ops have no XLA kernels, so with `jit_compile=True` (or
"auto" on a GPU) XLA compiles the forward and backward pass and the
sampler update runs after it, outside the compiled function.
"""

import keras
import tensorflow as tf

from tf_adasamp import utilities as utilities_lib
from tf_adasamp.data import importance_weights


class AdaptiveSamplingModel(keras.Model):
  """Trains `model` with `fit` on adaptive batches.

  Example:
    sampler = tf_adasamp.AdaptiveSampler(len(x), amplitude=1.0, decay=0.9)
    stage = tf_adasamp.data.AdaptiveSampling(sampler, batch_size=32)
    trainer = tf_adasamp.keras.AdaptiveSamplingModel(model, stage, "l1")
    trainer.compile(optimizer="adam",
                    loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"], jit_compile=True)
    trainer.fit(stage.dataset((x, y)), steps_per_epoch=100, epochs=3,
                validation_data=(x_val, y_val))

  Training batches are (x, y, indices, probabilities) or
  (x, y, sample_weight, indices, probabilities), as the stage yields them;
  y holds integer class labels. Evaluation, prediction and validation take
  ordinary data. Save `trainer.model`, the wrapped model.
  """

  def __init__(self, model, stage, utility="l1", from_logits=False,
               debias=False, **kwargs):
    """Wraps `model`.

    Args:
      model: the `keras.Model` to train; its outputs are class
        probabilities, or logits with `from_logits=True`.
      stage: the `tf_adasamp.data.AdaptiveSampling` stage whose dataset
        `fit` consumes; the step reports utilities through it.
      utility: "zero_one", "l1", "cross_entropy" or a callable
        (labels [B], probabilities [B, C]) -> [B]; see
        `tf_adasamp.utilities`.
      from_logits: whether `model` outputs logits.
      debias: if True, weight each example's loss by 1 / (n Q_t(i)), so the
        loss estimates the uniform average; Algorithm 1 does not.
      **kwargs: passed to `keras.Model`, e.g. `name`.
    """
    super().__init__(**kwargs)
    self.model = model
    self.stage = stage
    self.utility = utilities_lib.get(utility)
    self.from_logits = bool(from_logits)
    self.debias = bool(debias)
    self._learn = None

  def call(self, inputs, training=None):
    return self.model(inputs, training=training)

  def compile(self, *args, **kwargs):
    """`keras.Model.compile`; XLA, if on, compiles only the learning step."""
    super().compile(*args, **kwargs)
    # Keras would compile the whole train step, sampler ops included.
    self._learn = (tf.function(self._learn_step, jit_compile=True)
                   if self.jit_compile else self._learn_step)
    self.jit_compile = False

  def _symbolic_build(self, iterator=None, data_batch=None):
    # Under a tf.distribute strategy Keras builds the model from one
    # training batch, which ends with the stage's indices and probabilities.
    if data_batch is not None and len(data_batch) > 2:
      data_batch = tuple(data_batch[:-2])
    super()._symbolic_build(iterator=iterator, data_batch=data_batch)

  def train_step(self, data):
    *batch, indices, probabilities = data
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(batch))
    if self.debias:
      weights = tf.cast(
          importance_weights(probabilities, self.stage.sampler.num_examples),
          self.compute_dtype)
      sample_weight = (weights if sample_weight is None else
                       weights * tf.cast(sample_weight, weights.dtype))
    logs, y_pred = self._learn(x, y, sample_weight)
    probs = tf.nn.softmax(y_pred) if self.from_logits else y_pred
    self.stage.update(indices, self.utility(y, probs))
    return {**logs, "kl": self.stage.sampler.kl_divergence()}

  def _learn_step(self, x, y, sample_weight):
    """Forward, backward and optimizer step; returns (logs, predictions)."""
    with tf.GradientTape() as tape:
      y_pred = self(x, training=True)
      loss = self.compute_loss(x=x, y=y, y_pred=y_pred,
                               sample_weight=sample_weight, training=True)
      scaled_loss = self.optimizer.scale_loss(loss)
    gradients = tape.gradient(scaled_loss, self.trainable_weights)
    self.optimizer.apply(gradients, self.trainable_weights)
    for metric in self.metrics:
      if metric.name == "loss":
        metric.update_state(loss, sample_weight=tf.shape(y_pred)[0])
    return self.compute_metrics(x, y, y_pred, sample_weight), y_pred
