"""Reproduces the experiment of London (NIPS 2017), section "Experiments".

Runs the paper's six algorithms for --trials trials plus an amplitude sweep
(tf_adasamp.experiment.study.design, trained by
tf_adasamp.experiment.study.pool),
then draws the five panels of Figure 1 and writes summary.md
(tf_adasamp.experiment.study.report), which opens with the departures from the
paper and the verdict rules. The main job (`make experiment`), offline, a
784-512-10 MLP on 5,000 Fashion-MNIST images (Debian's
dataset-fashion-mnist):

  python -m tf_adasamp.experiment.reproduce --dataset=fashion_mnist_5k \\
      --trials=10 --output_dir=runs/fashion_mnist_5k

The convex regime is --dataset=fashion_mnist (the L2 logistic regression),
scikit-learn's digits (`--dataset=digits`, the paper's CNN) serves quick
runs, and `--dataset=cifar10` a machine with CIFAR-10 (or a network).
Interrupted, it resumes where it stopped when run again.
"""

import dataclasses
import os
import sys

from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets

PROGRAM = "tf-adasamp-reproduce"


@dataclasses.dataclass(frozen=True)
class Options:
  """What the experiment runs on and where it writes."""
  dataset: str = option("fashion_mnist_5k", "Data set; fashion_mnist_5k and "
                        "fashion_mnist (Debian's dataset-fashion-mnist) and "
                        "digits need no network.",
                        choices=datasets.DATASETS)
  data_dir: str | None = option(
      None, "tensorflow_datasets directory holding a prepared CIFAR-10.")
  model: str | None = option(None, "Model to train (default: the data "
                             "set's, presets.DEFAULT_MODELS).",
                             choices=config_lib.MODELS)
  trials: int = option(10, "Trials (seeds 0..trials-1).")
  output_dir: str | None = option(
      None, "Directory of the runs (default runs/<dataset>).")
  report_dir: str | None = option(
      None, "Directory for the figures and "
      "summary.md (default <output_dir>/report).")
  progress: bool = option(False, "Show a progress bar per run (with "
                          "--workers=1).")
  workers: int = option(
      2, "Worker processes that train the runs, each with one TensorFlow "
      "thread.")


def define_flags():
  flags_lib.define(Options)
  # Unset settings take the data set's preset.
  flags_lib.define(presets.Settings, unset_defaults=True)


def _plan(options, model, output_dir, report_dir):
  """(settings, runs, data), every setting checked before any run starts."""
  pool.check_workers(options.workers)
  settings = dataclasses.replace(
      presets.preset(options.dataset, model),
      **flags_lib.values(presets.Settings, skip_unset=True))
  report.check_settings(settings)
  return settings, *design.checked_study(settings, options.trials, output_dir,
                                         report_dir, options.dataset,
                                         options.data_dir, model)


def _reproducing_command(options, model):
  """The command that reproduces the summary's numbers, whatever flags only
  placed the outputs or paced the run: a summary records what it is, not
  where it was written."""
  data_dir = {"data_dir": options.data_dir} if options.data_dir else {}
  return flags_lib.command(
      "tf_adasamp.experiment.reproduce", {
          "dataset": options.dataset,
          "model": model,
          "trials": options.trials,
          **flags_lib.values(presets.Settings, skip_unset=True),
          **data_dir
      })


def main():
  options = flags_lib.parse(PROGRAM, Options)
  model = options.model or presets.DEFAULT_MODELS[options.dataset]
  output_dir = options.output_dir or os.path.join("runs", options.dataset)
  report_dir = options.report_dir or os.path.join(output_dir, "report")
  try:
    settings, runs, data = _plan(options, model, output_dir, report_dir)
    pool.run_all(runs, data, progress=options.progress, workers=options.workers)
    replication = _replicate(options, settings, model, output_dir)
  except (TypeError, ValueError, datasets.DatasetUnavailableError) as error:
    # run_files.RunError is a ValueError: a run that cannot start or failed.
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)
  command = _reproducing_command(options, model)
  departures = presets.departures(options.dataset, model, settings,
                                  options.trials, len(data.y_train))
  title = (f"Adaptive vs uniform sampling on {options.dataset} ({model}), "
           f"{options.trials} trials")
  for path in report.report(runs,
                            settings,
                            options.trials,
                            title,
                            report_dir,
                            command,
                            departures,
                            dataset=options.dataset,
                            replication=replication):
    print(f"wrote {path}")


def _replicate(options, settings, model, output_dir):
  """Trains the headline comparison on the data set's replication, if it
  has one (presets.REPLICATIONS), into <output_dir>/replication; (its name,
  its runs) or None."""
  replica = presets.REPLICATIONS.get(options.dataset)
  if replica is None:
    return None
  runs = design.replication_plan(settings, options.trials,
                                 os.path.join(output_dir, "replication"),
                                 replica, options.data_dir, model)
  pool.run_all(runs,
               datasets.load(replica, options.data_dir),
               progress=options.progress,
               workers=options.workers)
  return replica, runs


def run():
  """Console-script entry point (tf-adasamp-reproduce)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
