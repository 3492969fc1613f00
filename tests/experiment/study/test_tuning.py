"""Tuning by cross-validation: validation splits, the stages, the choice."""

import dataclasses
import json

import numpy as np
import pytest

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import tuning_report
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets


def test_tuning_reads_validation_splits_never_the_test_set(tmp_path, digits):
  full = digits
  # A test split that would give accuracy 0 or garbage if it were read.
  poisoned = dataclasses.replace(full,
                                 x_test=full.x_test[:1] * np.nan,
                                 y_test=full.y_test[:1])
  options = tuning_options.Options(dataset="digits",
                                   model="logistic",
                                   seeds="100,101",
                                   validation_size=300,
                                   sgd_learning_rates="0.1,0.3",
                                   sgd_lr_decays="0",
                                   adagrad_learning_rates="0.1",
                                   lr_schedules="inverse_time,linear",
                                   amplitudes="1",
                                   decays="0.5",
                                   utilities_at="updated",
                                   adaptive_lr_factors="2",
                                   output_dir=str(tmp_path),
                                   workers=1)
  settings = dataclasses.replace(presets.preset("digits", "logistic"),
                                 steps=4,
                                 eval_interval=2,
                                 batch_size=16)
  results = tuning.tune(options, poisoned, settings, log=lambda _: None)
  # Two SGD step sizes and one AdaGrad step size under each of the two
  # schedules for each algorithm of the rule (uniform ones and baselines),
  # each over both seeds.
  grid = {"sgd": 4, "adagrad": 2}
  assert len(results["step_sizes"]) == sum(
      grid[presets.RUNS[name][2]] for name in tuning_options.STAGE1)
  for row in results["step_sizes"]:
    assert len(row["final"]) == 2
    assert all(np.isfinite(row["final"]))  # validation, not the NaN test
  assert set(results["chosen_baseline_step_sizes"]) == set(presets.ALTERNATIVES)
  # One stage-2 setting for each of the four adaptive algorithms.
  assert sorted(r["algorithm"] for r in results["amplitude_decay"]) == sorted(
      tuning.ADAPTIVE)
  assert tuning.chosen(results) == (1.0, 0.5, "updated")
  # Stage 3: each adaptive algorithm at its rule's step size and twice it.
  assert len(results["adaptive_step_sizes"]) == 2 * len(tuning.ADAPTIVE)
  chosen_sgd = results["chosen_step_sizes"]["sgd"][0]
  assert results["chosen_adaptive_learning_rates"][0] in (chosen_sgd,
                                                          2 * chosen_sgd)
  # The JSON's settings are the chosen ones, not the preset's.
  tuned = presets.Settings(**results["settings"])
  assert (tuned.amplitude, tuned.decay) == (1.0, 0.5)
  assert [tuned.sgd_learning_rate,
          tuned.sgd_lr_decay] == results["chosen_step_sizes"]["sgd"]
  assert list(tuned.adaptive_learning_rates
             ) == results["chosen_adaptive_learning_rates"]
  for name in presets.ALTERNATIVES:
    assert list(tuned.learning_rate(
        name)) == results["chosen_baseline_step_sizes"][name]
  # Each algorithm's schedule is its stage-1 winner's, the adaptive ones
  # their rule's, as their stage 2 and 3 runs were.
  schedules = results["chosen_lr_schedules"]
  for name, (_, _, rule) in presets.RUNS.items():
    assert tuned.lr_schedule(name) == schedules.get(name, schedules[rule])
  for run_dir in (tmp_path / "stage2").iterdir():
    algorithm = run_dir.name.split("-a")[0]
    config = json.loads((run_dir / "seed100" / "config.json").read_text())
    assert config["lr_schedule"] == schedules[presets.RUNS[algorithm][2]]
  text = tuning_report.markdown(results, "cmd")
  for section in ("## Stage 1", "## Stage 2", "## Choice", "## Stage 3",
                  "Chosen (in bold)", *presets.ALTERNATIVES):
    assert section in text


