"""The paper's experiment (London, NIPS 2017, section "Experiments"): its runs.

The six algorithms of `presets.ALGORITHMS`, the baselines of
`presets.BASELINES` and the methods of `presets.COMPETITORS` for a number of
trials, plus a sweep of the amplitude of one algorithm: `plan` lists the runs
(`pool.run_all` trains them) and `collect` reads their metrics back as
the curves that `claims`, `report` and `plots` take.

Trial k runs every algorithm with seed k: the same initial model (and
dropout masks), and the same random numbers behind the draws, so the first
batch is shared too. Planning and reading runs need no TensorFlow, so the
command lines refuse bad settings at once.
"""

import dataclasses
import os

import numpy as np

from tf_adasamp import _validation
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

CURVE_METRICS = ("train_loss", "train_accuracy", "validation_loss",
                 "validation_accuracy", "test_loss", "test_accuracy", "kl",
                 "ess_fraction", "max_probability", "misclassified_mass",
                 "examples_forwarded", "examples_backpropagated",
                 "train_seconds")
# Logged by runs of the logistic model only (training.loop).
CERTIFICATE_METRICS = ("zero_one_gap", "corollary1_bound")


@dataclasses.dataclass(frozen=True)
class Run:
  """One training run of the experiment: an algorithm at an amplitude (0
  for uniform sampling) in a trial."""
  algorithm: str
  amplitude: float
  trial: int
  config: config_lib.TrainConfig


def run_config(settings, algorithm, amplitude, trial, run_dir, **fields):
  """The TrainConfig of `algorithm` at `amplitude` in `trial`."""
  sampling, utility, optimizer = presets.RUNS[algorithm]
  decay = settings.decay
  if sampling != "adaptive":
    # Uniform runs ignore amplitude and decay; fixed values keep them valid
    # (and resumable) whatever the adaptive settings.
    amplitude, decay = 0.0, presets.UNIFORM_DECAY
  learning_rate, lr_decay = settings.learning_rate(algorithm)
  options = dict(
      optimizer=optimizer,
      learning_rate=learning_rate,
      lr_decay=lr_decay,
      lr_schedule=settings.lr_schedule(algorithm),
      batch_size=settings.batch_size,
      sampling=sampling,
      utility=utility,
      utility_at=settings.utility_at,
      # Algorithm 1 weighs no loss, whatever the trainer's
      # default; the methods from the field set their own.
      beta=0.0,
      amplitude=amplitude,
      decay=decay,
      steps=settings.steps,
      eval_interval=settings.eval_interval,
      early_evaluations=settings.early_evaluations,
      seed=trial,
      output_dir=run_dir,
      resume=True)
  options.update(fields)
  options.update(presets.COMPETITOR_SAMPLERS.get(algorithm, {}))
  return config_lib.TrainConfig(**options)


# The most trials a study takes: each is a seed of every algorithm's runs,
# and a study of more would not end on any machine this runs on.
MAX_TRIALS = 1000


def check_trials(trials):
  """`trials` as an int in [1, MAX_TRIALS]; ValueError (TypeError for a
  non-int) naming the flag otherwise."""
  trials = _validation.positive_int(trials, "trials")
  if trials > MAX_TRIALS:
    raise ValueError(f"trials must be at most {MAX_TRIALS}, got {trials}")
  return trials


def plan(settings, trials, output_dir, dataset, data_dir=None, model="cnn"):
  """Every run of the experiment, the sweep's included, each listed once."""
  check_trials(trials)
  if not settings.sweep_amplitudes:
    raise ValueError("sweep_amplitudes is empty; give the amplitudes to "
                     "sweep")
  for name in ("train_accuracy_target", "test_accuracy_target"):
    if not 0 < getattr(settings, name) <= 1:  # NaN too
      raise ValueError(f"{name} must be an accuracy in (0, 1], got "
                       f"{getattr(settings, name)}")
  if settings.sweep_algorithm not in presets.ADAPTIVE:
    raise ValueError("sweep_algorithm must be an adaptive algorithm, got "
                     f"{settings.sweep_algorithm!r}")
  runs = {}

  def add(algorithm, amplitude, trial, utility_at=settings.utility_at):
    # The algorithms without an amplitude to sweep run once a trial.
    once = algorithm not in presets.ADAPTIVE
    amplitude = 0.0 if once else amplitude
    name = algorithm if once else f"{algorithm}-a{amplitude:g}"
    if utility_at != settings.utility_at:
      name += f"-{utility_at}"
    run_dir = os.path.join(output_dir, name, f"seed{trial}")
    if run_dir not in runs:
      runs[run_dir] = Run(
          algorithm, amplitude, trial,
          run_config(settings,
                     algorithm,
                     amplitude,
                     trial,
                     run_dir,
                     dataset=dataset,
                     data_dir=data_dir,
                     model=model,
                     utility_at=utility_at))

  for trial in range(trials):
    for algorithm in presets.RUNS:
      add(algorithm, settings.amplitude, trial)
    for amplitude in settings.sweep_amplitudes:
      add(settings.sweep_algorithm, amplitude, trial)
      if settings.sweep_both_utilities:
        add(settings.sweep_algorithm, amplitude, trial,
            other_utility_at(settings))
  return list(runs.values())


