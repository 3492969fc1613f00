"""The experiment runner: plan, runs, figures, summary and claims."""

import dataclasses
import os

import numpy as np
import pytest

from tf_adasamp.experiment import datasets
from tf_adasamp.experiment import report
from tf_adasamp.experiment import study

TINY = study.Settings(
    steps=2, eval_interval=1, sgd_learning_rate=0.1, sgd_lr_decay=0.01,
    adagrad_learning_rate=0.1, amplitude=1.0, decay=0.5,
    sweep_amplitudes=(0.5, 1.0), batch_size=16)


def test_plan_runs_each_algorithm_per_trial_with_the_trial_seed(tmp_path):
  runs = study.plan(TINY, trials=2, output_dir=str(tmp_path),
                        dataset="digits", model="logistic")
  # Six algorithms and the sweep's one new amplitude (1.0 is shared, and
  # amplitude 0 is Unif-SGD), per trial.
  assert len(runs) == 2 * (6 + 1)
  assert len({run.config.output_dir for run in runs}) == len(runs)
  for run in runs:
    assert run.config.seed == run.trial
    sampling, utility, optimizer = study.ALGORITHMS[run.algorithm]
    assert (run.config.sampling, run.config.optimizer) == (sampling,
                                                           optimizer)
    if sampling == "adaptive":
      assert run.config.utility == utility
  assert {run.amplitude for run in runs
          if run.algorithm == "AdaSamp-01-SGD"} == {0.5, 1.0}


def test_plan_refuses_a_uniform_sweep_algorithm(tmp_path):
  settings = dataclasses.replace(TINY, sweep_algorithm="Unif-SGD")
  with pytest.raises(ValueError, match="adaptive algorithm"):
    study.plan(settings, 1, str(tmp_path), "digits")


def test_experiment_reports_figures_and_claims_and_skips_finished_runs(
    tmp_path, capsys):
  runs = study.plan(TINY, trials=2, output_dir=str(tmp_path / "runs"),
                        dataset="digits", model="logistic")
  data = datasets.load("digits")
  study.run_all(runs, data)
  paths = report.report(runs, TINY, 2, "digits", "logistic",
                           str(tmp_path / "report"), command="cmd")
  for name in ["train_loss", "train_accuracy", "test_accuracy", "amplitude",
               "kl", "figure1"]:
    path = str(tmp_path / "report" / f"{name}.png")
    assert path in paths and os.path.getsize(path) > 0
  with open(tmp_path / "report" / "summary.md") as f:
    summary = f.read()
  for algorithm in study.ALGORITHMS:
    assert f"| {algorithm} |" in summary
  assert summary.count("supported.**") == 4
  capsys.readouterr()
  study.run_all(runs, data)
  assert capsys.readouterr().out.count("skipped") == len(runs)
  # Every algorithm of a trial starts from the same model.
  curves, _ = study.collect(runs, TINY)
  first = [curve["train_loss"][:, 0] for curve in curves.values()]
  np.testing.assert_array_equal(np.ptp(first, axis=0), 0)


def test_mean_over_is_the_trapezoid_time_average():
  steps = np.array([0, 1, 2, 4])
  np.testing.assert_allclose(study.mean_over(steps, [3, 3, 3, 3]), 3)
  np.testing.assert_allclose(study.mean_over(steps, steps), 2)
  np.testing.assert_allclose(study.mean_over(steps, steps, until=2), 1)
  np.testing.assert_allclose(study.mean_over(steps, steps, since=2), 3)


def synthetic(adaptive_better):
  """Curves and a sweep where adaptive sampling does (or does not) win."""
  steps = np.arange(0, 11)
  trials = 3
  base = np.exp(-steps / 3.0)
  curves = {}
  for name in study.ALGORITHMS:
    adaptive = not name.startswith("Unif")
    speed = 0.7 if adaptive == adaptive_better else 1.0
    loss = np.tile(base**(1 / speed), (trials, 1))
    kl = np.tile(steps * np.exp(-steps / 1.5), (trials, 1)) * adaptive
    curves[name] = {"step": steps, "train_loss": loss,
                    "train_accuracy": 1 - loss / 2,
                    "test_accuracy": 0.9 - loss / 2, "kl": kl}
  sign = 1 if adaptive_better else -1
  sweep = {"algorithm": "AdaSamp-01-SGD", "amplitude": [0.0, 0.5, 1.0],
           "train_accuracy": [np.full(trials, 0.5 + sign * 0.1 * i)
                              for i in range(3)],
           "test_accuracy": [np.full(trials, 0.9 - sign * 0.01 * i)
                             for i in range(3)]}
  return curves, sweep


@pytest.mark.parametrize("adaptive_better", [True, False])
def test_claims_follow_the_curves(adaptive_better):
  curves, sweep = synthetic(adaptive_better)
  verdicts = [supported for _, supported, _ in
              report.assess_claims(curves, sweep, steps=10)]
  # The synthetic KL curve rises then decays either way.
  assert verdicts == [adaptive_better] * 3 + [True]


def test_amplitude_claim_needs_three_amplitudes():
  curves, sweep = synthetic(adaptive_better=True)
  sweep = {key: value[:2] if isinstance(value, list) else value
           for key, value in sweep.items()}
  claims = report.assess_claims(curves, sweep, steps=10)
  assert claims[2][1] is None