def test_stage_1_tries_each_schedule_with_the_gammas_it_reads():
  options = tuning_options.Options(sgd_learning_rates="0.1,0.3",
                                   sgd_lr_decays="0,0.01",
                                   adagrad_learning_rates="0.1",
                                   lr_schedules="inverse_time,cosine")
  assert tuning.step_size_grid(options, "sgd") == [(0.1, 0.0, "inverse_time"),
                                                   (0.1, 0.01, "inverse_time"),
                                                   (0.3, 0.0, "inverse_time"),
                                                   (0.3, 0.01, "inverse_time"),
                                                   (0.1, 0.0, "cosine"),
                                                   (0.3, 0.0, "cosine")]
  assert tuning.step_size_grid(options,
                               "adagrad") == [(0.1, 0.0, "inverse_time"),
                                              (0.1, 0.0, "cosine")]
  with pytest.raises(ValueError, match="lr_schedules must be of"):
    tuning_options.Options(lr_schedules="cosine,step")


def test_validation_data_differs_per_seed():
  full = datasets.load("digits")
  first = tuning._validation_data(full, 300, False,
                                  design.Run("a", 0, 100, None))
  second = tuning._validation_data(full, 300, False,
                                   design.Run("a", 0, 101, None))
  assert len(first.y_test) == 300
  assert not np.array_equal(first.y_test, second.y_test)


# Per-seed noise of the synthetic stage 2 below: its standard error over the
# 5 seeds is 0.0016 / sqrt(5) = 0.0007.
NOISE = np.array([-0.002, -0.001, 0.0, 0.001, 0.002])


def _stage2_results(gains, final=None):
  """Tuning results whose stage 2 has each adaptive algorithm gain
  gains[setting] + NOISE over uniform (time-averaged), and final[setting] +
  NOISE at the end (0 where not given); a setting is an amplitude (the
  utility at 'updated') or (amplitude, utility_at)."""
  final = final or {}

  def key(setting):
    return setting if isinstance(setting, tuple) else (setting, "updated")

  return {
      "amplitude_decay": [{
          "amplitude": key(setting)[0],
          "decay": 0.5,
          "utility_at": key(setting)[1],
          "algorithm": algorithm,
          "auc_difference": (gain + NOISE).tolist(),
          "final_difference": (final.get(setting, 0.0) + NOISE).tolist(),
          "max_kl": [0.0] * len(NOISE)
      } for setting, gain in gains.items() for algorithm in tuning.ADAPTIVE]
  }


def test_setting_summary_gives_the_standard_error_over_seeds():
  summary = tuning.setting_summary(_stage2_results({0.3: 0.002}))
  entry = summary[(0.3, 0.5, "updated")]
  assert entry["mean"] == pytest.approx(0.002)
  assert entry["se"] == pytest.approx(np.std(NOISE, ddof=1) / np.sqrt(5))
  assert entry["worse"] == []


def test_a_smaller_amplitude_within_one_standard_error_is_chosen():
  # The best is 1 (+0.0020); 0.3 is 0.0005 below it, within its SE 0.0007.
  results = _stage2_results({0.1: 0.0010, 0.3: 0.0015, 1.0: 0.0020, 3.0: 0})
  assert tuning.chosen(results) == (0.3, 0.5, "updated")


def test_a_smaller_amplitude_beyond_one_standard_error_is_not_chosen():
  # 0.3 is 0.0009 below the best, more than its SE 0.0007; 0.1 further
  # still.
  results = _stage2_results({0.1: 0, 0.3: 0.0011, 1.0: 0.0020, 3.0: 0.0015})
  assert tuning.chosen(results) == (1.0, 0.5, "updated")


def test_an_amplitude_significantly_worse_than_uniform_is_not_chosen():
  # 0.1 is the best time-averaged, but every algorithm ends 0.01 below
  # uniform (t-interval below 0): set aside, 1 is the best, 0.3 the choice.
  gains = {0.1: 0.0030, 0.3: 0.0015, 1.0: 0.0020}
  results = _stage2_results(gains, final={0.1: -0.01})
  summary = tuning.setting_summary(results)
  assert len(summary[(0.1, 0.5, "updated")]["worse"]) == len(tuning.ADAPTIVE)
  assert tuning.chosen(results) == (0.3, 0.5, "updated")
  table = "\n".join(tuning_report._choice_lines(results))
  assert ("| **0.3** | **0.5** | **updated** | **+0.0015** | **0.0007** | "
          "**none** | **yes** |" in table)
  assert "| 1 | 0.5 | updated | +0.0020 | 0.0007 | none | best |" in table
  assert ("| 0.1 | 0.5 | updated | +0.0030 | 0.0007 | AdaSamp-01-SGD "
          "(final)" in table)


