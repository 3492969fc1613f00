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
import glob
import math
import os
import re
import shutil

import tensorflow as tf

from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import summaries


class DivergedError(run_files.RunError):
  """The model's parameters or losses stopped being finite."""


# `resume_from` for a run that resumes its latest checkpoint.
LATEST = "latest"


class Controller:
  """Runs a Trainer to a number of steps, evaluating every `eval_interval`.

  Orbit's controller (tensorflow/models orbit/controller.py) in this run's
  terms: the trainer's `train(num_steps)` runs the steps, the evaluator's
  `evaluate` makes each metric record, and the controller owns the schedule
  and what a run writes: its checkpoints, its records in `output_dir`'s
  metrics.jsonl (run_files.MetricsLog) and its summaries.

  Args:
    trainer: a trainer.Trainer, or an object with its `step` variable and
      its `train`, `read_clocks`, `distinct_draws_per_batch` and
      `reset_interval` methods.
    evaluator: an evaluator.Evaluator, or an object with its `evaluate`.
    eval_interval: the steps between two evaluations; the run also
      evaluates at its start and at its end.
    early_evaluations: evaluations before the first eval_interval, at its
      half, quarter, eighth, ...: this many of them (those that fall on a
      step), so that a curve is dense where it moves fastest.
    steps_per_execution: the most steps one call of the trainer runs.
    checkpoint_manager: the tf.train.CheckpointManager of the trainer's
      state (`checkpoint_manager_in`), saved at each evaluation; None saves
      none.
    output_dir: the directory of the run's metrics.jsonl; None keeps the
      records in memory only.
    summaries: a summaries.Summaries that each record is written to, or
      None.
    resume_from: None to start a new run; LATEST to resume the manager's
      latest checkpoint; a step to resume the manager's checkpoint of that
      step (a multi-worker run's `resume.common_checkpoint_step`).
    multi_worker: whether the trainer runs on a cluster: a lost worker
      then ends the run with a RunError that says how to resume.
    divergence_advice: what a DivergedError's message advises, or None.
    sampler: the run's sampler, shown by the progress bar.
    stop_requested: an optional callable, asked before each call of the
      trainer; if it returns True, the run raises KeyboardInterrupt there
      (train.py's Ctrl-C, which Python can lose: a KeyboardInterrupt raised
      inside a garbage-collector callback is printed and dropped).
    prepare: an optional callable, run once before a new run's first
      evaluation, to make state that its checkpoints then hold (the
      irreducible losses of utility reducible_loss): a resumed run restores
      that state instead.

  Raises:
    ValueError: `eval_interval` or `steps_per_execution` is below 1, or
      `resume_from` is given without a `checkpoint_manager`.
  """

  def __init__(self,
               trainer,
               evaluator,
               *,
               eval_interval,
               early_evaluations=0,
               steps_per_execution=1,
               checkpoint_manager=None,
               output_dir=None,
               summaries=None,
               resume_from=None,
               multi_worker=False,
               divergence_advice=None,
               sampler=None,
               stop_requested=None,
               prepare=None):
    if eval_interval < 1 or steps_per_execution < 1:
      raise ValueError("eval_interval and steps_per_execution must be at "
                       f"least 1, not {eval_interval} and "
                       f"{steps_per_execution}")
    if early_evaluations < 0:
      raise ValueError("early_evaluations must be at least 0, not "
                       f"{early_evaluations}")
    if resume_from is not None and checkpoint_manager is None:
      raise ValueError("resume_from needs a checkpoint_manager to resume from")
    self._trainer, self._evaluator = trainer, evaluator
    self._eval_interval = eval_interval
    self._early_steps = sorted(
        {eval_interval >> k for k in range(1, early_evaluations + 1)} - {0})
    self._steps_per_execution = steps_per_execution
    self._manager, self._output_dir = checkpoint_manager, output_dir
    self._summaries, self._resume_from = summaries, resume_from
    self._multi_worker = multi_worker
    self._divergence_advice = divergence_advice
    self._sampler = sampler
    self._stop_requested = stop_requested or (lambda: False)
    self._prepare = prepare or (lambda: None)
    self._metrics = None

  def start(self, total_steps=None):
    """Restores the checkpoint to resume, if any (else runs `prepare`), and
    records the run's start.

    Args:
      total_steps: the run's length, past which no checkpoint is restored.

    Raises:
      run_files.RunError: the checkpoint to resume cannot be found or
        restored, the run diverged, or a file cannot be written.
    """
    path = self._checkpoint_to_resume()
    if path:
      resume.restore(self._manager.checkpoint, path, total_steps)
    step = int(self._trainer.step)
    self._metrics = run_files.MetricsLog(self._output_dir,
                                         keep_until_step=step if path else -1)
    if not path:
      self._prepare()
      self._evaluate_and_save()
    elif self._metrics.last_step != step:
      # Killed between the checkpoint and its record.
      self._publish(self._evaluate())
    else:
      self._trainer.reset_interval()

  def train_and_evaluate(self, total_steps, progress_bar=None):
    """Trains to `total_steps`, evaluating at the early evaluations, at
    every multiple of eval_interval and at the end.

    Each call of the trainer runs at most steps_per_execution steps and
    stops at the next evaluation.

    Args:
      total_steps: the step the run ends at.
      progress_bar: an optional progress.ProgressBar, updated after each
        call of the trainer.

    Returns:
      The run's metric records, those of the steps before a resume included.

    Raises:
      KeyboardInterrupt: `stop_requested` returned True.
      DivergedError: the model diverged; the last checkpoint is kept.
      run_files.RunError: the cluster lost a worker, or a file cannot be
        written.
    """
    trainer = self._trainer
    step = int(trainer.step)
    while step < total_steps:
      if self._stop_requested():
        raise KeyboardInterrupt
      count = min(self._steps_per_execution,
                  self._next_record(step) - step, total_steps - step)
      output = self._train(count, step)
      step += output.steps
      if self._is_record(step) or step == total_steps:
        self._evaluate_and_save()
      if progress_bar:
        progress_bar.update(step, output, self._sampler)
    return self._metrics.records

  def _next_record(self, step):
    """The first evaluation point after `step`."""
    early = [s for s in self._early_steps if s > step]
    if early:
      return early[0]
    return (step // self._eval_interval + 1) * self._eval_interval

  def _is_record(self, step):
    return step % self._eval_interval == 0 or step in self._early_steps

  def _train(self, count, step):
    """Runs `count` steps from `step`; raises DivergedError if a step's
    utilities were not finite, RunError if the cluster lost a worker."""
    try:
      output = self._trainer.train(count)
    except resume.LOST_WORKER_ERRORS as error:
      if not self._multi_worker:
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
      self._save(record["step"])
    self._publish(evaluation)

  def _save(self, step):
    """Saves the checkpoint of `step`; a failed save (a full disk) leaves no
    temporary files behind, and the first leaves no checkpoints/ at all, so
    that the directory holds no run to resume, and a new run may start."""
    directory = self._manager.directory
    first = self._manager.latest_checkpoint is None
    try:
      with _io_errors_name(
          directory, "before its first checkpoint: run it again without "
          "--resume" if first else _KEPT):
        path = self._manager.save(checkpoint_number=step)
        # What resuming checks the files against (resume.check_checkpoint).
        run_files.record_checkpoint_digest(path)
    except run_files.RunError:
      if first:  # all that checkpoints/ holds is this save's
        shutil.rmtree(directory, ignore_errors=True)
      prefix = glob.escape(os.path.join(directory, f"ckpt-{step}"))
      for path in glob.glob(prefix + "_temp*"):
        shutil.rmtree(path, ignore_errors=True)
      raise

  def _publish(self, evaluation):
    self._metrics.append(evaluation.record)
    if self._summaries:
      with _io_errors_name(self._summaries.log_dir):
        self._summaries.write(evaluation)
    self._trainer.reset_interval()

  def _checkpoint_to_resume(self):
    """The path of the checkpoint to restore, or None for a new run."""
    if self._resume_from is None:
      return None
    if self._resume_from != LATEST:
      return resume.checkpoint_of_step(self._manager.directory,
                                       self._resume_from)
    return resume.checkpoint_to_resume(self._output_dir)

  def _diverged(self, step, cause):
    advice = f"; {self._divergence_advice}" if self._divergence_advice else ""
    return DivergedError(f"the run diverged at step {step} ({cause}){advice}")


def checkpoint_manager_in(output_dir, checkpoint):
  """The CheckpointManager of `checkpoint` in `output_dir`/checkpoints/,
  which keeps the last two.

  Args:
    output_dir: the run's output directory.
    checkpoint: the tf.train.Checkpoint of the trainer's state.

  Returns:
    A tf.train.CheckpointManager.

  Raises:
    run_files.RunError: checkpoints/ is there but not a directory.
  """
  run_files.check_checkpoints_dir(output_dir)
  return tf.train.CheckpointManager(checkpoint,
                                    os.path.join(output_dir,
                                                 run_files.CHECKPOINTS_DIR),
                                    max_to_keep=2)


def summaries_in(output_dir, data=None):
  """The summaries.Summaries of a run, in `output_dir`/tensorboard/, over
  its `data` (see Summaries).

  Raises:
    run_files.RunError: the directory cannot be written.
  """
  log_dir = os.path.join(output_dir, "tensorboard")
  with _io_errors_name(log_dir, "before it trains"):
    return summaries.Summaries(log_dir, data)


# What becomes of a run that a failed write stops after a checkpoint.
_KEPT = "its last checkpoint kept"


@contextlib.contextmanager
def _io_errors_name(path, outcome=_KEPT):
  """Turns a failed write under `path` into a RunError naming it, why (a
  full disk: "No space left on device") and the run's `outcome`."""
  try:
    yield
  except (OSError, tf.errors.OpError) as error:
    raise run_files.RunError(f"cannot write to {path}: {_reason(error)}; the "
                             f"run stops, {outcome}") from None


def _reason(error):
  """Why a write failed, in one line: an OSError's strerror, or TensorFlow's
  message without its function wrapper and op name, the reason that its
  file errors end with ("<file>; No space left on device") first."""
  if getattr(error, "strerror", None):
    return error.strerror
  text = getattr(error, "message", None) or str(error)
  text = re.sub(r"\{\{function_node [^}]*\}\}", "", text).strip()
  text = text.splitlines()[0] if text else type(error).__name__
  text = re.sub(r"\s*\[Op:\w+\]$", "", text)  # as raised eagerly
  where, _, reason = text.rpartition("; ")
  return f"{reason} ({where})" if where else text[:200]
