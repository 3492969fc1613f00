"""Time to target: first crossings, paired ratios and the report's table,
on synthetic trials whose answers are known."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import timing

STEPS = np.arange(0, 1001, 100)
BATCH = 10


def test_first_reach_interpolates_between_evaluations():
  loss = [1.0, 0.6, 0.2]
  assert targets.first_reach([0, 100, 200], loss, 0.4, True) == 150
  assert targets.first_reach([0, 100, 200], loss, 1.0, True) == 0
  assert targets.first_reach([0, 100, 200], loss, 0.1, True) == math.inf
  accuracy = [0.5, 0.7, 0.6, 0.9]
  # The first crossing counts, though the curve falls back after it.
  assert targets.first_reach([0, 1, 2, 3], accuracy, 0.6, False) == 0.5
  assert targets.first_reach([0, 1, 2, 3], accuracy, 0.95, False) == math.inf


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval_of_the_logs():
  costs = [50.0, 60.0, 70.0, math.inf, 80.0]
  baseline = [100.0, 100.0, 100.0, 100.0, math.inf]
  ratio = targets.paired_ratio(costs, baseline)
  logs = np.log([0.5, 0.6, 0.7])
  assert ratio.geometric_mean == pytest.approx(np.exp(logs.mean()))
  interval = stats.ttest_1samp(logs, 0).confidence_interval(0.95)
  assert ratio.interval == pytest.approx(np.exp([interval.low, interval.high]))
  assert (ratio.reached, ratio.adaptive_never, ratio.baseline_never) == (3, 1,
                                                                         1)


def _curve(speed, trials=5, forward_passes=1, seed=0):
  """Curves whose train loss exp(-speed * step / 1000) falls `speed` times
  as fast as speed 1's, give or take a few percent per trial."""
  rng = np.random.default_rng(seed)
  rates = speed * (1 + 0.03 * rng.standard_normal(trials))
  loss = np.exp(-np.outer(rates, STEPS) / 1000)
  accuracy = 1 - loss / 2
  return {
      "step":
          STEPS,
      "epoch":
          STEPS * BATCH / 1000,
      "train_loss":
          loss,
      "train_accuracy":
          accuracy,
      "test_accuracy":
          accuracy - 0.1,
      "test_loss":
          loss + 0.2,
      "kl":
          np.zeros_like(loss),
      "ess_fraction":
          np.ones_like(loss),
      "examples_forwarded":
          np.outer(np.ones(trials), STEPS * BATCH * forward_passes),
      "examples_backpropagated":
          np.outer(np.ones(trials), STEPS * BATCH),
      # A second forward pass makes a step half as dear again.
      "train_seconds":
          np.outer(np.ones(trials), STEPS * 0.002 * (1 + forward_passes / 2)),
  }


def test_compare_charges_the_second_forward_pass():
  # Twice as fast in steps, but each step forwards its batch twice:
  # (2 + 2) / (1 + 2) the passes a step.
  fast = _curve(2.0, forward_passes=2, seed=1)
  uniform = _curve(1.0, seed=2)
  target = targets.targets(uniform, 0.9, 0.5)[0]
  row = targets.compare(fast, uniform, target)
  assert row.steps.geometric_mean == pytest.approx(0.5, rel=0.05)
  assert row.passes.geometric_mean == pytest.approx(0.5 * 4 / 3, rel=0.05)
  assert row.seconds.geometric_mean == pytest.approx(0.5 * 2 / 1.5, rel=0.05)
  assert row.seconds.geometric_mean == pytest.approx(0.5 * 2 / 1.5, rel=0.05)
  assert row.steps.reached == 5
  # Test loss tracks train loss here: equal where both reach the target,
  # lower at the end for the faster run.
  assert row.test_loss_at_target.mean == pytest.approx(0, abs=0.01)
  assert row.final_test_loss.mean < -0.1
  slow = targets.compare(uniform, fast, target)
  assert slow.steps.geometric_mean == pytest.approx(2.0, rel=0.05)


SETTINGS = dataclasses.replace(presets.preset("fashion_mnist_5k", "mlp"),
                               amplitude=0.1,
                               sweep_amplitudes=(0.1, 1.0),
                               train_accuracy_target=0.8,
                               test_accuracy_target=0.7)


def _study(speeds):
  """curves and sweep, with each run's speed from `speeds` (1 if absent)."""
  curves = {
      name: _curve(speeds.get(name, 1.0), seed=i)
      for i, name in enumerate(presets.RUNS)
  }
  sweep = {
      "algorithm":
          "AdaSamp-01-SGD",
      "amplitude": [0.0, 0.1, 1.0],
      "curves": [
          curves["Unif-SGD"],
          _curve(speeds.get(0.1, 1.0), seed=10),
          _curve(speeds.get(1.0, 1.0), forward_passes=2, seed=11)
      ],
  }
  return curves, sweep


