"""The sampler's controls against NumPy references: the uniform floor, the
amplitude and beta schedules, and importance weights with an exponent."""

import math
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import child_process
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
import reference
from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import diagnostics
from tf_adasamp import schedules
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 40
HARD = np.arange(NUM_EXAMPLES) % 7 == 0


def utility_of(indices, step=0):
  """Signed, index- and time-dependent utilities."""
  return np.where(HARD[np.asarray(indices)], 1.0, -0.25) * (1 + 0.01 * step)


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


def test_schedules_take_their_values_at_the_given_steps():
  assert [float(schedules.warmup(2.0, 10)(s)) for s in [0, 5, 10, 11, 1000]
         ] == [0.0, 1.0, 2.0, 2.0, 2.0]
  assert [float(schedules.anneal(2.0, 4)(s)) for s in [0, 1, 4, 9]
         ] == [2.0, 1.5, 0.0, 0.0]
  # InfoBatch's delta = 0.875 of 100 updates: uniform from update 88 on.
  final = schedules.final_uniform(1.5, total_steps=100)
  assert [float(final(s)) for s in [0, 87, 88, 100]] == [1.5, 1.5, 0.0, 0.0]
  # Its mirror: uniform for the first quarter of 10 updates (2.5 rounds to
  # 2), then the amplitude.
  initial = schedules.initial_uniform(1.5, total_steps=10, fraction=0.25)
  assert [float(initial(s)) for s in [0, 1, 2, 9, 50]] == [0, 0, 1.5, 1.5, 1.5]
  assert float(schedules.initial_uniform(1.5, 10, fraction=0)(0)) == 1.5
  assert float(schedules.initial_uniform(1.5, 10, fraction=1)(9)) == 0
  # Warm-up, a plateau, a jump and an annealing, against the reference at
  # every step, also as tensors of both integer widths.
  steps, values = [3, 10, 20, 20, 30], [0.0, 1.0, 1.0, 0.4, 0.1]
  schedule = schedules.PiecewiseLinear(steps, values)
  for step in range(40):
    expected = reference.piecewise_linear(steps, values, step)
    assert float(schedule(step)) == pytest.approx(expected, rel=1e-15)
    assert float(schedule(tf.constant(step,
                                      tf.int64))) == pytest.approx(expected,
                                                                   rel=1e-15)
    assert float(schedule(tf.constant(step,
                                      tf.int32))) == pytest.approx(expected,
                                                                   rel=1e-15)


@pytest.mark.parametrize("arguments,error,message", [
    (([], []), ValueError, "at least one knot"),
    (([0, 1], [1.0]), ValueError, "equally long"),
    (([1, 0], [1.0, 2.0]), ValueError, "nondecreasing"),
    (([-1], [1.0]), ValueError, ">= 0"),
    (([0, 2, 2, 2], [1.0, 1.0, 0.0, 1.0]), ValueError, "at most twice"),
    (([0.5], [1.0]), TypeError, "steps must be ints"),
    (([0], [math.nan]), ValueError, "values must be finite"),
    (([0], ["1"]), TypeError, "values must be a real number"),
])
def test_bad_schedules_are_refused(arguments, error, message):
  with pytest.raises(error, match=message):
    schedules.PiecewiseLinear(*arguments)


@pytest.mark.parametrize("make,error,message", [
    (lambda: schedules.warmup(1.0, 0), ValueError, "steps must be >= 1"),
    (lambda: schedules.final_uniform(1.0, 10, delta=1.5), ValueError,
     r"delta must be in \[0, 1\]"),
    (lambda: schedules.final_uniform(1.0, 10, delta=math.nan), ValueError,
     r"delta must be in \[0, 1\]"),
    (lambda: schedules.initial_uniform(1.0, 10, fraction=-0.1), ValueError,
     r"fraction must be in \[0, 1\]"),
    (lambda: schedules.initial_uniform(1.0, 0), ValueError,
     "total_steps must be >= 1"),
])
def test_bad_schedule_helpers_are_refused(make, error, message):
  with pytest.raises(error, match=message):
    make()


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


def controlled_sampler(seed, dtype=tf.float64):
  return AdaptiveSampler(NUM_EXAMPLES,
                         schedules.PiecewiseLinear([0, 6, 12, 12],
                                                   [0.0, 2.0, 2.0, 0.0]),
                         decay=0.7,
                         seed=seed,
                         stratified=True,
                         epsilon=0.25,
                         beta=schedules.anneal(1.0, 10),
                         dtype=dtype)