def checked_study(settings,
                  trials,
                  output_dir,
                  report_dir,
                  dataset,
                  data_dir=None,
                  model="cnn"):
  """`plan`'s runs and the data they train on, every setting and path
  checked before any run starts: the trials, the data directory, the
  settings, both output directories, a batch no larger than the data.

  Returns:
    (runs, data): the runs, and the data set (`datasets.load`'s).
  """
  check_trials(trials)
  if data_dir is not None and not os.path.isdir(data_dir):
    raise ValueError(f"--data_dir {data_dir} is not a directory")
  runs = plan(settings, trials, output_dir, dataset, data_dir, model)
  run_files.ensure_writable_dir(output_dir, "output_dir")
  run_files.ensure_writable_dir(report_dir, "report_dir")
  data = datasets.load(dataset, data_dir)
  if settings.batch_size > len(data.y_train):
    raise ValueError(f"--batch_size={settings.batch_size} is larger than the "
                     f"{len(data.y_train)} training examples of {dataset}")
  return runs, data


def replication_plan(settings,
                     trials,
                     output_dir,
                     dataset,
                     data_dir=None,
                     model="cnn"):
  """The runs of the headline comparison on a replication `dataset`
  (presets.REPLICATIONS): the swept algorithm at the preset's amplitude and
  utility option, its uniform counterpart, and the baselines and methods
  from the field with its update rule."""
  algorithm = settings.sweep_algorithm
  rule = presets.RUNS[algorithm][2]
  others = {presets.counterpart(algorithm)} | {
      name for name in (*presets.BASELINES, *presets.COMPETITORS)
      if presets.RUNS[name][2] == rule
  }
  return [
      run
      for run in plan(settings, trials, output_dir, dataset, data_dir, model)
      if run.algorithm in others or
      (run.algorithm == algorithm and run.amplitude == settings.amplitude and
       run.config.utility_at == settings.utility_at)
  ]


def curves_by_algorithm(runs):
  """{algorithm: curves} of `runs`, one setting an algorithm
  (`replication_plan`'s)."""
  groups = {}
  for run in runs:
    groups.setdefault(run.algorithm, []).append(run)
  return {name: curves_of(group) for name, group in groups.items()}


def other_utility_at(settings):
  """The utility option the sweep also runs if `sweep_both_utilities`."""
  return next(u for u in config_lib.UTILITY_AT if u != settings.utility_at)


def _stack(runs_by_trial, metric):
  """[trials, E] values of `metric`; NaN where a record lacks it (the
  bounds are not logged at step 0)."""
  return np.array(
      [[r.get(metric, np.nan) for r in records] for records in runs_by_trial],
      dtype=float)


def collect(runs, settings):
  """Reads the runs' metrics: (curves, sweep).

  curves[algorithm] (each of `presets.RUNS`) holds "step" and "epoch" [E]
  and, per metric, [trials, E]; sweep holds the swept algorithm's name, its
  amplitudes (0 for the uniform counterpart) and each amplitude's curves; with
  `sweep_both_utilities`, also "other_utility_at" and "other_curves", the
  swept amplitudes' curves under that utility option.
  """
  by_key = by_setting(runs)

  def curve(algorithm, amplitude, utility_at=settings.utility_at):
    return curves_of(by_key[(algorithm, amplitude, utility_at)])

  curves = {
      algorithm: curve(algorithm, settings.amplitude)
      for algorithm in presets.ADAPTIVE
  }
  # The others run once a trial, each with its own settings.
  curves.update({
      algorithm: curves_of([run for run in runs if run.algorithm == algorithm])
      for algorithm in presets.RUNS
      if algorithm not in presets.ADAPTIVE
  })
  curves = {algorithm: curves[algorithm] for algorithm in presets.RUNS}
  amplitudes = [0.0, *settings.sweep_amplitudes]
  sweep = {
      "algorithm":
          settings.sweep_algorithm,
      "amplitude":
          amplitudes,
      "curves": [
          curve(
              settings.sweep_algorithm
              if a else presets.counterpart(settings.sweep_algorithm), a)
          for a in amplitudes
      ],
  }
  if settings.sweep_both_utilities:
    sweep["other_utility_at"] = other_utility_at(settings)
    sweep["other_curves"] = [
        curve(settings.sweep_algorithm, a, sweep["other_utility_at"])
        for a in settings.sweep_amplitudes
    ]
  return curves, sweep


def by_setting(runs):
  """`runs` grouped by (algorithm, amplitude, utility_at), each group's
  trials in order."""
  groups = {}
  for run in runs:
    groups.setdefault((run.algorithm, run.amplitude, run.config.utility_at),
                      []).append(run)
  return groups


def curves_of(runs, metrics=CURVE_METRICS + CERTIFICATE_METRICS):
  """The curves of `runs`, one per trial in order: "step" and "epoch" [E]
  and, for each of `metrics` that the runs record, [trials, E]."""
  records = [run_files.read_metrics(run.config.output_dir) for run in runs]
  result = {
      "step": np.array([r["step"] for r in records[0]]),
      "epoch": np.array([r["epoch"] for r in records[0]], dtype=float)
  }
  for metric in metrics:
    if metric in records[0][-1]:
      result[metric] = _stack(records, metric)
  return result


def mean_over(times, values, until=None, since=0):
  """Time average of `values` ([..., E] at `times`, steps or epochs) over
  [since, until] (to the last time if None), by the trapezoid rule: the
  area under the curve divided by its length."""
  times = np.asarray(times, dtype=float)
  until = times[-1] if until is None else until
  keep = (times >= since) & (times <= until)
  if keep.sum() < 2:
    raise ValueError(f"the window [{since:g}, {until:g}] holds fewer than 2 "
                     "evaluations")
  return (np.trapezoid(np.asarray(values)[..., keep], times[keep], axis=-1) /
          (times[keep][-1] - times[keep][0]))
