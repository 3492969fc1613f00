"""AdaptiveSampler (tf_adasamp.sampler) against a NumPy reference of
Algorithm 1; bad input, in Python and through checkpoints, refused before
any state changes (issue 16)."""

import math
import re

import keras
import numpy as np
import pytest
from scipy import stats
import tensorflow as tf

from kernel_helpers import assert_same_state
from kernel_helpers import assert_unchanged
from kernel_helpers import state_of
import reference
from sampler_controls import controlled_sampler
from sampler_controls import controlled_steps
from sampler_controls import NUM_EXAMPLES
from sampler_controls import utility_of
import tf_adasamp
from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import ops
from tf_adasamp import schedules
from tf_adasamp import SumTree


def run_against_reference(sampler, algorithm, steps, batch_size, utility):
  """Runs both with the same uniforms; returns the sampled index batches."""
  batches = []
  for step in range(steps):
    uniforms = sampler.uniforms(batch_size)
    indices, probabilities = sampler.tree.sample(uniforms)
    expected = algorithm.draw(uniforms.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected)
    np.testing.assert_allclose(probabilities.numpy(),
                               algorithm.probabilities()[expected],
                               rtol=1e-12)
    utilities = utility(step, indices.numpy())
    sampler.update(indices, utilities)
    algorithm.update(indices.numpy(), utilities)
    batches.append(indices.numpy())
  return batches


@pytest.mark.parametrize("batch_size", [1, 16])
@pytest.mark.parametrize("amplitude,decay", [(1.0, 0.9), (3.0, 0.5)])
def test_draws_and_weights_follow_algorithm_1(batch_size, amplitude, decay):
  num_examples = 50
  sampler = AdaptiveSampler(num_examples, amplitude, decay, seed=0)
  algorithm = reference.Algorithm1(num_examples, amplitude, decay)
  hard = np.arange(num_examples) % 7 == 0

  def utility(step, indices):
    # Signed, index- and time-dependent utilities.
    return np.where(hard[indices], 1.0, -0.25) * (1 + 0.01 * step)

  run_against_reference(sampler, algorithm, 60, batch_size, utility)
  np.testing.assert_allclose(sampler.log_weights.numpy(),
                             algorithm.log_weights,
                             rtol=1e-12,
                             atol=1e-12)
  np.testing.assert_allclose(sampler.probabilities().numpy(),
                             algorithm.probabilities(),
                             rtol=1e-12)
  np.testing.assert_allclose(sampler.kl_divergence().numpy(),
                             algorithm.kl_divergence(),
                             rtol=1e-9,
                             atol=1e-14)


def test_repeated_index_is_reweighted_once_with_first_utility():
  sampler = AdaptiveSampler(4, amplitude=2.0, decay=0.5)
  sampler.update([1, 3, 1, 1], [1.0, -1.0, 5.0, 7.0])
  np.testing.assert_allclose(sampler.log_weights.numpy(), [0.0, 2.0, 0.0, -2.0])


def test_update_and_sample_inside_function_match_eager():
  eager = AdaptiveSampler(30, amplitude=1.0, decay=0.8, seed=3)
  graph = AdaptiveSampler(30, amplitude=1.0, decay=0.8, seed=3)

  def step(sampler):
    indices = sampler.sample(8)
    sampler.update(indices, tf.cast(indices % 3 == 0, tf.float64))
    return indices

  graph_step = tf.function(lambda: step(graph))
  for _ in range(20):
    np.testing.assert_array_equal(step(eager).numpy(), graph_step().numpy())
  for expected, actual in zip(state_of(eager), state_of(graph)):
    np.testing.assert_array_equal(expected, actual)


def test_training_step_graph_has_no_host_callbacks():
  sampler = AdaptiveSampler(100, amplitude=1.0, decay=0.9, seed=0)
  data = tf.random.stateless_normal([100, 4], seed=[0, 0])

  @tf.function
  def step():
    indices = sampler.sample(10)
    batch = tf.gather(data, indices)
    sampler.update(indices, tf.reduce_sum(batch, axis=1))

  graph = step.get_concrete_function().graph
  op_types = {op.type for op in graph.get_operations()}
  assert "AdaSamp>SumTreeDraw" in op_types
  assert "AdaSamp>AdaptiveReweight" in op_types
  assert not op_types & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}
  # The draw op makes its own uniforms: no generator ops besides it.
  assert not op_types & {"RngReadAndSkip", "StatelessRandomUniformV2"}


@pytest.mark.parametrize(
    "utility,amplitude,decay",
    [
        (1.0, 50.0, 0.999),  # Weights grow towards exp(50 / 0.001).
        (-1.0, 50.0, 0.999),  # ... or shrink towards exp(-50000).
        (1.0, 50.0, 0.5),
    ])
def test_extreme_runs_stay_finite_and_exact(utility, amplitude, decay):
  num_examples, steps = 10, 100_000
  sampler = AdaptiveSampler(num_examples, amplitude, decay)
  focus = tf.constant([0, 3, 7], tf.int64)
  utilities = tf.fill([3], tf.constant(utility, tf.float64))

  @tf.function
  def run():
    for _ in tf.range(steps):
      sampler.update(focus, utilities)

  run()
  # Closed form: l = amplitude * u * (1 - decay^T) / (1 - decay).
  expected_log_weight = amplitude * utility * (1 - decay**steps) / (1 - decay)
  log_weights = np.zeros(num_examples)
  log_weights[[0, 3, 7]] = expected_log_weight
  np.testing.assert_allclose(sampler.log_weights.numpy(),
                             log_weights,
                             rtol=1e-9)
  probabilities = sampler.probabilities().numpy()
  expected = np.exp(log_weights - log_weights.max())
  expected /= expected.sum()
  assert np.all(np.isfinite(probabilities)) and probabilities.sum() > 0
  np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=1e-300)
  for value in state_of(sampler):
    assert np.all(np.isfinite(value))
  kl = sampler.kl_divergence().numpy()
  assert math.isfinite(kl)
  indices = sampler.sample(1000).numpy()
  assert np.all(expected[indices] > 0)