def controlled_steps(sampler, steps, jit_compile=False):
  """`steps` training steps of draws with weights and updates; returns the
  draws and weights of each."""

  @tf.function(jit_compile=jit_compile)
  def step():
    indices, weights = sampler.sample_with_weights(8)
    sampler.update(indices, tf.cast(indices % 3, sampler.dtype) - 0.5)
    return indices, weights

  return [[t.numpy() for t in step()] for _ in range(steps)]


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


def save(sampler, tmp_path):
  return tf.train.Checkpoint(sampler=sampler).save(str(tmp_path / "ckpt"))


def restore(sampler, path):
  tf.train.Checkpoint(sampler=sampler).restore(path).assert_consumed()


@pytest.mark.parametrize("saved,restored,error,message", [
    ({
        "epsilon": 0.1
    }, {
        "epsilon": 0.2
    }, tf.errors.InvalidArgumentError, "checkpoint's epsilon differs"),
    ({
        "beta": 0.5
    }, {
        "beta": 0.6
    }, tf.errors.InvalidArgumentError, "checkpoint's beta differs"),
    ({}, {
        "epsilon": 0.2
    }, tf.errors.NotFoundError, "epsilon"),
    ({}, {
        "amplitude": schedules.warmup(1.0, 5)
    }, tf.errors.NotFoundError, "update_count"),
    ({
        "amplitude": schedules.warmup(1.0, 5)
    }, {}, tf.errors.NotFoundError, "amplitude"),
])
def test_a_checkpoint_of_other_controls_is_refused(tmp_path, saved, restored,
                                                   error, message):
  sampler = AdaptiveSampler(NUM_EXAMPLES, **{
      "amplitude": 1.0,
      "decay": 0.5,
      **saved
  })
  sampler.update([1, 2], [1.0, 2.0])
  path = save(sampler, tmp_path)
  target = AdaptiveSampler(NUM_EXAMPLES, **{
      "amplitude": 1.0,
      "decay": 0.5,
      **restored
  })
  before = state_of(target)
  with pytest.raises(error, match=message):
    restore(target, path)
  assert_same_state(state_of(target), before)


def test_a_checkpoint_with_a_negative_update_count_is_refused(tmp_path):
  sampler = controlled_sampler(seed=0)
  controlled_steps(sampler, 3)
  sampler._update_count.assign(-1)
  path = save(sampler, tmp_path)
  target = controlled_sampler(seed=0)
  before = state_of(target)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="update count is negative"):
    restore(target, path)
  assert_same_state(state_of(target), before)


def test_controls_off_keep_the_checkpoint_layout(tmp_path):
  # A sampler made without controls saves what one made before they
  # existed: its checkpoints restore either way.
  path = save(AdaptiveSampler(NUM_EXAMPLES, 1.0, 0.5, epsilon=0.0, beta=1.0),
              tmp_path)
  names = {
      name.split("/")[-1].split(".")[0]
      for name, _ in tf.train.list_variables(path)
  }
  assert {"epsilon", "beta", "update_count"}.isdisjoint(names)
  assert {"amplitude", "decay", "log_weights"} <= names


@pytest.mark.parametrize("update_in_function", [False, True])
def test_stage_draws_from_the_floor_and_counts_updates_for_schedules(
    update_in_function):
  x = np.arange(NUM_EXAMPLES, dtype=np.float32)
  stage = data.AdaptiveSampling(controlled_sampler(seed=6), 8, max_lag=0)
  update = tf.function(stage.update) if update_in_function else stage.update
  in_step = controlled_sampler(seed=6)
  for step, (batch, indices,
             probabilities) in enumerate(stage.dataset(x).take(14)):
    expected, expected_probabilities = in_step.sample_with_probabilities(8)
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_array_equal(probabilities, expected_probabilities)
    np.testing.assert_array_equal(batch, x[expected.numpy()])
    np.testing.assert_array_equal(
        stage.sampler.importance_weights(probabilities),
        in_step.importance_weights(expected_probabilities))
    utilities = tf.cast(indices % 3, tf.float64) - 0.5
    update(indices, utilities)
    in_step.update(expected, utilities)
    count = stage.sampler._update_count
    assert int(count) == step + 1
  assert_same_state(state_of(stage.sampler), state_of(in_step))


def keras_trainer(sampler, debias=False, seed=0):
  keras.utils.set_random_seed(seed)
  net = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation="softmax")
  ])
  trainer = AdaptiveSamplingModel(net,
                                  data.AdaptiveSampling(sampler, 16, max_lag=0),
                                  utility="zero_one",
                                  debias=debias)
  trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss="sparse_categorical_crossentropy")
  return trainer


def toy_data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y


