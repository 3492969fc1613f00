"""SumTree (tf_adasamp.sum_tree) and its ops against a NumPy reference; bad
checkpoints refused before any state changes (issue 16)."""

import numpy as np
import pytest
from scipy import stats
import tensorflow as tf

from kernel_helpers import assert_unchanged
from kernel_helpers import restore
from kernel_helpers import save
from kernel_helpers import state_of
import reference
from tf_adasamp import ops
from tf_adasamp import SumTree

DTYPES = [tf.float64, tf.float32]
SIZES = [1, 2, 5, 8, 1000]


def random_weights(num_leaves, seed, zero_fraction=0.2):
  rng = np.random.default_rng(seed)
  weights = rng.gamma(0.5, size=num_leaves)
  weights[rng.random(num_leaves) < zero_fraction] = 0
  weights[rng.integers(num_leaves)] = 1.0  # At least one positive weight.
  return weights


def tolerance(dtype):
  return 1e-12 if dtype == tf.float64 else 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", SIZES)
def test_build_stores_weights_and_sums(dtype, num_leaves):
  weights = random_weights(num_leaves,
                           seed=num_leaves).astype(dtype.as_numpy_dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree(weights))
  np.testing.assert_array_equal(tree.weights().numpy(), weights)
  np.testing.assert_allclose(tree.total().numpy(),
                             weights.sum(),
                             rtol=tolerance(dtype))
  np.testing.assert_allclose(tree.probabilities().numpy(),
                             weights / weights.sum(),
                             rtol=tolerance(dtype))
  np.testing.assert_allclose(tree.probabilities([0]).numpy(),
                             weights[:1] / weights.sum(),
                             rtol=tolerance(dtype))


def test_default_weights_are_uniform():
  tree = SumTree(6)
  np.testing.assert_array_equal(tree.probabilities().numpy(), np.full(6, 1 / 6))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", SIZES)
