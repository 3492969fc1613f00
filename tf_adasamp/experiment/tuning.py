"""Chooses the experiment's hyperparameters by cross-validation on training
data (London, NIPS 2017, "Experiments": "We tuned all hyperparameters using
random subsets of the training data for cross-validation").

Tuning seed s holds out a random validation set drawn with seed s from the
training split, trains on the rest with seed s, and measures accuracy on the
held-out part; with --fixed_validation every seed holds out the same one,
the trainer's fixed split of --validation_size (the split a study's runs
hold out). The test split is never read, and the tuning seeds (100 and up
by default) are not the reported trials' seeds (0 to trials - 1).

  stage 1  step sizes, with uniform sampling and for each method users
           would run instead (presets.ALTERNATIVES: the baselines and the
           methods from the field) with the update rules of --adaptive:
           every SGD (eta, gamma) and every AdaGrad step size of the grid
           under each step-size schedule of --lr_schedules, for each
           algorithm of that update rule; the highest validation accuracy
           by --score wins: averaged over the run (area under the curve
           divided by its length), or at its end. The adaptive algorithms
           take their uniform counterpart's schedule.
  stage 2  amplitude and decay, at the winning step sizes: every (amplitude,
           decay) of the grid for the adaptive algorithms of --adaptive,
           each against its uniform counterpart of the same seed (stage 1's
           winner): paired differences of the time-averaged and of the
           final validation accuracy, with 95% t-intervals; `chosen` picks
           one.
  stage 3  each of those adaptive algorithms' own step size, at the chosen
           amplitude and decay: its update rule's winning step size times
           each of --adaptive_lr_factors (and 1, stage 2's run), by the
           highest validation accuracy by --score.

It writes a markdown report (and the same numbers as JSON beside it, whose
`settings` block is the preset with the chosen values) naming each
algorithm's step size, the amplitude and the decay:

  python -m tf_adasamp.experiment.tuning --dataset=fashion_mnist_5k \\
      --seeds=100,101,102,103,104 --validation_size=1000 --decays=0.5 \\
      --output_dir=runs/tuning/fashion_mnist_5k \\
      --report=docs/experiment/tuning/fashion_mnist_5k.md

Like the experiment, it resumes where it stopped when run again.
"""

import dataclasses
import functools
import json
import math
import os
import sys
import time

from absl import flags
from absl import logging
import numpy as np

from tf_adasamp import _validation
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-tuning"
FLAGS = flags.FLAGS
ADAPTIVE = presets.ADAPTIVE
ALTERNATIVES = presets.ALTERNATIVES
# The algorithms whose step sizes stage 1 tunes, uniform ones first, where
# every adaptive algorithm is tuned (`stage1_algorithms`).
STAGE1 = ("Unif-SGD", "Unif-AdaGrad", *ALTERNATIVES)
# What stages 1 and 3 rank a step size by (Options.score): the validation
# accuracy averaged over the run, or at its end.
SCORES = ("time_averaged", "final")