def test_keras_file_round_trips_the_controls_and_the_update_count(tmp_path):
  x, y = toy_data()
  trainer = keras_trainer(controlled_sampler(seed=2))
  trainer.fit(x, y, steps_per_epoch=5, verbose=0)
  path = str(tmp_path / "trainer.keras")
  trainer.save(path)
  loaded = keras.models.load_model(path)
  sampler, restored = trainer.stage.sampler, loaded.stage.sampler
  assert restored.epsilon == 0.25
  assert isinstance(restored.amplitude, schedules.PiecewiseLinear)
  assert restored.amplitude.get_config() == sampler.amplitude.get_config()
  assert restored.beta.get_config() == sampler.beta.get_config()
  assert int(restored._update_count) == 5
  assert_same_state(state_of(restored), state_of(sampler))
  np.testing.assert_array_equal(
      restored.sample_with_weights(8)[1],
      sampler.sample_with_weights(8)[1])


def test_keras_debias_weighs_the_loss_by_beta():
  # beta = 0: weights of 1, so debiasing trains as not debiasing does; the
  # same run at beta = 1 trains otherwise.
  x, y = toy_data()
  trained = []
  for beta, debias in [(0.0, True), (1.0, False), (1.0, True)]:
    trainer = keras_trainer(AdaptiveSampler(NUM_EXAMPLES,
                                            2.0,
                                            0.5,
                                            seed=1,
                                            epsilon=0.1,
                                            beta=beta),
                            debias=debias)
    trainer.fit(x, y, steps_per_epoch=6, verbose=0)
    trained.append(trainer.model.get_weights())
  for unweighted, weighted_by_one in zip(trained[1], trained[0]):
    np.testing.assert_allclose(weighted_by_one, unweighted, rtol=1e-6)
  assert any(not np.allclose(debiased, unweighted)
             for debiased, unweighted in zip(trained[2], trained[1]))


@pytest.mark.parametrize("epsilon", [0.0, 0.2, 1.0])
def test_diagnostics_describe_the_distribution_the_draws_follow(epsilon):
  sampler = AdaptiveSampler(NUM_EXAMPLES, 3.0, 0.5, epsilon=epsilon)
  indices = np.arange(NUM_EXAMPLES)
  sampler.update(indices, utility_of(indices))
  values = diagnostics.compute(sampler)
  kl = float(sampler.kl_divergence())
  assert float(values["kl_divergence"]) == pytest.approx(kl,
                                                         rel=1e-9,
                                                         abs=1e-15)
  probabilities = np.exp(values["log_n_probability"]) / NUM_EXAMPLES
  np.testing.assert_allclose(probabilities, sampler.probabilities(), rtol=1e-12)


MIRRORED_CONTROLS = """
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tf_adasamp
from tf_adasamp import distribute, schedules
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
settings = dict(amplitude=schedules.warmup(2.0, 4), decay=0.5, seed=3,
                epsilon=0.2, beta=schedules.anneal(1.0, 5))
sampler = distribute.create_sampler(strategy, 50, **settings)
plain = tf_adasamp.AdaptiveSampler(50, **settings)

@tf.function
def step(in_replicas):
  indices, probabilities = distribute.sample_share(sampler, 8, 0, 1)
  weights = sampler.importance_weights(probabilities)
  utilities = tf.cast(indices % 3 == 0, tf.float64)
  if in_replicas:  # each replica reports half of the batch
    def update(context):
      share = context.replica_id_in_sync_group * 4
      return indices[share:share + 4], utilities[share:share + 4]
    halves = strategy.experimental_distribute_values_from_function(update)
    strategy.run(sampler.update, halves)
  else:
    sampler.update(indices, utilities)
  return indices, weights

for t in range(8):
  indices, weights = step(t % 2 == 1)
  expected = plain._sample_from(plain.tree.variable, plain.uniforms(8))
  np.testing.assert_array_equal(indices, expected[0])
  np.testing.assert_allclose(weights, plain.importance_weights(expected[1]),
                             rtol=1e-14)
  plain.update(expected[0], tf.cast(expected[0] % 3 == 0, tf.float64))
for name in ("_update_count", "log_weights"):
  for copy in strategy.experimental_local_results(getattr(sampler, name)):
    np.testing.assert_array_equal(copy, getattr(plain, name))
print("identical")
"""


def test_mirrored_copies_draw_weigh_and_count_as_one_sampler():
  # Logical CPU devices are set before TensorFlow starts: in a child.
  result = subprocess.run(
      [sys.executable, "-c", MIRRORED_CONTROLS],
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""),
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 0, result.stderr[-4000:]
  assert result.stdout.split()[-1] == "identical"
