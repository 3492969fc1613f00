"""Adaptive sampling for SGD: London, NIPS 2017, Algorithm 1.

    w_i <- 1 for all i
    each step: draw i with probability w_i / sum(w); update the model;
               w_i <- w_i ** decay * exp(amplitude * utility_i)

Mini-batches draw B independent indices and reweight each unique index once
(its first occurrence), as the paper's mini-batch variant says.

The exact state is the log weights l_i = log w_i, which stay within
|l| <= amplitude * max|u| / (1 - decay) whatever the run's length; the sum-tree
caches exp(l_i - c) for a shared log-scale c that the update op moves when the
cached total leaves a safe range. So weights never overflow, underflow to an
all-zero tree or turn NaN, and probabilities stay exact relative to the log
weights. A second tree of s_i log s_i makes KL(Q_t || uniform) an O(1) read.
"""

import math

import numpy as np
import tensorflow as tf

from tf_adasamp import ops
from tf_adasamp.sum_tree import SumTree
from tf_adasamp.sum_tree import as_indices
from tf_adasamp.sum_tree import check_float_dtype
from tf_adasamp.sum_tree import check_positive_int


def check_amplitude(amplitude):
  amplitude = float(amplitude)
  if not (math.isfinite(amplitude) and amplitude >= 0):
    raise ValueError(f"amplitude must be finite and >= 0, got {amplitude}")
  return amplitude


def check_decay(decay):
  decay = float(decay)
  if not 0 < decay < 1:
    raise ValueError(f"decay must be in (0, 1), got {decay}")
  return decay


def make_generator(seed):
  """A `tf.random.Generator` seeded with `seed`.

  With seed None it follows TensorFlow's global seed, as a random op or a
  Keras layer does: reproducible after `tf.random.set_seed` (which
  `keras.utils.set_random_seed` calls), nondeterministic without one.
  """
  if seed is None:
    # A random op without an op seed takes one from the global seed (a fresh
    # sequence after each set_seed) or, with none set, from entropy.
    with tf.init_scope():
      seed = int(tf.random.uniform([], maxval=tf.int64.max, dtype=tf.int64))
  return tf.random.Generator.from_seed(seed)


class AdaptiveSampler(tf.Module):
  """Draws example indices from Algorithm 1's adaptive distribution Q_t.

  Example, one training step (no host round-trip inside `tf.function`):
    sampler = tf_adasamp.AdaptiveSampler(len(x), amplitude=1.0, decay=0.9,
                                         seed=0)
    indices = sampler.sample(100)
    ... forward/backward on tf.gather(x, indices) ...
    sampler.update(indices, tf_adasamp.utilities.zero_one(labels, probs))
  """

  def __init__(self, num_examples, amplitude, decay, seed=None,
               stratified=False, dtype=tf.float64, name=None):
    """Creates a uniform sampler over `num_examples` indices.

    Args:
      num_examples: n, an int >= 1.
      amplitude: alpha >= 0, how strongly a utility raises a weight.
      decay: lambda in (0, 1), how fast past utilities are forgotten.
      seed: seed of the sampler's `tf.random.Generator`; None to follow
        TensorFlow's global seed (`tf.random.set_seed`,
        `keras.utils.set_random_seed`), nondeterministic if none is set.
      stratified: if True, a batch of B draws takes one uniform from each of
        B equal strata of [0, 1) (lower variance, still drawn from Q_t
        marginally); if False, B independent draws as in the paper.
      dtype: tf.float64 (default) or tf.float32, for weights and sums.
      name: name of the module.
    """
    super().__init__(name=name)
    self._num_examples = check_positive_int(num_examples, "num_examples")
    self._amplitude = check_amplitude(amplitude)
    self._decay = check_decay(decay)
    self._stratified = bool(stratified)
    self._dtype = check_float_dtype(dtype)
    with self.name_scope:
      self.tree = SumTree(num_examples, dtype=dtype, name="tree")
      # Sums of s_i * log(s_i) over the cached s_i of `tree`.
      self._entropy_tree = tf.Variable(
          tf.zeros([2 * self.tree.capacity], dtype), trainable=False,
          name="entropy_tree")
      self.log_weights = tf.Variable(
          tf.zeros([num_examples], dtype), trainable=False,
          name="log_weights")
      # The tree caches exp(log_weights - log_scale).
      self._log_scale = tf.Variable(tf.zeros([], dtype), trainable=False,
                                    name="log_scale")
      self.generator = make_generator(seed)

  @property
  def num_examples(self):
    return self._num_examples

  @property
  def amplitude(self):
    return self._amplitude

  @property
  def decay(self):
    return self._decay

  @property
  def stratified(self):
    return self._stratified

  def uniforms(self, batch_size):
    """The [batch_size] uniforms in [0, 1) behind the next draw."""
    uniforms = self.generator.uniform([batch_size], dtype=self._dtype)
    if self._stratified:
      strata = tf.cast(tf.range(batch_size), self._dtype)
      # (B - 1 + u) / B can round up to 1 in floating point.
      below_one = np.nextafter(1, 0, dtype=self._dtype.as_numpy_dtype)
      uniforms = tf.minimum((strata + uniforms) / tf.cast(batch_size,
                                                          self._dtype),
                            below_one)
    return uniforms

  def sample(self, batch_size):
    """Draws `batch_size` indices from Q_t; int64 [batch_size]."""
    return self.sample_with_probabilities(batch_size)[0]

  def sample_with_probabilities(self, batch_size):
    """Draws `batch_size` indices and returns (indices, Q_t(indices)).

    The probabilities give importance weights 1 / (n Q_t(i)) for an unbiased
    gradient estimate.
    """
    return self.tree.sample(self.uniforms(batch_size))

  def update(self, indices, utilities):
    """Algorithm 1, line 5: w_i <- w_i ** decay * exp(amplitude * u_i).

    Args:
      indices: [B] sampled indices in [0, n); a repeated index is reweighted
        once, with the utility of its first occurrence.
      utilities: [B] finite utilities, e.g. from `tf_adasamp.utilities`.
    """
    ops.adaptive_reweight(
        self.tree.variable.handle, self._entropy_tree.handle,
        self.log_weights.handle, self._log_scale.handle,
        as_indices(indices),
        tf.cast(tf.convert_to_tensor(utilities, dtype_hint=self._dtype),
                self._dtype),
        tf.constant(self._amplitude, self._dtype),
        tf.constant(self._decay, self._dtype))

  def probabilities(self):
    """Q_t over all n examples, [n]."""
    return self.tree.probabilities()

  def kl_divergence(self):
    """KL(Q_t || uniform) of the current distribution, in O(1).

    With cached weights s_i, total W and H = sum_i s_i log s_i,
    KL = sum_i (s_i / W) log(n s_i / W) = log n + H / W - log W.
    """
    total = self.tree.total()
    entropy_sum = tf.gather(self._entropy_tree, 1)
    kl = (math.log(self._num_examples) + entropy_sum / total -
          tf.math.log(total))
    # Round-off can leave a uniform distribution a hair below zero.
    return tf.maximum(kl, tf.zeros([], self._dtype))

  def reset(self):
    """Returns to the uniform distribution (all weights 1)."""
    self.tree.assign(tf.ones([self._num_examples], self._dtype))
    self._entropy_tree.assign(tf.zeros_like(self._entropy_tree))
    self.log_weights.assign(tf.zeros_like(self.log_weights))
    self._log_scale.assign(tf.zeros([], self._dtype))
