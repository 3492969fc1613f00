"""The tuning's three stages and its rule: step sizes, then amplitude,
decay and utility option against uniform, then each adaptive algorithm's own
step size, on validation splits of the training data; `chosen` picks
stage 2's setting, `tuned_settings` carries the choices into a preset.
Its options are tuning_options', its report tuning_report's."""

import dataclasses
import functools
import os
import time

import numpy as np

from tf_adasamp import _validation
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

ADAPTIVE = presets.ADAPTIVE
ALTERNATIVES = presets.ALTERNATIVES


def _validation_data(full, size, fixed, run):
  """The tuning data of `run`: `full` less a validation set, which stands
  in for the test split (dropped): drawn with the run's seed, or, where
  `fixed`, the trainer's fixed split of `size` examples
  (datasets.with_validation's)."""
  seed = datasets.VALIDATION_SEED if fixed else run.trial
  return datasets.validation_split(full, size, seed=seed)


def _run(algorithm, trial, output_dir, base, **fields):
  config = dataclasses.replace(base,
                               seed=trial,
                               output_dir=os.path.join(output_dir,
                                                       f"seed{trial}"),
                               **fields)
  return design.Run(algorithm, fields.get("amplitude", 0.0), trial, config)


def _adaptive_run(algorithm, seed, directory, base, step_size, amplitude, decay,
                  utility_at):
  """A run of adaptive `algorithm` at `step_size`, (eta, gamma, schedule)."""
  _, utility, rule = presets.ALGORITHMS[algorithm]
  eta, gamma, schedule = step_size
  return _run(algorithm,
              seed,
              directory,
              base,
              sampling="adaptive",
              utility=utility,
              optimizer=rule,
              learning_rate=eta,
              lr_decay=gamma,
              lr_schedule=schedule,
              amplitude=amplitude,
              decay=decay,
              utility_at=utility_at)


def _passes(records):
  """Example passes (forward + backward, a backward counted as
  targets.BACKWARD_COST forward ones) at each of `records`."""
  return np.array([
      r["examples_forwarded"] +
      targets.BACKWARD_COST * r["examples_backpropagated"] for r in records
  ])


def _scores(run, budget=None):
  """(time-averaged, final) validation accuracy and max KL of a finished
  run. Time-averaged: the area under the validation-accuracy curve over
  the first `budget` example passes (the run's own, where None), divided
  by them, so a run whose steps cost more passes (a second forward pass)
  is judged on the same budget as the uniform run it is compared with."""
  records = run_files.read_metrics(run.config.output_dir)
  passes = _passes(records)
  accuracy = np.array([r["test_accuracy"] for r in records])
  budget = passes[-1] if budget is None else min(budget, passes[-1])
  keep = passes < budget
  times = np.append(passes[keep], budget)
  values = np.append(accuracy[keep], np.interp(budget, passes, accuracy))
  return (float(design.mean_over(times, values)), float(accuracy[-1]),
          max(r["kl"] for r in records))


def _budget(run):
  """A run's example passes at its end."""
  return float(_passes(run_files.read_metrics(run.config.output_dir))[-1])


def tune(options, full_data, settings, log=print):
  """Runs the three stages; returns the results as a JSON-ready dict."""
  _validation.positive_int(options.workers, "workers")
  tuning_options.names(options.utilities_at)
  seeds = [int(s) for s in tuning_options.floats(options.seeds)]
  base = config_lib.TrainConfig(
      dataset=options.dataset,
      data_dir=options.data_dir,
      model=options.model,
      steps=settings.steps,
      eval_interval=settings.eval_interval,
      batch_size=settings.batch_size,
      utility_at=settings.utility_at,
      beta=0.0,  # Algorithm 1, as design.run_config
      jit_compile=options.jit_compile,
      train_eval_size=options.train_eval_size,
      output_dir=options.output_dir,
      resume=True)
  data = functools.partial(_validation_data, full_data, options.validation_size,
                           options.fixed_validation)

  def train(stage, runs):
    log(f"{stage}: {len(runs)} runs")
    start = time.time()
    pool.run_all(runs, data, workers=options.workers)
    log(f"{stage}: {len(runs)} runs in {time.time() - start:.0f} s")

  results = {"options": dataclasses.asdict(options)}
  uniform = _stage1(options, seeds, base, train, results)
  stage2 = _stage2(options, seeds, base, train, results, uniform)
  _stage3(options, base, train, results, uniform, stage2)
  results["settings"] = dataclasses.asdict(tuned_settings(settings, results))
  return results


