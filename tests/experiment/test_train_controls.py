"""The trainer's sampler controls and label noise (issue 45's flags)."""

import numpy as np
import pytest

import run_records
from run_records import stopped_and_resumed
from run_records import without_clocks
from tf_adasamp import schedules
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop


def tiny_config(**overrides):
  """A small run of Algorithm 1 (no importance weights) at amplitude 1,
  long enough to resume twice."""
  return run_records.tiny_config(**{
      **dict(steps=6, sampling="adaptive", amplitude=1.0, beta=0.0),
      **overrides
  })


def test_label_noise_flips_a_fixed_fraction_to_other_classes(digits):
  noisy = datasets.with_label_noise(digits, 0.2)
  changed = noisy.y_train != digits.y_train
  np.testing.assert_array_equal(changed, noisy.flipped)
  assert changed.sum() == round(0.2 * digits.num_train)
  np.testing.assert_array_equal(noisy.y_test, digits.y_test)
  assert noisy.y_train.dtype == np.int32
  assert set(np.unique(noisy.y_train)) <= set(range(digits.num_classes))
  # Every run of the study flips the same examples the same way.
  again = datasets.with_label_noise(digits, 0.2)
  np.testing.assert_array_equal(again.y_train, noisy.y_train)
  with pytest.raises(ValueError, match="flipped already"):
    datasets.with_label_noise(noisy, 0.2)
  with pytest.raises(ValueError, match=r"in \[0, 1\)"):
    datasets.with_label_noise(digits, 1.0)


def test_a_noisy_run_records_its_clean_loss_and_the_mass_on_flipped_labels(
    digits):
  records = loop.train(tiny_config(label_noise=0.4), data=digits)
  first, last = records[0], records[-1]
  # Uniform at the start: the flipped examples' share is theirs, 0.4.
  assert first["flipped_mass"] == pytest.approx(0.4, abs=1e-6)
  assert last["flipped_mass"] > 0.4
  for record in records:
    assert 0 <= record["clean_train_accuracy"] <= 1
  clean = loop.train(tiny_config(), data=digits)
  assert "flipped_mass" not in clean[-1]


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
  whole = loop.train(tiny_config(**controls), data=digits)
  # Stopped as Ctrl-C stops it, after its second call (step 4): the same
  # settings, so a schedule over the run's length is the same schedule.
  resumed = stopped_and_resumed(
      tiny_config(output_dir=str(tmp_path), **controls), digits)
  assert without_clocks(resumed) == without_clocks(whole)
  plain = loop.train(tiny_config(), data=digits)
  # Each control changes the run (the floor halves the KL's reach).
  assert without_clocks(whole) != without_clocks(plain)


def test_a_final_uniform_phase_stops_concentrating_the_draws(digits):
  settings = dict(steps=8, decay=0.1)
  constant = loop.train(tiny_config(**settings), data=digits)
  final = loop.train(tiny_config(amplitude_schedule="final_uniform",
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
  initial = loop.train(tiny_config(amplitude_schedule="initial_uniform",
                                   schedule_fraction=0.5,
                                   **settings),
                       data=digits)
  uniform = loop.train(tiny_config(sampling="uniform", **settings), data=digits)
  # Amplitude 0 for updates 0-3: the uniform run's draws and model, KL 0.
  for ours, theirs in zip(initial[:3], uniform[:3]):
    assert ours["kl"] == 0
    for name in ("train_loss", "test_accuracy"):
      assert ours[name] == theirs[name]
  assert initial[-1]["kl"] > 0
  assert initial[-1]["train_loss"] != uniform[-1]["train_loss"]


@pytest.mark.parametrize("overrides,message", [
    (dict(epsilon=1.5), "epsilon must be in"),
    (dict(epsilon=float("nan")), "epsilon must be in"),
    (dict(beta=-0.1), "beta must be in"),
    (dict(schedule_fraction=2.0), "schedule_fraction must be in"),
    (dict(schedule_fraction=0.5), "'constant' ignores it"),
    (dict(amplitude_schedule="anneal",
          schedule_fraction=0.5), "'anneal' ignores it"),
    (dict(label_noise=1.0), "label_noise must be in"),
    (dict(sampling="uniform", epsilon=0.1), "^epsilon needs sampling "
     "'adaptive'"),
    (dict(sampling="reshuffle", epsilon=0.1, amplitude_schedule="warmup"),
     "^epsilon and amplitude_schedule need sampling 'adaptive'"),
    (dict(amplitude_schedule="cosine"), "amplitude_schedule must be one of"),
])
def test_bad_controls_are_refused(overrides, message):
  with pytest.raises(ValueError, match=message):
    tiny_config(**overrides)
