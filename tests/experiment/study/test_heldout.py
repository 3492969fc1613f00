"""Held-out measures (tf_adasamp.experiment.study.heldout) on synthetic
trials whose answers are known, each rule both ways."""

import numpy as np
import pytest

from heldout_curves import curve
from heldout_curves import SETTINGS
from heldout_curves import STEPS
from heldout_curves import study
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import presets


def test_smoothing_is_a_centred_mean_over_three_evaluations():
  values = np.array([[0.0, 3.0, 6.0, 0.0, 3.0]])
  np.testing.assert_allclose(heldout.smoothed(values),
                             [[1.5, 3.0, 3.0, 3.0, 1.5]])
  np.testing.assert_allclose(heldout.smoothed(values[:, :1]), [[0.0]])


def test_each_variant_has_one_baseline():
  curves = {name: None for name in presets.RUNS}
  assert heldout.baseline_of("AdaSamp-01-SGD", curves) == "Shuffle-SGD"
  assert heldout.baseline_of("Unif-SGD", curves) == "Shuffle-SGD"
  assert heldout.baseline_of("IS-SGD", curves) == "Shuffle-SGD"
  assert heldout.baseline_of("AdaSamp-L1-AdaGrad", curves) == "Unif-AdaGrad"
  # Where no reshuffling ran, the with-replacement counterpart.
  del curves["Shuffle-SGD"]
  assert heldout.baseline_of("AdaSamp-01-SGD", curves) == "Unif-SGD"


@pytest.mark.parametrize("speed", [2.0, 0.5])
def test_the_ladder_reads_each_rung_off_both_curves(speed):
  rungs = heldout.ladder(curve(speed, seed=1), curve(1.0, seed=2))
  assert [r.label for r in rungs] == [
      "90% of the best", "95% of the best", "98% of the best",
      "99% of the best", "99.5% of the best", "the final"
  ]
  # The slower runs reach the first rung only, at the end.
  for rung in rungs[:3] if speed > 1 else rungs[:1]:
    assert rung.steps.geometric_mean == pytest.approx(1 / speed, rel=0.1)
    assert rung.seconds.geometric_mean == pytest.approx(1 / speed, rel=0.1)
  if speed < 1:
    assert rungs[-1].steps.adaptive_never == 6


def test_a_second_forward_pass_is_charged_in_passes_and_seconds():
  rungs = heldout.ladder(curve(2.0, forward_passes=2, seed=1), curve(1.0,
                                                                     seed=2))
  assert rungs[0].steps.geometric_mean == pytest.approx(0.5, rel=0.1)
  assert rungs[0].passes.geometric_mean == pytest.approx(0.5 * 4 / 3, rel=0.1)
  assert rungs[0].seconds.geometric_mean == pytest.approx(0.5 * 2 / 1.5,
                                                          rel=0.1)


def test_one_lucky_evaluation_does_not_reach_a_target():
  baseline = curve(1.0, seed=2)
  lucky = curve(1.0, seed=2)
  # One evaluation jumps to the plateau early, then falls back.
  lucky["test_accuracy"] = lucky["test_accuracy"].copy()
  lucky["test_accuracy"][:, 2] = 0.9
  raw = heldout.ladder(lucky, baseline)[0]
  assert raw.steps.geometric_mean == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("speed, sign", [(2.0, +1), (0.5, -1)])
def test_at_a_fraction_of_the_budget_the_faster_runs_are_ahead(speed, sign):
  budget = heldout.at_budget(curve(speed, seed=1), curve(1.0, seed=2))
  assert [b.fraction for b in budget] == [0.1, 0.25, 0.5, 1.0]
  quarter = budget[1]
  assert sign * quarter.accuracy.mean > 0.05 and quarter.accuracy.high * (
      quarter.accuracy.low) > 0
  assert sign * quarter.loss.mean < 0
  # At the whole budget both are near the plateau.
  assert abs(budget[-1].accuracy.mean) < abs(quarter.accuracy.mean)