def test_the_table_compares_every_variant_with_its_baselines():
  curves, sweep = _study({"Shuffle-SGD": 1.25, 1.0: 2.0})
  tables = targets.table(curves, sweep, SETTINGS)
  assert [label for label, _ in tables] == [
      "Unif's final train loss", "train accuracy 0.8", "test accuracy 0.7"
  ]
  entries = {entry.name: entry for entry in tables[0][1]}
  assert set(entries) == {
      "AdaSamp-01-SGD, amplitude 0.1", "AdaSamp-01-SGD, amplitude 1",
      "AdaSamp-L1-SGD, amplitude 0.1", "AdaSamp-01-AdaGrad, amplitude 0.1",
      "AdaSamp-L1-AdaGrad, amplitude 0.1", "Shuffle-SGD", "IS-SGD"
  }
  for name in ("AdaSamp-01-SGD, amplitude 1", "IS-SGD"):
    assert list(entries[name].rows) == ["Unif-SGD", "Shuffle-SGD"]
  assert list(
      entries["AdaSamp-L1-AdaGrad, amplitude 0.1"].rows) == ["Unif-AdaGrad"]
  fastest = entries["AdaSamp-01-SGD, amplitude 1"].rows
  assert fastest["Unif-SGD"].steps.geometric_mean == pytest.approx(0.5,
                                                                   rel=0.05)
  assert fastest["Shuffle-SGD"].steps.geometric_mean == pytest.approx(1.25 / 2,
                                                                      rel=0.05)


def test_a_method_from_the_field_gets_its_own_line():
  # IS-SGD is 3x as fast as the uniform baselines, amplitude 1 only 1.2x.
  curves, sweep = _study({"IS-SGD": 3.0, 1.0: 1.2})
  summary = "\n".join(report.time_to_target_lines(curves, sweep, SETTINGS))
  assert "Headline" not in summary  # no setting picked after the fact
  line = next(
      text for text in summary.splitlines() if text.startswith("**IS-SGD**"))
  assert line.startswith("**IS-SGD** reaches Unif's final training loss in "
                         "0.33")
  assert "of Shuffle-SGD's example passes" in line


def test_the_summary_weighs_the_second_forward_pass_against_its_savings():
  curves, sweep = _study({})
  # The sweep under the other option: amplitude 1 at 'step' is twice as
  # fast in steps and forwards once; at 'updated' it forwards twice.
  sweep["other_utility_at"] = "step"
  sweep["other_curves"] = [_curve(1.0, seed=12), _curve(2.0, seed=13)]
  summary = "\n".join(report.time_to_target_lines(curves, sweep, SETTINGS))
  line = next(text for text in summary.splitlines()
              if text.startswith("**Where the utility"))
  cell = line.split("amplitude 1: ")[1]
  at_updated, at_step = (
      float(part.split()[0]) for part in cell.split(" against "))
  # 1 step-ratio x (2 + 2) / (1 + 2) passes, against 0.5 x 1.
  assert at_updated == pytest.approx(4 / 3, rel=0.05)
  assert at_step == pytest.approx(0.5, rel=0.05)


def test_a_collapsed_amplitude_is_marked_in_the_tables():
  curves, sweep = _study({1.0: 3.0})
  slowest = sweep["curves"][2]
  tables = targets.table(curves, sweep, SETTINGS, lambda c: c is slowest)
  entry = next(e for e in tables[0][1] if e.name.endswith("amplitude 1"))
  assert entry.collapsed
  assert not any(e.collapsed for e in tables[0][1] if e is not entry)


def test_wall_time_gives_the_seconds_of_each_timed_run():
  # Amplitude 1 takes half the steps, each 4/3 as dear (a second forward);
  # Shuffle-SGD takes 0.8 of Unif's.
  curves, sweep = _study({"Shuffle-SGD": 1.25, 1.0: 2.0})
  timed = [("AdaSamp-01-SGD, amplitude 1", sweep["curves"][2],
            "AdaSamp-01-SGD"),
           ("Shuffle-SGD", curves["Shuffle-SGD"], "Shuffle-SGD")]
  baselines = {name: curves[name] for name in ("Unif-SGD", "Shuffle-SGD")}
  wall = timing.markdown_of(baselines, timed, SETTINGS, "synthetic", "cmd",
                            "a CPU")
  to_loss = wall.split("## To Unif's final train loss")[1]
  row = next(line for line in to_loss.splitlines()
             if line.startswith("| AdaSamp-01-SGD, amplitude 1 |"))
  versus_unif, versus_shuffle = (
      float(cell.split()[0]) for cell in row.split("|")[2:4])
  assert versus_unif == pytest.approx(2 / 3, rel=0.05)
  assert versus_shuffle == pytest.approx(2 / 3 * 1.25, rel=0.05)
  # A step with a second forward pass costs 4/3 of Unif's.
  assert "| 1.33x |" in wall.split("## Training milliseconds")[1].split(
      "## To")[0]


def test_wall_time_times_the_runs_one_trial_at_a_time(tmp_path):
  runs = timing.plan(SETTINGS, (0.1, 1.0), 2, str(tmp_path), "digits",
                     "logistic")
  # Trial by trial, so that uniform and adaptive runs alternate.
  assert [run.trial for run in runs] == [0] * 7 + [1] * 7
  assert {
      (run.algorithm, run.amplitude, run.config.utility_at) for run in runs[:7]
  } == {("Unif-SGD", 0.0, SETTINGS.utility_at),
        ("Shuffle-SGD", 0.0, SETTINGS.utility_at), ("IS-SGD", 0.0, "step"),
        ("AdaSamp-01-SGD", 0.1, "updated"), ("AdaSamp-01-SGD", 0.1, "step"),
        ("AdaSamp-01-SGD", 1.0, "updated"), ("AdaSamp-01-SGD", 1.0, "step")}