def test_where_every_setting_is_worse_the_rule_runs_over_all():
  gains = {0.3: 0.0015, 1.0: 0.0020}
  results = _stage2_results(gains, final={0.3: -0.01, 1.0: -0.01})
  assert tuning.chosen(results) == (0.3, 0.5, "updated")


def test_of_two_utility_options_at_the_chosen_amplitude_the_better():
  results = _stage2_results({
      (0.3, "updated"): 0.0015,
      (0.3, "step"): 0.0018,
      (1.0, "updated"): 0.0020,
  })
  assert tuning.chosen(results) == (0.3, 0.5, "step")


@pytest.mark.parametrize(
    "gain, advice",
    [
        (0.0005, tuning.UNIFORM),  # within one SE (0.0007) of 0
        (0.0020, [0.3, 0.5, "updated"]),
    ])
def test_uniform_is_recommended_where_no_setting_beats_it_by_one_se(
    gain, advice):
  results = _stage2_results({0.3: gain, 1.0: gain - 0.0004})
  assert tuning.recommended(results) == advice
  text = "\n".join(tuning_report._choice_lines(results))
  assert ("**uniform sampling**" in text) == (advice == tuning.UNIFORM)


def _run_with(tmp_path, name, forward_passes, accuracy):
  """A finished run whose records have `accuracy` at steps 0, 10, ...,
  each step forwarding its batch of 10 `forward_passes` times."""
  run_dir = tmp_path / name
  run_dir.mkdir()
  with open(run_dir / "metrics.jsonl", "w") as f:
    for k, value in enumerate(accuracy):
      f.write(
          json.dumps({
              "step": 10 * k,
              "test_accuracy": value,
              "kl": 0.0,
              "examples_forwarded": 100 * k * forward_passes,
              "examples_backpropagated": 100 * k
          }) + "\n")
  return design.Run("a", 0.0, 0,
                    config_lib.TrainConfig(output_dir=str(run_dir)))


def test_a_run_with_a_second_forward_pass_is_judged_on_uniforms_budget(
    tmp_path):
  # The same accuracy per step; a step that forwards twice costs 4 passes
  # to uniform's 3, so over uniform's budget it gets 3/4 of its steps.
  accuracy = [0.0, 0.2, 0.4, 0.6, 0.8]
  uniform = _run_with(tmp_path, "uniform", 1, accuracy)
  twice = _run_with(tmp_path, "twice", 2, accuracy)
  budget = tuning._budget(uniform)
  assert budget == 40 * 3 * 10
  ours = tuning._scores(twice, budget)[0]
  theirs = tuning._scores(uniform)[0]
  assert theirs == pytest.approx(0.4)
  # Within that budget it climbs to 0.6, not 0.8: it averages 0.3.
  assert ours == pytest.approx(0.3)


def test_tuned_settings_take_the_choices_and_keep_old_results_working():
  results = {
      "chosen_step_sizes": {
          "sgd": [0.3, 0.001],
          "adagrad": [0.1, 0.0]
      },
      "stage3_setting": [1.0, 0.5],
      "chosen_adaptive_learning_rates": [0.15, 0.3, 0.1, 0.2],
  }
  preset = presets.preset("fashion_mnist_5k", "mlp")
  old = tuning.tuned_settings(preset, results)
  assert old.baseline_learning_rates == preset.baseline_learning_rates
  results["chosen_baseline_step_sizes"] = {
      name: [0.6 + i, 0.01 * (presets.RUNS[name][2] == "sgd")]
      for i, name in enumerate(presets.ALTERNATIVES)
  }
  tuned = tuning.tuned_settings(preset, results)
  assert tuned.lr_schedule("Shuffle-SGD") == "inverse_time"
  results["chosen_lr_schedules"] = {
      "sgd": "cosine",
      "adagrad": "linear",
      **{
          name: "linear" for name in presets.ALTERNATIVES
      }
  }
  tuned = tuning.tuned_settings(preset, results)
  assert [tuned.lr_schedule(name) for name in presets.RUNS] == [
      "cosine", "cosine", "cosine", "linear", "linear", "linear", "linear",
      "linear"
  ]
  assert (tuned.amplitude, tuned.decay) == (1.0, 0.5)
  assert tuned.learning_rate("Unif-SGD") == (0.3, 0.001)
  assert tuned.learning_rate("AdaSamp-01-SGD") == (0.15, 0.001)
  assert tuned.learning_rate("AdaSamp-L1-AdaGrad") == (0.2, 0.0)
  for name, step_size in results["chosen_baseline_step_sizes"].items():
    assert list(tuned.learning_rate(name)) == step_size


