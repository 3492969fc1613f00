"""The CPU kernels' fast paths against straightforward NumPy references.

The sample kernel advances up to 32 walks in lockstep, without branches or in
AVX-512 vectors where the CPU has them (cc/kernels/descend_cpu.h), and shares
batches of >= 2 * 2048 draws with the intra-op pool in chunks of 1024, and
asks for huge pages for large trees; the update kernels find a batch's distinct
indices in a hash table on the stack for batches of <= 128, and by a radix
sort over the index bytes above. The sizes below straddle those thresholds,
and a draw must equal `Descend` (cc/kernels/sum_tree_algorithm.h) bit for
bit.
"""

import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import reference
from tf_adasamp import ops
from tf_adasamp import SumTree

DTYPES = [tf.float64, tf.float32]
# Groups of 32 walks; with 2 or more intra-op threads, batches from 4096 on
# are shared in chunks of 1024.
BATCH_SIZES = [1, 31, 32, 33, 100, 4095, 4096, 4097, 16383, 16384, 16385, 40000]
# One leaf (no levels), a few, and radix sorts of 1, 2 and 3 bytes.
SIZES = [1, 2, 3, 256, 257, 1000, 2**16 + 1]


def descend(tree, uniforms):
  """`Descend` per uniform, as written in sum_tree_algorithm.h."""
  capacity = len(tree) // 2
  total = tree[1]
  target = uniforms.astype(tree.dtype) * total
  node = np.ones(len(uniforms), np.int64)
  for _ in range(capacity.bit_length() - 1):
    left = tree[2 * node]
    right = tree[2 * node + 1]
    go_right = ~(target < left) & (right > 0)
    target = np.where(go_right, target - left, target)
    node = 2 * node + go_right
  return node - capacity, tree[node] / total