def test_rescale_keeps_weights_exact_after_focus_moves_away():
  # Indices 0..1 grow until the others underflow in the cached tree; when
  # they decay again the others must come back exactly, from the log weights.
  sampler = AdaptiveSampler(5, amplitude=50.0, decay=0.9)
  algorithm = reference.Algorithm1(5, amplitude=50.0, decay=0.9)
  for utilities in [[1.0, 1.0]] * 40 + [[0.0, 0.0]] * 400:
    sampler.update([0, 1], utilities)
    algorithm.update(np.array([0, 1]), np.array(utilities))
  np.testing.assert_allclose(sampler.probabilities().numpy(),
                             algorithm.probabilities(),
                             rtol=1e-12)
  assert sampler.probabilities().numpy()[4] > 0.1


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
def test_kl_divergence_is_zero_when_uniform_and_tracks_reference(dtype):
  sampler = AdaptiveSampler(1000, amplitude=2.0, decay=0.9, dtype=dtype)
  assert sampler.kl_divergence().numpy() == pytest.approx(0.0, abs=1e-6)
  algorithm = reference.Algorithm1(1000, 2.0, 0.9)
  rng = np.random.default_rng(0)
  for _ in range(30):
    indices = rng.integers(1000, size=64)
    utilities = rng.random(64)
    sampler.update(indices, utilities)
    algorithm.update(indices, utilities)
  tolerance = 1e-12 if dtype == tf.float64 else 1e-4
  np.testing.assert_allclose(sampler.kl_divergence().numpy(),
                             algorithm.kl_divergence(),
                             rtol=tolerance,
                             atol=tolerance)


def test_reset_returns_to_uniform():
  sampler = AdaptiveSampler(8, amplitude=5.0, decay=0.5)
  sampler.update([1, 2], [1.0, 3.0])
  sampler.reset()
  np.testing.assert_array_equal(sampler.probabilities().numpy(),
                                np.full(8, 1 / 8))
  assert sampler.kl_divergence().numpy() == 0.0


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
@pytest.mark.parametrize("num_examples", [7, 129, 1000, 3000])
@pytest.mark.parametrize("compiled", [False, True])
def test_reset_after_a_rescale_is_the_initial_state_exactly(
    dtype, num_examples, compiled):
  # Sizes on either side of the CPU's small-batch path (128 updates).
  sampler = AdaptiveSampler(num_examples,
                            amplitude=50.0,
                            decay=0.5,
                            dtype=dtype)
  initial = state_of(sampler)
  # exp(50 * 10) is past either dtype's safe range: the caches are rescaled,
  # so the log-scale is no longer 0.
  sampler.update([0, 3], [10.0, 7.0])
  assert sampler._log_scale.numpy() != 0
  (tf.function(sampler.reset) if compiled else sampler.reset)()
  for expected, actual in zip(initial, state_of(sampler)):
    np.testing.assert_array_equal(actual, expected)
  np_dtype = dtype.as_numpy_dtype
  np.testing.assert_array_equal(
      sampler.probabilities().numpy(),
      np.full(num_examples, 1 / np_dtype(num_examples), np_dtype))
  assert sampler.kl_divergence().numpy() == 0.0


def test_entropy_tree_node_0_holds_the_total(tmp_path):
  sampler = AdaptiveSampler(300, amplitude=50.0, decay=0.5, seed=0)

  def assert_holds_the_total():
    entropy_tree = sampler._entropy_tree.numpy()
    assert entropy_tree[0] == sampler.tree.total().numpy()

  assert_holds_the_total()
  sampler.update([1, 2, 2], [0.5, 1.0, 3.0])
  assert_holds_the_total()
  sampler.update([7], [10.0])  # A rescale.
  assert sampler.tree.total().numpy() == pytest.approx(1.0)
  assert_holds_the_total()
  sampler.update(np.arange(200), np.linspace(-1, 1, 200))  # Sorted path.
  assert_holds_the_total()
  path = tf.train.Checkpoint(sampler=sampler).save(str(tmp_path / "ckpt"))
  sampler.reset()
  assert_holds_the_total()
  # A checkpoint written before node 0 held the total has 0 there: the
  # restore writes the restored tree's total.
  sampler._entropy_tree.assign(
      tf.tensor_scatter_nd_update(sampler._entropy_tree, [[0]], [0.0]))
  old_path = tf.train.Checkpoint(sampler=sampler).save(str(tmp_path / "old"))
  tf.train.Checkpoint(sampler=sampler).restore(path).assert_consumed()
  assert_holds_the_total()
  tf.train.Checkpoint(sampler=sampler).restore(old_path).assert_consumed()
  assert_holds_the_total()
  assert sampler.kl_divergence().numpy() == 0.0


