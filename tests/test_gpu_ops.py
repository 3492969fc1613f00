"""The GPU kernels against the CPU kernels, through the TensorFlow ops.

Each op runs on /GPU:0 and on /CPU:0 on the same inputs, the same uniforms
for draws. Trees built or set from the same weights agree bit for bit, and so
do their draws (the CUDA source compiles without fused multiply-adds); after
reweighting, the log weights agree bit for bit and the caches to round-off, as
CUDA's exp and glibc's may differ in the last bit. Bad values on the GPU leave
the state untouched instead of raising (docs/cuda.md). Skipped where
TensorFlow sees no GPU.
"""

import numpy as np
import pytest
import tensorflow as tf

from kernel_helpers import assert_same_state
from kernel_helpers import build_on
from kernel_helpers import random_weights
from kernel_helpers import reweight_on
from kernel_helpers import ReweightState
from kernel_helpers import state_of
from kernel_helpers import train
from kernel_helpers import variable_on
from tf_adasamp import AdaptiveSampler
from tf_adasamp import ops

CPU = "/CPU:0"
GPU = "/GPU:0"
DTYPES = [np.float64, np.float32]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not tf.config.list_physical_devices("GPU"),
                       reason="TensorFlow sees no GPU"),
]


def tolerance(dtype):
  return 1e-13 if dtype == np.float64 else 2e-5


def sample_on(device, tree, uniforms):
  with tf.device(device):
    indices, probabilities = ops.sum_tree_sample(tree.handle, uniforms)
  return indices.numpy(), probabilities.numpy()


def uniforms_for(dtype, count, seed):
  uniforms = np.random.default_rng(seed).random(count).astype(dtype)
  uniforms[:2] = [0, np.nextafter(1, 0, dtype=dtype)]
  return uniforms


def test_sampler_state_and_ops_live_on_the_gpu():
  with tf.device(GPU):
    sampler = AdaptiveSampler(1000, amplitude=1.0, decay=0.9, seed=0)
    indices, probabilities = sampler.sample_with_probabilities(64)
  for tensor in (sampler.tree.variable, sampler.log_weights, indices,
                 probabilities):
    assert "GPU" in tensor.device


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", [1, 1000, 70000])
def test_build_and_sample_match_the_cpu(dtype, num_leaves):
  weights = random_weights(num_leaves, dtype, seed=num_leaves)
  gpu_tree = build_on(GPU, weights)
  cpu_tree = build_on(CPU, weights)
  np.testing.assert_array_equal(gpu_tree.numpy(), cpu_tree.numpy())
  uniforms = uniforms_for(dtype, 1 << 16, seed=1)
  for gpu, cpu in zip(sample_on(GPU, gpu_tree, uniforms),
                      sample_on(CPU, cpu_tree, uniforms)):
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stratified", [False, True])
# The one-block path, and the two launches past 1024 draws.
@pytest.mark.parametrize("count", [1, 5, 100, 1024, 1025, 70001])
def test_draw_matches_the_cpu_and_moves_the_state_as_it(dtype, stratified,
                                                        count):
  weights = random_weights(5000, dtype, seed=count)
  results = {}
  for device in (GPU, CPU):
    tree = build_on(device, weights)
    with tf.device(device):
      generator = tf.random.Generator.from_seed(count)
      draws = [
          ops.sum_tree_draw(tree.handle,
                            generator.state.handle,
                            count,
                            T=tf.as_dtype(dtype),
                            stratified=stratified) for _ in range(2)
      ]
    if device == GPU:
      assert "GPU" in generator.state.device
    results[device] = [x.numpy() for draw in draws for x in draw]
    results[device].append(generator.state.numpy())
  for gpu, cpu in zip(results[GPU], results[CPU]):
    np.testing.assert_array_equal(gpu, cpu)


def test_sampler_draws_on_the_gpu_are_those_of_the_generators_uniforms():
  with tf.device(GPU):
    fused = AdaptiveSampler(5000, amplitude=1.0, decay=0.9, seed=3)
    composite = AdaptiveSampler(5000, amplitude=1.0, decay=0.9, seed=3)
    for _ in range(3):
      np.testing.assert_array_equal(
          fused.sample(300),
          composite.tree.sample(composite.uniforms(300))[0])
  np.testing.assert_array_equal(fused.generator.state,
                                composite.generator.state)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves,count", [(13, 40), (1000, 1),
                                              (5000, 3000)])
