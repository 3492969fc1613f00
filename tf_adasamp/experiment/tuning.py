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
import os
import sys

from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import tuning
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import tuning_report
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-tuning"


def define_flags():
  flags_lib.define(tuning_options.Options)


def main():
  options = flags_lib.parse(PROGRAM, tuning_options.Options)
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
    tuning_options.check_options(options, settings)
    full = datasets.load(options.dataset, options.data_dir)
    tuning_options.check_data(options, full, settings)
    results = tuning.tune(options, full, settings)
  except (TypeError, ValueError, RuntimeError, datasets.DatasetUnavailableError,
          run_files.RunError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)
  command = " ".join(["python -m tf_adasamp.experiment.tuning", *sys.argv[1:]])
  tuning_report.write(results, options.report, command)
  print(f"wrote {options.report}")


def run():
  """Console-script entry point (python -m tf_adasamp.experiment.tuning)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
