"""The budget-limited regime: all of Fashion-MNIST for a few epochs, the
field's mechanisms against random reshuffling, with clean labels and with
20% of them flipped (tf_adasamp.experiment.study.budget).

  --stage=tuning     chooses the step sizes, schedules and amplitude on the
                     fixed validation split with tuning seeds, by the rule
                     of budget.SCALES (tf_adasamp.experiment.tuning), and
                     writes tuning.md and tuning.json to --report_dir
  --stage=study      trains the runs, --workers at a time, with
                     tuning.json's settings, then writes summary.md and the
                     validation-curve figures
  --stage=wall_time  trains the first --wall_time_trials trials' runs again,
                     one at a time, and writes wall_time.md and
                     heldout_seconds.png
  --stage=all        the three in turn (`make budget-study`)

  python -m tf_adasamp.experiment.budget_study \\
      --output_dir=runs/fashion_mnist_budget \\
      --report_dir=docs/experiment/fashion_mnist_budget

Nothing else should run on the machine during the wall-time pass.
Deterministic; interrupted, it resumes where it stopped when run again.
"""

import dataclasses
import json
import os
import sys

from tf_adasamp import _validation
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import budget
from tf_adasamp.experiment.study import budget_results
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import tuning_report
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-budget-study"
STAGES = ("all", "tuning", "study", "wall_time")


@dataclasses.dataclass(frozen=True)
class Options:
  """What to run, how big, and where the runs and the reports go."""
  stage: str = option("all",
                      "tuning, study, wall_time, or all three in turn.",
                      choices=STAGES)
  scale: str = option("full", "full: the regime; smoke: the same path at toy "
                      "size.",
                      choices=tuple(budget.SCALES))
  trials: int | None = option(
      None, "Reporting trials (seeds 0..trials-1; default: the scale's).")
  wall_time_trials: int | None = option(
      None, "Trials of the one-at-a-time pass, its first ones (default: the "
      "scale's).")
  output_dir: str = option(f"runs/{budget.REGIME}", "Directory of the runs.")
  report_dir: str | None = option(
      None, "Directory of summary.md, wall_time.md, tuning.md and tuning.json "
      "and the figures (default <output_dir>/report).")
  workers: int = option(
      2, "Worker processes that train the tuning's and the "
      "study's runs, each with one TensorFlow thread.")


def define_flags():
  flags_lib.define(Options)


def _checked(options):
  """(trials, wall-time trials) of `options`; ValueError naming a bad
  one."""
  _validation.positive_int(options.workers, "workers")
  spec = budget.SCALES[options.scale]
  trials = spec.trials if options.trials is None else options.trials
  wall = (spec.wall_time_trials
          if options.wall_time_trials is None else options.wall_time_trials)
  _validation.positive_int(trials, "trials")
  _validation.positive_int(wall, "wall_time_trials")
  return trials, wall


def _command(options):
  """The command that reproduces the reports, as they name it: the flags
  that change them (not --stage or --workers), where not the defaults."""
  defaults = Options()
  fields = ("scale", "trials", "wall_time_trials", "output_dir", "report_dir")
  return flags_lib.command(
      "tf_adasamp.experiment.budget_study", {
          field: getattr(options, field)
          for field in fields
          if getattr(options, field) != getattr(defaults, field)
      })


def main():
  options = flags_lib.parse(PROGRAM, Options)
  report_dir = options.report_dir or os.path.join(options.output_dir, "report")
  command = _command(options)
  tuned_path = os.path.join(report_dir, "tuning.json")
  try:
    trials, wall_trials = _checked(options)
    settings = budget.settings_for(options.scale)
    tune_options = tuning_options.Options(**budget.tuning_fields(
        options.scale, settings),
                                          output_dir=os.path.join(
                                              options.output_dir, "tuning"),
                                          report=os.path.join(
                                              report_dir, "tuning.md"),
                                          workers=options.workers)
    if options.stage in ("study",
                         "wall_time") and not os.path.exists(tuned_path):
      raise ValueError(f"{tuned_path} does not exist: run --stage=tuning "
                       "first")
    run_files.ensure_writable_dir(options.output_dir, "output_dir")
    run_files.ensure_writable_dir(report_dir, "report_dir")
    data = budget.load_data(options.scale)
    # One thread, as each worker of the pool: a tuning of one worker
    # trains here.
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    if options.stage in ("tuning", "all"):
      tuning_report.write(tuning.tune(tune_options, data, settings),
                          tune_options.report, command)
      print(f"wrote {tune_options.report}")
    with open(tuned_path) as f:
      settings = tuning.tuned_settings(settings, json.load(f))
    if options.stage in ("study", "all"):
      budget_results.run_study(options, settings, trials, data, report_dir,
                               command)
    if options.stage in ("wall_time", "all"):
      budget_results.run_wall_time(options, settings, wall_trials, data,
                                   report_dir, command)
  except (TypeError, ValueError, RuntimeError, OSError,
          datasets.DatasetUnavailableError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)


def run():
  """Console-script entry point (tf-adasamp-budget-study)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
