"""The paper's experiment at its own scale: its CNN on all 60,000
Fashion-MNIST training images and 10,000 test images, compiled by XLA, on a
GPU. benchmarks/gpu_cnn_study.sh runs it there; docs/experiment/cnn/README.md
gives the budget.

  --stage=study      trains the runs (resumable: finished runs are skipped,
                     cut ones go on from their last checkpoint), then writes
                     raw_metrics.jsonl.gz (every run's metric records in one
                     gzip'd JSON-lines file, its first line the settings),
                     and from that file alone Figure 1 and summary.md.
  --stage=report     the same archive, figure and summary from the trials
                     whose runs all finished, training nothing: a study the
                     device's time cut short, which its summary says.
  --stage=recompute  rewrites summary.md from raw_metrics.jsonl.gz alone (no
                     runs, no TensorFlow); --check compares it, byte for
                     byte, with the summary.md beside the archive instead.
  --stage=measure    steps per second of --workers processes sharing the
                     device, each training one run, against one process,
                     start-up and compilation included, and the seconds an
                     evaluation takes; written as JSON.

Where a device's time is short, --fit_seconds=S cuts the study's length (in
epochs, never its trials) to what the measured throughput predicts will
finish in S seconds (`epochs_that_fit`), decided before any run of the study
starts and kept in <report_dir>/length.json for the calls that resume it.

tf_adasamp.experiment.carry carries the runs directory off a lent device
and back, where --stage=study (or tuning) resumes them.

--scale=gpu is the paper's protocol (presets' ("fashion_mnist", "cnn"), 10
trials); --scale=cpu_smoke takes the same path at toy size on a CPU.
--tuned reads tf_adasamp.experiment.tuning's JSON for the step sizes,
amplitude and decay.
"""

import sys

from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.study import cnn
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.training import datasets

PROGRAM = "tf-adasamp-cnn-study"


def main():
  options = flags_lib.parse(PROGRAM, cnn.Options)
  try:
    cnn.check_options(options)
    if options.stage == "recompute":
      print(cnn.recompute(options))
    elif options.stage == "measure":
      print(f"wrote {cnn.measure(options)}")
    elif options.stage == "report":
      print(f"wrote {cnn.report_finished_trials(options)}")
    else:
      print(f"wrote {cnn.run_study(options)}")
  except (TypeError, ValueError, OSError,
          datasets.DatasetUnavailableError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, pool.INTERRUPTED)


def define_flags():
  flags_lib.define(cnn.Options)


def run():
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
