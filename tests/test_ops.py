"""The ops (tf_adasamp.ops) refuse the inputs that used to slip through
their checks.

- A build or set whose tree would hold an inf sum: the tree adds in pairs,
  so a running sum of the weights can stay finite where a node does not.
- A set with a num_leaves other than the tree's (within the same capacity,
  which the tree's shape alone cannot tell): it would write into padding.
- Draw permits past int64's range.
- Subnormal weights, which TensorFlow's CPU kernels add as 0: stored as 0,
  so a tree of only subnormal weights has total 0 and cannot be sampled.
- A sample or draw from a variable that no build wrote, with an infinite
  total or a negative leaf: refused, where it returned probabilities of 0
  or past 1.

Each rejected call leaves the state as it was. tests/test_gpu_steps_on_host.py
checks the GPU steps' side of the same cases.
"""

import numpy as np
import pytest
import tensorflow as tf

import reference
from tf_adasamp import ops
from tf_adasamp import SumTree

DTYPES = [np.float64, np.float32]

# Contracts of the CPU kernels (on a GPU, bad values are not raised).
pytestmark = pytest.mark.usefixtures("on_cpu")


def largest(dtype):
  return np.finfo(dtype).max


def quarter_ulp_of_largest(dtype):
  """A weight w with max + w finite but max + (w + w) inf, in pairs."""
  info = np.finfo(dtype)
  return dtype(2.0**(info.maxexp - 1 - info.nmant - 2))


def pairwise_overflow(dtype):
  """[M, 0, q, q]: the running sum M + 0 + q + q rounds to M at each step,
  but the tree adds (M + 0) + (q + q) = M + ulp/2, which rounds to inf."""
  big, quarter = largest(dtype), quarter_ulp_of_largest(dtype)
  weights = np.array([big, 0, quarter, quarter], dtype)
  running = dtype(0)
  for w in weights:
    running = dtype(running + w)
  assert np.isfinite(running)
  with np.errstate(over="ignore"):
    assert np.isinf(reference.heap_sums(weights)[1])
  return weights


def tree_variable(weights):
  tree = tf.Variable(
      np.zeros(2 * reference.capacity_of(len(weights)), weights.dtype))
  return tree