def test_kl_divergence_reads_both_totals_in_one_gather():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5)
  graph = tf.function(sampler.kl_divergence).get_concrete_function().graph
  reads = [
      op for op in graph.get_operations()
      if op.type in ("ResourceGather", "ReadVariableOp")
  ]
  assert len(reads) == 1, [op.type for op in reads]


def test_reweight_with_decay_0_forgets_the_past():
  sampler = AdaptiveSampler(6, amplitude=2.0, decay=0.5)
  sampler.update([0, 1, 2], [1.0, -1.0, 3.0])
  before = sampler.log_weights.numpy()
  # Through the op: the Python API keeps decay in (0, 1).
  sampler._reweight([1, 2, 4], [0.5, -2.0, 1.0], amplitude=3.0, decay=0.0)
  expected = before.copy()
  expected[[1, 2, 4]] = [1.5, -6.0, 3.0]  # amplitude * u, whatever came before.
  np.testing.assert_array_equal(sampler.log_weights.numpy(), expected)
  np.testing.assert_allclose(sampler.probabilities().numpy(),
                             np.exp(expected) / np.exp(expected).sum(),
                             rtol=1e-14)
  # The caches were recomputed with log-scale 0.
  assert sampler._log_scale.numpy() == 0
  capacity = sampler.tree.capacity
  np.testing.assert_allclose(sampler.tree.variable.numpy()[capacity:capacity +
                                                           6],
                             np.exp(expected),
                             rtol=1e-15)


@pytest.mark.parametrize("stratified", [False, True])
def test_draw_frequencies_follow_the_distribution(stratified):
  sampler = AdaptiveSampler(6,
                            amplitude=1.0,
                            decay=0.5,
                            seed=11,
                            stratified=stratified)
  sampler.update([0, 2, 5], [2.0, 1.0, -1.0])
  counts = np.zeros(6)
  for _ in range(200):
    counts += np.bincount(sampler.sample(250).numpy(), minlength=6)
  expected = sampler.probabilities().numpy() * counts.sum()
  _, p_value = stats.chisquare(counts, expected)
  assert p_value > 1e-3


def test_stratified_batch_takes_one_draw_per_stratum():
  sampler = AdaptiveSampler(10,
                            amplitude=1.0,
                            decay=0.5,
                            seed=1,
                            stratified=True)
  uniforms = sampler.uniforms(4).numpy()
  np.testing.assert_array_equal(np.floor(uniforms * 4), [0, 1, 2, 3])
  assert np.all(uniforms < 1)


def updated_sampler(dtype, stratified):
  sampler = AdaptiveSampler(5000,
                            amplitude=1.0,
                            decay=0.5,
                            seed=7,
                            stratified=stratified,
                            dtype=dtype)
  sampler.update(np.arange(0, 5000, 3), np.linspace(-3, 3, 1667))
  return sampler


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
@pytest.mark.parametrize("stratified", [False, True])
# One draw; a Philox block's worth of uniforms (2 doubles, 4 floats) and
# around it; a batch the intra-op pool shares.
@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 5, 1001, 40000])
def test_draws_are_those_of_the_generators_uniforms(dtype, stratified,
                                                    batch_size):
  fused = updated_sampler(dtype, stratified)
  composite = updated_sampler(dtype, stratified)
  for _ in range(2):
    indices, probabilities = fused.sample_with_probabilities(batch_size)
    expected = composite.tree.sample(composite.uniforms(batch_size))
    np.testing.assert_array_equal(indices, expected[0])
    np.testing.assert_array_equal(probabilities, expected[1])
    np.testing.assert_array_equal(fused.generator.state,
                                  composite.generator.state)


def test_draws_in_a_function_are_those_of_the_generators_uniforms():
  fused = updated_sampler(tf.float64, False)
  composite = updated_sampler(tf.float64, False)
  draw = tf.function(lambda: fused.sample(100))
  for _ in range(3):
    np.testing.assert_array_equal(
        draw(),
        composite.tree.sample(composite.uniforms(100))[0])


def test_a_refused_draw_leaves_the_generator_as_it_was(on_cpu):
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  sampler.tree.assign(np.zeros(10))
  before = sampler.generator.state.numpy()
  with pytest.raises(tf.errors.InvalidArgumentError, match="cannot sample"):
    sampler.sample(4)
  np.testing.assert_array_equal(sampler.generator.state, before)


def test_a_draw_leaves_an_earlier_read_of_the_generator_state_as_read():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  read = sampler.generator.state.read_value()
  kept = read.numpy().copy()
  sampler.sample(4)
  np.testing.assert_array_equal(read, kept)
  assert not np.array_equal(sampler.generator.state, kept)


def test_draw_op_refuses_a_state_that_is_not_a_philox_generators():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  state = tf.Variable(tf.zeros([2], tf.int64))
  with pytest.raises(tf.errors.InvalidArgumentError, match="Philox"):
    ops.sum_tree_draw(sampler.tree.variable.handle,
                      state.handle,
                      3,
                      T=tf.float64)
  np.testing.assert_array_equal(state, [0, 0])


def test_seeded_samplers_draw_the_same_sequence():
  first = AdaptiveSampler(1000, 1.0, 0.9, seed=42)
  second = AdaptiveSampler(1000, 1.0, 0.9, seed=42)
  np.testing.assert_array_equal(
      first.sample(100).numpy(),
      second.sample(100).numpy())


def first_draws(seed=None):
  return AdaptiveSampler(100, 1.0, 0.9, seed=seed).sample(20).numpy()