def test_the_ladder_and_the_budget_read_the_split_they_are_given():
  # Twice as fast on the test split; on the validation split, the
  # baseline's own curves.
  ours, theirs = curve(2.0, seed=1), curve(1.0, seed=2)
  for c in (ours, theirs):
    c["validation_accuracy"] = theirs["test_accuracy"]
    c["validation_loss"] = theirs["test_loss"]
  on_test = heldout.ladder(ours, theirs)[0]
  on_validation = heldout.ladder(ours, theirs, split="validation")[0]
  assert on_test.steps.geometric_mean == pytest.approx(0.5, rel=0.1)
  assert on_validation.steps.geometric_mean == pytest.approx(1.0)
  quarter = heldout.at_budget(ours, theirs, split="validation")[1]
  assert quarter.accuracy.mean == quarter.loss.mean == 0
  assert heldout.at_budget(ours, theirs)[1].accuracy.mean > 0.05
  # The final test accuracy is the test split's whatever the split.
  row = heldout.rows({"Shuffle-SGD": theirs}, [("ours", ours, "Unif-SGD")],
                     split="validation")[0]
  assert row.ladder[0].steps.geometric_mean == pytest.approx(1.0)
  assert row.final_accuracy.mean == pytest.approx(
      (ours["test_accuracy"][:, -1] - theirs["test_accuracy"][:, -1]).mean())


def test_stopping_on_validation_reads_test_accuracy_where_validation_peaks():
  ours, theirs = curve(1.0, seed=1), curve(1.0, seed=2)
  assert heldout.stopped(ours, theirs) is None  # no validation split
  for c, peak in ((ours, 5), (theirs, 15)):
    validation = np.zeros_like(c["test_accuracy"])
    validation[:, peak] = 1.0
    c["validation_accuracy"] = validation
  test = heldout.stopped(ours, theirs)
  # Smoothed over three evaluations, the peak is first reached just before
  # `peak`.
  expected = (ours["test_accuracy"][:, 4] - theirs["test_accuracy"][:, 14])
  assert test.mean == pytest.approx(expected.mean())


@pytest.mark.parametrize("speed, final_gap, verdict", [
    (2.0, 0.0, "met"),
    (1.2, 0.0, "not met"),
    (2.0, -0.02, "not met"),
])
def test_the_answer_is_the_chosen_settings_against_reshuffling(
    speed, final_gap, verdict):
  curves, sweep = study(speed, final_gap)
  text = "\n".join(heldout.lines(curves, sweep, SETTINGS, trials=6))
  answer = next(line for line in text.splitlines() if "Held-out answer" in line)
  assert "AdaSamp-01-SGD, amplitude 1 (trials 0-5" in answer
  assert "of Shuffle-SGD's example passes" in answer
  assert f"**{verdict}**" in answer
  # Every variant has its one baseline in every table.
  assert "| Unif-AdaGrad | " not in text.split("| run | baseline |")[0]
  assert "| AdaSamp-01-AdaGrad, amplitude 1 | Unif-AdaGrad |" in text


def test_the_replication_answers_on_the_second_subset_and_on_both():
  curves, sweep = study(2.0)
  # On the second subset the setting is no faster than reshuffling.
  replica = {
      name: curve(1.0, seed=40 + i)
      for i, name in enumerate(("Unif-SGD", "Shuffle-SGD", "AdaSamp-01-SGD"))
  }
  lines = heldout.replication_lines(curves, sweep, SETTINGS, replica, "b")
  text = "\n".join(lines)
  on_b = next(
      line for line in lines if line.startswith("**On the second subset**"))
  both = next(line for line in lines if line.startswith("**Both subsets**"))
  assert "**not met**" in on_b and "trials 0-5" in on_b
  assert "(12 trials, 6 on each subset)" in both
  assert "on b: other training, test and validation images" in text
  # Pooled, the ratio lies between the two subsets' (2x faster and 1x).
  ratio = float(both.split("it takes ")[1].split()[0])
  assert 0.5 < ratio < 1.0


def test_pooling_joins_the_trials_and_keeps_the_evaluations():
  one, two = curve(1.0, trials=3, seed=1), curve(1.0, trials=4, seed=2)
  both = heldout.pooled(one, two)
  assert both["test_accuracy"].shape == (7, len(STEPS))
  np.testing.assert_array_equal(both["step"], STEPS)


def test_the_goal_needs_the_target_reached_in_every_trial():
  curves, sweep = study(2.0)
  adaptive = sweep["curves"][1]
  # Two trials plateau a point below: they never reach reshuffling's final
  # held-out accuracy, however fast the others do.
  adaptive["test_accuracy"][:2] = adaptive["test_accuracy"][:2] - 0.01
  row = heldout.rows(
      curves, [("AdaSamp-01-SGD, amplitude 1", adaptive, "AdaSamp-01-SGD")])[0]
  assert heldout.shortfalls(row)[0] == "it never reaches it in 2 of 6 trials"
  row = heldout.rows(curves,
                     [("AdaSamp-01-SGD, amplitude 1",
                       study(2.0)[1]["curves"][1], "AdaSamp-01-SGD")])[0]
  assert not heldout.shortfalls(row)
