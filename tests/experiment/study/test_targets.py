"""Time to target: first crossings, paired ratios and the report's table,
on synthetic trials whose answers are known."""

import math

import numpy as np
import pytest
from scipy import stats

from target_curves import curve as _curve
from target_curves import SETTINGS
from target_curves import study as _study
from tf_adasamp.experiment.study import targets


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


def test_a_collapsed_amplitude_is_marked_in_the_tables():
  curves, sweep = _study({1.0: 3.0})
  slowest = sweep["curves"][2]
  tables = targets.table(curves, sweep, SETTINGS, lambda c: c is slowest)
  entry = next(e for e in tables[0][1] if e.name.endswith("amplitude 1"))
  assert entry.collapsed
  assert not any(e.collapsed for e in tables[0][1] if e is not entry)
