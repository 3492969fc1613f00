"""The budget-limited regime's design (tf_adasamp.experiment.study.budget):
its plan, its tuning's data and the irreducible model's charge."""

import numpy as np

from budget_curves import curve
from budget_curves import NUM_TRAIN
from budget_curves import TUNED
from tf_adasamp.experiment.study import budget
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.training import datasets


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
