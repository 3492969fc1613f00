"""One step of Algorithm 1 (London, NIPS 2017) in one `tf.function`.

    indices ~ Q_t (B independent draws)        sampler.sample(B)
    batch = read(data, indices)
    h_t = update(h_{t-1}, batch)               forward/backward, SGD/AdaGrad
    w_i <- w_i ** decay * exp(amplitude * utility(z_i, h_t))

Where the utility comes from (`utility_at`):
  "updated"   Algorithm 1 as written: the utility of the model *after* the
              update, h_t. Costs a second forward pass over the batch, in
              inference mode (no dropout). The default.
  "step"      the cheaper option: the step's own training forward pass, i.e.
              h_{t-1} with dropout active. No extra pass; utilities lag the
              update by one step and are noisier.

With `strategy` "mirrored" or "multi_worker" the step runs on every
tf.distribute replica, each drawing its share of the batch from one adaptive
distribution whose copies stay identical (tf_adasamp.distribute).
"""

import tensorflow as tf

from tf_adasamp import utilities
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import uniform_sampler


def make_train_step(model,
                    optimizer,
                    sampler,
                    images,
                    labels,
                    batch_size,
                    utility="zero_one",
                    utility_at="updated",
                    strategy=None,
                    weighted=False):
  """One training step as a `tf.function` of no arguments, drawing from
  `images` and `labels`, tensors with n rows; see `make_reading_train_step`.
  """

  def read_batch(indices):
    return tf.gather(images, indices), tf.gather(labels, indices)

  return make_reading_train_step(model, optimizer, sampler, read_batch,
                                 batch_size, utility, utility_at, strategy,
                                 weighted)


def make_reading_train_step(model,
                            optimizer,
                            sampler,
                            read_batch,
                            batch_size,
                            utility="zero_one",
                            utility_at="updated",
                            strategy=None,
                            weighted=False):
  """One training step as a `tf.function` of no arguments.

  `read_batch` maps the drawn indices (an int64 tensor [b]) to the batch's
  images and labels, e.g. gathered from tensors or read from a file.
  `utility` is a name in `tf_adasamp.utilities.UTILITIES`, a callable
  (labels, probs) -> utilities, or a `tf_adasamp.utilities.ReducibleLoss`
  (made under `strategy`'s scope), which reads the drawn indices too. Under
  `strategy` (model, optimizer and sampler made in its scope), each of its
  R replicas draws batch_size / R examples, and the gradients and the
  sampler's update cover the whole batch. With `weighted`, each example's
  loss is weighed by the sampler's importance weight (1 / (n p_i)) ** beta
  (`AdaptiveSampler.sample_with_weights`).

  Returns the batch's mean cross-entropy and accuracy, its indices ([B]
  int64) and its utilities ([B]; zeros for a uniform baseline). A utility that
  is not finite (a diverged model) reaches the sampler as 0, and the caller
  sees it in the returned utilities: the step signals divergence, it does
  not fail.
  """
  if utility_at not in config_lib.UTILITY_AT:
    raise ValueError(f"unknown utility_at {utility_at!r}; choose one of "
                     f"{config_lib.UTILITY_AT}")
  strategy = strategy or tf.distribute.get_strategy()
  num_replicas = strategy.num_replicas_in_sync
  if batch_size % num_replicas:
    raise ValueError(f"batch_size {batch_size} must be a multiple of the "
                     f"{num_replicas} replicas")
  step = _ReplicaStep(model, optimizer, sampler,
                      read_batch, batch_size // num_replicas,
                      _utility_of_logits(utility), utility_at, num_replicas,
                      weighted)

  @tf.function
  def train_step():
    with strategy.scope():
      cross_entropy, accuracy, indices, batch_utilities = strategy.run(step)
      mean = tf.distribute.ReduceOp.MEAN
      return (strategy.reduce(mean, cross_entropy, axis=None),
              strategy.reduce(mean, accuracy,
                              axis=None), strategy.gather(indices, axis=0),
              strategy.gather(batch_utilities, axis=0))

  return train_step


def _utility_of_logits(utility):
  """`utility` as a function (indices, labels, logits) -> [b] utilities."""
  if isinstance(utility, utilities.ReducibleLoss):
    return utility.from_logits
  utility = utilities.get(utility)
  return lambda indices, labels, logits: utilities.from_logits(
      utility, labels, logits)


class _ReplicaStep:
  """A replica's share of the step: draw, descend, reweight."""

  def __init__(self, model, optimizer, sampler, read_batch, batch_size,
               utility_fn, utility_at, num_replicas, weighted):
    self._model, self._optimizer, self._sampler = model, optimizer, sampler
    self._read_batch = read_batch
    self._batch_size = batch_size
    self._utility_fn, self._utility_at = utility_fn, utility_at
    self._num_replicas = num_replicas
    self._reweights = not isinstance(sampler, uniform_sampler.BASELINES)
    self._weighted = weighted

  def __call__(self):
    if self._weighted:
      indices, weights = self._sampler.sample_with_weights(self._batch_size)
    else:
      indices, weights = self._sampler.sample(self._batch_size), None
    batch_images, batch_labels = self._read_batch(indices)
    cross_entropy, logits = self._descend(batch_images, batch_labels, weights)
    accuracy = tf.reduce_mean(
        tf.cast(
            tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                     batch_labels), tf.float32))
    if not self._reweights:
      return (cross_entropy, accuracy, indices,
              tf.zeros([self._batch_size], tf.float32))
    if self._utility_at == "updated":
      logits = self._model(batch_images, training=False)
    batch_utilities = self._utility_fn(indices, batch_labels, logits)
    finite = tf.math.is_finite(batch_utilities)
    self._sampler.update(
        indices,
        tf.where(finite, batch_utilities, tf.zeros_like(batch_utilities)))
    return cross_entropy, accuracy, indices, batch_utilities

  def _descend(self, batch_images, batch_labels, weights=None):
    """One gradient step on the batch, its examples' losses weighed by
    `weights` if given; the batch's mean cross-entropy and logits."""
    model = self._model
    with tf.GradientTape() as tape:
      logits = model(batch_images, training=True)
      losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
          batch_labels, logits)
      cross_entropy = tf.reduce_mean(losses)
      objective = cross_entropy if weights is None else tf.reduce_mean(
          tf.cast(weights, losses.dtype) * losses)
      # The replicas' gradients are summed.
      loss = tf.add_n([objective, *model.losses]) / self._num_replicas
    gradients = tape.gradient(loss, model.trainable_variables)
    self._optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return cross_entropy, logits
