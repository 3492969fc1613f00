"""The GPU kernels' steps, run on the host, against the CPU ops.

The CUDA kernels are launches of the steps that
cc/kernels/gpu/sum_tree_parallel.h sequences (cc/kernels/gpu/sum_tree_steps.h).
tests/sum_tree_parallel_host.cc runs those same steps with a serial executor,
elements and threads in a forward, reverse or shuffled order; this file builds
it with g++ and checks every op against the CPU op on the same inputs: the
same trees bit for bit (the host steps use the CPU's exp), the same draws, and
on bad input the GPU semantics (state untouched, draws -1 with probability
NaN). It needs no GPU; tests/test_gpu_ops.py and tests/test_gpu_kernels.py
check the kernels themselves where there is one.
"""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

import kernel_helpers
from kernel_helpers import assert_same_state
from kernel_helpers import random_weights
from kernel_helpers import ReweightState
import reference
from tf_adasamp import ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU = "/CPU:0"
ORDERS = {"forward": 0, "reverse": 1, "shuffled": 2}
DTYPES = [np.float64, np.float32]


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
  compiler = os.environ.get("CXX", shutil.which("g++"))
  if compiler is None:
    pytest.skip("no C++ compiler")
  library = str(tmp_path_factory.mktemp("host") / "sum_tree_parallel_host.so")
  subprocess.check_call([
      compiler, "-O2", "-std=c++17", "-shared", "-fPIC", f"-I{ROOT}",
      f"-I{tf.sysconfig.get_include()}",
      os.path.join(ROOT, "tests", "sum_tree_parallel_host.cc"), "-o", library
  ])
  return HostSteps(ctypes.CDLL(library))


def pointer(array):
  return array.ctypes.data_as(ctypes.c_void_p)


