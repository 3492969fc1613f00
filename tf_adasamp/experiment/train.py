"""Trains a classifier with adaptive or uniform sampling SGD.

London, NIPS 2017, Algorithm 1, on CIFAR-10 (the paper's experiment) or, with
no network and no data, on scikit-learn's bundled digits:

  python -m tf_adasamp.experiment.train --dataset=digits --sampling=adaptive \\
      --utility=zero_one --optimizer=sgd --steps=2000 --output_dir=runs/a

Writes metrics.jsonl (one JSON record per evaluation), TensorBoard summaries
and checkpoints under --output_dir; --resume continues a stopped run and gives
the same metrics as an uninterrupted one. --data_path trains from an
ArrayRecord file of images on disk instead (docs/data.md, "The trainer").
Flags may come from --flagfile.
"""

import os
import signal
import sys

from absl import flags

from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

PROGRAM = "tf-adasamp-train"
FLAGS = flags.FLAGS


def define_flags():
  flags_lib.define(config_lib.TrainConfig)
  flags.DEFINE_bool("progress", True, "Show a progress bar.")


def main():
  if FLAGS["output_dir"].present and not FLAGS.output_dir:
    sys.exit(f"{PROGRAM}: output_dir is empty; name a directory, or leave "
             "out --output_dir for runs/train")
  config = flags_lib.parse(PROGRAM,
                           config_lib.TrainConfig,
                           output_dir=FLAGS.output_dir or "runs/train")
  if config.data_path is not None and FLAGS["dataset"].present:
    sys.exit(f"{PROGRAM}: --data_path replaces --dataset; give one of them")
  for name in ("data_path", "test_data_path"):
    path = getattr(config, name)
    if path is not None and not os.path.isfile(path):
      sys.exit(f"{PROGRAM}: {name} {path!r} is not a file")
  if config.data_dir is not None and not os.path.isdir(config.data_dir):
    sys.exit(f"{PROGRAM}: data_dir {config.data_dir!r} is not a directory")
  try:
    # Before TensorFlow loads (seconds): a bad --output_dir fails at once.
    if config.resume:
      run_files.check_resumable(config.output_dir)
    run_files.ensure_writable_dir(config.output_dir)
    run_files.check_output_dir(config)
    if config.resume and config.data_path is not None:
      run_files.check_data(
          config.output_dir,
          run_files.data_files_identity(config.data_path,
                                        config.test_data_path))
  except run_files.RunError as error:
    sys.exit(f"{PROGRAM}: {error}")
  try:
    # Only now, with good flags, TensorFlow loads.
    from tf_adasamp.experiment.training import loop
    from tf_adasamp.experiment.training import resume
  except KeyboardInterrupt:
    flags_lib.interrupted(PROGRAM, "training had not begun")
  interrupts = _Interrupts()
  signal.signal(signal.SIGINT, interrupts.handle)
  try:
    records = loop.train(config,
                         progress=FLAGS.progress,
                         stop_requested=interrupts.requested)
  except (datasets.DatasetUnavailableError, run_files.RunError) as error:
    sys.exit(f"{PROGRAM}: {error}")
  except KeyboardInterrupt:
    try:
      step = resume.last_checkpoint_step(config.output_dir)
    except run_files.RunError:  # its checkpoint state was edited meanwhile
      step = None
    flags_lib.interrupted(
        PROGRAM, "no checkpoint was written yet" if step is None else
        f"the last checkpoint is of step {step}: the same command "
        "with --resume goes on from it")
  final = records[-1]
  print(f"step {final['step']}: train loss {final['train_loss']:.4f}, "
        f"train accuracy {final['train_accuracy']:.4f}, test accuracy "
        f"{final['test_accuracy']:.4f}; metrics in {config.output_dir}")


class _Interrupts:
  """Ctrl-C (SIGINT), raised as KeyboardInterrupt and remembered: Python
  drops a KeyboardInterrupt raised inside a garbage-collector callback (one
  that a library registered), so training also asks `requested()` between
  its calls."""

  def __init__(self):
    self._count = 0

  def handle(self, signum, frame):
    self._count += 1
    signal.default_int_handler(signum, frame)

  def requested(self):
    return self._count > 0


def run():
  """Console-script entry point (tf-adasamp-train)."""
  flags_lib.run(PROGRAM, define_flags, main, quiet=True)


if __name__ == "__main__":
  run()