@pytest.mark.parametrize("dtype", DTYPES)
def test_build_rejects_weights_whose_pairwise_sum_overflows(dtype):
  weights = pairwise_overflow(dtype)
  with pytest.raises(tf.errors.InvalidArgumentError, match="sum to inf"):
    SumTree(4, initial_weights=weights, dtype=tf.as_dtype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rejected_build_leaves_the_tree_unchanged(dtype):
  tree = SumTree(4,
                 initial_weights=np.arange(4, dtype=dtype),
                 dtype=tf.as_dtype(dtype))
  before = tree.variable.numpy()
  with pytest.raises(tf.errors.InvalidArgumentError, match="sum to inf"):
    tree.assign(pairwise_overflow(dtype))
  np.testing.assert_array_equal(tree.variable.numpy(), before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_set_rejects_weights_whose_pairwise_sum_overflows(dtype):
  big, quarter = largest(dtype), quarter_ulp_of_largest(dtype)
  tree = SumTree(4,
                 initial_weights=np.array([big, 0, quarter, 0], dtype),
                 dtype=tf.as_dtype(dtype))
  before = tree.variable.numpy()
  assert np.isfinite(before[1])
  # The running new total, big + quarter, is finite; the tree's is not.
  with pytest.raises(tf.errors.InvalidArgumentError, match="sum to inf"):
    tree.set([3], np.array([quarter], dtype))
  np.testing.assert_array_equal(tree.variable.numpy(), before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_set_near_the_top_of_the_range_goes_through_when_it_fits(dtype):
  # The cheap bound (old total + new weights) fails here, so the exact
  # check decides, and must accept: replacing the big weight by itself.
  big = largest(dtype)
  tree = SumTree(3,
                 initial_weights=np.array([big / 2, big / 4, 0], dtype),
                 dtype=tf.as_dtype(dtype))
  new = np.array([big / 2, big / 4], dtype)
  tree.set([0, 1], new)
  np.testing.assert_array_equal(
      tree.variable.numpy(),
      reference.build_tree(np.array([big / 2, big / 4, 0], dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_set_exact_check_matches_the_tree_it_would_write(dtype):
  # Random sets near the top of the range: accepted iff the reference tree
  # of the new weights has a finite root, and then equal to it bit for bit.
  rng = np.random.default_rng(3)
  big = largest(dtype)
  num_leaves = 37
  weights = (rng.random(num_leaves) * big / num_leaves).astype(dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=tf.as_dtype(dtype))
  outcomes = set()
  for _ in range(40):
    indices = rng.integers(num_leaves, size=rng.integers(1, 6))
    new = (rng.random(len(indices)) * big / 3).astype(dtype)
    expected = weights.copy()
    expected[indices] = new
    with np.errstate(over="ignore"):
      expected_tree = reference.build_tree(expected)
    if np.isfinite(expected_tree[1]):
      tree.set(indices, new)
      weights = expected
      outcomes.add("accepted")
    else:
      with pytest.raises(tf.errors.InvalidArgumentError, match="sum to inf"):
        tree.set(indices, new)
      outcomes.add("rejected")
    np.testing.assert_array_equal(tree.variable.numpy(),
                                  reference.build_tree(weights))
  assert outcomes == {"accepted", "rejected"}


@pytest.mark.parametrize("num_leaves", [7, 8])
def test_set_rejects_a_num_leaves_other_than_the_trees(num_leaves):
  # A tree over 5 leaves has capacity 8: num_leaves 7 or 8 pads to the same
  # shape, and would let index 6 write into the padding.
  tree = SumTree(5, initial_weights=[1.0, 1.0, 1.0, 1.0, 1.0])
  before = tree.variable.numpy()
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=f"num_leaves = {num_leaves} but the tree was built "
                     "over 5 leaves"):
    ops.sum_tree_set(tree.variable.handle,
                     tf.constant([6], tf.int64),
                     tf.constant([5.0], tf.float64),
                     num_leaves=num_leaves)
  np.testing.assert_array_equal(tree.variable.numpy(), before)
  indices, _ = tree.sample(tf.linspace(tf.constant(0.0, tf.float64), 0.999,
                                       100))
  assert np.all(indices.numpy() < 5)


@pytest.mark.parametrize("op", ["build", "set"])
def test_ops_reject_a_num_leaves_whose_capacity_is_not_the_trees(op):
  tree = SumTree(5)
  before = tree.variable.numpy()
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"tree has shape \[16\] but a tree over 9 leaves"):
    if op == "build":
      ops.sum_tree_build(tree.variable.handle,
                         tf.ones([9], tf.float64),
                         num_leaves=9)
    else:
      ops.sum_tree_set(tree.variable.handle,
                       tf.constant([0], tf.int64),
                       tf.constant([2.0], tf.float64),
                       num_leaves=9)
  np.testing.assert_array_equal(tree.variable.numpy(), before)


def test_build_records_num_leaves_and_a_rebuild_may_change_it():
  tree = tree_variable(np.zeros(5))
  ops.sum_tree_build(tree.handle, tf.ones([5], tf.float64), num_leaves=5)
  assert tree.numpy()[0] == 5
  ops.sum_tree_build(tree.handle, tf.ones([7], tf.float64), num_leaves=7)
  assert tree.numpy()[0] == 7
  ops.sum_tree_set(tree.handle,
                   tf.constant([6], tf.int64),
                   tf.constant([3.0], tf.float64),
                   num_leaves=7)
  np.testing.assert_array_equal(tree.numpy(),
                                reference.build_tree([1, 1, 1, 1, 1, 1, 3.0]))


def test_set_on_a_tree_no_build_wrote_is_not_checked():
  # Node 0 is 0 in a tree from before num_leaves was recorded.
  weights = np.array([1.0, 2.0, 3.0])
  tree = tf.Variable(reference.heap_sums(np.append(weights, 0.0)))
  ops.sum_tree_set(tree.handle,
                   tf.constant([2], tf.int64),
                   tf.constant([5.0], tf.float64),
                   num_leaves=3)
  assert tree.numpy()[1] == 8.0 and tree.numpy()[0] == 0


def test_release_draw_permits_rejects_a_count_past_int64():
  permits = ops.draw_permits_handle(shared_name="test_permits_past_int64")
  ops.release_draw_permits(permits, 2**63 - 1)
  with pytest.raises(
      tf.errors.InvalidArgumentError,
      match=r"count = 1 would take the permits past 2\*\*63 - 1"):
    ops.release_draw_permits(permits, 1)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="count = 9223372036854775807 would take"):
    ops.release_draw_permits(permits, 2**63 - 1)
  ops.release_draw_permits(permits, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_subnormal_weights_are_stored_as_zero(dtype):
  tiny = np.finfo(dtype).smallest_subnormal
  weights = np.array([tiny, 1.0, tiny * 3, 2.0], dtype)
  tree = SumTree(4, initial_weights=weights, dtype=tf.as_dtype(dtype))
  np.testing.assert_array_equal(tree.weights().numpy(),
                                np.array([0, 1, 0, 2], dtype))
  tree.set([1, 3], np.array([tiny, tiny], dtype))
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree(np.zeros(4, dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_tree_of_subnormal_weights_cannot_be_sampled(dtype):
  tiny = np.finfo(dtype).smallest_subnormal
  tree = SumTree(3,
                 initial_weights=np.full(3, tiny, dtype),
                 dtype=tf.as_dtype(dtype))
  assert tree.total().numpy() == 0
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="cannot sample: the tree's total weight is 0"):
    tree.sample(tf.constant([0.5], dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_draws_never_land_on_a_subnormal_weight(dtype):
  tiny = np.finfo(dtype).smallest_subnormal
  weights = np.array([tiny, 1.0, tiny, tiny, 1.0, tiny], dtype)
  tree = SumTree(6, initial_weights=weights, dtype=tf.as_dtype(dtype))
  uniforms = np.nextafter(np.linspace(0, 1, 1001, dtype=dtype)[:-1], dtype(1))
  uniforms = np.concatenate([[0], uniforms]).astype(dtype)
  indices, probabilities = tree.sample(tf.constant(uniforms))
  assert set(indices.numpy()) == {1, 4}
  np.testing.assert_array_equal(probabilities.numpy(), dtype(0.5))


def unbuilt_trees(dtype):
  """Tree variables written by assignment, not by the ops: an infinite total
  (a leaf of inf), and a negative leaf beside one above the total."""
  return {
      "infinite total":
          reference.heap_sums(np.array([np.inf, 1.0, 0.0, 0.0], dtype)),
      "negative leaf":
          reference.heap_sums(np.array([-5.0, 6.0, 0.0, 0.0], dtype)),
  }


def draw_ops(dtype):
  """Each op that draws from a tree variable, as a function of the tree and a
  generator, eager and compiled with XLA."""

  def sample(tree, generator):
    del generator
    return ops.sum_tree_sample(tree.handle, tf.constant([0.1, 0.5, 0.9], dtype))

  def draw(tree, generator):
    return ops.sum_tree_draw(tree.handle,
                             generator.state.handle,
                             3,
                             T=tf.as_dtype(dtype),
                             stratified=False)

  return {
      "sample": sample,
      "draw": draw,
      "sample under XLA": tf.function(sample, jit_compile=True),
      "draw under XLA": tf.function(draw, jit_compile=True),
  }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["infinite total", "negative leaf"])
@pytest.mark.parametrize(
    "op", ["sample", "draw", "sample under XLA", "draw under XLA"])
def test_draws_from_a_tree_no_build_wrote_are_refused(dtype, case, op):
  tree = tf.Variable(unbuilt_trees(dtype)[case])
  generator = tf.random.Generator.from_seed(7)
  tree_before = tree.numpy()
  generator_before = generator.state.numpy()
  match = ("the tree's total weight is inf" if case == "infinite total" else
           "not a sum tree of nonnegative weights")
  with pytest.raises(tf.errors.InvalidArgumentError, match=match):
    draw_ops(dtype)[op](tree, generator)
  np.testing.assert_array_equal(tree.numpy(), tree_before)
  np.testing.assert_array_equal(generator.state.numpy(), generator_before)