@pytest.mark.parametrize("set_seed",
                         [tf.random.set_seed, keras.utils.set_random_seed])
def test_unseeded_sampler_follows_the_global_seed(set_seed):
  set_seed(7)
  first, second = first_draws(), first_draws()
  set_seed(7)
  np.testing.assert_array_equal(first_draws(), first)
  np.testing.assert_array_equal(first_draws(), second)
  # Like two layers' initializers: two samplers, two streams.
  assert not np.array_equal(first, second)
  set_seed(8)
  assert not np.array_equal(first_draws(), first)


def test_an_explicit_seed_overrides_the_global_seed():
  tf.random.set_seed(1)
  seeded = first_draws(seed=3)
  tf.random.set_seed(2)
  np.testing.assert_array_equal(first_draws(seed=3), seeded)


@pytest.mark.parametrize("indices,utilities,message", [
    ([0, 20], [1.0, 1.0], r"indices\[1\] = 20 is out of range \[0, 20\)"),
    ([-1], [1.0], r"indices\[0\] = -1 is out of range"),
    ([0, 1], [1.0, np.nan], r"utilities\[1\] = nan is not finite"),
    ([0, 0], [1.0, np.nan], r"utilities\[1\] = nan is not finite"),
    ([0], [np.inf], r"utilities\[0\] = inf is not finite"),
    ([0], [1e308], "overflows"),
    ([0, 1], [1.0], "indices has 2 elements but utilities has 1"),
    ([[0]], [[1.0]], "must be"),
])
@pytest.mark.usefixtures("on_cpu")
def test_bad_update_raises_and_leaves_state_unchanged(indices, utilities,
                                                      message):
  sampler = AdaptiveSampler(20, amplitude=2.0, decay=0.9, seed=0)
  sampler.update([3, 4], [1.0, 2.0])
  before = state_of(sampler)
  with pytest.raises((tf.errors.InvalidArgumentError, ValueError),
                     match=message):
    sampler.update(indices, utilities)
  for expected, actual in zip(before, state_of(sampler)):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("amplitude,decay,message", [
    (-1.0, 0.5, r"amplitude = -1 must be finite and >= 0"),
    (np.inf, 0.5, r"amplitude = inf"),
    (1.0, -0.5, r"decay = -0.5 must be in \[0, 1\)"),
    (1.0, 1.0, r"decay = 1 must be in \[0, 1\)"),
    (1.0, np.nan, r"decay = nan must be in \[0, 1\)"),
])
@pytest.mark.usefixtures("on_cpu")
def test_reweight_op_rejects_bad_amplitude_and_decay(amplitude, decay, message):
  sampler = AdaptiveSampler(4, amplitude=1.0, decay=0.5)
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    ops.adaptive_reweight(sampler.tree.variable.handle,
                          sampler._entropy_tree.handle,
                          sampler.log_weights.handle, sampler._log_scale.handle,
                          tf.constant([0], tf.int64),
                          tf.constant([1.0], tf.float64),
                          tf.constant(amplitude, tf.float64),
                          tf.constant(decay, tf.float64))
  for expected, actual in zip(before, state_of(sampler)):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("twice,message", [
    ((0, 1), "tree and entropy_tree are the same variable"),
    ((1, 2), "entropy_tree and log_weights are the same variable"),
])
def test_reweight_op_rejects_one_variable_given_twice(twice, message):
  # It would read one array as two while writing it, corrupting the state.
  sampler = AdaptiveSampler(4, amplitude=1.0, decay=0.5)
  before = state_of(sampler)
  variables = [
      sampler.tree.variable, sampler._entropy_tree, sampler.log_weights,
      sampler._log_scale
  ]
  variables[twice[1]] = variables[twice[0]]
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    ops.adaptive_reweight(*[v.handle for v in variables],
                          tf.constant([0], tf.int64),
                          tf.constant([1.0], tf.float64),
                          tf.constant(1.0, tf.float64),
                          tf.constant(0.5, tf.float64))
  for expected, actual in zip(before, state_of(sampler)):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("arguments,error,message", [
    ((0, 1.0, 0.5), ValueError, "num_examples must be >= 1"),
    ((10, -0.1, 0.5), ValueError, "amplitude must be finite and >= 0"),
    ((10, 1.0, 1.0), ValueError, r"decay must be in \(0, 1\)"),
    ((10, 1.0, 0.0), ValueError, r"decay must be in \(0, 1\)"),
    ((10.0, 1.0, 0.5), TypeError, "num_examples must be an int"),
])
def test_constructor_rejects_bad_arguments(arguments, error, message):
  with pytest.raises(error, match=message):
    AdaptiveSampler(*arguments)


def test_float_indices_are_refused():
  sampler = AdaptiveSampler(4, amplitude=1.0, decay=0.5)
  with pytest.raises(TypeError, match="indices must be integers"):
    sampler.update([0.5], [1.0])


def test_public_api():
  assert tf_adasamp.SumTree is not None
  assert callable(tf_adasamp.utilities.zero_one)


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("method",
                         ["sample", "sample_with_probabilities", "uniforms"])
@pytest.mark.parametrize("batch_size, error",
                         [(-1, ValueError), (0, ValueError), (1.5, TypeError),
                          (True, TypeError), (2**40, ValueError),
                          ("4", TypeError)])
