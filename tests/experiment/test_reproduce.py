"""The experiment runner: plan, runs, figures, summary and claims."""

import dataclasses
import os

import numpy as np
import pytest

from tf_adasamp.experiment import datasets
from tf_adasamp.experiment import report
from tf_adasamp.experiment import study

TINY = study.Settings(steps=2,
                      eval_interval=1,
                      sgd_learning_rate=0.1,
                      sgd_lr_decay=0.01,
                      adagrad_learning_rate=0.1,
                      amplitude=1.0,
                      decay=0.5,
                      sweep_amplitudes=(0.5, 1.0),
                      batch_size=16)


def test_plan_runs_each_algorithm_per_trial_with_the_trial_seed(tmp_path):
  runs = study.plan(TINY,
                    trials=2,
                    output_dir=str(tmp_path),
                    dataset="digits",
                    model="logistic")
  # Six algorithms and the sweep's one new amplitude (1.0 is shared, and
  # amplitude 0 is Unif-SGD), per trial.
  assert len(runs) == 2 * (6 + 1)
  assert len({run.config.output_dir for run in runs}) == len(runs)
  for run in runs:
    assert run.config.seed == run.trial
    sampling, utility, optimizer = study.ALGORITHMS[run.algorithm]
    assert (run.config.sampling, run.config.optimizer) == (sampling, optimizer)
    if sampling == "adaptive":
      assert run.config.utility == utility
  assert {run.amplitude for run in runs if run.algorithm == "AdaSamp-01-SGD"
         } == {0.5, 1.0}


def test_plan_refuses_a_uniform_sweep_algorithm(tmp_path):
  settings = dataclasses.replace(TINY, sweep_algorithm="Unif-SGD")
  with pytest.raises(ValueError, match="adaptive algorithm"):
    study.plan(settings, 1, str(tmp_path), "digits")


def test_experiment_reports_figures_and_claims_and_skips_finished_runs(
    tmp_path, capsys):
  runs = study.plan(TINY,
                    trials=2,
                    output_dir=str(tmp_path / "runs"),
                    dataset="digits",
                    model="logistic")
  data = datasets.load("digits")
  study.run_all(runs, data)
  paths = report.report(runs,
                        TINY,
                        2,
                        "digits",
                        "logistic",
                        str(tmp_path / "report"),
                        command="cmd",
                        departures=study.departures("digits", "logistic", TINY,
                                                    2, 1500))
  for name in [
      "train_loss", "train_accuracy", "test_accuracy", "amplitude", "kl",
      "figure1"
  ]:
    path = str(tmp_path / "report" / f"{name}.png")
    assert path in paths and os.path.getsize(path) > 0
  with open(tmp_path / "report" / "summary.md") as f:
    summary = f.read()
  for algorithm in study.ALGORITHMS:
    assert f"| {algorithm} |" in summary
  # The departures come first, and say what differs.
  assert summary.index("## Departures from the paper") < summary.index(
      "## The paper's claims")
  assert "- Data: scikit-learn's digits" in summary
  assert "- Trials: 2 (the paper: 10)." in summary
  # The logistic model's runs put Corollary 1 beside the measured gap.
  assert "Theorem 4's estimate from this single run" in summary
  # Every claim has a verdict line; two trials give intervals.
  assert summary.count(".**") == 4
  assert "[95% CI]" in summary
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


def synthetic(effect, trials=5, noise=0.01, seed=0):
  """Curves and a sweep of `trials` trials where adaptive sampling is better
  (effect > 0), worse (effect < 0) or no different (effect 0) than uniform
  sampling, with per-trial noise shared by the algorithms of a trial plus a
  little of their own."""
  rng = np.random.default_rng(seed)
  steps = np.arange(0, 11)
  base = np.exp(-steps / 3.0)
  shared = rng.normal(0, 0.2, size=(trials, 1))  # trial-to-trial spread
  curves = {}
  for name in study.ALGORITHMS:
    adaptive = not name.startswith("Unif")
    own = rng.normal(0, noise, size=(trials, 1))
    shift = (effect if adaptive else 0.0) + own
    loss = np.clip(base * (1 + shared) - shift * base, 1e-3, None)
    kl = np.tile(steps * np.exp(-steps / 1.5), (trials, 1)) * adaptive
    curves[name] = {
        "step": steps,
        "train_loss": loss,
        "train_accuracy": 1 - loss / 4,
        "test_accuracy": 0.9 - loss / 4,
        "kl": kl
    }
  amplitudes = [0.0, 0.5, 1.0, 2.0]
  sign = np.sign(effect)
  sweep = {
      "algorithm":
          "AdaSamp-01-SGD",
      "amplitude":
          amplitudes,
      "train_accuracy": [
          0.5 + sign * 0.05 * i + rng.normal(0, noise, trials) for i in range(4)
      ],
      "train_accuracy_final": [np.full(trials, 0.99)] * 4,
      "train_loss": [np.full(trials, 0.5)] * 4,
      "kl_max": [np.full(trials, 0.1 * i) for i in range(4)],
      "test_accuracy": [
          0.9 - sign * 0.01 * i + rng.normal(0, noise / 10, trials)
          for i in range(4)
      ]
  }
  return curves, sweep


