"""The outer loop of a run: the train/evaluate schedule, checkpoints,
records and summaries, divergence and a lost worker.

At each evaluation point the controller evaluates, refuses a diverged model,
saves the checkpoint, then appends the record to metrics.jsonl and writes
the summaries. The checkpoint comes first: a run killed after it resumes at
that step and, finding no record of it, evaluates it again (the evaluation
reads the restored state, so the record is the one it would have written);
a run killed before it redoes the steps since the last checkpoint. Either
way no record, and no summary, is written twice.
"""

import contextlib
import math
import os

import tensorflow as tf

from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import summaries


class DivergedError(run_files.RunError):
  """The model's parameters or losses stopped being finite."""


class Controller:
  """Runs a Trainer to `config.num_steps`, evaluating every eval_interval.

  Owns the run's files in config.output_dir (none if it is empty): the
  `tf.train.CheckpointManager` of `checkpoint` in checkpoints/, the records
  in metrics.jsonl (run_files.MetricsLog) and the TensorBoard summaries in
  tensorboard/ (summaries.Summaries).
  """

  def __init__(self,
               trainer,
               evaluator,
               checkpoint,
               config,
               sampler=None,
               stop_requested=None):
    """`stop_requested`: an optional callable, asked before each call of
    the trainer; if it returns True, the run raises KeyboardInterrupt
    there (train.py's Ctrl-C, which Python can lose: a KeyboardInterrupt
    raised inside a garbage-collector callback is printed and dropped)."""
    self._trainer, self._evaluator = trainer, evaluator
    self._checkpoint, self._config = checkpoint, config
    self._sampler = sampler
    self._stop_requested = stop_requested or (lambda: False)
    self._manager = self._summaries = self._metrics = None
    if config.output_dir:
      directory = os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR)
      _check_is_directory_or_absent(directory)
      self._manager = tf.train.CheckpointManager(checkpoint,
                                                 directory,
                                                 max_to_keep=2)
      log_dir = os.path.join(config.output_dir, "tensorboard")
      with _io_errors_name(log_dir):
        self._summaries = summaries.Summaries(log_dir)

  def start(self, common_step=None, total_steps=None):
    """Restores the checkpoint to resume, if any, and records the run's
    start. `common_step`: a multi-worker run's `resume.common_checkpoint_step`;
    `total_steps`: the run's length, past which no checkpoint is restored.
    """
    path = self._checkpoint_to_resume(common_step)
    if path:
      resume.restore(self._checkpoint, path, total_steps)
    step = int(self._trainer.step)
    self._metrics = run_files.MetricsLog(self._config.output_dir,
                                         keep_until_step=step if path else -1)
    if not path:
      self._evaluate_and_save()
    elif self._metrics.last_step != step:
      # Killed between the checkpoint and its record.
      self._publish(self._evaluate())
    else:
      self._trainer.reset_interval()

  def train_and_evaluate(self, total_steps, progress_bar=None):
    """Trains to `total_steps`, evaluating at every multiple of
    eval_interval and at the end; returns the metric records."""
    config, trainer = self._config, self._trainer
    step = int(trainer.step)
    while step < total_steps:
      if self._stop_requested():
        raise KeyboardInterrupt
      next_record = (step // config.eval_interval + 1) * config.eval_interval
      count = min(config.steps_per_execution, next_record - step,
                  total_steps - step)
      output = self._train(count, step)
      step += output.steps
      if step % config.eval_interval == 0 or step == total_steps:
        self._evaluate_and_save()
      if progress_bar:
        progress_bar.update(step, output, self._sampler)
    return self._metrics.records

  def _train(self, count, step):
    """Runs `count` steps from `step`; raises DivergedError if a step's
    utilities were not finite, RunError if the cluster lost a worker."""
    try:
      output = self._trainer.train(count)
    except resume.LOST_WORKER_ERRORS as error:
      if self._config.strategy != "multi_worker":
        raise
      raise resume.lost_worker(error, f"after step {step}") from None
    if not output.finite:
      raise self._diverged(step + output.steps + 1, "non-finite utilities")
    return output

  def _evaluate(self):
    return self._evaluator.evaluate(int(self._trainer.step),
                                    self._trainer.distinct_draws_per_batch(),
                                    self._trainer.read_clocks())

  def _evaluate_and_save(self):
    evaluation = self._evaluate()
    record = evaluation.record
    if not math.isfinite(record["train_loss"]):
      raise self._diverged(record["step"],
                           f"training loss {record['train_loss']}")
    if self._manager:
      with _io_errors_name(self._manager.directory):
        self._manager.save(checkpoint_number=record["step"])
    self._publish(evaluation)

  def _publish(self, evaluation):
    self._metrics.append(evaluation.record)
    if self._summaries:
      with _io_errors_name(self._summaries.log_dir):
        self._summaries.write(evaluation)
    self._trainer.reset_interval()

  def _checkpoint_to_resume(self, common_step):
    """The path of the checkpoint to restore, or None for a new run."""
    if not self._manager:
      return None
    if self._config.strategy == "multi_worker":
      return resume.checkpoint_of_step(self._manager.directory, common_step)
    if not self._config.resume:
      return None
    directory = self._manager.directory
    # Unlike the manager's, this looks for the checkpoint's files too.
    path = tf.train.latest_checkpoint(directory)
    if path is None and (run_files.read_metrics(self._config.output_dir) or
                         os.path.isdir(directory) and os.listdir(directory)):
      raise run_files.RunError(
          f"cannot resume: {directory} has no readable checkpoint (its "
          "'checkpoint' file is missing or damaged, or names missing files) "
          "though the run has begun; leave out --resume and choose another "
          "output_dir to start over")
    return path

  def _diverged(self, step, cause):
    return DivergedError(
        f"the run diverged at step {step} ({cause}); try a learning_rate "
        f"smaller than {self._config.learning_rate:g}")


@contextlib.contextmanager
def _io_errors_name(path):
  """Turns a failed write under `path` into a RunError naming it."""
  try:
    yield
  except (OSError, tf.errors.OpError) as error:
    cause = getattr(error, "strerror", None) or getattr(error, "message",
                                                        None) or str(error)
    raise run_files.RunError(
        f"cannot write to {path}: {cause.strip().splitlines()[0][:200]}; "
        "the run stops, its last checkpoint kept") from None


def _check_is_directory_or_absent(path):
  if os.path.lexists(path) and not os.path.isdir(path):
    kind = "a dangling link" if os.path.islink(path) else "not a directory"
    raise run_files.RunError(
        f"{path} is {kind}, so the run's checkpoints cannot be read or "
        "written; move it away (and, to start over, the whole output_dir)")