def test_refused_draw_leaves_the_random_state(method, batch_size, error):
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  before = state_of(sampler)
  with pytest.raises(error, match="batch_size"):
    getattr(sampler, method)(batch_size)
  assert_unchanged(sampler, before)


@pytest.mark.usefixtures("on_cpu")
def test_numpy_integers_are_sizes():
  sampler = AdaptiveSampler(np.int64(10), amplitude=1.0, decay=0.5, seed=0)
  assert sampler.sample(np.int32(3)).shape == [3]
  assert SumTree(np.uint8(4)).num_leaves == 4


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("kwargs, error, name", [
    ({
        "amplitude": None
    }, TypeError, "amplitude"),
    ({
        "amplitude": [1.0]
    }, TypeError, "amplitude"),
    ({
        "amplitude": "1.0"
    }, TypeError, "amplitude"),
    ({
        "amplitude": True
    }, TypeError, "amplitude"),
    ({
        "amplitude": float("inf")
    }, ValueError, "amplitude"),
    ({
        "decay": None
    }, TypeError, "decay"),
    ({
        "decay": [0.5]
    }, TypeError, "decay"),
    ({
        "decay": 1.0
    }, ValueError, "decay"),
    ({
        "seed": 1.5
    }, TypeError, "seed"),
    ({
        "seed": -1
    }, ValueError, "seed"),
    ({
        "stratified": "no"
    }, TypeError, "stratified"),
    ({
        "num_examples": True
    }, TypeError, "num_examples"),
    ({
        "num_examples": 0
    }, ValueError, "num_examples"),
    ({
        "dtype": tf.int32
    }, TypeError, "dtype"),
    ({
        "dtype": "half-precision"
    }, TypeError, "dtype"),
])
def test_bad_sampler_arguments_name_the_argument(kwargs, error, name):
  arguments = {"num_examples": 10, "amplitude": 1.0, "decay": 0.5, **kwargs}
  with pytest.raises(error, match=name):
    AdaptiveSampler(**arguments)


@pytest.mark.usefixtures("on_cpu")
def test_complex_utilities_are_refused_before_any_change():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  before = state_of(sampler)
  with pytest.raises(TypeError, match="utilities"):
    sampler.update([1], tf.constant([1 + 2j]))
  assert_unchanged(sampler, before)


@pytest.mark.usefixtures("on_cpu")
def test_gradients_stop_at_draws_and_reweights():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  scale = tf.Variable(2.0, dtype=tf.float64)
  with tf.GradientTape() as tape:
    indices, probabilities = sampler.sample_with_probabilities(4)
    sampler.update(indices, scale * tf.ones([4], tf.float64))
    loss = scale * tf.reduce_sum(probabilities)
  # Only the direct path counts; the ops are not differentiable.
  assert float(tape.gradient(loss, scale)) == pytest.approx(
      float(tf.reduce_sum(probabilities)))


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("dtype,amplitude,decay,bound", [
    (tf.float64, 1e308, 0.5, "1.798e+300"),
    (tf.float64, 1e290, 1 - 1e-12, "1.798e+300"),
    (tf.float32, 1e30, 0.9, "3.403e+30"),
])
def test_an_amplitude_whose_log_weights_could_overflow_is_refused_with_bound(
    dtype, amplitude, decay, bound):
  with pytest.raises(ValueError,
                     match=rf"amplitude / \(1 - decay\) must be at most "
                     rf"{re.escape(bound)}, so that log weights stay finite"):
    AdaptiveSampler(4, amplitude, decay, dtype=dtype)


@pytest.mark.usefixtures("on_cpu")
def test_log_weights_at_the_amplitude_cap_stay_finite_up_to_the_bound():
  # amplitude / (1 - decay) just below the cap, utilities of 1e8: the log
  # weights approach 1e308 and stay finite, however long the run.
  sampler = AdaptiveSampler(4, 8.98e299, 0.5)
  for _ in range(60):
    sampler.update([0, 1], [1e8, -1e8])
  for value in state_of(sampler):
    assert np.all(np.isfinite(value))
  assert sampler.log_weights.numpy()[0] == pytest.approx(1.796e308, rel=1e-3)
  # A utility past the bound whose log weight would overflow is refused,
  # the error naming the log weight, not the product (which is finite).
  sampler = AdaptiveSampler(4, 1e299, 0.9)
  sampler.update([0], [1e9])
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"the new log weight of example 0, decay \* "
                     r"log_weight \+ amplitude \* utilities\[0\] = 0.9 \* "
                     r"1e\+308 \+ 1e\+299 \* 1e\+09, overflows"):
    sampler.update([0], [1e9])
  for expected, actual in zip(before, state_of(sampler)):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("kwargs, name, message", [
    ({
        "decay": 0.99999999
    }, "decay", "rounds to 1.0 in float32"),
    ({
        "decay": 1e-50
    }, "decay", "rounds to 0.0 in float32"),
    ({
        "amplitude": 1e39
    }, "amplitude", "overflows float32"),
])
def test_float32_parameters_are_checked_as_rounded_to_float32(
    kwargs, name, message):
  arguments = {"amplitude": 1.0, "decay": 0.5, **kwargs}
  with pytest.raises(ValueError, match=name) as error:
    AdaptiveSampler(10, dtype=tf.float32, **arguments)
  assert message in str(error.value)
  # The same values are valid weights' parameters in float64.
  sampler = AdaptiveSampler(10, dtype=tf.float64, **arguments)
  sampler.update([0, 1], [0.5, -0.5])


