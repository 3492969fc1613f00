"""The budget-limited regime's results (study.budget_results): its rules on
synthetic trials whose answers are known, each both ways, and its pages."""

import re

import numpy as np
import pytest

from budget_curves import curve
from budget_curves import NUM_TRAIN
from budget_curves import STEPS
from budget_curves import TUNED
from tf_adasamp.experiment.study import budget
from tf_adasamp.experiment.study import budget_results


@pytest.mark.parametrize("rate, rising", [(200, False), (5000, True)])
def test_the_budget_is_the_limit_only_while_validation_accuracy_rises(
    rate, rising):
  # Accuracy 1 - exp(-t / rate), read with an evaluation's noise: flat by
  # step 1350 at rate 200, still climbing at rate 5000.
  rng = np.random.default_rng(0)
  accuracy = (
      1 - np.exp(-np.outer(1 + 0.05 * rng.standard_normal(8), STEPS) / rate) +
      0.002 * rng.standard_normal((8, len(STEPS))))
  test = budget_results.still_rising({
      "step": STEPS,
      "validation_accuracy": accuracy
  })
  assert budget_results.rising(test) == rising
  expected = accuracy[:, -1] - (accuracy[:, -3] + accuracy[:, -2]) / 2
  assert test.mean == pytest.approx(expected.mean())


def _collected(variant=None, noisy=None):
  """Every run learning as Shuffle-SGD does, but `variant` and `noisy`
  (name -> curves) at the clean and the noisy level."""
  collected = {}
  for noise, replaced in ((0.0, variant or {}), (0.2, noisy or {})):
    collected[noise] = {
        name: replaced.get(name, curve(seed=i))
        for i, name in enumerate(budget.variants_at(noise))
    }
  return collected


@pytest.mark.parametrize("speed, test_gap, verdict", [
    (2.0, 0.0, "met"),
    (1.1, 0.0, "not met (it needs more than 0.77x the example passes)"),
    (2.0, -0.01, "not met (its final test accuracy is lower)"),
])
def test_each_mechanism_is_answered_against_shuffle(speed, test_gap, verdict):
  name = "Algorithm 1, uniform finish (last 1/8)"
  ours = curve(speed, seed=20)
  collected = _collected({name: ours})
  ours["test_accuracy"] = (collected[0.0]["Shuffle-SGD"]["test_accuracy"] +
                           test_gap)
  rows = {row.name: row for row in budget_results.rows(collected[0.0])}
  assert set(rows) == set(budget.VARIANTS) - {"Shuffle-SGD"}
  assert {row.baseline for row in rows.values()} == {"Shuffle-SGD"}
  assert budget_results.verdict(rows[name], "passes") == verdict
  # As fast as reshuffling: some trials never reach its final accuracy.
  assert budget_results.verdict(
      rows["Algorithm 1"], "passes").startswith("not met (it never reaches it")


def test_the_answer_reads_the_validation_split_and_the_final_test_accuracy():
  # Validation accuracy climbs twice as fast; the test split, which the
  # ladder must not read, 0.001 above Shuffle-SGD's throughout.
  fast = curve(2.0, seed=20)
  curves = _collected({"IS-SGD": fast})[0.0]
  fast["test_accuracy"] = curves["Shuffle-SGD"]["test_accuracy"] + 0.001
  row = next(row for row in budget_results.rows(curves) if row.name == "IS-SGD")
  assert row.ladder[-1].steps.geometric_mean < 0.77
  assert budget_results.verdict(row, "passes") == "met"


@pytest.mark.parametrize("test_gap, keeps", [(-0.01, False), (0.0, True),
                                             (-0.0005, True)])
def test_the_reducible_loss_keeps_accuracy_unless_shown_lower(test_gap, keeps):
  ours = curve(seed=20)
  collected = _collected(noisy={budget.REDUCIBLE: ours})
  # Per trial the baseline's, shifted by test_gap (and by noise of 0.001).
  noise = 0.001 * np.random.default_rng(0).standard_normal((6, 1))
  ours["test_accuracy"] = (collected[0.2]["Shuffle-SGD"]["test_accuracy"] +
                           test_gap + noise)
  row = next(row for row in budget_results.rows(collected[0.2])
             if row.name == budget.REDUCIBLE)
  assert budget_results.keeps_accuracy(row) == keeps