class HostSteps:
  """The host C ABI over NumPy arrays; mutates the arrays it is given."""

  def __init__(self, library):
    self._library = library
    for name in ("build", "set", "adaptive_reweight"):
      for suffix in ("f32", "f64"):
        getattr(library, f"adasamp_host_{scratch_name(name)}_scratch_bytes_"
                f"{suffix}").restype = ctypes.c_size_t

  def order(self, order, seed=0):
    self._library.adasamp_host_set_order(ORDERS[order], ctypes.c_uint64(seed))

  def _function(self, name, dtype):
    suffix = "f64" if dtype == np.float64 else "f32"
    return getattr(self._library, f"adasamp_host_{name}_{suffix}")

  def _scratch(self, name, dtype, *sizes):
    size = self._function(f"{scratch_name(name)}_scratch_bytes",
                          dtype)(*[ctypes.c_int64(s) for s in sizes])
    # Device memory starts as garbage; so does this.
    return np.full(size, 0xff, np.uint8)

  def build(self, tree, weights):
    capacity = len(tree) // 2
    scratch = self._scratch("build", tree.dtype, capacity)
    self._function("sum_tree_build", tree.dtype)(pointer(weights),
                                                 ctypes.c_int64(len(weights)),
                                                 pointer(tree),
                                                 ctypes.c_int64(capacity),
                                                 pointer(scratch))

  def set(self, tree, num_leaves, indices, weights):
    scratch = self._scratch("set", tree.dtype, len(indices), num_leaves)
    self._function("sum_tree_set", tree.dtype)(pointer(indices),
                                               pointer(weights),
                                               ctypes.c_int64(len(indices)),
                                               ctypes.c_int64(num_leaves),
                                               pointer(tree),
                                               ctypes.c_int64(len(tree) // 2),
                                               pointer(scratch))

  def sample(self, tree, uniforms):
    indices = np.empty(len(uniforms), np.int64)
    probabilities = np.empty(len(uniforms), tree.dtype)
    self._function("sum_tree_sample",
                   tree.dtype)(pointer(tree), ctypes.c_int64(len(tree) // 2),
                               pointer(uniforms), ctypes.c_int64(len(uniforms)),
                               pointer(indices), pointer(probabilities))
    return indices, probabilities

  def draw(self, tree, rng_state, count, stratified):
    indices = np.empty(count, np.int64)
    probabilities = np.empty(count, tree.dtype)
    self._function("sum_tree_draw", tree.dtype)(pointer(tree),
                                                ctypes.c_int64(len(tree) // 2),
                                                pointer(rng_state),
                                                ctypes.c_int64(count),
                                                ctypes.c_int(stratified),
                                                pointer(indices),
                                                pointer(probabilities))
    return indices, probabilities

  def reweight(self, state, indices, utilities, amplitude, decay):
    dtype = state.tree.dtype
    num_leaves = len(state.log_weights)
    scratch = self._scratch("adaptive_reweight", dtype, len(indices),
                            num_leaves)
    scalar = np.ctypeslib.as_ctypes_type(dtype)
    self._function("adaptive_reweight",
                   dtype)(scalar(amplitude), scalar(decay), pointer(indices),
                          pointer(utilities), ctypes.c_int64(len(indices)),
                          pointer(state.log_weights),
                          ctypes.c_int64(num_leaves), pointer(state.log_scale),
                          pointer(state.tree), pointer(state.entropy_tree),
                          ctypes.c_int64(len(state.tree) // 2),
                          pointer(scratch))


def scratch_name(name):
  return name if name == "adaptive_reweight" else f"sum_tree_{name}"


def cpu_build(weights):
  return kernel_helpers.build_on(CPU, weights)


def cpu_reweight(state, indices, utilities, amplitude, decay):
  return kernel_helpers.reweight_on(CPU, state, indices, utilities, amplitude,
                                    decay)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", [1, 2, 5, 1000, 70000])
def test_build_writes_the_cpu_ops_tree(steps, dtype, num_leaves):
  weights = random_weights(num_leaves, dtype, seed=num_leaves)
  tree = np.full(2 * reference.capacity_of(num_leaves), 7, dtype)
  steps.build(tree, weights)
  np.testing.assert_array_equal(tree, cpu_build(weights).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "bad", [np.nan, np.inf, -1.0, "overflow", "pairwise overflow"])
def test_build_with_bad_weights_leaves_tree_untouched(steps, dtype, bad):
  weights = random_weights(100, dtype, seed=1)
  tree = cpu_build(weights).numpy()
  if bad == "overflow":
    new_weights = np.full(100, np.finfo(dtype).max / 4, dtype)
  elif bad == "pairwise overflow":
    # A running sum stays finite; the tree's (M + 0) + (q + q) does not.
    new_weights = np.zeros(100, dtype)
    new_weights[[0, 2, 3]] = [
        np.finfo(dtype).max,
        quarter_ulp(dtype),
        quarter_ulp(dtype)
    ]
  else:
    new_weights = weights.copy()
    new_weights[37] = bad
  steps.build(tree, new_weights)
  np.testing.assert_array_equal(tree, cpu_build(weights).numpy())


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stratified", [False, True])
# Batches up to 1024 take the one-block path, larger ones two launches.
@pytest.mark.parametrize("count", [1, 3, 100, 1024, 1025, 3001])
def test_draw_draws_what_the_cpu_op_draws_and_moves_the_state_on(
    steps, order, dtype, stratified, count):
  steps.order(order, seed=count)
  cpu_tree = cpu_build(random_weights(1000, dtype, seed=6))
  with tf.device(CPU):
    generator = tf.random.Generator.from_seed(count)
    rng_state = generator.state.numpy()
    cpu_indices, cpu_probabilities = ops.sum_tree_draw(cpu_tree.handle,
                                                       generator.state.handle,
                                                       count,
                                                       T=tf.as_dtype(dtype),
                                                       stratified=stratified)
  indices, probabilities = steps.draw(cpu_tree.numpy(), rng_state, count,
                                      stratified)
  np.testing.assert_array_equal(indices, cpu_indices.numpy())
  np.testing.assert_array_equal(probabilities, cpu_probabilities.numpy())
  np.testing.assert_array_equal(rng_state, generator.state.numpy())


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
# Batches up to 1024 take the one-block path, larger ones the sorting path.
@pytest.mark.parametrize("num_leaves,count", [(1, 3), (13, 40), (1000, 1),
                                              (5000, 700), (1000, 1024),
                                              (1000, 1025), (1000, 3000)])
def test_set_writes_the_cpu_ops_tree(steps, order, dtype, num_leaves, count):
  steps.order(order, seed=count)
  rng = np.random.default_rng(count)
  weights = random_weights(num_leaves, dtype, seed=0)
  # Repeated indices, whose last weight must win.
  indices = rng.integers(num_leaves, size=count)
  new_weights = random_weights(count, dtype, seed=1)
  cpu_tree = cpu_build(weights)
  ops.sum_tree_set(cpu_tree.handle, indices, new_weights, num_leaves=num_leaves)
  tree = cpu_build(weights).numpy()
  steps.set(tree, num_leaves, indices, new_weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())


def padded(indices, weights, count, dtype):
  """The batch behind `count - len(indices)` good entries, for either path."""
  padding = count - len(indices)
  return (np.concatenate([np.arange(padding) % 4, indices]).astype(np.int64),
          np.concatenate([np.ones(padding), weights]).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
@pytest.mark.parametrize("index,weight", [(100, 1.0), (-1, 1.0), (3, np.nan),
                                          (3, -2.0)])
def test_set_with_bad_input_leaves_tree_untouched(steps, dtype, count, index,
                                                  weight):
  tree = cpu_build(random_weights(100, dtype, seed=2)).numpy()
  before = tree.copy()
  # A later weight of index 3 would win, but the bad one is checked all the
  # same, as on the CPU.
  steps.set(tree, 100, *padded([5, index, 3], [1, weight, 2], count, dtype))
  np.testing.assert_array_equal(tree, before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_set_that_overflows_the_total_leaves_tree_untouched(
    steps, dtype, count):
  tree = cpu_build(np.full(4, np.finfo(dtype).max / 4, dtype)).numpy()
  before = tree.copy()
  # Only the last entry's change overflows (leaf 3 keeps max / 4), so the check
  # must sum every change.
  weights = np.ones(count, dtype)
  weights[-1] = np.finfo(dtype).max
  steps.set(tree, 4, np.arange(count, dtype=np.int64) % 3, weights)
  np.testing.assert_array_equal(tree, before)


def quarter_ulp(dtype):
  """A quarter of the largest value's ulp: max + q + q finite as a running
  sum, max + (q + q) inf."""
  info = np.finfo(dtype)
  return dtype(2.0**(info.maxexp - 1 - info.nmant - 2))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_set_whose_pairwise_sum_overflows_is_undone(steps, order, dtype, count):
  steps.order(order, seed=count)
  big, quarter = np.finfo(dtype).max, quarter_ulp(dtype)
  weights = np.array([big, 0, quarter, 0], dtype)
  indices = np.append(np.ones(count - 1), 3).astype(np.int64)
  new_weights = np.append(np.zeros(count - 1), quarter).astype(dtype)
  cpu_tree = cpu_build(weights)
  with pytest.raises(tf.errors.InvalidArgumentError, match="sum to inf"):
    ops.sum_tree_set(cpu_tree.handle, indices, new_weights, num_leaves=4)
  tree = cpu_tree.numpy()
  steps.set(tree, 4, indices, new_weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [2, 2000])
def test_set_near_the_top_of_the_range_that_fits_goes_through(
    steps, dtype, count):
  big = np.finfo(dtype).max
  weights = np.array([big / 2, big / 4, 0], dtype)
  indices = np.arange(count, dtype=np.int64) % 2
  # Each weight set to itself: the cheap bound (old total + new weights) is
  # past the range, so the exact check decides.
  new_weights = weights[indices]
  cpu_tree = cpu_build(weights)
  ops.sum_tree_set(cpu_tree.handle, indices, new_weights, num_leaves=3)
  tree = cpu_build(weights).numpy()
  steps.set(tree, 3, indices, new_weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())
  assert np.isfinite(tree[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [1, 2000])
def test_set_with_another_num_leaves_leaves_tree_untouched(steps, dtype, count):
  # Capacity 8 fits 5 and 7 leaves alike; node 0 says the tree has 5.
  tree = cpu_build(np.ones(5, dtype)).numpy()
  before = tree.copy()
  indices = np.full(count, 6, np.int64)
  steps.set(tree, 7, indices, np.full(count, 5, dtype))
  np.testing.assert_array_equal(tree, before)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_subnormal_weights_are_stored_as_zero_as_on_the_cpu(
    steps, dtype, count):
  tiny = np.finfo(dtype).smallest_subnormal
  weights = np.array([tiny, 1, tiny, 2, 0, tiny], dtype)
  tree = np.zeros(16, dtype)
  steps.build(tree, weights)
  cpu_tree = cpu_build(weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())
  np.testing.assert_array_equal(tree, reference.build_tree(weights))
  indices = np.arange(count, dtype=np.int64) % 6
  new_weights = np.full(count, tiny * 5, dtype)
  new_weights[-1] = 3
  ops.sum_tree_set(cpu_tree.handle, indices, new_weights, num_leaves=6)
  steps.set(tree, 6, indices, new_weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [2, 2000])
def test_set_checks_the_total_with_the_last_weight_of_an_index(
    steps, dtype, count):
  weights = np.full(4, np.finfo(dtype).max / 4, dtype)
  indices = np.zeros(count, np.int64)
  # The earlier weights would overflow the total, but the last one wins.
  new_weights = np.full(count, np.finfo(dtype).max, dtype)
  new_weights[-1] = 1
  cpu_tree = cpu_build(weights)
  ops.sum_tree_set(cpu_tree.handle, indices, new_weights, num_leaves=4)
  tree = cpu_build(weights).numpy()
  steps.set(tree, 4, indices, new_weights)
  np.testing.assert_array_equal(tree, cpu_tree.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", [1, 5, 1000])
def test_sample_draws_what_the_cpu_op_draws(steps, dtype, num_leaves):
  weights = random_weights(num_leaves, dtype, seed=3)
  cpu_tree = cpu_build(weights)
  rng = np.random.default_rng(4)
  uniforms = np.concatenate(
      [rng.random(3000), [0.0, np.nextafter(1, 0, dtype=dtype)]]).astype(dtype)
  cpu_indices, cpu_probabilities = ops.sum_tree_sample(cpu_tree.handle,
                                                       uniforms)
  indices, probabilities = steps.sample(cpu_tree.numpy(), uniforms)
  np.testing.assert_array_equal(indices, cpu_indices.numpy())
  np.testing.assert_array_equal(probabilities, cpu_probabilities.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_draws_minus_one_for_bad_uniforms(steps, dtype):
  tree = cpu_build(random_weights(10, dtype, seed=5)).numpy()
  uniforms = np.array([0.5, 1.0, -0.25, np.nan, 0.0], dtype)
  indices, probabilities = steps.sample(tree, uniforms)
  np.testing.assert_array_equal(indices[1:4], [-1, -1, -1])
  assert np.isnan(probabilities[1:4]).all()
  assert (indices[[0, 4]] >= 0).all()
  assert np.isfinite(probabilities[[0, 4]]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_from_an_all_zero_tree_draws_minus_one(steps, dtype):
  tree = np.zeros(16, dtype)
  indices, probabilities = steps.sample(tree, np.array([0.0, 0.5], dtype))
  np.testing.assert_array_equal(indices, [-1, -1])
  assert np.isnan(probabilities).all()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
# Batches up to 1024 take the one-block path, larger ones the sorting path.
@pytest.mark.parametrize("num_leaves,count", [(1, 4), (50, 100), (1000, 1024),
                                              (1000, 1025), (3000, 5000)])
def test_reweight_updates_state_as_the_cpu_op(steps, order, dtype, num_leaves,
                                              count):
  steps.order(order, seed=count)
  rng = np.random.default_rng(count)
  state = ReweightState(rng.normal(size=num_leaves).astype(dtype), 0.5)
  for _ in range(3):
    indices = rng.integers(num_leaves, size=count)
    utilities = rng.normal(size=count).astype(dtype)
    expected = cpu_reweight(state, indices, utilities, 0.8, 0.9)
    steps.reweight(state, indices, utilities, 0.8, 0.9)
    assert_same_state(state.arrays(), expected)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
# 70000 leaves take two passes of the log-sum-exp.
@pytest.mark.parametrize("num_leaves,count", [(1, 1), (300, 200),
                                              (70000, 2000)])
def test_reweight_rescales_as_the_cpu_op(steps, order, dtype, num_leaves,
                                         count):
  steps.order(order, seed=count)
  rng = np.random.default_rng(count)
  state = ReweightState(rng.normal(size=num_leaves).astype(dtype), 0.0)
  # Utilities of 300 push the float64 total past 2 ** 256 (and float32's past
  # 2 ** 32): the caches must be rebuilt with a new log-scale.
  indices = rng.permutation(num_leaves)[:count]
  utilities = np.full(count, 300, dtype)
  expected = cpu_reweight(state, indices, utilities, 1.0, 0.5)
  steps.reweight(state, indices, utilities, 1.0, 0.5)
  assert expected[1] > 100
  # The log-sum-exp adds in another order than the CPU's.
  rtol = 1e-12 if dtype == np.float64 else 1e-4
  assert_same_state(state.arrays(), expected, rtol=rtol)
  np.testing.assert_allclose(state.tree[1], 1, rtol=rtol)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
# A batch of every index: the one-block path up to 1024, the sorting path past.
@pytest.mark.parametrize("num_leaves", [1, 1000, 1024, 1025, 3000])
def test_reweight_with_decay_0_over_every_index_resets_as_the_cpu_op(
    steps, order, dtype, num_leaves):
  steps.order(order, seed=num_leaves)
  rng = np.random.default_rng(num_leaves)
  # A log-scale that is not 0, as after a rescale.
  state = ReweightState((10 * rng.normal(size=num_leaves)).astype(dtype), 37.25)
  indices = rng.permutation(num_leaves)
  utilities = np.zeros(num_leaves, dtype)
  expected = cpu_reweight(state, indices, utilities, 0.0, 0.0)
  steps.reweight(state, indices, utilities, 0.0, 0.0)
  assert_same_state(state.arrays(), expected)
  # The state of a new sampler: log weights and log-scale 0, leaves of 1.
  assert_same_state(state.arrays(),
                    ReweightState(np.zeros(num_leaves, dtype), 0.0).arrays())
  np.testing.assert_array_equal(state.entropy_tree[:2], [num_leaves, 0])


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_reweight_with_decay_0_recomputes_the_caches_as_the_cpu_op(
    steps, order, dtype, count):
  steps.order(order, seed=count)
  rng = np.random.default_rng(count)
  state = ReweightState(rng.normal(size=3000).astype(dtype), -4.5)
  indices = rng.integers(3000, size=count)
  utilities = rng.normal(size=count).astype(dtype)
  expected = cpu_reweight(state, indices, utilities, 2.0, 0.0)
  steps.reweight(state, indices, utilities, 2.0, 0.0)
  assert expected[1] == 0
  assert_same_state(state.arrays(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
@pytest.mark.parametrize("bad", ["index", "nan", "inf", "overflow"])
def test_reweight_with_bad_input_leaves_state_untouched(steps, dtype, count,
                                                        bad):
  rng = np.random.default_rng(6)
  state = ReweightState(rng.normal(size=50).astype(dtype), 0.0)
  before = state.copy()
  indices = rng.integers(50, size=count)
  utilities = np.ones(count, dtype)
  if bad == "index":
    indices[-1] = 50
  else:
    # Position 0 holds the first occurrence of its index: its utility is read.
    utilities[0] = {
        "nan": np.nan,
        "inf": np.inf,
        "overflow": np.finfo(dtype).max
    }[bad]
  amplitude = 10.0 if bad == "overflow" else 1.0
  steps.reweight(state, indices, utilities, amplitude, 0.9)
  assert_same_state(state.arrays(), before.arrays())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_reweight_applies_the_first_utility_of_a_repeated_index(
    steps, dtype, count):
  rng = np.random.default_rng(7)
  state = ReweightState(rng.normal(size=50).astype(dtype), 0.0)
  indices = rng.integers(50, size=count)
  indices[-1] = indices[0]
  utilities = np.ones(count, dtype)
  utilities[-1] = 5.0  # Not its index's first occurrence: not applied.
  expected = cpu_reweight(state, indices, utilities, 1.0, 0.9)
  steps.reweight(state, indices, utilities, 1.0, 0.9)
  assert_same_state(state.arrays(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [3, 2000])
def test_reweight_refuses_a_repeated_indexs_nan_leaving_state_untouched(
    steps, dtype, count):
  rng = np.random.default_rng(7)
  state = ReweightState(rng.normal(size=50).astype(dtype), 0.0)
  before = state.copy()
  indices = rng.integers(50, size=count)
  indices[-1] = indices[0]
  utilities = np.ones(count, dtype)
  utilities[-1] = np.nan  # Not applied, but a batch holding it is refused.
  steps.reweight(state, indices, utilities, 1.0, 0.9)
  assert_same_state(state.arrays(), before.arrays())


@pytest.mark.parametrize("dtype", DTYPES)
def test_reweight_of_an_empty_batch_changes_nothing(steps, dtype):
  state = ReweightState(np.linspace(-1, 1, 20).astype(dtype), 0.25)
  before = state.copy()
  steps.reweight(state, np.zeros(0, np.int64), np.zeros(0, dtype), 1.0, 0.9)
  assert_same_state(state.arrays(), before.arrays())