def generator_uniforms(generator, batch_size, stratified):
  """The uniforms behind a sampler's draw, from a twin of its generator."""
  uniforms = generator.uniform([batch_size], dtype=tf.float64).numpy()
  if stratified:
    uniforms = np.minimum((np.arange(batch_size) + uniforms) / batch_size,
                          np.nextafter(1.0, 0.0))
  return uniforms


@pytest.mark.parametrize("epsilon", [0.3, 1.0])
@pytest.mark.parametrize("stratified", [False, True])
def test_floor_draws_and_probabilities_follow_the_mixture(epsilon, stratified):
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            amplitude=2.0,
                            decay=0.8,
                            seed=5,
                            stratified=stratified,
                            epsilon=epsilon)
  twin = tf.random.Generator.from_seed(5)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, 2.0, 0.8)
  for step in range(30):
    indices, probabilities = sampler.sample_with_probabilities(12)
    expected = reference.floored_draw(algorithm.probabilities(),
                                      generator_uniforms(twin, 12, stratified),
                                      epsilon)
    np.testing.assert_array_equal(indices.numpy(), expected)
    mixture = reference.floored(algorithm.probabilities(), epsilon)
    np.testing.assert_allclose(probabilities.numpy(),
                               mixture[expected],
                               rtol=1e-12)
    sampler.update(indices, utility_of(expected, step))
    algorithm.update(expected, utility_of(expected, step))
  mixture = reference.floored(algorithm.probabilities(), epsilon)
  np.testing.assert_allclose(sampler.probabilities().numpy(),
                             mixture,
                             rtol=1e-12)
  np.testing.assert_allclose(sampler.kl_divergence().numpy(),
                             reference.kl_to_uniform(mixture),
                             rtol=1e-9,
                             atol=1e-15)


def test_floor_kl_is_the_mixtures_and_at_most_the_convex_bound():
  # A focused Q_t (one weight far above the rest), then floors from none to
  # all: the mixture's KL, never above (1 - epsilon) KL(Q_t || U).
  unfloored = AdaptiveSampler(NUM_EXAMPLES, amplitude=3.0, decay=0.5)
  indices = np.arange(NUM_EXAMPLES)
  for _ in range(4):
    unfloored.update(indices, utility_of(indices))
  q = unfloored.probabilities().numpy()
  kl = unfloored.kl_divergence().numpy()
  assert kl > 0.1
  for epsilon in [0.0, 1e-3, 0.1, 0.5, 0.9, 1.0]:
    sampler = AdaptiveSampler(NUM_EXAMPLES,
                              amplitude=3.0,
                              decay=0.5,
                              epsilon=epsilon)
    for _ in range(4):
      sampler.update(indices, utility_of(indices))
    floored_kl = sampler.kl_divergence().numpy()
    assert floored_kl == pytest.approx(reference.kl_to_uniform(
        reference.floored(q, epsilon)),
                                       rel=1e-9,
                                       abs=1e-15)
    assert floored_kl <= (1 - epsilon) * kl + 1e-12
  assert floored_kl == 0


def test_floor_draws_are_uniform_where_epsilon_is_1_and_frequencies_follow():
  # Q_t puts almost all its mass on the hard examples; with epsilon = 0.5
  # half the draws still spread over all examples (chi-square, fixed seed).
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            amplitude=4.0,
                            decay=0.5,
                            seed=2,
                            epsilon=0.5)
  indices = np.arange(NUM_EXAMPLES)
  for _ in range(3):
    sampler.update(indices, utility_of(indices))
  draws = sampler.sample(200_000).numpy()
  counts = np.bincount(draws, minlength=NUM_EXAMPLES)
  expected = 200_000 * sampler.probabilities().numpy()
  chi_square = np.sum((counts - expected)**2 / expected)
  # The 0.999 quantile of chi-square with 39 degrees of freedom is 72.1.
  assert chi_square < 72.1


def run_scheduled(sampler, algorithm, amplitude_at, steps, batch_size=8):
  """Runs both, the reference's amplitude set per update from
  `amplitude_at`; compares the draws; returns the last update's
  (log weights before, indices)."""
  for step in range(steps):
    indices = sampler.sample(batch_size).numpy()
    algorithm.amplitude = amplitude_at(step)
    before = sampler.log_weights.numpy()
    sampler.update(indices, utility_of(indices, step))
    algorithm.update(indices, utility_of(indices, step))
  return before, indices


@pytest.mark.parametrize("schedule", [
    schedules.warmup(2.0, 10),
    schedules.anneal(2.0, 10),
    schedules.final_uniform(2.0, total_steps=20, delta=0.5),
    schedules.initial_uniform(2.0, total_steps=20, fraction=0.25),
    keras.optimizers.schedules.ExponentialDecay(2.0, 5, 0.5),
    lambda step: 0.1 * tf.cast(step % 4, tf.float64),
])
def test_amplitude_schedule_reweights_as_algorithm_1_at_each_step(schedule):
  sampler = AdaptiveSampler(NUM_EXAMPLES, schedule, decay=0.8, seed=1)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, 0.0, 0.8)
  # The schedule's value as the sampler takes it, in its dtype.
  run_scheduled(sampler, algorithm,
                lambda step: float(tf.cast(schedule(step), tf.float64)), 20)
  np.testing.assert_allclose(sampler.log_weights.numpy(),
                             algorithm.log_weights,
                             rtol=1e-12,
                             atol=1e-12)
  assert int(sampler._update_count) == 20