def tuned_settings(settings, results):
  """Settings with the tuning's choices.

  Args:
    settings: presets.Settings to start from.
    results: tune's results, or its JSON file read back.

  Returns:
    `settings` with the chosen step sizes (the baselines' too where the
    results have them), amplitude, decay and utility option.
  """
  step_sizes = results["chosen_step_sizes"]
  # A tuning of some update rules (--adaptive) leaves the others' as they
  # are.
  sgd_eta, sgd_gamma = step_sizes.get(
      "sgd", (settings.sgd_learning_rate, settings.sgd_lr_decay))
  adagrad_eta, _ = step_sizes.get("adagrad",
                                  (settings.adagrad_learning_rate, 0.0))
  # A tuning that did not vary the utility option chose amplitude and decay.
  amplitude, decay, *utility_at = results["stage3_setting"]
  utility_at = utility_at[0] if utility_at else settings.utility_at
  # Results of a tuning before the baselines had their own step sizes, or
  # before the schedules were tuned, leave the settings' own.
  own = results.get("chosen_baseline_step_sizes")
  baselines = {}
  if own is not None:
    own = {
        name: own.get(name, settings.learning_rate(name))
        for name in ALTERNATIVES
    }
    baselines = dict(
        baseline_learning_rates=tuple(own[name][0] for name in ALTERNATIVES),
        baseline_lr_decays=tuple(own[name][1] for name in ALTERNATIVES))
  schedules = results.get("chosen_lr_schedules")
  if schedules is not None:
    schedules = {
        "sgd": settings.sgd_lr_schedule,
        "adagrad": settings.adagrad_lr_schedule,
        **{
            name: settings.lr_schedule(name) for name in ALTERNATIVES
        },
        **schedules
    }
    baselines.update(sgd_lr_schedule=schedules["sgd"],
                     adagrad_lr_schedule=schedules["adagrad"],
                     baseline_lr_schedules=tuple(
                         schedules[name] for name in ALTERNATIVES))
  # None where the tuning left an adaptive algorithm out (--adaptive).
  adaptive = tuple(
      settings.learning_rate(name)[0] if eta is None else eta
      for name, eta in zip(ADAPTIVE, results["chosen_adaptive_learning_rates"]))
  return dataclasses.replace(settings,
                             sgd_learning_rate=sgd_eta,
                             sgd_lr_decay=sgd_gamma,
                             adagrad_learning_rate=adagrad_eta,
                             amplitude=amplitude,
                             decay=decay,
                             utility_at=utility_at,
                             adaptive_learning_rates=adaptive,
                             **baselines)


def step_size_grid(options, rule):
  """Stage 1's step sizes of update rule `rule`: (eta, gamma, schedule) for
  every schedule of `options.lr_schedules`, SGD's inverse_time over every
  gamma of the grid, the others (and AdaGrad's) at gamma 0."""
  etas = tuning_options.floats(options.sgd_learning_rates if rule ==
                               "sgd" else options.adagrad_learning_rates)
  grid = []
  for schedule in tuning_options.words(options.lr_schedules):
    gammas = (tuning_options.floats(options.sgd_lr_decays)
              if rule == "sgd" and schedule == "inverse_time" else [0.0])
    grid += [(eta, gamma, schedule) for eta in etas for gamma in gammas]
  return grid


def _stage1_directory(options, prefix, step_size):
  eta, gamma, schedule = step_size
  # inverse_time keeps the directories of the tuning before the schedules.
  tail = f"gamma{gamma:g}" if schedule == "inverse_time" else schedule
  return os.path.join(options.output_dir, "stage1",
                      f"{prefix}-eta{eta:g}-{tail}")