@pytest.mark.parametrize("effect, expected", [(0.3, report.SUPPORTED),
                                              (-0.3, report.CONTRADICTED),
                                              (0.0, report.NOT_SHOWN)])
def test_claims_judge_paired_differences(effect, expected):
  curves, sweep = synthetic(effect)
  claims = report.assess_claims(curves, sweep, steps=10)
  # Claims 1 and 2 follow the effect although the trial-to-trial spread
  # (std 0.2) dwarfs it: the comparisons are paired within a trial.
  assert [claim.verdict for claim in claims[:2]] == [expected] * 2
  # Claim 1 is judged on both cross-entropy and accuracy.
  assert {c.measure for c in claims[0].comparisons
         } == {"train cross-entropy, 1st half", "train accuracy, 1st half"}
  # The synthetic KL curve rises, then decays, either way.
  assert claims[3].verdict == report.SUPPORTED


def test_verdict_reads_the_interval_against_the_papers_direction():
  assert report.verdict(0.1, 0.3, +1) == report.SUPPORTED
  assert report.verdict(-0.3, -0.1, -1) == report.SUPPORTED
  assert report.verdict(-0.3, -0.1, +1) == report.CONTRADICTED
  assert report.verdict(-0.1, 0.2, +1) == report.NOT_SHOWN
  assert report.verdict(float("nan"), float("nan"), +1) == report.NO_VERDICT


def test_paired_interval_is_the_t_interval():
  mean, low, high = report.paired_interval([1.0, 2.0, 3.0])
  # mean 2, standard error 1 / sqrt(3), t(0.975, 2) = 4.3027
  np.testing.assert_allclose([mean, low, high],
                             [2, 2 - 4.3027 / 3**0.5, 2 + 4.3027 / 3**0.5],
                             rtol=1e-4)
  assert np.isnan(report.paired_interval([1.0])[1])


def test_one_trial_gives_no_verdict():
  curves, sweep = synthetic(0.3, trials=1)
  claims = report.assess_claims(curves, sweep, steps=10)
  assert {claim.verdict for claim in claims} == {report.NO_VERDICT}
  settings = dataclasses.replace(TINY, steps=10)
  summary = report.summary_markdown(curves, sweep, settings, 1, "digits",
                                    "logistic", "cmd")
  assert "no verdict is possible" in summary
  assert "supported" not in summary.replace("*supported*", "")


def test_amplitude_claim_is_reported_with_and_without_collapsed_runs():
  curves, sweep = synthetic(0.3)
  # Training speed rises with the amplitude up to 1; test accuracy is
  # noise; amplitude 2 collapses to chance, which reverses the trend.
  rng = np.random.default_rng(1)
  sweep["train_accuracy"] = [
      np.full(5, 0.5),
      np.full(5, 0.6),
      np.full(5, 0.7),
      np.full(5, 0.1)
  ]
  sweep["train_accuracy_final"] = [np.full(5, 0.99)] * 3 + [np.full(5, 0.1)]
  sweep["test_accuracy"] = [0.9 + rng.normal(0, 0.01, 5) for _ in range(3)]
  sweep["test_accuracy"].append(np.full(5, 0.1))
  claim = report.assess_claims(curves, sweep, steps=10)[2]
  assert len(claim.comparisons) == 4  # with and without amplitude 2
  note = " ".join(claim.notes)
  assert "Amplitude 2 collapsed" in note
  assert "the collapsed runs drive the verdict" in note
  # Without it, faster training is supported and worse testing not shown.
  assert [c.verdict for c in claim.comparisons[2:]
         ] == [report.SUPPORTED, report.NOT_SHOWN]
  assert claim.verdict == report.CONTRADICTED  # all amplitudes


def test_amplitude_claim_needs_three_amplitudes():
  curves, sweep = synthetic(0.3)
  sweep = {
      key: value[:2] if isinstance(value, list) else value
      for key, value in sweep.items()
  }
  claims = report.assess_claims(curves, sweep, steps=10)
  assert claims[2].verdict == "not assessed"
