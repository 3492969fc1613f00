"""Adaptive sampling under label noise, and the controls that limit it.

Trains the main regime with 20% and 40% of its training labels flipped:
uniform sampling, Algorithm 1 at several amplitudes, and Algorithm 1 with
each control (tf_adasamp.experiment.study.noise), then writes summary.md
and flipped_share.png, which say which setting a user with noisy labels
should choose, and wall_time.md, the training seconds to target:

  python -m tf_adasamp.experiment.noise_study --trials=10 \\
      --output_dir=runs/label_noise --report_dir=docs/experiment/label_noise

Interrupted, it resumes where it stopped when run again.
"""

import dataclasses
import os
import sys

from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import noise
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-noise-study"


@dataclasses.dataclass(frozen=True)
class Options:
  """How many trials, and where the runs and the report go."""
  trials: int = option(
      10, "Trials (seeds 0..trials-1) per variant and noise "
      "level.")
  output_dir: str = option("runs/label_noise", "Directory of the runs.")
  report_dir: str | None = option(
      None, "Directory for summary.md and "
      "flipped_share.png (default <output_dir>/report).")
  workers: int = option(
      2, "Worker processes that train the runs, each "
      "with one TensorFlow thread.")


def define_flags():
  flags_lib.define(Options)


def main():
  options = flags_lib.parse(PROGRAM, Options)
  report_dir = options.report_dir or os.path.join(options.output_dir, "report")
  settings = presets.preset(noise.DATASET, noise.MODEL)
  try:
    pool.check_workers(options.workers)
    design.check_trials(options.trials)
    runs = noise.plan(options.trials, options.output_dir, settings)
    run_files.ensure_writable_dir(options.output_dir, "output_dir")
    run_files.ensure_writable_dir(report_dir, "report_dir")
    data = datasets.load(noise.DATASET)
    pool.run_all(runs, data, workers=options.workers)
  except (TypeError, ValueError, datasets.DatasetUnavailableError) as error:
    # run_files.RunError is a ValueError: a path, or a run that failed.
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)
  collected = noise.collect(runs)
  command = ("python -m tf_adasamp.experiment.noise_study "
             f"--trials={options.trials}")
  summary = os.path.join(report_dir, "summary.md")
  run_files.write_atomically(
      summary,
      noise.summary_markdown(collected, settings, options.trials, command))
  wall_time = os.path.join(report_dir, "wall_time.md")
  run_files.write_atomically(
      wall_time, noise.wall_time_markdown(collected, options.trials))
  figure = os.path.join(report_dir, "flipped_share.png")
  noise.plot_flipped_share(collected, figure)
  print(f"wrote {summary}\nwrote {wall_time}\nwrote {figure}")


def run():
  """Console-script entry point (tf-adasamp-noise-study)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
