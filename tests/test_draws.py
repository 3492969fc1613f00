"""The sampler's randomness (tf_adasamp._draws): the uniforms of a draw bit
for bit those of `tf.random.Generator.uniform`, compiled or not; strata; the
uniform floor's mixture."""

import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp import _draws
from tf_adasamp import SumTree


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_generator_uniforms_are_the_generators_own_bit_for_bit(
    dtype, jit_compile):
  ours = tf.random.Generator.from_seed(7)
  twin = tf.random.Generator.from_seed(7)
  draw = tf.function(lambda: _draws.generator_uniforms(ours, 1000, dtype),
                     jit_compile=jit_compile)
  for _ in range(3):  # each call advances both generators alike
    uniforms = draw().numpy()
    expected = twin.uniform([1000], dtype=dtype).numpy()
    np.testing.assert_array_equal(uniforms, expected)
  assert uniforms.dtype == dtype.as_numpy_dtype
  assert 0 <= uniforms.min() and uniforms.max() < 1
  np.testing.assert_array_equal(ours.state.numpy(), twin.state.numpy())


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
def test_stratified_uniforms_take_one_from_each_stratum_below_one(dtype):
  below_one = np.nextafter(1, 0, dtype=dtype.as_numpy_dtype)
  uniforms = tf.constant([0.0, 0.5, below_one, below_one], dtype)
  strata = _draws.stratified(uniforms, 4).numpy()
  np.testing.assert_array_equal(strata[:2], [0.0, 0.375])
  bins = np.arange(4) / 4
  # At most the stratum's upper end, which rounding alone reaches.
  assert np.all(bins <= strata) and np.all(strata <= bins + 0.25)
  # (3 + u) / 4 rounds up to 1 for the largest u: kept below it.
  assert strata[3] == below_one


def test_seeded_generators_repeat_and_unseeded_ones_follow_the_global_seed():
  assert np.array_equal(
      _draws.make_generator(3).state.numpy(),
      _draws.make_generator(3).state.numpy())
  tf.random.set_seed(11)
  first = _draws.make_generator(None).state.numpy()
  tf.random.set_seed(11)
  assert np.array_equal(_draws.make_generator(None).state.numpy(), first)
  assert not np.array_equal(_draws.make_generator(None).state.numpy(), first)


def test_floored_draws_pick_uniformly_below_epsilon_and_from_the_tree_above():
  weights = [1.0, 0.0, 3.0, 0.0, 4.0]
  tree = SumTree(5, dtype=tf.float64)
  tree.assign(weights)
  epsilon = 0.5
  uniforms = tf.constant([0.0, 0.1, 0.49, 0.5, 0.6, 0.99], tf.float64)
  indices, probabilities = _draws.floored_draws(tree.variable, tree.capacity, 5,
                                                epsilon, uniforms)
  # Below epsilon: floor(u / epsilon * n), whatever the weights.
  np.testing.assert_array_equal(indices[:3], [0, 1, 4])
  # From epsilon on: the tree's draw for (u - epsilon) / (1 - epsilon).
  expected, _ = tree.sample(tf.constant([0.0, 0.2, 0.98], tf.float64))
  np.testing.assert_array_equal(indices[3:], expected)
  # The probabilities are the tree's (Q), not the mixture's.
  np.testing.assert_allclose(probabilities,
                             np.array(weights)[indices.numpy()] / 8,
                             rtol=1e-15)


def test_a_floor_of_one_draws_every_example_uniformly():
  tree = SumTree(4, dtype=tf.float32)
  tree.assign([0.0, 0.0, 0.0, 1.0])
  below_one = np.nextafter(np.float32(1), np.float32(0))
  uniforms = tf.constant([0.0, 0.25, 0.5, 0.75, below_one], tf.float32)
  indices, _ = _draws.floored_draws(tree.variable, tree.capacity, 4, 1.0,
                                    uniforms)
  np.testing.assert_array_equal(indices, [0, 1, 2, 3, 3])