def test_fixed_validation_holds_out_the_trainers_split_for_every_seed(digits):
  split = [
      tuning._validation_data(digits, 300, True, design.Run("a", 0, seed, None))
      for seed in (100, 101)
  ]
  held = datasets.with_validation(digits, 300)
  for data in split:
    np.testing.assert_array_equal(data.x_test, held.x_validation)
    np.testing.assert_array_equal(data.y_train, held.y_train)
  with pytest.raises(ValueError, match="must be a whole number, got 0.2"):
    tuning_options.Options(fixed_validation=True, validation_size=0.2)


def test_a_tuning_of_one_adaptive_algorithm_ranks_step_sizes_by_final_accuracy(
    tmp_path, digits):
  poisoned = dataclasses.replace(digits,
                                 x_test=digits.x_test[:1] * np.nan,
                                 y_test=digits.y_test[:1])
  options = tuning_options.Options(dataset="digits",
                                   model="logistic",
                                   seeds="100,101",
                                   validation_size=300,
                                   fixed_validation=True,
                                   adaptive="AdaSamp-01-SGD",
                                   score="final",
                                   sgd_learning_rates="0.01,1",
                                   sgd_lr_decays="0",
                                   lr_schedules="linear",
                                   amplitudes="1",
                                   decays="0.5",
                                   utilities_at="step",
                                   adaptive_lr_factors="2",
                                   output_dir=str(tmp_path),
                                   workers=1)
  preset = presets.preset("digits", "logistic")
  settings = dataclasses.replace(preset,
                                 steps=4,
                                 eval_interval=2,
                                 batch_size=16)
  results = tuning.tune(options, poisoned, settings, log=lambda _: None)
  # Stage 1: the SGD algorithms only; no AdaGrad run.
  assert [row["algorithm"] for row in results["step_sizes"]] == [
      "Unif-SGD", "Unif-SGD", "Shuffle-SGD", "Shuffle-SGD", "IS-SGD", "IS-SGD"
  ]
  assert not (tmp_path / "stage1" / "adagrad-eta0.1-linear").exists()
  for name in ("Unif-SGD", "Shuffle-SGD", "IS-SGD"):
    rows = [r for r in results["step_sizes"] if r["algorithm"] == name]
    best = max(rows, key=lambda r: np.mean(r["final"]))
    assert best["eta"] == tuning_report._stage1_winner(results, name)[0]
  assert {r["algorithm"] for r in results["amplitude_decay"]
         } == {"AdaSamp-01-SGD"}
  assert {r["algorithm"] for r in results["adaptive_step_sizes"]
         } == {"AdaSamp-01-SGD"}
  assert results["chosen_adaptive_learning_rates"][1:] == [None, None, None]
  # The algorithms left out keep the preset's settings.
  tuned = presets.Settings(**results["settings"])
  assert tuned.adagrad_learning_rate == preset.adagrad_learning_rate
  assert tuned.adagrad_lr_schedule == preset.adagrad_lr_schedule
  for name in ("AdaSamp-L1-SGD", "AdaSamp-01-AdaGrad", "AdaSamp-L1-AdaGrad"):
    assert tuned.learning_rate(name)[0] == settings.learning_rate(name)[0]
  assert tuned.learning_rate("AdaSamp-01-SGD")[0] == (
      results["chosen_adaptive_learning_rates"][0])
  text = tuning_report.markdown(results, "cmd")
  assert "holds out the same 300 training examples, the trainer's fixed" in (
      text)
  assert "ranked by the final validation accuracy" in text
