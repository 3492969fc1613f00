"""The run's parts (tf_adasamp.experiment.training.components)."""

import numpy as np
import pytest
import tensorflow as tf

from run_records import controls_config
from run_records import stopped_and_resumed
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp import schedules
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files


def test_sgd_step_size_is_eta_over_one_plus_gamma_t():
  optimizer = components.make_optimizer("sgd", 0.5, 0.1)
  weight = tf.Variable(0.0)
  for _ in range(3):  # gradient 1: each step moves by the step size
    optimizer.apply_gradients([(tf.constant(1.0), weight)])
  expected = -sum(0.5 / (1 + 0.1 * t) for t in range(3))
  np.testing.assert_allclose(float(weight), expected, rtol=1e-6)


@pytest.mark.parametrize("rule", ["sgd", "adagrad"])
@pytest.mark.parametrize(
    "lr_schedule,reference",
    [
        ("inverse_time", lambda t, total: 0.5 / (1 + 0.1 * t)),
        # Past the run's end (t > T) both stay at 0.
        ("linear", lambda t, total: 0.5 * max(0, 1 - t / total)),
        ("cosine", lambda t, total: 0.5 *
         (1 + np.cos(np.pi * min(t, total) / total)) / 2),
    ])
def test_step_size_schedules_follow_their_formulas_to_the_runs_end(
    rule, lr_schedule, reference):
  total = 5
  optimizer = components.make_optimizer(rule, 0.5, 0.1, lr_schedule, total)
  weight = tf.Variable(0.0)
  optimizer.build([weight])
  for t in range(total + 2):
    # The step size of update t, read as the evaluations read it.
    np.testing.assert_allclose(float(optimizer.learning_rate),
                               reference(t, total),
                               rtol=1e-6,
                               atol=1e-7)
    optimizer.apply_gradients([(tf.constant(1.0), weight)])
  if lr_schedule != "inverse_time":
    assert float(optimizer.learning_rate) == 0


def test_a_budget_schedule_needs_the_runs_length():
  with pytest.raises(TypeError, match="total_steps must be an int"):
    components.make_optimizer("sgd", 0.5, 0.0, "cosine")


@pytest.mark.parametrize("lr_schedule", ["linear", "cosine"])
def test_a_run_with_a_budget_schedule_ends_at_step_size_0_and_resumes_exactly(
    digits, tmp_path, lr_schedule):
  settings = dict(sampling="adaptive", steps=6, lr_schedule=lr_schedule)
  whole = loop.train(tiny_config(**settings), data=digits)
  assert whole[0]["learning_rate"] == pytest.approx(0.1)
  assert whole[-1]["learning_rate"] == 0
  resumed = stopped_and_resumed(
      tiny_config(output_dir=str(tmp_path), **settings), digits)
  assert without_clocks(resumed) == without_clocks(whole)
  # Another length would be another schedule: refused, the run as it was.
  metrics = (tmp_path / run_files.METRICS_FILE).read_bytes()
  with pytest.raises(run_files.RunExistsError,
                     match=f"another length \\(steps 6 there, steps 8 here\\): "
                     f"its lr_schedule '{lr_schedule}' follows the run's "
                     "length"):
    loop.train(tiny_config(output_dir=str(tmp_path),
                           resume=True,
                           **dict(settings, steps=8)),
               data=digits)
  assert (tmp_path / run_files.METRICS_FILE).read_bytes() == metrics


@pytest.mark.parametrize(
    "name,at,expected",
    [("constant", [0, 10, 99], [2.0, 2.0, 2.0]),
     ("warmup", [0, 5, 10, 50], [0.0, 1.0, 2.0, 2.0]),
     ("anneal", [0, 50, 100], [2.0, 1.0, 0.0]),
     ("final_uniform", [0, 89, 90, 99], [2.0, 2.0, 0.0, 0.0]),
     ("initial_uniform", [0, 9, 10, 99], [0.0, 0.0, 2.0, 2.0])])
def test_amplitude_schedules_take_their_values_at_the_given_updates(
    name, at, expected):
  amplitude = components.amplitude_schedule(name, 2.0, 0.1, 100)
  values = [
      amplitude(step) if callable(amplitude) else amplitude for step in at
  ]
  np.testing.assert_allclose(np.asarray(values, float), expected)
  if name != "constant":
    assert isinstance(amplitude, schedules.PiecewiseLinear)


@pytest.mark.parametrize("controls", [
    dict(epsilon=0.5),
    dict(amplitude_schedule="final_uniform", schedule_fraction=0.5),
    dict(amplitude_schedule="initial_uniform", schedule_fraction=0.5),
    dict(beta=1.0),
])
def test_a_run_with_a_control_resumes_exactly(digits, tmp_path, controls):
  whole = loop.train(controls_config(**controls), data=digits)
  # Stopped as Ctrl-C stops it, after its second call (step 4): the same
  # settings, so a schedule over the run's length is the same schedule.
  resumed = stopped_and_resumed(
      controls_config(output_dir=str(tmp_path), **controls), digits)
  assert without_clocks(resumed) == without_clocks(whole)
  plain = loop.train(controls_config(), data=digits)
  # Each control changes the run (the floor halves the KL's reach).
  assert without_clocks(whole) != without_clocks(plain)


def test_a_final_uniform_phase_stops_concentrating_the_draws(digits):
  settings = dict(steps=8, decay=0.1)
  constant = loop.train(controls_config(**settings), data=digits)
  final = loop.train(controls_config(amplitude_schedule="final_uniform",
                                     schedule_fraction=0.5,
                                     **settings),
                     data=digits)
  # The same run to step 4; then amplitude 0 only decays the drawn
  # examples' log weights, and the KL falls where the constant run's grows.
  assert final[2]["kl"] == constant[2]["kl"]
  assert final[-1]["kl"] < final[2]["kl"] < constant[-1]["kl"]


def test_an_initial_uniform_phase_trains_as_uniform_sampling_until_it_ends(
    digits):
  settings = dict(steps=8, decay=0.1)
  initial = loop.train(controls_config(amplitude_schedule="initial_uniform",
                                       schedule_fraction=0.5,
                                       **settings),
                       data=digits)
  uniform = loop.train(controls_config(sampling="uniform", **settings),
                       data=digits)
  # Amplitude 0 for updates 0-3: the uniform run's draws and model, KL 0.
  for ours, theirs in zip(initial[:3], uniform[:3]):
    assert ours["kl"] == 0
    for name in ("train_loss", "test_accuracy"):
      assert ours[name] == theirs[name]
  assert initial[-1]["kl"] > 0
  assert initial[-1]["train_loss"] != uniform[-1]["train_loss"]