@dataclasses.dataclass(frozen=True)
class Options:
  """The grid, the validation protocol, and where results go.

  The grids' defaults are comma-separated strings, as absl's list flags
  take them; the parsed flags are tuples of floats. `floats` reads both.
  """
  dataset: str = option("fashion_mnist", "Data set.", choices=datasets.DATASETS)
  data_dir: str | None = option(
      None, "tensorflow_datasets directory "
      "holding a prepared CIFAR-10.")
  model: str | None = option(None, "Model (default: the data set's, "
                             "presets.DEFAULT_MODELS).",
                             choices=config_lib.MODELS)
  steps: int | None = option(None, "Steps per run (default: the preset's).")
  eval_interval: int | None = option(
      None, "Steps between evaluations "
      "(default: the preset's).")
  seeds: tuple = option("100,101,102,103,104", "Tuning seeds; each "
                        "draws its own validation set.")
  stage2_seeds: int | None = option(
      None, "Stage 2 uses only the first "
      "this many seeds (default: all).")
  validation_size: float = option(
      10000, "Held-out examples per seed (a "
      "count, or a fraction if below 1).")
  fixed_validation: bool = option(
      False, "Every seed holds out the same validation split, the trainer's "
      "(the examples that a run of --validation_size=<validation_size> "
      "holds out, datasets.VALIDATION_SEED), instead of its own; "
      "validation_size must then be a count.")
  adaptive: tuple[str, ...] = option(
      ",".join(ADAPTIVE), "Comma-separated adaptive algorithms that stages "
      "2 and 3 tune; stage 1 tunes their uniform counterparts and the "
      "baselines and methods from the field with their update rules. The "
      "others keep the preset's settings.")
  score: str = option(
      "time_averaged", "What stages 1 and 3 rank step sizes by: "
      "time_averaged, the validation accuracy averaged over the run (area "
      "under the curve over its length); final, the validation accuracy at "
      "the run's end, what a fixed budget trains for.",
      choices=SCORES)
  sgd_learning_rates: tuple = option("0.1,0.3,1", "SGD's eta values.")
  sgd_lr_decays: tuple = option("0.001,0.01", "SGD's gamma values.")
  adagrad_learning_rates: tuple = option("0.03,0.1,0.3",
                                         "AdaGrad's step sizes.")
  lr_schedules: tuple[str, ...] = option(
      "inverse_time", "Step-size schedules that stage 1 tries with each "
      "step size (TrainConfig.lr_schedule): inverse_time over every gamma "
      "of the grid; linear and cosine, which decay to 0 at the run's end, "
      "take no gamma.")
  amplitudes: tuple = option("0.3,1", "Amplitudes.")
  decays: tuple = option("0.5,0.9", "Decays.")
  utilities_at: str = option(
      "updated,step", "Stage 2: where the utility is computed, "
      "comma-separated (TrainConfig.utility_at's choices), each a setting of "
      "its own.")
  adaptive_lr_factors: tuple = option(
      "0.5,2", "Stage 3: each adaptive "
      "algorithm's step sizes, as multiples of its update rule's winner.")
  output_dir: str | None = option(
      None, "Directory of the runs (default "
      "runs/tuning/<dataset>).")
  report: str | None = option(
      None, "Markdown report (default "
      "<output_dir>/tuning.md); JSON beside it.")
  workers: int = option(2, "Worker processes (one TensorFlow thread each).")
  jit_compile: bool = option(
      False, "Compile each run's training loop with "
      "XLA (TrainConfig.jit_compile).")
  train_eval_size: int | None = option(
      None, "Training examples the evaluations read "
      "(TrainConfig.train_eval_size); all if unset.")

  def __post_init__(self):
    for schedule in _words(self.lr_schedules):
      if schedule not in config_lib.LR_SCHEDULES:
        raise ValueError("lr_schedules must be of "
                         f"{config_lib.LR_SCHEDULES}, got {schedule!r}")
    adaptive = _words(self.adaptive)
    for name in adaptive:
      if name not in ADAPTIVE:
        raise ValueError(f"adaptive takes {', '.join(ADAPTIVE)}, got "
                         f"{name!r}")
    if not adaptive:
      raise ValueError("adaptive names no algorithm")
    if self.score not in SCORES:
      raise ValueError(f"score must be one of {SCORES}, got {self.score!r}")
    if self.fixed_validation and self.validation_size != int(
        self.validation_size):
      raise ValueError("fixed_validation holds out the trainer's split of "
                       "a count of examples; validation_size must be a "
                       f"whole number, got {self.validation_size:g}")


def floats(values):
  """A grid as a list of floats, from a tuple or a comma-separated string."""
  if isinstance(values, str):
    values = values.split(",")
  return [float(v) for v in values]


def _words(values):
  """A list of words, from a tuple or a comma-separated string."""
  return values.split(",") if isinstance(values, str) else list(values)


def _validation_data(full, size, fixed, run):
  """The tuning data of `run`: `full` less a validation set, which stands
  in for the test split (dropped): drawn with the run's seed, or, where
  `fixed`, the trainer's fixed split of `size` examples
  (datasets.with_validation's)."""
  seed = datasets.VALIDATION_SEED if fixed else run.trial
  return datasets.validation_split(full, size, seed=seed)


