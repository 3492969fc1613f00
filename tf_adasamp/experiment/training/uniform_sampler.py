"""The uniform baseline behind AdaptiveSampler's interface."""

import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp.sampler import make_generator


class UniformSampler(tf.Module):
  """Uniform draws behind AdaptiveSampler's interface, for a fair baseline.

  Draws index floor(u * n) for each uniform u of `generator.uniform([B],
  float64)`, the very stream and call that AdaptiveSampler makes, and the
  index its sum-tree walk returns while Q_t is uniform: so with a shared seed
  both samplers draw the same first batch, and an AdaptiveSampler with
  amplitude 0 would draw the same indices forever. `update` does nothing.
  It has no log weights: `tf_adasamp.diagnostics` reads it as uniform.
  """

  def __init__(self, num_examples, seed=None, name=None):
    super().__init__(name=name)
    self._num_examples = _validation.positive_int(num_examples, "num_examples")
    with self.name_scope:
      self.generator = make_generator(seed)

  @property
  def num_examples(self):
    return self._num_examples

  def sample(self, batch_size):
    """Draws `batch_size` indices uniformly; int64 [batch_size]."""
    uniforms = self.generator.uniform([batch_size], dtype=tf.float64)
    indices = tf.cast(tf.floor(uniforms * self._num_examples), tf.int64)
    # u * n can round up to n in floating point.
    return tf.minimum(indices, self._num_examples - 1)

  def update(self, indices, utilities):  # pylint: disable=unused-argument
    """Uniform sampling ignores utilities."""

  def probabilities(self):
    return tf.fill([self._num_examples],
                   tf.constant(1 / self._num_examples, tf.float64))

  def kl_divergence(self):
    return tf.zeros([], tf.float64)