def test_amplitude_zero_decays_the_weights_toward_uniform_exactly():
  # After update 10 the amplitude is 0: w <- w ** decay * exp(0), bit for
  # bit decay * l in log space, whatever the utilities.
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            schedules.final_uniform(3.0, 20, delta=0.5),
                            decay=0.5,
                            seed=0)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, 0.0, 0.5)
  before, indices = run_scheduled(sampler, algorithm, lambda step: 3.0
                                  if step < 10 else 0.0, 12)
  after = sampler.log_weights.numpy()
  first = np.unique(indices)
  np.testing.assert_array_equal(after[first], 0.5 * before[first])
  assert np.any(before[first] != 0)
  # A fresh sampler at amplitude 0 stays exactly uniform.
  uniform = AdaptiveSampler(NUM_EXAMPLES, schedules.anneal(1.0, 1), 0.5)
  uniform.update([0], [0.0])  # update 0, amplitude 1 times a utility of 0
  uniform.update(np.arange(NUM_EXAMPLES), np.full(NUM_EXAMPLES, 9.0))
  np.testing.assert_array_equal(uniform.log_weights.numpy(), 0.0)
  assert uniform.kl_divergence().numpy() == 0


def test_an_initial_uniform_phase_draws_uniformly_then_reweights():
  # Updates 0-4 at amplitude 0: every log weight stays exactly 0, and the
  # draws are uniform sampling's; update 5 reweights at the amplitude.
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            schedules.initial_uniform(2.0, 20, fraction=0.25),
                            decay=0.5,
                            seed=0)
  uniform = AdaptiveSampler(NUM_EXAMPLES, 0.0, decay=0.5, seed=0)
  for step in range(5):
    indices = sampler.sample(8)
    np.testing.assert_array_equal(indices, uniform.sample(8))
    sampler.update(indices, utility_of(indices.numpy(), step))
    uniform.update(indices, utility_of(indices.numpy(), step))
  np.testing.assert_array_equal(sampler.log_weights.numpy(), 0.0)
  indices = sampler.sample(8).numpy()
  sampler.update(indices, np.ones(8))
  np.testing.assert_array_equal(sampler.log_weights.numpy()[indices], 2.0)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_are_the_reference_weights(beta):
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            amplitude=2.0,
                            decay=0.8,
                            seed=3,
                            epsilon=0.2,
                            beta=beta)
  twin = AdaptiveSampler(NUM_EXAMPLES,
                         amplitude=2.0,
                         decay=0.8,
                         seed=3,
                         epsilon=0.2)
  for step in range(10):
    indices, weights = sampler.sample_with_weights(16)
    twin_indices, probabilities = twin.sample_with_probabilities(16)
    np.testing.assert_array_equal(indices, twin_indices)
    np.testing.assert_allclose(weights.numpy(),
                               reference.importance_weights(
                                   probabilities.numpy(), NUM_EXAMPLES, beta),
                               rtol=1e-13)
    np.testing.assert_array_equal(sampler.importance_weights(probabilities),
                                  weights)
    sampler.update(indices, utility_of(indices, step))
    twin.update(indices, utility_of(indices, step))
  if beta == 1:
    # Exactly the stage's unbiased weights.
    np.testing.assert_array_equal(
        weights, data.importance_weights(probabilities, NUM_EXAMPLES))
  # Their mean under the draws' distribution: 1 at beta = 1, at most 1.
  p = sampler.probabilities().numpy()
  mean = np.sum(p * reference.importance_weights(p, NUM_EXAMPLES, beta))
  assert mean <= 1 + 1e-12
  if beta == 1:
    assert mean == pytest.approx(1, rel=1e-12)
  # The floor bounds every weight by epsilon ** -beta.
  assert np.max(reference.importance_weights(p, NUM_EXAMPLES,
                                             beta)) <= 0.2**-beta * (1 + 1e-12)


def test_a_beta_schedule_is_read_at_the_update_count():
  beta = schedules.PiecewiseLinear([0, 4], [0.4, 1.0])
  sampler = AdaptiveSampler(NUM_EXAMPLES, 1.0, 0.8, seed=0, beta=beta)
  for step in range(6):
    indices, weights = sampler.sample_with_weights(8)
    probabilities = sampler.probabilities().numpy()[indices.numpy()]
    np.testing.assert_allclose(weights.numpy(),
                               reference.importance_weights(
                                   probabilities, NUM_EXAMPLES,
                                   reference.piecewise_linear([0, 4],
                                                              [0.4, 1.0],
                                                              step)),
                               rtol=1e-13)
    sampler.update(indices, utility_of(indices, step))


@pytest.mark.parametrize("arguments,error,message", [
    ({
        "epsilon": -0.1
    }, ValueError, r"epsilon must be in \[0, 1\]"),
    ({
        "epsilon": 1.5
    }, ValueError, r"epsilon must be in \[0, 1\]"),
    ({
        "epsilon": math.nan
    }, ValueError, r"epsilon must be in \[0, 1\]"),
    ({
        "epsilon": "0.1"
    }, TypeError, "epsilon must be a real number"),
    ({
        "beta": 1.01
    }, ValueError, r"beta must be in \[0, 1\]"),
    ({
        "beta": -1.0
    }, ValueError, r"beta must be in \[0, 1\]"),
    ({
        "beta": math.nan
    }, ValueError, r"beta must be in \[0, 1\]"),
    ({
        "beta": True
    }, TypeError, "beta must be a real number"),
    ({
        "amplitude": "1"
    }, TypeError, "amplitude must be a real number"),
])
def test_bad_control_values_are_refused(arguments, error, message):
  settings = {"amplitude": 1.0, "decay": 0.5, **arguments}
  with pytest.raises(error, match=message):
    AdaptiveSampler(10, **settings)


