"""The sampler's randomness: its generator, the uniforms behind a batch of
draws, and the uniform floor's mixture.

A draw maps one uniform u in [0, 1) to an index through the sum-tree (the
ops); everything random about a draw is made here, so that the draws are
the same compiled or not, on the CPU or a GPU.
"""

import numpy as np
import tensorflow as tf

from tf_adasamp import ops


def make_generator(seed: int | None) -> tf.random.Generator:
  """Makes the random generator of a sampler.

  Args:
    seed: the generator's seed. With None it follows TensorFlow's global
      seed, as a random op or a Keras layer does: reproducible after
      `tf.random.set_seed` (which `keras.utils.set_random_seed` calls),
      nondeterministic without one.

  Returns:
    A `tf.random.Generator`.
  """
  if seed is None:
    # A random op without an op seed takes one from the global seed (a fresh
    # sequence after each set_seed) or, with none set, from entropy.
    with tf.init_scope():
      seed = int(tf.random.uniform([], maxval=tf.int64.max, dtype=tf.int64))
  return tf.random.Generator.from_seed(seed)


def generator_uniforms(generator: tf.random.Generator, batch_size: int,
                       dtype: tf.DType) -> tf.Tensor:
  """`generator.uniform([batch_size], dtype=dtype)`, bit for bit, from bits.

  TensorFlow's CPU and GPU kernels take a uniform's mantissa from Philox
  bits as here; XLA's kernel for `generator.uniform` converts them
  otherwise, its bits and state being the same. So the draws are the same
  compiled or not.

  Returns:
    [batch_size] uniforms in [0, 1) of `dtype` (float32 or float64).
  """
  if dtype == tf.float64:
    bits = generator.uniform_full_int([batch_size], tf.uint64)
    # Of the two 32-bit words, the low 20 bits of the second drawn (the
    # low half here) lead the mantissa, the first drawn follows.
    mantissa = tf.bitwise.bitwise_or(
        tf.bitwise.left_shift(
            tf.bitwise.bitwise_and(bits, tf.constant(0xfffff, tf.uint64)),
            tf.constant(32, tf.uint64)),
        tf.bitwise.right_shift(bits, tf.constant(32, tf.uint64)))
    return tf.cast(mantissa, tf.float64) * 2.0**-52
  bits = generator.uniform_full_int([batch_size], tf.uint32)
  mantissa = tf.bitwise.bitwise_and(bits, tf.constant(0x7fffff, tf.uint32))
  return tf.cast(mantissa, tf.float32) * 2.0**-23


def stratified(uniforms: tf.Tensor, batch_size: int) -> tf.Tensor:
  """(i + u_i) / B for B uniforms: one from each of B equal strata of [0, 1).

  Args:
    uniforms: [B] uniforms in [0, 1), float32 or float64.
    batch_size: B.

  Returns:
    [B] uniforms of their dtype, the i-th in [i / B, (i + 1) / B] (its
    upper end only where (i + u) / B rounds up to it), every one below 1.
  """
  dtype = uniforms.dtype
  strata = tf.cast(tf.range(batch_size), dtype)
  # (B - 1 + u) / B can round up to 1 in floating point.
  below_one = np.nextafter(1, 0, dtype=dtype.as_numpy_dtype)
  return tf.minimum((strata + uniforms) / tf.cast(batch_size, dtype), below_one)


def floored_draws(tree: tf.Variable, capacity: int, num_examples: int,
                  epsilon: float,
                  uniforms: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Draws from (1 - epsilon) Q + epsilon U, Q the tree's distribution.

  One uniform a draw, so that the random stream is that of the draws
  without the floor: a uniform u < epsilon picks example
  floor(u / epsilon * n); any other is mapped to (u - epsilon) /
  (1 - epsilon) for the tree.

  Args:
    tree: the sum-tree's variable, or one replica's copy of it.
    capacity: the tree's leaf capacity (its first leaf's node).
    num_examples: n.
    epsilon: the floor, in (0, 1].
    uniforms: [B] uniforms in [0, 1), of the tree's dtype.

  Returns:
    (indices, Q(indices)): int64 [B] indices in [0, n), and their
    probabilities under Q (not the mixture's).
  """
  dtype = uniforms.dtype
  epsilon = tf.constant(epsilon, dtype)
  below_one = np.nextafter(1, 0, dtype=dtype.as_numpy_dtype)
  # u / epsilon and (u - epsilon) / (1 - epsilon) can round up to 1; the
  # second is -inf for epsilon = 1, where no draw uses it.
  from_uniform = uniforms < epsilon
  uniform_indices = tf.minimum(
      tf.cast(
          tf.floor(tf.minimum(uniforms / epsilon, below_one) * num_examples),
          tf.int64), num_examples - 1)
  tree_indices, _ = ops.sum_tree_sample(
      tree.handle,
      tf.where(from_uniform, tf.zeros_like(uniforms),
               tf.minimum((uniforms - epsilon) / (1 - epsilon), below_one)))
  indices = tf.where(from_uniform, uniform_indices, tree_indices)
  # Q of every drawn index, from one read of the total and the leaves (the
  # state of the draw, unless another thread updates in between).
  values = tf.gather(tree, tf.concat([[1], indices + capacity], axis=0))
  return indices, values[1:] / values[0]
