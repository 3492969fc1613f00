"""Property-based tests: SumTree and AdaptiveSampler against the NumPy
references over random sequences of operations (hypothesis), at sizes
around powers of two and extreme magnitudes, with checkpoint round trips."""

import tempfile

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import tensorflow as tf

import reference
from tf_adasamp import AdaptiveSampler
from tf_adasamp import SumTree

# Sizes at, just below and just above powers of two.
SIZES = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64])
# Weights from the smallest normal double to 1e300: a tree of at most 64
# stays finite. (TensorFlow's kernels run with subnormals flushed to zero.)
WEIGHTS = st.one_of(
    st.just(0.0),
    st.floats(min_value=2.3e-308, max_value=1e-300),
    st.floats(min_value=1e-300, max_value=1e300),
    st.floats(min_value=0.0, max_value=10.0, allow_subnormal=False),
)
UNIFORMS = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
UTILITIES = st.one_of(
    st.floats(min_value=-50.0, max_value=50.0, allow_subnormal=False),
    st.sampled_from([0.0, 1.0]))
# Derandomized: the same examples every run, so CI is reproducible.
PROPERTY_SETTINGS = settings(max_examples=40,
                             deadline=None,
                             database=None,
                             derandomize=True)


def checkpoint_round_trip(module, fresh):
  """`fresh` restored from a checkpoint of `module`."""
  with tempfile.TemporaryDirectory() as directory:
    path = tf.train.Checkpoint(module=module).save(f"{directory}/ckpt")
    tf.train.Checkpoint(module=fresh).restore(path).assert_consumed()
  return fresh


def assert_draws_follow_the_weights(indices, weights, uniforms):
  """Each draw has weight > 0 and is the reference's draw, but where u *
  total lies within round-off of a boundary of the cumulative sums."""
  weights = np.asarray(weights)
  indices = np.asarray(indices)
  assert np.all(weights[indices] > 0)
  cumulative = np.cumsum(weights)
  for index, u, expected in zip(indices, uniforms,
                                reference.draw(weights, uniforms)):
    if index != expected:
      target = u * cumulative[-1]
      low, high = sorted((index, expected))
      boundary = cumulative[low:high]
      assert np.all(np.abs(boundary - target) <= 1e-9 * cumulative[-1])


@st.composite
def tree_programs(draw):
  """A size, initial weights and a sequence of tree operations."""
  n = draw(SIZES)
  weights = draw(st.lists(WEIGHTS, min_size=n, max_size=n).filter(any))
  operations = draw(
      st.lists(st.one_of(
          st.tuples(
              st.just("set"),
              st.lists(st.tuples(st.integers(0, n - 1), WEIGHTS),
                       min_size=1,
                       max_size=8)),
          st.tuples(st.just("assign"), st.lists(WEIGHTS, min_size=n,
                                                max_size=n)),
          st.tuples(st.just("sample"), st.lists(UNIFORMS,
                                                min_size=1,
                                                max_size=8)),
          st.tuples(st.just("checkpoint"), st.none()),
      ),
               max_size=8))
  return n, weights, operations


@PROPERTY_SETTINGS
@given(tree_programs())
def test_sum_tree_matches_the_reference(program):
  n, weights, operations = program
  weights = np.array(weights)
  tree = SumTree(n, initial_weights=weights)
  for operation, argument in operations:
    if operation == "set":
      indices = [i for i, _ in argument]
      values = [w for _, w in argument]
      tree.set(indices, values)
      for i, w in argument:  # The last weight of an index wins.
        weights[i] = w
    elif operation == "assign":
      weights = np.array(argument)
      tree.assign(weights)
    elif operation == "checkpoint":
      tree = checkpoint_round_trip(tree, SumTree(n))
    elif weights.sum() > 0:
      indices, probabilities = tree.sample(argument)
      assert_draws_follow_the_weights(indices, weights, argument)
      # To round-off, and to 0 where TensorFlow flushes a subnormal ratio.
      np.testing.assert_allclose(probabilities,
                                 weights[indices] / weights.sum(),
                                 rtol=1e-12,
                                 atol=np.finfo(np.float64).tiny)
    # Every internal node is the sum of its children: no drift.
    np.testing.assert_array_equal(tree.variable.numpy(),
                                  reference.build_tree(weights))


@st.composite
def sampler_programs(draw):
  """A size, amplitude, decay and a sequence of sampler operations."""
  n = draw(SIZES)
  amplitude = draw(st.sampled_from([0.0, 0.5, 1.0, 10.0]))
  decay = draw(st.sampled_from([0.1, 0.5, 0.9, 0.999]))
  operations = draw(
      st.lists(st.one_of(
          st.tuples(
              st.just("update"),
              st.lists(st.tuples(st.integers(0, n - 1), UTILITIES),
                       min_size=1,
                       max_size=8)),
          st.tuples(st.just("sample"), st.integers(1, 8)),
          st.tuples(st.just("reset"), st.none()),
          st.tuples(st.just("checkpoint"), st.none()),
      ),
               max_size=10))
  return n, amplitude, decay, operations


@PROPERTY_SETTINGS
@given(sampler_programs())
def test_sampler_matches_algorithm_1(program):
  n, amplitude, decay, operations = program
  sampler = AdaptiveSampler(n, amplitude, decay, seed=0)
  expected = reference.Algorithm1(n, amplitude, decay)
  for operation, argument in operations:
    if operation == "update":
      indices = np.array([i for i, _ in argument])
      utilities = np.array([u for _, u in argument])
      sampler.update(indices, utilities)
      expected.update(indices, utilities)
    elif operation == "sample":
      indices, probabilities = sampler.sample_with_probabilities(argument)
      q = expected.probabilities()
      assert np.all(q[indices.numpy()] > 0)
      np.testing.assert_allclose(probabilities, q[indices.numpy()], rtol=1e-9)
    elif operation == "reset":
      sampler.reset()
      expected = reference.Algorithm1(n, amplitude, decay)
    else:
      sampler = checkpoint_round_trip(
          sampler, AdaptiveSampler(n, amplitude, decay, seed=1))
    # Equal, but where TensorFlow flushes a subnormal result to zero.
    np.testing.assert_allclose(sampler.log_weights.numpy(),
                               expected.log_weights,
                               rtol=1e-15,
                               atol=1e-300)
    np.testing.assert_allclose(sampler.probabilities(),
                               expected.probabilities(),
                               rtol=1e-9,
                               atol=1e-300)
    np.testing.assert_allclose(float(sampler.kl_divergence()),
                               expected.kl_divergence(),
                               rtol=1e-6,
                               atol=1e-9)