def bad_after(step, value):
  """A schedule that is 1 before update `step`, then `value`."""
  return lambda count: tf.where(count < step, tf.constant(1.0, tf.float64),
                                tf.constant(value, tf.float64))


@pytest.mark.usefixtures("on_cpu")
# Above 1e300 at decay 0.5: a log weight could overflow for a utility of 1e8
# (the cap that a constant amplitude meets when the sampler is made).
@pytest.mark.parametrize("value", [-0.5, math.nan, math.inf, 1e300])
@pytest.mark.parametrize("mode", ["eager", "function", "jit_compile"])
def test_an_amplitude_schedule_out_of_range_is_refused_leaving_the_state(
    value, mode):
  sampler = AdaptiveSampler(NUM_EXAMPLES, bad_after(2, value), 0.5, seed=0)
  update = sampler.update
  if mode != "eager":
    update = tf.function(sampler.update, jit_compile=mode == "jit_compile")
  for step in range(2):
    indices = sampler.sample(8)
    update(indices, utility_of(indices.numpy(), step))
  before = state_of(sampler)
  indices = sampler.sample(8)
  after_draw = state_of(sampler)
  assert not all(np.array_equal(a, b) for a, b in zip(before, after_draw))
  # Compiled, XLA drops the assertion; the value reaches the op as NaN
  # utilities, which it refuses.
  message = (
      "utilities" if mode == "jit_compile" else
      r"amplitude schedule returned a value outside \[0, 8.98847e\+299\]")
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    update(indices, utility_of(indices.numpy()))
  assert_same_state(state_of(sampler), after_draw)


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("value", [1.5, -0.1, math.nan])
@pytest.mark.parametrize("in_function", [False, True])
def test_a_beta_schedule_out_of_range_refuses_the_draw_leaving_the_state(
    value, in_function):
  sampler = AdaptiveSampler(NUM_EXAMPLES,
                            1.0,
                            0.5,
                            seed=0,
                            beta=bad_after(1, value))
  draw = (tf.function(sampler.sample_with_weights)
          if in_function else sampler.sample_with_weights)
  indices, _ = draw(4)
  sampler.update(indices, utility_of(indices.numpy()))
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"beta schedule returned a value outside \[0, 1\]"):
    draw(4)
  assert_same_state(state_of(sampler), before)
  with pytest.raises(tf.errors.InvalidArgumentError, match="beta schedule"):
    sampler.importance_weights([0.5])


def test_a_schedule_must_return_a_scalar():
  sampler = AdaptiveSampler(4, lambda step: tf.ones([2], tf.float64), 0.5)
  before = state_of(sampler)
  with pytest.raises(ValueError, match="must return a scalar"):
    sampler.update([0], [1.0])
  assert_same_state(state_of(sampler), before)


@pytest.mark.parametrize("value", ["1.0", True])
def test_a_schedule_must_return_a_real_number(value):
  sampler = AdaptiveSampler(4, lambda step: tf.constant(value), 0.5)
  before = state_of(sampler)
  with pytest.raises(TypeError,
                     match="amplitude schedule must return a real "
                     "number, got a (string|bool) tensor"):
    sampler.update([0], [1.0])
  assert_same_state(state_of(sampler), before)


def test_a_resumed_sampler_draws_and_weighs_as_an_uninterrupted_one(tmp_path):
  uninterrupted = controlled_sampler(seed=9)
  expected = controlled_steps(uninterrupted, 16)

  first = controlled_sampler(seed=9)
  resumed = controlled_steps(first, 7)
  path = tf.train.Checkpoint(sampler=first).save(str(tmp_path / "ckpt"))
  second = controlled_sampler(seed=1)
  tf.train.Checkpoint(sampler=second).restore(path).assert_consumed()
  assert int(second._update_count) == 7
  resumed += controlled_steps(second, 9)

  for (indices, weights), (resumed_indices,
                           resumed_weights) in zip(expected,
                                                   resumed,
                                                   strict=True):
    np.testing.assert_array_equal(resumed_indices, indices)
    np.testing.assert_array_equal(resumed_weights, weights)
  assert_same_state(state_of(second), state_of(uninterrupted))


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("dtype", [tf.float64, tf.float32])
def test_a_compiled_controlled_step_draws_and_updates_as_the_uncompiled_one(
    dtype):
  samplers = [controlled_sampler(seed=4, dtype=dtype) for _ in range(2)]
  eager, compiled = (controlled_steps(sampler, 16, jit_compile)
                     for sampler, jit_compile in zip(samplers, (False, True)))
  for (indices, weights), (compiled_indices,
                           compiled_weights) in zip(eager,
                                                    compiled,
                                                    strict=True):
    np.testing.assert_array_equal(compiled_indices, indices)
    # XLA's pow may differ from TensorFlow's in the last bit.
    np.testing.assert_allclose(compiled_weights,
                               weights,
                               rtol=2 * np.finfo(weights.dtype).eps)
  assert_same_state(state_of(samplers[1]), state_of(samplers[0]))
  assert samplers[1].kl_divergence().numpy() > 0