def test_sample_matches_cumulative_sum_reference(dtype, num_leaves):
  weights = random_weights(num_leaves, seed=7).astype(dtype.as_numpy_dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  uniforms = np.random.default_rng(0).random(2000).astype(dtype.as_numpy_dtype)
  indices, probabilities = tree.sample(uniforms)
  np.testing.assert_array_equal(indices.numpy(),
                                reference.draw(weights, uniforms))
  np.testing.assert_allclose(probabilities.numpy(),
                             weights[indices.numpy()] / weights.sum(),
                             rtol=tolerance(dtype))


def test_sample_is_deterministic_given_uniforms_eager_and_in_function():
  tree = SumTree(100, initial_weights=random_weights(100, seed=1))
  uniforms = tf.random.stateless_uniform([500], seed=[1, 2], dtype=tf.float64)
  eager = tree.sample(uniforms)
  graph = tf.function(tree.sample)(uniforms)
  np.testing.assert_array_equal(eager[0].numpy(), graph[0].numpy())
  np.testing.assert_array_equal(eager[1].numpy(), graph[1].numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_frequencies_follow_weights(dtype):
  weights = np.array([5, 0, 1, 3, 0.5, 0, 2, 8, 0.25, 4])
  tree = SumTree(len(weights), initial_weights=weights, dtype=dtype)
  uniforms = tf.random.stateless_uniform([200_000], seed=[3, 4], dtype=dtype)
  indices, _ = tree.sample(uniforms)
  counts = np.bincount(indices.numpy(), minlength=len(weights))
  assert counts[weights == 0].sum() == 0
  positive = weights > 0
  expected = weights[positive] / weights.sum() * counts.sum()
  _, p_value = stats.chisquare(counts[positive], expected)
  assert p_value > 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_never_returns_padded_or_zero_weight_leaf(dtype):
  # Zero weights at the end (before the padding), in the middle and at the
  # start; uniforms at both ends of [0, 1), where u * total meets the total.
  weights = np.array(
      [0, 1e-30, 0, 3, 0, 0, 1e-300 if dtype == tf.float64 else 1e-38, 0,
       0]).astype(dtype.as_numpy_dtype)
  tree = SumTree(len(weights), initial_weights=weights, dtype=dtype)
  below_one = np.nextafter(dtype.as_numpy_dtype(1), dtype.as_numpy_dtype(0))
  edges = np.array(
      [0, below_one] +
      [below_one - k * np.finfo(dtype.as_numpy_dtype).eps for k in range(1, 6)],
      dtype.as_numpy_dtype)
  randoms = np.random.default_rng(5).random(10_000).astype(dtype.as_numpy_dtype)
  indices = tree.sample(np.concatenate([edges, randoms]))[0].numpy()
  assert np.all(indices < len(weights))
  assert np.all(weights[indices] > 0)


def test_sample_target_past_the_children_sums_stays_off_padding():
  # Round-off can leave a node's sum above the sum of its children, and a
  # target in that gap must still end on a positive leaf. Simulate a wide gap:
  # leaves [1, 1, 0] and one padding leaf under a root that claims 2.5, so
  # targets past 2 would walk into the empty right subtree without the guard.
  tree = SumTree(3, initial_weights=[1.0, 1.0, 0.0])
  tree.variable.assign([0.0, 2.5, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0])
  indices, probabilities = tree.sample([0.0, 0.5, 0.9, 0.999])
  np.testing.assert_array_equal(indices.numpy(), [0, 1, 1, 1])
  assert np.all(probabilities.numpy() > 0)


@pytest.mark.parametrize("dtype", DTYPES)
# Batches of up to 128 (in the order given) and larger ones (sorted), with
# repeated indices.
@pytest.mark.parametrize("num_leaves,max_batch", [(37, 8), (1000, 129),
                                                  (1000, 3000)])
def test_set_recomputes_ancestors_exactly(dtype, num_leaves, max_batch):
  rng = np.random.default_rng(2)
  weights = random_weights(num_leaves, seed=2).astype(dtype.as_numpy_dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  for _ in range(50):
    indices = rng.integers(num_leaves, size=rng.integers(1, max_batch))
    new = rng.gamma(1.0, size=len(indices)).astype(dtype.as_numpy_dtype)
    tree.set(indices, new)
    weights[indices] = new
  # Recomputed from children, never by deltas: identical to a fresh build.
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree(weights))


def test_set_with_repeated_index_keeps_last_weight():
  tree = SumTree(4)
  tree.set([2, 0, 2, 2], [5.0, 7.0, 6.0, 9.0])
  np.testing.assert_array_equal(tree.weights().numpy(), [7.0, 1.0, 9.0, 1.0])
  assert tree.total().numpy() == 18.0


def test_set_inside_function_matches_eager():
  eager, graph = SumTree(10), SumTree(10)
  eager.set([1, 4], [3.0, 0.0])
  tf.function(graph.set)(tf.constant([1, 4]), tf.constant([3.0, 0.0],
                                                          tf.float64))
  np.testing.assert_array_equal(eager.variable.numpy(), graph.variable.numpy())


def test_assign_rebuilds_everything():
  tree = SumTree(5, initial_weights=[1, 2, 3, 4, 5])
  tree.assign([0.0, 0.0, 1.0, 0.0, 0.0])
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree([0.0, 0.0, 1.0, 0.0, 0.0]))
  assert np.all(tree.sample([0.0, 0.5, 0.99])[0].numpy() == 2)


BAD_INPUTS = [
    # (method, arguments, message)
    ("assign", ([1.0, -1.0, 1.0, 1.0, 1.0],), r"weights\[1\] = -1"),
    ("assign", ([1.0, 1.0, np.nan, 1.0, 1.0],), r"weights\[2\] = nan"),
    ("assign", ([1.0, 1.0, 1.0, np.inf, 1.0],), r"weights\[3\] = inf"),
    ("assign", ([1e308, 1e308, 1.0, 1.0, 1.0],), "sum to inf"),
    ("assign", ([1.0, 1.0],), "weights has 2 elements but the tree has 5"),
    ("assign", ([[1.0] * 5],), "must be"),
    ("set", ([5], [1.0]), r"indices\[0\] = 5 is out of range \[0, 5\)"),
    ("set", ([0, -1], [1.0, 1.0]), r"indices\[1\] = -1 is out of range"),
    ("set", ([0], [-2.0]), r"weights\[0\] = -2"),
    ("set", ([0], [np.nan]), r"weights\[0\] = nan"),
    ("set", ([0, 1], [1.0]), "indices has 2 elements but weights has 1"),
    ("set", ([[0]], [[1.0]]), "must be"),
    ("set", ([0, 1], [1e308, 1e308]), "sum to inf"),
    ("sample", ([0.5, 1.0],), r"uniforms\[1\] = 1 is outside \[0, 1\)"),
    ("sample", ([-0.1],), r"uniforms\[0\] = -0.1 is outside"),
    ("sample", ([np.nan],), r"uniforms\[0\] = nan is outside"),
    ("sample", ([[0.5]],), "must be"),
]


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("method,arguments,message", BAD_INPUTS)
def test_bad_input_raises_and_leaves_tree_unchanged(method, arguments, message):
  tree = SumTree(5, initial_weights=[1.0, 2.0, 3.0, 4.0, 5.0])
  before = tree.variable.numpy()
  with pytest.raises((tf.errors.InvalidArgumentError, ValueError),
                     match=message):
    getattr(tree, method)(*arguments)
  np.testing.assert_array_equal(tree.variable.numpy(), before)


@pytest.mark.usefixtures("on_cpu")
def test_sampling_an_all_zero_tree_raises():
  tree = SumTree(3, initial_weights=[0.0, 0.0, 0.0])
  with pytest.raises(tf.errors.InvalidArgumentError, match="total weight is 0"):
    tree.sample([0.5])


@pytest.mark.usefixtures("on_cpu")
def test_uninitialized_variable_raises():
  handle = tf.raw_ops.VarHandleOp(dtype=tf.float64,
                                  shape=[8],
                                  shared_name="never_initialized")
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="tree is not an initialized variable"):
    ops.sum_tree_sample(handle, tf.constant([0.5], tf.float64))