def weights_with_zeros(num_leaves, seed):
  """Gamma weights, a third of them 0, the last ones 0, one surely positive."""
  rng = np.random.default_rng(seed)
  weights = rng.gamma(0.5, size=num_leaves)
  weights[rng.random(num_leaves) < 1 / 3] = 0
  weights[num_leaves - num_leaves // 4:] = 0
  weights[rng.integers(num_leaves - num_leaves // 4)] = 1.0
  return weights


def edge_uniforms(weights, batch_size, dtype, seed):
  """Random uniforms, plus 0, -0, the largest below 1, and exact boundaries."""
  rng = np.random.default_rng(seed)
  uniforms = rng.random(batch_size).astype(dtype)
  below_one = np.nextafter(dtype(1), dtype(0))
  boundaries = np.cumsum(weights)[:-1] / weights.sum()
  edges = np.concatenate([[0.0, -0.0, below_one], boundaries]).astype(dtype)
  edges = edges[(edges >= 0) & (edges < 1)]
  count = min(batch_size, len(edges))
  uniforms[rng.choice(batch_size, count, replace=False)] = edges[:count]
  return uniforms


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", SIZES)
@pytest.mark.parametrize("batch_size", BATCH_SIZES)
def test_sample_equals_descend_bit_for_bit(dtype, num_leaves, batch_size):
  np_dtype = dtype.as_numpy_dtype
  weights = weights_with_zeros(num_leaves, seed=num_leaves).astype(np_dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  uniforms = edge_uniforms(weights, batch_size, np_dtype, seed=batch_size)
  indices, probabilities = tree.sample(uniforms)
  expected_indices, expected_probabilities = descend(tree.variable.numpy(),
                                                     uniforms)
  np.testing.assert_array_equal(indices.numpy(), expected_indices)
  np.testing.assert_array_equal(probabilities.numpy(), expected_probabilities)
  assert np.all(weights[indices.numpy()] > 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_equals_descend_on_random_shapes(dtype):
  rng = np.random.default_rng(0)
  np_dtype = dtype.as_numpy_dtype
  for case in range(30):
    num_leaves = int(rng.integers(1, 5000))
    weights = weights_with_zeros(num_leaves, seed=case).astype(np_dtype)
    tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
    uniforms = edge_uniforms(weights,
                             int(rng.integers(1, 300)),
                             np_dtype,
                             seed=case)
    indices, probabilities = tree.sample(uniforms)
    expected = descend(tree.variable.numpy(), uniforms)
    np.testing.assert_array_equal(indices.numpy(), expected[0])
    np.testing.assert_array_equal(probabilities.numpy(), expected[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sample_at_exact_interval_boundaries_equals_descend(dtype):
  # Integer weights summing to 2048: every boundary u * total is exact.
  np_dtype = dtype.as_numpy_dtype
  rng = np.random.default_rng(5)
  weights = rng.integers(0, 3, 1000).astype(np_dtype)
  weights[0] += 2048 - weights.sum()
  tree = SumTree(len(weights), initial_weights=weights, dtype=dtype)
  uniforms = (np.cumsum(weights)[:-1] / 2048).astype(np_dtype)
  indices, probabilities = tree.sample(uniforms)
  expected = descend(tree.variable.numpy(), uniforms)
  np.testing.assert_array_equal(indices.numpy(), expected[0])
  np.testing.assert_array_equal(probabilities.numpy(), expected[1])
  np.testing.assert_array_equal(indices.numpy(),
                                reference.draw(weights, uniforms))


@pytest.mark.parametrize("batch_size", [1, 33, 5000])
def test_sample_with_node_sums_above_their_children_equals_descend(batch_size):
  # Round-off can leave a node's sum above its children's; inflating sums
  # widens those gaps, so many targets pass both children and the guard that
  # only enters positive sums decides.
  rng = np.random.default_rng(6)
  weights = weights_with_zeros(1000, seed=6)
  tree = SumTree(len(weights), initial_weights=weights)
  values = tree.variable.numpy()
  capacity = len(values) // 2
  for node in range(capacity - 1, 0, -1):
    values[node] = (values[2 * node] + values[2 * node + 1]) * rng.uniform(
        1, 1.5)
  tree.variable.assign(values)
  uniforms = rng.random(batch_size)
  indices, probabilities = tree.sample(uniforms)
  expected = descend(values, uniforms)
  np.testing.assert_array_equal(indices.numpy(), expected[0])
  np.testing.assert_array_equal(probabilities.numpy(), expected[1])
  assert np.all(weights[indices.numpy()] > 0)


def test_sample_of_sorted_uniforms_equals_descend():
  weights = weights_with_zeros(2**16 + 1, seed=1)
  tree = SumTree(len(weights), initial_weights=weights)
  uniforms = (np.arange(5000) + np.random.default_rng(1).random(5000)) / 5000
  indices, probabilities = tree.sample(uniforms)
  expected = descend(tree.variable.numpy(), uniforms)
  np.testing.assert_array_equal(indices.numpy(), expected[0])
  np.testing.assert_array_equal(probabilities.numpy(), expected[1])


def repeated_indices(num_leaves, batch_size, seed):
  """Indices with many repeats, unsorted, spanning the whole range."""
  rng = np.random.default_rng(seed)
  distinct = rng.integers(num_leaves, size=max(1, batch_size // 3))
  indices = rng.choice(distinct, batch_size)
  indices[0] = num_leaves - 1
  return indices


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", SIZES)
@pytest.mark.parametrize("batch_size", [1, 127, 128, 129, 1000])
def test_set_keeps_last_weight_and_equals_full_rebuild(dtype, num_leaves,
                                                       batch_size):
  np_dtype = dtype.as_numpy_dtype
  weights = weights_with_zeros(num_leaves, seed=2).astype(np_dtype)
  tree = SumTree(num_leaves, initial_weights=weights, dtype=dtype)
  indices = repeated_indices(num_leaves, batch_size, seed=batch_size)
  new_weights = np.random.default_rng(3).gamma(0.5,
                                               size=batch_size).astype(np_dtype)
  tree.set(indices, new_weights)
  weights[indices] = new_weights  # NumPy keeps the last weight too.
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree(weights))


def reweight_variables(num_leaves, dtype, seed):
  """A tree, entropy tree, log weights and log-scale as AdaptiveReweight
  expects them, from random log weights."""
  np_dtype = dtype.as_numpy_dtype
  log_weights = np.random.default_rng(seed).normal(
      size=num_leaves).astype(np_dtype)
  scaled = np.exp(log_weights)
  return [
      tf.Variable(reference.build_tree(scaled)),
      tf.Variable(reference.heap_sums(scaled * log_weights)),
      tf.Variable(log_weights),
      tf.Variable(np_dtype(0)),
  ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", SIZES)
@pytest.mark.parametrize("batch_size", [1, 127, 128, 129, 1000])
def test_reweight_uses_first_utility_and_recomputes_every_ancestor(
    dtype, num_leaves, batch_size):
  np_dtype = dtype.as_numpy_dtype
  variables = reweight_variables(num_leaves, dtype, seed=num_leaves)
  tree, entropy_tree, log_weights, _ = variables
  old_log_weights = log_weights.numpy()
  old_tree = tree.numpy()
  indices = repeated_indices(num_leaves, batch_size, seed=batch_size)
  utilities = np.random.default_rng(4).normal(size=batch_size).astype(np_dtype)
  amplitude, decay = np_dtype(0.5), np_dtype(0.9)
  ops.adaptive_reweight(*[v.handle for v in variables], indices, utilities,
                        amplitude, decay)

  expected = old_log_weights.copy()
  _, firsts = np.unique(indices, return_index=True)
  for position in firsts:
    i = indices[position]
    expected[i] = decay * old_log_weights[i] + amplitude * utilities[position]
  rtol = 1e-12 if dtype == tf.float64 else 1e-5
  np.testing.assert_allclose(log_weights.numpy(), expected, rtol=rtol)
  capacity = len(old_tree) // 2
  for values in (tree.numpy(), entropy_tree.numpy()):
    internal = np.arange(1, capacity)
    np.testing.assert_array_equal(
        values[internal], values[2 * internal] + values[2 * internal + 1])
  leaves = tree.numpy()[capacity:capacity + num_leaves]
  np.testing.assert_allclose(leaves, np.exp(expected), rtol=rtol)
  untouched = np.setdiff1d(np.arange(num_leaves), indices)
  np.testing.assert_array_equal(leaves[untouched],
                                old_tree[capacity:][untouched])


@pytest.mark.usefixtures("on_cpu")
def test_reweight_checks_every_utility_but_applies_only_the_first():
  variables = reweight_variables(300, tf.float64, seed=0)
  log_weights = variables[2]
  old = log_weights.numpy()
  before = [v.numpy() for v in variables]
  indices = np.array([299, 5, 299, 5, 7])
  amplitude, decay = np.float64(1.0), np.float64(0.5)
  # The NaN is the second utility of index 299: never applied, still refused.
  for bad in (np.nan, np.inf):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"utilities\[2\] = {bad}"):
      ops.adaptive_reweight(*[v.handle for v in variables], indices,
                            np.array([1.0, 2.0, bad, 3.0, 4.0]), amplitude,
                            decay)
    for variable, value in zip(variables, before):
      np.testing.assert_array_equal(variable.numpy(), value)
  ops.adaptive_reweight(*[v.handle for v in variables], indices,
                        np.array([1.0, 2.0, 9.0, 3.0, 4.0]), amplitude, decay)
  np.testing.assert_allclose(log_weights.numpy()[[299, 5, 7]],
                             0.5 * old[[299, 5, 7]] + [1.0, 2.0, 4.0])


@pytest.mark.parametrize("stride", [1, 2**9, 2**10 - 1])
def test_small_set_of_distinct_indices_equals_full_rebuild(stride):
  # 128 distinct indices fill half the hash table; strides of powers of two
  # and near them probe past collisions.
  num_leaves = 2**17
  weights = np.random.default_rng(stride).gamma(0.5, size=num_leaves)
  tree = SumTree(num_leaves, initial_weights=weights)
  indices = (np.arange(128) * stride) % num_leaves
  new_weights = np.arange(128, dtype=np.float64)
  tree.set(indices, new_weights)
  weights[indices] = new_weights
  np.testing.assert_array_equal(tree.variable.numpy(),
                                reference.build_tree(weights))


def test_scalar_walks_equal_descend_where_avx512_would_run():
  # The kernel picks AVX-512 walks where the CPU has them; TF_ADASAMP_CPU_SIMD=0
  # makes it take the scalar ones, which a CPU without AVX-512 always takes.
  # The variable is read once per process, so the check runs in a new one.
  here = os.path.dirname(os.path.abspath(__file__))
  result = subprocess.run(
      [
          sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
          os.path.join(here, "test_fast_paths.py"), "-k",
          "test_sample_equals_descend_bit_for_bit"
      ],
      env={
          **os.environ, "TF_ADASAMP_CPU_SIMD":
              "0",
          "PYTHONPATH":
              os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])
      },
      capture_output=True,
      text=True,
      check=False,
      cwd=os.path.dirname(here))
  assert result.returncode == 0, result.stdout[-3000:]
  assert " passed" in result.stdout and "failed" not in result.stdout


def anon_huge_page_bytes():
  with open("/proc/self/smaps_rollup") as f:
    return 1024 * int(re.search(r"AnonHugePages:\s+(\d+) kB", f.read())[1])


def transparent_huge_pages_usable():
  """Whether madvise can ask this kernel for huge pages now: THP not off,
  and MADV_COLLAPSE (Linux 6.1)."""
  try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
      if "[never]" in f.read():
        return False
    anon_huge_page_bytes()
  except OSError:
    return False
  version = re.match(r"(\d+)\.(\d+)", platform.release())
  return version is not None and tuple(map(int, version.groups())) >= (6, 1)


@pytest.mark.skipif(not transparent_huge_pages_usable(),
                    reason="no transparent huge pages on demand here")
def test_a_large_tree_is_backed_by_huge_pages_once_drawn_from(on_cpu):
  # 32 MiB of tree: past the TLB's reach in 4 KiB pages.
  tree = SumTree(2**21, dtype=tf.float64)
  before = anon_huge_page_bytes()
  tree.sample(np.array([0.5]))
  assert anon_huge_page_bytes() - before >= 16 << 20
