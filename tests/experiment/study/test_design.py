"""The experiment's plans and curves (tf_adasamp.experiment.study.design)."""

import dataclasses

import numpy as np
import pytest

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets
from tiny_settings import TINY


def test_plan_runs_each_algorithm_per_trial_with_the_trial_seed(tmp_path):
  runs = design.plan(TINY,
                     trials=2,
                     output_dir=str(tmp_path),
                     dataset="digits",
                     model="logistic")
  # Six algorithms, the reshuffling baseline, importance sampling and the
  # sweep's one new amplitude (1.0 is shared, and amplitude 0 is Unif-SGD),
  # per trial.
  assert len(runs) == 2 * (8 + 1)
  assert len({run.config.output_dir for run in runs}) == len(runs)
  for run in runs:
    assert run.config.seed == run.trial
    sampling, utility, optimizer = presets.RUNS[run.algorithm]
    assert (run.config.sampling, run.config.optimizer) == (sampling, optimizer)
    if sampling == "adaptive":
      assert run.config.utility == utility
  assert {run.amplitude for run in runs if run.algorithm == "AdaSamp-01-SGD"
         } == {0.5, 1.0}


def test_plan_runs_importance_sampling_with_its_own_sampler(tmp_path):
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")
  config = next(run.config for run in runs if run.algorithm == "IS-SGD")
  # Loss-proportional draws from the step's own losses, a third uniform,
  # unbiased weights; whatever the adaptive algorithms' amplitude.
  assert (config.sampling, config.utility,
          config.utility_at) == ("adaptive", "log_cross_entropy", "step")
  assert (config.amplitude, config.epsilon, config.beta) == (1.0, 1 / 3, 1.0)
  assert config.output_dir.endswith("IS-SGD/seed0")


def test_plan_runs_algorithm_1_whatever_the_trainers_defaults(tmp_path):
  # The library's defaults weigh losses (beta 1) and take the step's own
  # utility; the paper's algorithms set theirs.
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")
  for run in runs:
    if run.algorithm in presets.ALGORITHMS:
      assert run.config.beta == 0.0, run.algorithm
      assert run.config.utility_at == TINY.utility_at == "updated"


def test_plan_sweeps_both_utility_options_where_asked(tmp_path):
  settings = dataclasses.replace(TINY, sweep_both_utilities=True)
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  step = [
      run for run in runs
      if run.config.utility_at == "step" and run.algorithm in presets.ADAPTIVE
  ]
  assert sorted(run.amplitude for run in step) == [0.5, 1.0]
  assert all(run.algorithm == "AdaSamp-01-SGD" and
             run.config.output_dir.endswith(f"a{run.amplitude:g}-step/seed0")
             for run in step)
  assert len(runs) == len(design.plan(TINY, 1, str(tmp_path), "digits")) + 2


def test_plan_gives_adaptive_algorithms_their_own_step_sizes(tmp_path):
  settings = dataclasses.replace(TINY,
                                 adaptive_learning_rates=(0.2, 0.3, 0.4, 0.5))
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  rates = {run.algorithm: run.config.learning_rate for run in runs}
  assert rates == {
      "AdaSamp-01-SGD": 0.2,
      "AdaSamp-L1-SGD": 0.3,
      "Unif-SGD": 0.1,
      "AdaSamp-01-AdaGrad": 0.4,
      "AdaSamp-L1-AdaGrad": 0.5,
      "Unif-AdaGrad": 0.1,
      "Shuffle-SGD": 0.1,
      "IS-SGD": 0.1
  }
  with pytest.raises(ValueError, match="needs 4 values"):
    design.plan(dataclasses.replace(TINY, adaptive_learning_rates=(0.2,)), 1,
                str(tmp_path), "digits")