def _stage1(options, seeds, base, train, results):
  """Step sizes of the uniform algorithms and the baselines; {algorithm:
  ((eta, gamma, schedule), runs at those)}."""
  stage1 = {}
  for algorithm in tuning_options.stage1_algorithms(options):
    sampling, utility, rule = presets.RUNS[algorithm]
    # Uniform runs keep the directories of the tuning before the baselines.
    prefix = rule if sampling == "uniform" else algorithm
    stage1[algorithm] = {
        step_size: [
            _run(algorithm,
                 seed,
                 _stage1_directory(options, prefix, step_size),
                 base,
                 sampling=sampling,
                 utility=utility,
                 optimizer=rule,
                 learning_rate=step_size[0],
                 lr_decay=step_size[1],
                 lr_schedule=step_size[2],
                 **presets.COMPETITOR_SAMPLERS.get(algorithm, {}))
            for seed in seeds
        ] for step_size in step_size_grid(options, rule)
    }
  train("stage 1, step sizes", [
      run for grid in stage1.values() for runs in grid.values() for run in runs
  ])
  results["step_sizes"] = []
  winners = {}
  for algorithm, grid in stage1.items():
    rows = {}
    for (eta, gamma, schedule), runs in grid.items():
      scores = np.array([_scores(run)[:2] for run in runs])
      rows[(eta, gamma, schedule)] = {
          "algorithm": algorithm,
          "rule": presets.RUNS[algorithm][2],
          "eta": eta,
          "gamma": gamma,
          "schedule": schedule,
          "auc": scores[:, 0].tolist(),
          "final": scores[:, 1].tolist()
      }
    results["step_sizes"] += rows.values()
    best = max(rows.items(), key=lambda item: _score(options, item[1]))[0]
    winners[algorithm] = (best, grid[best])
  uniform = [name for name in winners if name not in ALTERNATIVES]
  alternatives = [name for name in winners if name in ALTERNATIVES]
  results["chosen_step_sizes"] = {
      presets.RUNS[name][2]: list(winners[name][0][:2]) for name in uniform
  }
  results["chosen_baseline_step_sizes"] = {
      name: list(winners[name][0][:2]) for name in alternatives
  }
  results["chosen_lr_schedules"] = {
      **{
          presets.RUNS[name][2]: winners[name][0][2] for name in uniform
      },
      **{
          name: winners[name][0][2] for name in alternatives
      }
  }
  return {presets.RUNS[name][2]: winners[name] for name in uniform}


def _score(options, row):
  """A stage 1 or 3 row's mean validation accuracy by options.score."""
  return np.mean(row["auc" if options.score == "time_averaged" else "final"])


def _stage2(options, seeds, base, train, results, uniform):
  """Amplitude, decay and utility option of the adaptive algorithms against
  uniform, each run judged on its uniform counterpart's budget of example
  passes; {(amplitude, decay, utility_at, algorithm): runs}."""
  count = options.stage2_seeds or len(seeds)
  stage2 = {}
  for amplitude in tuning_options.floats(options.amplitudes):
    for decay in tuning_options.floats(options.decays):
      for utility_at in tuning_options.names(options.utilities_at):
        for algorithm in tuning_options.adaptive_algorithms(options):
          step_size = uniform[presets.ALGORITHMS[algorithm][2]][0]
          stage2[(amplitude, decay, utility_at, algorithm)] = [
              _adaptive_run(
                  algorithm, seed,
                  os.path.join(
                      options.output_dir, "stage2",
                      f"{algorithm}-a{amplitude:g}-d{decay:g}-{utility_at}"),
                  base, step_size, amplitude, decay, utility_at)
              for seed in seeds[:count]
          ]
  train("stage 2, amplitude, decay and utility option",
        [run for runs in stage2.values() for run in runs])
  results["stage2_seeds"] = seeds[:count]
  results["amplitude_decay"] = []
  for (amplitude, decay, utility_at, algorithm), runs in stage2.items():
    counterparts = uniform[presets.ALGORITHMS[algorithm][2]][1][:count]
    theirs = np.array([_scores(run)[:2] for run in counterparts])
    ours = np.array([
        _scores(run, _budget(counterpart))
        for run, counterpart in zip(runs, counterparts)
    ])
    results["amplitude_decay"].append({
        "amplitude": amplitude,
        "decay": decay,
        "utility_at": utility_at,
        "algorithm": algorithm,
        "auc_difference": (ours[:, 0] - theirs[:, 0]).tolist(),
        "final_difference": (ours[:, 1] - theirs[:, 1]).tolist(),
        "max_kl": ours[:, 2].tolist()
    })
  return stage2