def test_set_matches_the_cpu(dtype, num_leaves, count):
  rng = np.random.default_rng(count)
  weights = random_weights(num_leaves, dtype, seed=0)
  indices = rng.integers(num_leaves, size=count)  # Repeats: the last wins.
  new_weights = random_weights(count, dtype, seed=1)
  trees = []
  for device in (GPU, CPU):
    tree = build_on(device, weights)
    with tf.device(device):
      ops.sum_tree_set(tree.handle, indices, new_weights, num_leaves=num_leaves)
    trees.append(tree.numpy())
  np.testing.assert_array_equal(*trees)


@pytest.mark.parametrize("dtype", DTYPES)
# Batches up to 1024 take the one-block kernel, larger ones the sorting path.
@pytest.mark.parametrize("num_leaves,count", [(50, 100), (1000, 1024),
                                              (3000, 5000)])
def test_reweight_matches_the_cpu(dtype, num_leaves, count):
  rng = np.random.default_rng(count)
  state = ReweightState(rng.normal(size=num_leaves).astype(dtype), 0.5)
  for _ in range(3):
    indices = rng.integers(num_leaves, size=count)
    utilities = rng.normal(size=count).astype(dtype)
    gpu = reweight_on(GPU, state, indices, utilities, 0.8, 0.9)
    cpu = reweight_on(CPU, state, indices, utilities, 0.8, 0.9)
    # No exp in the log weights and the log-scale: bit for bit.
    assert_same_state(gpu[:2], cpu[:2])
    assert_same_state(gpu[2:], cpu[2:], rtol=tolerance(dtype))
    state.log_weights, state.log_scale, state.tree, state.entropy_tree = cpu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_leaves", [300, 70000])
def test_rescale_on_the_gpu_matches_the_cpu(dtype, num_leaves):
  rng = np.random.default_rng(num_leaves)
  state = ReweightState(rng.normal(size=num_leaves).astype(dtype), 0.0)
  indices = rng.permutation(num_leaves)[:200]
  # Utilities of 300 push the total out of its safe range in either dtype.
  utilities = np.full(200, 300, dtype)
  gpu = reweight_on(GPU, state, indices, utilities, 1.0, 0.5)
  cpu = reweight_on(CPU, state, indices, utilities, 1.0, 0.5)
  assert cpu[1] > 100
  assert_same_state(gpu, cpu, rtol=10 * tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
# A batch of every index: the one-block kernel, then the sorting path.
@pytest.mark.parametrize("num_leaves", [1000, 3000])
def test_reset_on_the_gpu_gives_the_initial_state(dtype, num_leaves):
  rng = np.random.default_rng(num_leaves)
  state = ReweightState((10 * rng.normal(size=num_leaves)).astype(dtype), 37.25)
  gpu = reweight_on(GPU, state, rng.permutation(num_leaves),
                    np.zeros(num_leaves, dtype), 0.0, 0.0)
  assert_same_state(gpu,
                    ReweightState(np.zeros(num_leaves, dtype), 0.0).arrays())


@pytest.mark.parametrize("dtype", DTYPES)
def test_bad_values_leave_gpu_state_untouched_without_error(dtype):
  weights = random_weights(100, dtype, seed=2)
  tree = build_on(GPU, weights)
  before = tree.numpy()
  with tf.device(GPU):
    ops.sum_tree_set(tree.handle,
                     np.array([3, 100]),
                     np.ones(2, dtype),
                     num_leaves=100)
    ops.sum_tree_set(tree.handle,
                     np.array([3]),
                     np.array([np.nan], dtype),
                     num_leaves=100)
    ops.sum_tree_build(tree.handle, -weights, num_leaves=100)
  np.testing.assert_array_equal(tree.numpy(), before)

  state = ReweightState(np.zeros(100, dtype), 0.0)
  after = reweight_on(GPU, state, np.array([3, 7]), np.array([np.inf, 1],
                                                             dtype), 1.0, 0.9)
  assert_same_state(after, state.arrays())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [1, 2000])