def stage1_algorithms(options):
  """The algorithms whose step sizes stage 1 tunes: the uniform
  counterparts of `options.adaptive`, then the ALTERNATIVES with their
  update rules."""
  rules = {presets.RUNS[name][2] for name in _words(options.adaptive)}
  return tuple(name for name in STAGE1 if presets.RUNS[name][2] in rules)


def adaptive_algorithms(options):
  """The adaptive algorithms that stages 2 and 3 tune, in ADAPTIVE's
  order."""
  chosen = set(_words(options.adaptive))
  return tuple(name for name in ADAPTIVE if name in chosen)


# The grids, each a flag: non-empty, but for the factors (stage 3 may keep
# stage 2's step sizes alone).
GRIDS = ("sgd_learning_rates", "sgd_lr_decays", "adagrad_learning_rates",
         "amplitudes", "decays", "adaptive_lr_factors")


def check_options(options, settings):
  """Checks every flag before anything trains: the seeds, each grid's
  values as every run's TrainConfig takes them, the workers, and where the
  runs and the report go.

  Args:
    options: the Options, with main's model, output_dir and report.
    settings: the presets.Settings the runs start from.

  Raises:
    ValueError: naming the flag (run_files.RunError for a path).
  """
  seeds = floats(options.seeds)
  _check_grid("seeds", seeds)
  if options.stage2_seeds is not None and not (1 <= options.stage2_seeds <=
                                               len(seeds)):
    raise ValueError(f"--stage2_seeds must be in [1, {len(seeds)}], the "
                     f"number of --seeds, got {options.stage2_seeds}")
  size = options.validation_size
  if not (math.isfinite(size) and size > 0 and (size < 1 or size % 1 == 0)):
    raise ValueError("--validation_size must be a count >= 1 or a fraction "
                     f"in (0, 1), got {size:g}")
  grids = {name: floats(getattr(options, name)) for name in GRIDS}
  for name, values in grids.items():
    _check_grid(name, values, empty=name == "adaptive_lr_factors")
  if 1 in grids["adaptive_lr_factors"]:
    raise ValueError("--adaptive_lr_factors: 1 is stage 2's own step size; "
                     "leave it out")
  pool.check_workers(options.workers)
  for name in ("steps", "eval_interval"):
    # Set, they replace the preset's: 0 would read as unset.
    if getattr(options, name) is not None:
      _validation.positive_int(getattr(options, name), name)
  if options.data_dir is not None and not os.path.isdir(options.data_dir):
    raise ValueError(f"--data_dir {options.data_dir} is not a directory")
  base = dict(dataset=options.dataset,
              model=options.model,
              steps=settings.steps,
              eval_interval=settings.eval_interval,
              batch_size=settings.batch_size,
              utility_at=settings.utility_at,
              jit_compile=options.jit_compile,
              train_eval_size=options.train_eval_size)
  config_lib.TrainConfig(**base)  # its errors name the setting
  for name, fields in _run_settings(seeds, grids):
    try:
      config_lib.TrainConfig(**base, **fields)
    except (TypeError, ValueError) as error:
      raise ValueError(f"--{name}: {error}") from None
  run_files.ensure_writable_dir(options.output_dir, "output_dir")
  for path in (options.report, os.path.splitext(options.report)[0] + ".json"):
    run_files.ensure_writable_file(path, "report")


def _check_grid(name, values, empty=False):
  """ValueError unless flag `name`'s `values` are whole seeds, or (a grid)
  finite, none twice: a value twice would train its runs twice, at once,
  in one directory."""
  if not values and not empty:
    raise ValueError(f"--{name} is empty; give at least one value")
  if name == "seeds" and any(value % 1 for value in values):
    raise ValueError(f"--seeds must be whole numbers, got {values}")
  twice = sorted({value for value in values if values.count(value) > 1})
  if twice:
    raise ValueError(f"--{name} holds {', '.join(f'{v:g}' for v in twice)} "
                     "more than once")