@pytest.mark.usefixtures("on_cpu")
def test_wrong_dtype_variable_raises():
  variable = tf.Variable(tf.zeros([8], tf.float32))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="tree has dtype float, expected double"):
    ops.sum_tree_sample(variable.handle, tf.constant([0.5], tf.float64))


@pytest.mark.usefixtures("on_cpu")
def test_tree_of_wrong_size_raises():
  variable = tf.Variable(tf.ones([12], tf.float64))
  with pytest.raises(tf.errors.InvalidArgumentError, match="power of two"):
    ops.sum_tree_sample(variable.handle, tf.constant([0.5], tf.float64))


@pytest.mark.parametrize("num_leaves,message", [(0, ">= 1"), (2.5, "int")])
def test_constructor_rejects_bad_num_leaves(num_leaves, message):
  with pytest.raises((ValueError, TypeError), match=message):
    SumTree(num_leaves)


def test_constructor_rejects_integer_dtype():
  with pytest.raises(TypeError, match="float32 or float64"):
    SumTree(4, dtype=tf.int32)


def _bytes_allocated_by(run, fetches, op_type):
  """Bytes that the nodes of `op_type` allocated while `run` ran `fetches`."""
  metadata = tf.compat.v1.RunMetadata()
  run(fetches,
      options=tf.compat.v1.RunOptions(
          trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
      run_metadata=metadata)
  return sum(memory.total_bytes
             for device in metadata.step_stats.dev_stats
             for node in device.node_stats if node.node_name.endswith(op_type)
             for memory in node.memory)


def test_updates_and_draws_do_not_copy_the_tree():
  num_leaves = 1 << 18
  tree_bytes = 2 * num_leaves * 8
  with tf.Graph().as_default():
    tree = SumTree(num_leaves)
    build = ops.sum_tree_build(tree.variable.handle,
                               tf.ones([num_leaves], tf.float64),
                               num_leaves=num_leaves)
    update = ops.sum_tree_set(tree.variable.handle,
                              tf.constant([3, 77, 3], tf.int64),
                              tf.constant([2.0, 0.5, 1.0], tf.float64),
                              num_leaves=num_leaves)
    draw = ops.sum_tree_sample(tree.variable.handle,
                               tf.constant([0.25, 0.5], tf.float64))
    read = tree.variable.read_value()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(build)
      # The tracker does see a full copy: reading the variable makes one.
      assert _bytes_allocated_by(session.run, read,
                                 "ReadVariableOp") >= (tree_bytes)
      # A set copies nothing; on a GPU it takes a few hundred bytes of
      # scratch, far below a copy of the tree.
      assert _bytes_allocated_by(session.run, update, "SumTreeSet") < 1024
      # A draw allocates its two [2] outputs, nothing of the tree's size.
      assert _bytes_allocated_by(session.run, draw, "SumTreeSample") < 1024
      # Index 3 repeats: its last weight, 1.0, wins.
      assert session.run(tree.total()) == num_leaves - 2 + 1.0 + 0.5


@pytest.mark.usefixtures("on_cpu")
def test_sum_tree_checkpoint_of_another_size_is_refused(tmp_path):
  path = save(SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.]), tmp_path)
  smaller = SumTree(5, initial_weights=[5., 4., 3., 2., 1.])
  before = state_of(smaller)
  with pytest.raises(tf.errors.InvalidArgumentError, match="number of leaves"):
    restore(smaller, path)
  assert_unchanged(smaller, before)


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("edit, message", [
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[9]], [-1.0]),
     "negative weight"),
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[9]], [np.nan]),
     "weights"),
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[15]], [1.0]), "padding"),
])
def test_edited_tree_in_a_checkpoint_is_refused(tmp_path, edit, message):
  edited = SumTree(6)
  edited.variable.assign(edit(edited.variable))  # Around the ops' checks.
  path = save(edited, tmp_path)
  tree = SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.])
  before = state_of(tree)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    restore(tree, path)
  assert_unchanged(tree, before)


@pytest.mark.usefixtures("on_cpu")
def test_edited_sums_in_a_checkpoint_are_rebuilt(tmp_path):
  edited = SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.])
  edited.variable.assign(
      tf.tensor_scatter_nd_update(edited.variable, [[1], [2]], [1e9, -5.]))
  path = save(edited, tmp_path)
  tree = SumTree(6)
  restore(tree, path)
  assert float(tree.total()) == 21
  np.testing.assert_allclose(tree.probabilities(), np.arange(1, 7) / 21)


@pytest.mark.usefixtures("on_cpu")
def test_probabilities_of_an_all_zero_tree_are_refused():
  tree = SumTree(4)
  tree.assign(tf.zeros([4], tf.float64))
  with pytest.raises(tf.errors.InvalidArgumentError, match="total weight"):
    tree.probabilities()
