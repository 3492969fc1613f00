"""The budget-limited regime (tf_adasamp.experiment.study.budget): its plan,
and its rules on synthetic trials whose answers are known, each both ways."""

import dataclasses
import re

import numpy as np
import pytest

from tf_adasamp.experiment.study import budget
from tf_adasamp.experiment.study import budget_results
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.training import datasets

STEPS = np.arange(0, 1501, 100)
BATCH = 100
NUM_TRAIN = 50000
TUNED = dataclasses.replace(budget.settings_for("full"),
                            sgd_learning_rate=0.3,
                            sgd_lr_schedule="cosine",
                            baseline_learning_rates=(1.0, 0.1),
                            baseline_lr_decays=(0.0, 0.001),
                            baseline_lr_schedules=("linear", "inverse_time"),
                            adaptive_learning_rates=(0.15, 0.3, 0.1, 0.1),
                            amplitude=1.0)


def test_plan_runs_each_variant_with_its_mechanism_on_the_fixed_split(tmp_path):
  runs = budget.plan(TUNED, 2, str(tmp_path))
  per_trial = len(budget.VARIANTS) + len(budget.NOISY)
  assert len(runs) == 2 * per_trial
  assert len({run.config.output_dir for run in runs}) == len(runs)
  # Trial by trial: the one-at-a-time pass alternates uniform and adaptive
  # runs within each.
  assert [run.trial for run in runs] == [0] * per_trial + [1] * per_trial
  for run in runs:
    config = run.config
    assert (config.dataset, config.model) == ("fashion_mnist", "mlp")
    assert config.validation_size == 10000 and config.train_eval_size == 10000
    assert config.seed == run.trial and config.label_noise == run.noise
    assert (config.steps, config.eval_interval,
            config.early_evaluations) == (1500, 100, 3)
    algorithm, fields = budget.VARIANTS[run.variant]
    assert run.algorithm == algorithm
    for field, value in fields.items():
      assert getattr(config, field) == value
    if algorithm == budget.ALGORITHM:
      # The tuned amplitude and step size, the utility of the step's own
      # logits.
      assert (config.amplitude, config.learning_rate) == (1.0, 0.15)
      assert config.utility_at == "step" and config.lr_schedule == "cosine"
  by_variant = {run.variant: run.config for run in runs if run.noise == 0}
  shuffle = by_variant["Shuffle-SGD"]
  assert (shuffle.sampling, shuffle.learning_rate,
          shuffle.lr_schedule) == ("reshuffle", 1.0, "linear")
  assert by_variant["Unif-SGD"].sampling == "uniform"
  assert by_variant["Unif-SGD"].lr_schedule == "cosine"
  importance = by_variant["IS-SGD"]
  assert (importance.learning_rate, importance.lr_decay,
          importance.lr_schedule) == (0.1, 0.001, "inverse_time")
  assert importance.beta == 1.0 and importance.utility == "log_cross_entropy"
  assert {run.variant for run in runs if run.noise} == set(budget.NOISY)
  assert {run.noise for run in runs} == {0.0, 0.2}


def test_the_tuning_reads_the_runs_validation_split_and_never_the_test_set(
    digits):
  settings = budget.settings_for("full")
  fields = budget.tuning_fields("full", settings)
  options = tuning_options.Options(**fields)
  assert options.fixed_validation and options.score == "final"
  assert options.validation_size == budget.SCALES["full"].validation_size
  assert tuning_options.stage1_algorithms(options) == ("Unif-SGD",
                                                       "Shuffle-SGD", "IS-SGD")
  assert tuning_options.adaptive_algorithms(options) == (budget.ALGORITHM,)
  # The tuning seeds are not the reporting trials'.
  seeds = [int(s) for s in tuning_options.floats(options.seeds)]
  assert not set(seeds) & set(range(budget.SCALES["full"].trials))
  # What a tuning run trains and is scored on: the runs' training images
  # and their validation split; the test images nowhere.
  held = datasets.with_validation(digits, 300)
  run = budget.plan(settings, 1, "")[0]
  tuned = tuning._validation_data(digits, 300, True, run)
  np.testing.assert_array_equal(tuned.x_test, held.x_validation)
  np.testing.assert_array_equal(tuned.x_train, held.x_train)
  test_rows = {row.tobytes() for row in digits.x_test}
  assert not any(row.tobytes() in test_rows for row in tuned.x_test)


def curve(speed=1.0, trials=6, seed=0, seconds=0.002):
  """Runs whose validation and test accuracy climb to 0.85 `speed` times
  as fast as speed 1's (a few percent apart per trial), `seconds` a
  step."""
  rng = np.random.default_rng(seed)
  rates = speed * (1 + 0.03 * rng.standard_normal(trials))
  progress = 1 - np.exp(-np.outer(rates, STEPS) / 500)
  ones = np.ones(trials)
  accuracy = 0.1 + 0.75 * progress
  return {
      "step": STEPS,
      "epoch": STEPS * BATCH / NUM_TRAIN,
      "train_loss": 2 * (1 - progress) + 0.01,
      "validation_accuracy": accuracy,
      "validation_loss": 2.2 * (1 - progress) + 0.3,
      "test_accuracy": accuracy.copy(),
      "test_loss": 2.2 * (1 - progress) + 0.3,
      "examples_forwarded": np.outer(ones, STEPS * BATCH),
      "examples_backpropagated": np.outer(ones, STEPS * BATCH),
      "train_seconds": np.outer(ones, STEPS * seconds),
      "flipped_mass": np.full((trials, len(STEPS)), 0.2),
  }


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


def test_the_irreducible_model_is_charged_to_the_reducible_loss_alone():
  runs = {run.variant: run.config for run in budget.plan(TUNED, 1, "")}
  reducible = runs[budget.REDUCIBLE]
  # 3 epochs over the 10,000 validation images in batches of 100, then a
  # forward pass over the 50,000 training images.
  assert budget.irreducible_passes(reducible, NUM_TRAIN) == (80000, 30000)
  plain = curve()
  plain["irreducible_seconds"] = np.full_like(plain["train_seconds"], 7.0)
  charged = budget.charged(plain, reducible, NUM_TRAIN)
  np.testing.assert_array_equal(charged["examples_forwarded"],
                                plain["examples_forwarded"] + 80000)
  np.testing.assert_array_equal(charged["examples_backpropagated"],
                                plain["examples_backpropagated"] + 30000)
  np.testing.assert_array_equal(charged["train_seconds"],
                                plain["train_seconds"] + 7.0)
  assert budget.charged(plain, runs["Algorithm 1"], NUM_TRAIN) is plain


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
