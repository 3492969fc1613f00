"""Wall time to target: the experiment's runs trained one at a time.

Trains, trial by trial, the uniform baselines, importance sampling and the
swept adaptive algorithm at each amplitude under both utility options, one
run at a time with one TensorFlow thread, and writes wall_time.md
(tf_adasamp.experiment.study.timing): the training seconds each needs to
reach each target, against uniform sampling and random reshuffling. The main
regime's (`make wall-time`):

  python -m tf_adasamp.experiment.wall_time --trials=10 \\
      --output_dir=runs/wall_time/fashion_mnist_5k \\
      --report=docs/experiment/fashion_mnist_5k/wall_time.md

Nothing else should run on the machine meanwhile. Interrupted, it resumes
where it stopped when run again; finished runs are only reported again.
"""

import dataclasses
import os
import sys

from tf_adasamp import _validation
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import timing
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-wall-time"
DATASET, MODEL = "fashion_mnist_5k", "mlp"


@dataclasses.dataclass(frozen=True)
class Options:
  """How many trials and amplitudes, and where the runs and report go."""
  trials: int = option(10, "Trials (seeds 0..trials-1).")
  amplitudes: tuple = option(
      (0.1, 0.3, 1.0, 3.0), "Comma-separated amplitudes of the swept "
      "algorithm to time (those of the experiment's sweep that do not "
      "collapse).")
  output_dir: str = option(f"runs/wall_time/{DATASET}",
                           "Directory of the runs.")
  report: str | None = option(
      None, "Path of wall_time.md (default "
      "<output_dir>/wall_time.md).")


def define_flags():
  flags_lib.define(Options)


def main():
  options = flags_lib.parse(PROGRAM, Options)
  report = options.report or os.path.join(options.output_dir, "wall_time.md")
  settings = presets.preset(DATASET, MODEL)
  try:
    design.check_trials(options.trials)
    amplitudes = tuple(options.amplitudes)
    if not amplitudes:
      raise ValueError("--amplitudes is empty: no adaptive run would be "
                       "timed; give at least one amplitude")
    if len(set(amplitudes)) < len(amplitudes):
      raise ValueError(f"--amplitudes holds an amplitude twice: {amplitudes}")
    for amplitude in amplitudes:
      _validation.amplitude(amplitude)
    runs = timing.plan(settings, amplitudes, options.trials, options.output_dir,
                       DATASET, MODEL)
    run_files.ensure_writable_dir(options.output_dir, "output_dir")
    run_files.ensure_writable_file(report, "report")
    data = datasets.load(DATASET)
    # One thread, as each worker of the experiment's pool.
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    pool.run_all(runs, data, workers=1)
  except (TypeError, ValueError, datasets.DatasetUnavailableError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)
  command = ("python -m tf_adasamp.experiment.wall_time "
             f"--trials={options.trials} --amplitudes="
             f"{','.join(f'{a:g}' for a in amplitudes)}")
  title = f"{DATASET} ({MODEL}), one run at a time"
  run_files.write_atomically(
      report, timing.markdown(runs, settings, title, command, timing.machine()))
  print(f"wrote {report}")
  figure = timing.heldout_figure(runs, settings,
                                 os.path.dirname(report) or ".", title)
  print(f"wrote {figure}")


def run():
  """Console-script entry point (tf-adasamp-wall-time)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