def _run_settings(seeds, grids):
  """(flag, TrainConfig fields) of each setting a run takes from a flag."""
  yield from (("seeds", dict(seed=int(seed))) for seed in seeds)
  sgd, adagrad = grids["sgd_learning_rates"], grids["adagrad_learning_rates"]
  yield from (("sgd_learning_rates", dict(learning_rate=eta)) for eta in sgd)
  yield from (("sgd_lr_decays", dict(lr_decay=gamma))
              for gamma in grids["sgd_lr_decays"])
  yield from (("adagrad_learning_rates",
               dict(optimizer="adagrad", learning_rate=eta)) for eta in adagrad)
  yield from (("amplitudes and --decays", dict(amplitude=amplitude,
                                               decay=decay))
              for amplitude in grids["amplitudes"]
              for decay in grids["decays"])
  yield from (("adaptive_lr_factors", dict(learning_rate=eta * factor))
              for factor in grids["adaptive_lr_factors"]
              for eta in sgd + adagrad)


def check_data(options, full, settings):
  """Checks that each tuning seed's validation split leaves a training set
  of at least a batch (ValueError naming --validation_size otherwise)."""
  seed = (datasets.VALIDATION_SEED if options.fixed_validation else int(
      floats(options.seeds)[0]))
  split = datasets.validation_split(full, options.validation_size, seed)
  if settings.batch_size > len(split.y_train):
    raise ValueError(f"--validation_size {options.validation_size:g} leaves "
                     f"{len(split.y_train)} training examples, fewer than "
                     f"a batch of {settings.batch_size}")


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
  names(options.utilities_at)
  seeds = [int(s) for s in floats(options.seeds)]
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