def _stage3(options, base, train, results, uniform, stage2):
  """Each adaptive algorithm's own step size at the chosen amplitude, decay
  and utility option."""
  amplitude, decay, utility_at = chosen(results)
  grid, new_runs = {}, []
  for algorithm in tuning_options.adaptive_algorithms(options):
    (eta, gamma, schedule), _ = uniform[presets.ALGORITHMS[algorithm][2]]
    grid[(algorithm, eta)] = stage2[(amplitude, decay, utility_at, algorithm)]
    for factor in tuning_options.floats(options.adaptive_lr_factors):
      grid[(algorithm, eta * factor)] = [
          _adaptive_run(
              algorithm, run.trial,
              os.path.join(options.output_dir, "stage3",
                           f"{algorithm}-eta{eta * factor:g}-{utility_at}"),
              base, (eta * factor, gamma, schedule), amplitude, decay,
              utility_at) for run in grid[(algorithm, eta)]
      ]
      new_runs += grid[(algorithm, eta * factor)]
  train("stage 3, adaptive step sizes", new_runs)
  grid_algorithms = {algorithm for algorithm, _ in grid}
  results["stage3_setting"] = [amplitude, decay, utility_at]
  results["recommended"] = recommended(results)
  results["adaptive_step_sizes"] = []
  for (algorithm, eta), runs in grid.items():
    scores = np.array([_scores(run)[:2] for run in runs])
    results["adaptive_step_sizes"].append({
        "algorithm": algorithm,
        "eta": eta,
        "auc": scores[:, 0].tolist(),
        "final": scores[:, 1].tolist()
    })
  # None for an algorithm the tuning left out (--adaptive).
  results["chosen_adaptive_learning_rates"] = [
      max((row
           for row in results["adaptive_step_sizes"]
           if row["algorithm"] == algorithm),
          key=lambda row: _score(options, row))["eta"]
      if algorithm in grid_algorithms else None
      for algorithm in ADAPTIVE
  ]


def setting_summary(results):
  """Stage 2's settings as `chosen` compares them.

  Args:
    results: tune's results, or its JSON file read back.

  Returns:
    {(amplitude, decay, utility_at): {"gains": per seed, the Δ
    time-averaged validation accuracy averaged over the adaptive
    algorithms; "mean" and "se" (its standard error) of those over the
    seeds; "worse": the algorithms worse than uniform at 95% confidence,
    time-averaged or final}}. utility_at is None in the results of a tuning
    that did not vary it.
  """
  gains, worse = {}, {}
  for row in results["amplitude_decay"]:
    key = (row["amplitude"], row["decay"], row.get("utility_at"))
    gains.setdefault(key, []).append(row["auc_difference"])
    worse.setdefault(key, [])
    for metric in ("auc_difference", "final_difference"):
      if verdicts.paired_test(row[metric]).high < 0:  # excludes 0 below it
        worse[key].append(f"{row['algorithm']} ({metric.split('_')[0]})")
  summary = {}
  for key, rows in gains.items():
    per_seed = np.mean(rows, axis=0)
    summary[key] = {
        "gains": per_seed.tolist(),
        "mean": float(per_seed.mean()),
        "se": (float(per_seed.std(ddof=1) /
                     np.sqrt(len(per_seed))) if len(per_seed) > 1 else 0.0),
        "worse": worse[key]
    }
  return summary


def chosen(results):
  """Stage 2's (amplitude, decay, utility_at): the smallest amplitude
  within one standard error of the best, among the settings with no
  algorithm worse than uniform.

  A setting's gain is, per tuning seed, the time-averaged validation
  accuracy of each adaptive algorithm minus that of its uniform counterpart
  (same seed, the same budget of example passes), averaged over the
  algorithms. Settings where an algorithm is worse than uniform at 95%
  confidence (time-averaged or final) are set aside, unless every setting
  is. Of the others the one with the highest mean gain over the seeds is
  the best; at its decay, the smallest amplitude whose mean gain is at
  least the best's minus the best's standard error over the seeds is
  chosen (of two utility options at that amplitude, the higher mean): of
  the settings the seeds cannot tell apart from the best, the one that
  departs least from uniform sampling (the one-standard-error rule).

  Args:
    results: tune's results (or its JSON file read back).

  Returns:
    (amplitude, decay, utility_at).
  """
  summary = setting_summary(results)
  _, within = _within_one_se(summary)
  return min(within, key=lambda key: (key[0], -summary[key]["mean"]))


UNIFORM = "uniform"


def recommended(results):
  """What the tuning recommends: UNIFORM where uniform sampling (a gain of
  0) is itself within one standard error of the best setting's mean gain,
  as `chosen` would then take it, the smallest departure of all; else
  `chosen`'s setting."""
  summary = setting_summary(results)
  best, _ = _within_one_se(summary)
  if summary[best]["mean"] - summary[best]["se"] <= 0:
    return UNIFORM
  return list(chosen(results))


def _within_one_se(summary):
  """(the best setting, the settings within one standard error of it at
  its decay) of `summary`, by `chosen`'s rule."""
  safe = [key for key, entry in summary.items() if not entry["worse"]]
  candidates = safe or list(summary)
  best = max(candidates, key=lambda key: summary[key]["mean"])
  floor = summary[best]["mean"] - summary[best]["se"]
  return best, [
      key for key in candidates
      if key[1] == best[1] and summary[key]["mean"] >= floor
  ]
