"""The tuning's options and their checks: the grids of its three stages,
the validation protocol, and where its runs and report go
(tf_adasamp.experiment.tuning is the command line)."""

import dataclasses
import math
import os

from tf_adasamp import _validation
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

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
    for schedule in words(self.lr_schedules):
      if schedule not in config_lib.LR_SCHEDULES:
        raise ValueError("lr_schedules must be of "
                         f"{config_lib.LR_SCHEDULES}, got {schedule!r}")
    adaptive = words(self.adaptive)
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


def words(values):
  """A list of words, from a tuple or a comma-separated string."""
  return values.split(",") if isinstance(values, str) else list(values)


def stage1_algorithms(options):
  """The algorithms whose step sizes stage 1 tunes: the uniform
  counterparts of `options.adaptive`, then the ALTERNATIVES with their
  update rules."""
  rules = {presets.RUNS[name][2] for name in words(options.adaptive)}
  return tuple(name for name in STAGE1 if presets.RUNS[name][2] in rules)


def adaptive_algorithms(options):
  """The adaptive algorithms that stages 2 and 3 tune, in ADAPTIVE's
  order."""
  chosen = set(words(options.adaptive))
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


def names(values):
  """A comma-separated grid of utility options as a list; ValueError
  naming any that is not one."""
  result = values.split(",")
  for name in result:
    if name not in config_lib.UTILITY_AT:
      raise ValueError(f"utilities_at takes {', '.join(config_lib.UTILITY_AT)},"
                       f" got {name!r}")
  return result