def write(results, report, command):
  """Writes tune's `results` as the markdown report `report` (with
  `command`, which produced it) and as JSON beside it; returns the JSON's
  path."""
  os.makedirs(os.path.dirname(os.path.abspath(report)), exist_ok=True)
  run_files.write_atomically(report, markdown(results, command))
  path = os.path.splitext(report)[0] + ".json"
  run_files.write_atomically(path, json.dumps(results, indent=1))
  return path


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
  etas = floats(options.sgd_learning_rates if rule ==
                "sgd" else options.adagrad_learning_rates)
  grid = []
  for schedule in _words(options.lr_schedules):
    gammas = (floats(options.sgd_lr_decays)
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
  for algorithm in stage1_algorithms(options):
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


def names(values):
  """A comma-separated grid of utility options as a list; ValueError
  naming any that is not one."""
  result = values.split(",")
  for name in result:
    if name not in config_lib.UTILITY_AT:
      raise ValueError(f"utilities_at takes {', '.join(config_lib.UTILITY_AT)},"
                       f" got {name!r}")
  return result


def _stage2(options, seeds, base, train, results, uniform):
  """Amplitude, decay and utility option of the adaptive algorithms against
  uniform, each run judged on its uniform counterpart's budget of example
  passes; {(amplitude, decay, utility_at, algorithm): runs}."""
  count = options.stage2_seeds or len(seeds)
  stage2 = {}
  for amplitude in floats(options.amplitudes):
    for decay in floats(options.decays):
      for utility_at in names(options.utilities_at):
        for algorithm in adaptive_algorithms(options):
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
  for algorithm in adaptive_algorithms(options):
    (eta, gamma, schedule), _ = uniform[presets.ALGORITHMS[algorithm][2]]
    grid[(algorithm, eta)] = stage2[(amplitude, decay, utility_at, algorithm)]
    for factor in floats(options.adaptive_lr_factors):
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


def _interval(values):
  return text.interval_text(verdicts.paired_test(values))


def markdown(results, command):
  """The tuning report as markdown."""
  options, settings = results["options"], results["settings"]
  seeds = [int(s) for s in floats(options["seeds"])]
  # Options a tuning before them did not record: their defaults.
  held_out = (
      f" holds out the same {options['validation_size']:g} training examples,"
      " the trainer's fixed validation split (the one the study's runs hold "
      "out)" if options.get("fixed_validation") else
      f" holds out {options['validation_size']:g} random training examples "
      "(drawn with that seed)")
  score = ("the final validation accuracy" if options.get("score") == "final"
           else "the time-averaged validation accuracy")
  lines = [
      f"# Tuning on {options['dataset']} ({options['model']}): validation "
      "splits of the training data",
      "",
      f"Produced by `{command}`.",
      "",
      f"Each of the {len(seeds)} tuning seeds ({', '.join(map(str, seeds))})"
      f"{held_out}, trains on the rest and measures accuracy on "
      "the held-out ones; the test split is not read. Runs of "
      f"{settings['steps']} steps of batch {settings['batch_size']}, "
      f"evaluated every {settings['eval_interval']} steps. 'time-averaged' "
      "is the area under the validation-accuracy curve divided by its "
      "length (it rewards learning early as well as ending high). Step "
      f"sizes are ranked by {score}.",
      "",
      "## Stage 1: step sizes (uniform sampling and the baselines)",
      "",
      "| algorithm | update rule | eta | gamma | schedule | validation "
      "accuracy, time-averaged | final validation accuracy |",
      "|---|---|---|---|---|---|---|",
  ]
  for row in results["step_sizes"]:
    schedule = row.get("schedule", "inverse_time")
    cells = [
        row["algorithm"], row["rule"], f"{row['eta']:g}", f"{row['gamma']:g}",
        schedule,
        text.mean_std(row["auc"]),
        text.mean_std(row["final"])
    ]
    if [row["eta"], row["gamma"],
        schedule] == _stage1_winner(results, row["algorithm"]):
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  lines += [
      "",
      "(mean ± std over the seeds; the winner of each algorithm in bold:"
      " inverse_time is eta / (1 + gamma t), linear eta (1 - t / T) and "
      "cosine eta (1 + cos(pi t / T)) / 2 over the run's T steps. The "
      "adaptive algorithms start from their uniform counterpart's; the "
      "baselines keep their own.)",
      "",
      "## Stage 2: amplitude, decay and utility option (adaptive minus "
      "uniform, same seed)",
      "",
      "Differences in validation accuracy, adaptive minus its uniform "
      "counterpart at the winning step sizes, mean over tuning seeds "
      f"{', '.join(map(str, results['stage2_seeds']))} with a 95% "
      "t-interval; positive favours adaptive sampling. The time average of "
      "an adaptive run is taken over its uniform counterpart's budget of "
      "example passes (a backward pass counted as "
      f"{targets.BACKWARD_COST:g} forward ones), so the utility at 'updated' "
      "pays for its second forward pass.",
      "",
      "| amplitude | decay | utility at | algorithm | Δ validation accuracy, "
      "time-averaged | Δ final validation accuracy | max KL(Q_t ‖ P_t) |",
      "|---|---|---|---|---|---|---|",
  ]
  for row in results["amplitude_decay"]:
    lines.append(f"| {row['amplitude']:g} | {row['decay']:g} | "
                 f"{row.get('utility_at') or '–'} | {row['algorithm']} | "
                 f"{_interval(row['auc_difference'])} | "
                 f"{_interval(row['final_difference'])} | "
                 f"{np.mean(row['max_kl']):.3f} |")
  lines += _choice_lines(results)
  lines += _stage3_lines(results)
  return "\n".join(lines) + "\n"


def _stage1_winner(results, algorithm):
  """Stage 1's [eta, gamma, schedule] for `algorithm`."""
  if algorithm in ALTERNATIVES:
    key = algorithm
    step_size = results["chosen_baseline_step_sizes"][algorithm]
  else:
    key = presets.RUNS[algorithm][2]
    step_size = results["chosen_step_sizes"][key]
  # None in results of a tuning before the schedules were tuned.
  schedules = results.get("chosen_lr_schedules", {})
  return [*step_size, schedules.get(key, "inverse_time")]


def _choice_lines(results):
  summary = setting_summary(results)
  choice = chosen(results)
  best, within = _within_one_se(summary)
  floor = summary[best]["mean"] - summary[best]["se"]
  lines = [
      "",
      "## Choice",
      "",
      "Per seed, the Δ time-averaged validation accuracy averaged over the "
      "adaptive algorithms tuned; its mean and standard error (SE) over the "
      "seeds. Rule (`tuning.chosen`), fixed before the runs: among the "
      "settings with no algorithm worse than uniform at 95% (time-averaged "
      "or final), the smallest amplitude whose mean is within one SE of the "
      "best mean (at the best's decay; of two utility options, the higher "
      "mean): the one-standard-error rule. Uniform sampling is the setting "
      "of gain 0: where it is within one SE of the best, it is the "
      "recommendation." +
      ("" if any(not entry["worse"] for entry in summary.values()) else
       " No setting is free of an algorithm worse than uniform: the rule "
       "ran over all of them."),
      "",
      "| amplitude | decay | utility at | mean Δ time-averaged (4 "
      "algorithms) | SE | worse than uniform at 95% | within 1 SE of the "
      "best |",
      "|---|---|---|---|---|---|---|",
  ]
  for key, entry in summary.items():
    cells = [
        f"{key[0]:g}", f"{key[1]:g}", key[2] or "–", f"{entry['mean']:+.4f}",
        f"{entry['se']:.4f}", ", ".join(entry["worse"]) or "none",
        ("best" if key == best else "yes") if key in within else "no"
    ]
    if key == choice:
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  advice = recommended(results)
  return lines + [
      "",
      f"- Best mean: {_setting_text(best)} ({summary[best]['mean']:+.4f}, "
      f"SE {summary[best]['se']:.4f}; within one SE: at least "
      f"{floor:+.4f}).",
      f"- Chosen (in bold), the setting the experiment runs: "
      f"{_setting_text(choice)}.",
      "- Recommended: " +
      ("**uniform sampling**: a gain of 0 is within one SE of the best, so "
       "the one-standard-error rule takes no adaptive setting." if advice
       == UNIFORM else f"{_setting_text(choice)}: the best's gain is more than "
       "one SE above 0."),
  ]


def _setting_text(key):
  return (f"amplitude {key[0]:g}, decay {key[1]:g}" +
          (f", utility at '{key[2]}'" if key[2] else ""))


def _stage3_lines(results):
  setting = (*results["stage3_setting"], None)[:3]
  lines = [
      "",
      "## Stage 3: each adaptive algorithm's step size",
      "",
      f"At {_setting_text(setting)} (stage 2's choice); "
      "validation accuracy, mean ± std over the stage-2 seeds; "
      "the winner of each algorithm in bold.",
      "",
      "| algorithm | step size | validation accuracy, time-averaged | "
      "final validation accuracy |",
      "|---|---|---|---|",
  ]
  chosen_etas = dict(zip(ADAPTIVE, results["chosen_adaptive_learning_rates"]))
  for row in results["adaptive_step_sizes"]:
    # A tuning before stage 3 recorded the final accuracy did not rank by it.
    final = text.mean_std(row["final"]) if "final" in row else "–"
    cells = [
        row["algorithm"], f"{row['eta']:g}",
        text.mean_std(row["auc"]), final
    ]
    if chosen_etas[row["algorithm"]] == row["eta"]:
      cells = [f"**{cell}**" for cell in cells]
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def define_flags():
  flags_lib.define(Options)


def main():
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  options = flags_lib.parse(PROGRAM, Options)
  model = options.model or presets.DEFAULT_MODELS[options.dataset]
  output_dir = options.output_dir or os.path.join("runs", "tuning",
                                                  options.dataset)
  options = dataclasses.replace(options,
                                model=model,
                                output_dir=output_dir,
                                report=options.report or
                                os.path.join(output_dir, "tuning.md"))
  try:
    settings = presets.preset(options.dataset, model)
    settings = dataclasses.replace(settings,
                                   steps=options.steps or settings.steps,
                                   eval_interval=options.eval_interval or
                                   settings.eval_interval)
    check_options(options, settings)
    full = datasets.load(options.dataset, options.data_dir)
    check_data(options, full, settings)
    results = tune(options, full, settings)
  except (TypeError, ValueError, RuntimeError, datasets.DatasetUnavailableError,
          run_files.RunError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)
  command = " ".join(["python -m tf_adasamp.experiment.tuning", *sys.argv[1:]])
  write(results, options.report, command)
  print(f"wrote {options.report}")


def run():
  """Console-script entry point (python -m tf_adasamp.experiment.tuning)."""
  flags_lib.run(PROGRAM, define_flags, main)


if __name__ == "__main__":
  run()