def _summary(collected):
  return budget_results.summary_markdown(collected, TUNED, "full", NUM_TRAIN, 6,
                                         [100, 101], "cmd")


def test_the_summary_opens_with_each_mechanisms_answer_and_holds_no_seconds():
  collected = _collected({"Algorithm 1": curve(2.0, seed=20)},
                         {budget.REDUCIBLE: curve(2.0, seed=21)})
  summary = _summary(collected)
  opening = summary.split("## The regime")[0]
  for heading in ("### Clean labels", "### 20% of the training labels flipped"):
    table = opening.split(heading)[1].split("\n\n")[1]
    assert table.startswith("| run | example passes to Shuffle-SGD's final "
                            "validation accuracy, ratio | steps, ratio |")
  clean, noisy = opening.split("### 20% of the training labels flipped")
  assert re.search(r"\| Algorithm 1 \| 0\.[45]\d\d \[.*\| met \|", clean)
  assert re.search(r"\| Algorithm 1, reducible-loss utility \| .*\| met \|",
                   noisy)
  assert "Shuffle-SGD gains" in opening and "Unif-SGD gains" in opening
  assert "3 epochs of Adam over the validation split" in summary
  assert "seeds 100, 101 (the reporting trials are seeds 0-5)" in summary
  assert "Shuffle-SGD 1 (1 - t / T), linear to 0" in summary
  assert "Algorithm 1 and its mechanisms 0.15 (1 + cos(pi t / T)) / 2" in (
      summary)
  assert "| run | share of the draws | at the end |" in noisy
  assert ("The reducible-loss utility under 20% flipped labels: its final "
          "test accuracy minus Shuffle-SGD's, +0.03") in noisy
  assert "**no loss shown**" in noisy
  # Deterministic: seconds change nothing in it.
  for curves in collected.values():
    for c in curves.values():
      c["train_seconds"] = 3 * c["train_seconds"]
  assert _summary(collected) == summary


def test_wall_time_judges_the_goal_in_seconds_the_irreducible_model_included():
  # The reducible-loss utility takes half the steps, but its irreducible
  # model costs as many seconds as Shuffle-SGD's whole run.
  fast = curve(2.0, seed=20)
  fast["irreducible_seconds"] = np.full_like(fast["train_seconds"],
                                             STEPS[-1] * 0.002)
  config = next(run.config
                for run in budget.plan(TUNED, 1, "")
                if run.variant == budget.REDUCIBLE)
  collected = _collected({
      budget.REDUCIBLE: budget.charged(fast, config, NUM_TRAIN),
      # Half the steps at twice the seconds a step.
      "Algorithm 1": curve(2.0, seed=21, seconds=0.004),
      "IS-SGD": curve(2.0, seed=22),
  })
  wall = budget_results.wall_time_markdown(collected, 6, "cmd", "a CPU")
  answer = wall.split("## Clean labels")[1].split("\n\n")[1]
  rows = {
      line.split(" | ")[0][2:]: line.split(" | ")
      for line in answer.splitlines()[2:]
  }

  def seconds(name):
    return float(rows[name][1].split()[0])

  assert seconds("IS-SGD") == pytest.approx(0.5, abs=0.05)
  assert rows["IS-SGD"][-1] == "met |"
  assert seconds("Algorithm 1") == pytest.approx(1.0, abs=0.05)
  assert seconds(budget.REDUCIBLE) > 1.3
  for name in ("Algorithm 1", budget.REDUCIBLE):
    assert rows[name][-1].startswith("not met (it needs more than 0.77x the "
                                     "training seconds)")
  # Its milliseconds per step leave the irreducible model out.
  per_step = [
      line for line in wall.splitlines()
      if line.startswith(f"| {budget.REDUCIBLE} | 2.000 | 3.0 |")
  ]
  assert per_step