def test_hardened_checks_leave_gpu_state_untouched_without_error(dtype, count):
  # tests/test_ops.py's cases: an inf pairwise sum (build and set),
  # and a num_leaves other than the one the build recorded.
  info = np.finfo(dtype)
  big, quarter = info.max, dtype(2.0**(info.maxexp - 1 - info.nmant - 2))
  tree = build_on(GPU, np.array([big, 0, quarter, 0, 1], dtype))
  before = tree.numpy()
  with tf.device(GPU):
    ops.sum_tree_build(tree.handle,
                       np.array([big, 0, quarter, quarter, 1], dtype),
                       num_leaves=5)
    ops.sum_tree_set(tree.handle,
                     np.full(count, 3, np.int64),
                     np.full(count, quarter, dtype),
                     num_leaves=5)
    ops.sum_tree_set(tree.handle,
                     np.full(count, 6, np.int64),
                     np.ones(count, dtype),
                     num_leaves=7)
  np.testing.assert_array_equal(tree.numpy(), before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_subnormal_weights_are_stored_as_zero_on_the_gpu(dtype):
  tiny = np.finfo(dtype).smallest_subnormal
  weights = np.array([tiny, 1, tiny, 2], dtype)
  np.testing.assert_array_equal(
      build_on(GPU, weights).numpy(),
      build_on(CPU, weights).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_bad_uniforms_draw_minus_one_on_the_gpu(dtype):
  tree = build_on(GPU, random_weights(10, dtype, seed=3))
  indices, probabilities = sample_on(GPU, tree,
                                     np.array([0.5, 1.0, -0.5, np.nan], dtype))
  np.testing.assert_array_equal(indices[1:], [-1, -1, -1])
  assert indices[0] >= 0
  assert np.isnan(probabilities[1:]).all()


def test_shape_errors_still_raise_on_the_gpu():
  tree = build_on(GPU, np.ones(10))
  with tf.device(GPU), pytest.raises(tf.errors.InvalidArgumentError):
    ops.sum_tree_set(tree.handle, np.array([1, 2]), np.ones(3), num_leaves=10)
  wrong_size = variable_on(GPU, np.zeros(6))
  with tf.device(GPU), pytest.raises(tf.errors.InvalidArgumentError):
    ops.sum_tree_build(wrong_size.handle, np.ones(10), num_leaves=10)


def test_sampler_steps_in_tf_function_match_the_cpu():
  samplers = {}
  for device in (GPU, CPU):
    with tf.device(device):
      samplers[device] = AdaptiveSampler(5000, amplitude=1.0, decay=0.9)

  @tf.function
  def update(sampler, indices, utilities):
    sampler.update(indices, utilities)
    return sampler.kl_divergence()

  rng = np.random.default_rng(4)
  for _ in range(20):
    indices = rng.integers(5000, size=100)
    utilities = rng.random(100)
    kls = {
        device: update(sampler, indices, utilities).numpy()
        for device, sampler in samplers.items()
    }
    np.testing.assert_allclose(kls[GPU], kls[CPU], rtol=1e-10, atol=1e-15)
  np.testing.assert_allclose(samplers[GPU].probabilities().numpy(),
                             samplers[CPU].probabilities().numpy(),
                             rtol=1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stratified", [False, True])
# One block, or the sorting path (more draws than a block has threads),
# whose scratch the compiled step sizes when it compiles.
@pytest.mark.parametrize("batch_size", [32, 2048])
def test_a_compiled_step_on_the_gpu_matches_the_ops_there(
    dtype, stratified, batch_size):
  # The ops' XLA kernels on the GPU (jit_compile=True) run the GPU kernels the
  # ops do, on the same state: the same results, bit for bit.
  states = []
  for jit_compile in (False, True):
    with tf.device(GPU):
      sampler = AdaptiveSampler(1000,
                                amplitude=0.5,
                                decay=0.9,
                                seed=7,
                                stratified=stratified,
                                dtype=dtype)
      last_batch = train(sampler, 60, batch_size, jit_compile)
    assert "GPU" in sampler.tree.variable.device
    states.append(last_batch + state_of(sampler))
  assert_same_state(states[1], states[0])


def test_a_compiled_sample_on_the_gpu_matches_the_op():
  tree = build_on(GPU, random_weights(100, np.float64, 0))
  uniforms = uniforms_for(np.float64, 64, 1)
  with tf.device(GPU):
    compiled = tf.function(lambda: ops.sum_tree_sample(tree.handle, uniforms),
                           jit_compile=True)()
  for got, expected in zip(compiled, sample_on(GPU, tree, uniforms)):
    np.testing.assert_array_equal(got.numpy(), expected)