def test_plan_gives_baselines_their_own_step_sizes(tmp_path):
  names = presets.ALTERNATIVES
  gammas = tuple(0.001 * (presets.RUNS[name][2] == "sgd") for name in names)
  settings = dataclasses.replace(TINY,
                                 baseline_learning_rates=tuple(
                                     0.2 + 0.1 * i for i in range(len(names))),
                                 baseline_lr_decays=gammas)
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  rates = {
      run.algorithm: (run.config.learning_rate, run.config.lr_decay)
      for run in runs
  }
  for i, name in enumerate(names):
    assert rates[name] == pytest.approx((0.2 + 0.1 * i, gammas[i]))
  # The others keep their update rules'.
  assert rates["Unif-SGD"] == (0.1, 0.01)
  assert rates["AdaSamp-01-SGD"] == (0.1, 0.01)
  with pytest.raises(ValueError, match="baseline_learning_rates needs"):
    design.plan(dataclasses.replace(TINY, baseline_learning_rates=(0.2,) * 9),
                1, str(tmp_path), "digits")


def test_plan_gives_each_algorithm_its_step_size_schedule(tmp_path):
  settings = dataclasses.replace(
      TINY,
      sgd_lr_schedule="cosine",
      adaptive_lr_schedules=("linear", "inverse_time", "cosine", "linear"),
      baseline_lr_schedules=("linear", "inverse_time"))
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  schedules = {run.algorithm: run.config.lr_schedule for run in runs}
  assert schedules == {
      "AdaSamp-01-SGD": "linear",
      "AdaSamp-L1-SGD": "inverse_time",
      "Unif-SGD": "cosine",
      "AdaSamp-01-AdaGrad": "cosine",
      "AdaSamp-L1-AdaGrad": "linear",
      "Unif-AdaGrad": "inverse_time",
      "Shuffle-SGD": "linear",
      "IS-SGD": "inverse_time"
  }
  # Empty tuples: each update rule's.
  rules = dataclasses.replace(TINY, adagrad_lr_schedule="linear")
  assert {
      run.algorithm: run.config.lr_schedule
      for run in design.plan(rules, 1, str(tmp_path), "digits")
  } == {
      name: "linear" if rule == "adagrad" else "inverse_time"
      for name, (_, _, rule) in presets.RUNS.items()
  }
  with pytest.raises(ValueError, match="IS-SGD's lr_schedule must be one of"):
    design.plan(
        dataclasses.replace(TINY, baseline_lr_schedules=("linear", "step")), 1,
        str(tmp_path), "digits")


def test_plan_refuses_a_uniform_sweep_algorithm(tmp_path):
  settings = dataclasses.replace(TINY, sweep_algorithm="Unif-SGD")
  with pytest.raises(ValueError, match="adaptive algorithm"):
    design.plan(settings, 1, str(tmp_path), "digits")


def test_the_replication_runs_the_headline_comparison(tmp_path):
  settings = dataclasses.replace(TINY, amplitude=1.0, utility_at="step")
  runs = design.replication_plan(settings,
                                 2,
                                 str(tmp_path),
                                 "digits",
                                 model="logistic")
  assert {(run.algorithm, run.amplitude, run.config.utility_at) for run in runs
         } == {
             ("AdaSamp-01-SGD", 1.0, "step"),
             ("Unif-SGD", 0.0, "step"),
             ("Shuffle-SGD", 0.0, "step"),
             ("IS-SGD", 0.0, "step"),
         }
  assert sorted(run.trial for run in runs) == [0] * 4 + [1] * 4
  curves = design.curves_by_algorithm([])
  assert curves == {}
  assert presets.preset("fashion_mnist_5k_b",
                        "mlp") == presets.preset("fashion_mnist_5k", "mlp")


def test_mean_over_is_the_trapezoid_time_average():
  epochs = np.array([0, 1, 2, 4])
  np.testing.assert_allclose(design.mean_over(epochs, [3, 3, 3, 3]), 3)
  np.testing.assert_allclose(design.mean_over(epochs, epochs), 2)
  np.testing.assert_allclose(design.mean_over(epochs, epochs, until=2), 1)
  np.testing.assert_allclose(design.mean_over(epochs, epochs, since=2), 3)
  with pytest.raises(ValueError, match="fewer than 2 evaluations"):
    design.mean_over(epochs, epochs, until=0.5)
