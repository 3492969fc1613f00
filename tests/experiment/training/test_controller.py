"""The Controller driven by a fake trainer and evaluator, as Orbit's
controller_test.py drives its own: the schedule, resumption, divergence, a
lost worker and a stop request, with no model."""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from run_records import tiny_config
from tf_adasamp.experiment.training import controller
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training.evaluator import Evaluation
from tf_adasamp.experiment.training.trainer import TrainOutput

ADVICE = "try a learning_rate smaller than 0.1"


class FakeTrainer(tf.Module):
  """Counts steps in `step` and records the size of each `train` call.

  The utilities of step `diverge_at` (counted from 1) are not finite: the
  call that reaches it stops before it, as Trainer's loop does, and a call
  after that raises AssertionError (a controller that went on would never
  reach it). `error`, if set, is raised by the next call.
  """

  def __init__(self, diverge_at=None):
    super().__init__()
    self.step = tf.Variable(0, dtype=tf.int64)
    self.calls = []
    self.error = None
    self.diverged = False
    self._diverge_at = diverge_at

  def train(self, num_steps):
    self.calls.append(num_steps)
    if self.error is not None:
      raise self.error
    if self.diverged:
      raise AssertionError("trained on after a divergence")
    start = int(self.step)
    steps, finite = num_steps, True
    if self._diverge_at is not None and self._diverge_at <= start + num_steps:
      steps, finite = self._diverge_at - 1 - start, False
      self.diverged = True
    self.step.assign_add(steps)
    return TrainOutput(steps=steps,
                       mean_loss=0.0,
                       mean_accuracy=0.0,
                       finite=finite)

  def distinct_draws_per_batch(self):
    return None

  def read_clocks(self):
    return {}

  def reset_interval(self):
    pass


class FakeEvaluator:
  """Makes a record from the step alone; its training loss is NaN at step
  `nan_loss_at`. `steps` lists the steps it evaluated."""

  def __init__(self, nan_loss_at=None):
    self.steps = []
    self._nan_loss_at = nan_loss_at

  def evaluate(self, step, distinct_draws_per_batch=None, clocks=None):
    del distinct_draws_per_batch, clocks  # Not part of these records.
    self.steps.append(step)
    loss = math.nan if step == self._nan_loss_at else 1.0 / (1 + step)
    record = {"step": step, "train_loss": loss}
    return Evaluation(record=record, log_probabilities=np.zeros(1))


def make_controller(trainer,
                    evaluator,
                    output_dir=None,
                    eval_interval=2,
                    steps_per_execution=1,
                    **kwargs):
  """A Controller of `trainer`, checkpointing its step in `output_dir`."""
  manager = None
  if output_dir is not None:
    manager = controller.checkpoint_manager_in(
        output_dir, tf.train.Checkpoint(step=trainer.step))
  return controller.Controller(trainer,
                               evaluator,
                               eval_interval=eval_interval,
                               steps_per_execution=steps_per_execution,
                               checkpoint_manager=manager,
                               output_dir=output_dir,
                               divergence_advice=ADVICE,
                               **kwargs)


def run(total_steps, trainer=None, evaluator=None, **kwargs):
  """Starts a Controller and trains to `total_steps`; its records."""
  trainer = trainer or FakeTrainer()
  evaluator = evaluator or FakeEvaluator()
  ctl = make_controller(trainer, evaluator, **kwargs)
  ctl.start()
  return ctl.train_and_evaluate(total_steps)


def checkpoint_steps(output_dir):
  state = tf.train.get_checkpoint_state(f"{output_dir}/checkpoints")
  return [resume.checkpoint_step(p) for p in state.all_model_checkpoint_paths]


def expected_records(steps):
  return [FakeEvaluator().evaluate(step).record for step in steps]


@pytest.mark.parametrize(
    "eval_interval,steps_per_execution,total_steps,calls,record_steps", [
        (3, 2, 8, [2, 1, 2, 1, 2], [0, 3, 6, 8]),
        (2, 5, 5, [2, 2, 1], [0, 2, 4, 5]),
        (4, 4, 8, [4, 4], [0, 4, 8]),
        (3, 1, 4, [1, 1, 1, 1], [0, 3, 4]),
        (5, 3, 0, [], [0]),
    ])
def test_evaluates_at_each_multiple_of_eval_interval_and_at_the_end(
    eval_interval, steps_per_execution, total_steps, calls, record_steps):
  trainer, evaluator = FakeTrainer(), FakeEvaluator()
  records = run(total_steps,
                trainer,
                evaluator,
                eval_interval=eval_interval,
                steps_per_execution=steps_per_execution)
  # A call runs at most steps_per_execution steps and ends at the next
  # evaluation.
  assert trainer.calls == calls
  assert evaluator.steps == record_steps
  assert records == expected_records(record_steps)


@pytest.mark.parametrize(
    "early_evaluations,record_steps",
    [
        (0, [0, 8, 16, 20]),
        (2, [0, 2, 4, 8, 16, 20]),
        (3, [0, 1, 2, 4, 8, 16, 20]),
        # Halving 8 more than 3 times reaches no further step.
        (10, [0, 1, 2, 4, 8, 16, 20]),
    ])
def test_early_evaluations_halve_the_first_interval(early_evaluations,
                                                    record_steps):
  trainer, evaluator = FakeTrainer(), FakeEvaluator()
  records = run(20,
                trainer,
                evaluator,
                eval_interval=8,
                steps_per_execution=5,
                early_evaluations=early_evaluations)
  assert evaluator.steps == record_steps
  assert records == expected_records(record_steps)


def test_a_run_resumed_before_its_early_evaluations_makes_them(tmp_path):
  output_dir = str(tmp_path)
  trainer = FakeTrainer()
  run(1, trainer, output_dir=output_dir, eval_interval=8, early_evaluations=3)
  evaluator = FakeEvaluator()
  records = run(10,
                trainer,
                evaluator,
                output_dir=output_dir,
                eval_interval=8,
                early_evaluations=3,
                resume_from=controller.LATEST)
  assert evaluator.steps == [2, 4, 8, 10]
  assert records == expected_records([0, 1, 2, 4, 8, 10])


def test_checkpoints_at_each_evaluation_and_keeps_the_last_two(tmp_path):
  output_dir = str(tmp_path)
  records = run(7, output_dir=output_dir, eval_interval=3)
  assert checkpoint_steps(output_dir) == [6, 7]
  assert run_files.read_metrics(output_dir) == records
  assert records == expected_records([0, 3, 6, 7])


def test_resume_between_a_checkpoint_and_its_record_makes_the_record_once(
    tmp_path):
  output_dir = str(tmp_path)
  run(4, output_dir=output_dir)
  assert checkpoint_steps(output_dir) == [2, 4]
  # A kill after step 4's checkpoint, before its record.
  records = run_files.read_metrics(output_dir)
  run_files.write_atomically(f"{output_dir}/{run_files.METRICS_FILE}",
                             "".join(json.dumps(r) + "\n" for r in records[:2]))
  assert [r["step"] for r in run_files.read_metrics(output_dir)] == [0, 2]

  trainer, evaluator = FakeTrainer(), FakeEvaluator()
  records = run(6,
                trainer,
                evaluator,
                output_dir=output_dir,
                resume_from=controller.LATEST)
  assert evaluator.steps == [4, 6]
  assert trainer.calls == [1, 1]
  assert records == expected_records([0, 2, 4, 6])
  assert run_files.read_metrics(output_dir) == records


def test_resume_from_an_earlier_checkpoint_makes_its_later_records_again_once(
    tmp_path):
  # A multi-worker run goes back to the latest checkpoint all its workers
  # have: here step 2, though this worker has recorded step 4.
  output_dir = str(tmp_path)
  run(4, output_dir=output_dir)
  trainer, evaluator = FakeTrainer(), FakeEvaluator()
  records = run(6, trainer, evaluator, output_dir=output_dir, resume_from=2)
  assert evaluator.steps == [4, 6]
  assert records == expected_records([0, 2, 4, 6])
  assert run_files.read_metrics(output_dir) == records


def test_resume_with_no_readable_checkpoint_of_a_begun_run_is_refused(tmp_path):
  output_dir = str(tmp_path)
  run(2, output_dir=output_dir)
  (tmp_path / "checkpoints" / "checkpoint").unlink()
  before = (tmp_path / run_files.METRICS_FILE).read_text()
  ctl = make_controller(FakeTrainer(),
                        FakeEvaluator(),
                        output_dir=output_dir,
                        resume_from=controller.LATEST)
  with pytest.raises(run_files.RunError, match="no readable checkpoint"):
    ctl.start()
  assert (tmp_path / run_files.METRICS_FILE).read_text() == before


@pytest.mark.parametrize("steps_per_execution,diverge_at", [(1, 5), (4, 6),
                                                            (4, 5), (3, 8)])
def test_non_finite_utilities_raise_naming_the_step_and_keep_the_checkpoint(
    tmp_path, steps_per_execution, diverge_at):
  output_dir = str(tmp_path)
  with pytest.raises(controller.DivergedError,
                     match=f"^the run diverged at step {diverge_at} "
                     f"\\(non-finite utilities\\); {ADVICE}$"):
    run(10,
        FakeTrainer(diverge_at=diverge_at),
        output_dir=output_dir,
        eval_interval=4,
        steps_per_execution=steps_per_execution)
  last = (diverge_at - 1) // 4 * 4
  assert checkpoint_steps(output_dir)[-1] == last
  assert [r["step"] for r in run_files.read_metrics(output_dir)
         ] == list(range(0, last + 1, 4))


def test_a_non_finite_training_loss_raises_before_its_checkpoint(tmp_path):
  output_dir = str(tmp_path)
  with pytest.raises(controller.DivergedError,
                     match=f"^the run diverged at step 4 \\(training loss "
                     f"nan\\); {ADVICE}$"):
    run(6, evaluator=FakeEvaluator(nan_loss_at=4), output_dir=output_dir)
  assert checkpoint_steps(output_dir) == [0, 2]
  assert [r["step"] for r in run_files.read_metrics(output_dir)] == [0, 2]


def test_a_stop_request_interrupts_before_the_next_call_of_the_trainer():
  trainer = FakeTrainer()
  ctl = make_controller(trainer,
                        FakeEvaluator(),
                        steps_per_execution=3,
                        eval_interval=10,
                        stop_requested=lambda: len(trainer.calls) == 2)
  ctl.start()
  with pytest.raises(KeyboardInterrupt):
    ctl.train_and_evaluate(20)
  assert trainer.calls == [3, 3]
  assert int(trainer.step) == 6


def test_a_lost_worker_of_a_cluster_ends_the_run_saying_how_to_resume():
  trainer = FakeTrainer()
  ctl = make_controller(trainer, FakeEvaluator(), multi_worker=True)
  ctl.start()
  ctl.train_and_evaluate(2)
  trainer.error = tf.errors.UnavailableError(None, None, "worker 1 is gone")
  with pytest.raises(run_files.RunError,
                     match="lost a worker after step 2 .*--resume"):
    ctl.train_and_evaluate(4)


def test_outside_a_cluster_a_lost_worker_error_is_raised_as_it_is():
  trainer = FakeTrainer()
  ctl = make_controller(trainer, FakeEvaluator())
  ctl.start()
  trainer.error = tf.errors.UnavailableError(None, None, "worker 1 is gone")
  with pytest.raises(tf.errors.UnavailableError):
    ctl.train_and_evaluate(4)


@pytest.mark.parametrize("arguments,message", [
    (dict(eval_interval=0), "eval_interval"),
    (dict(steps_per_execution=0), "steps_per_execution"),
    (dict(early_evaluations=-1), "early_evaluations"),
    (dict(resume_from=controller.LATEST), "needs a checkpoint_manager"),
])
def test_bad_arguments_are_refused(arguments, message):
  with pytest.raises(ValueError, match=message):
    make_controller(FakeTrainer(), FakeEvaluator(), **arguments)


# How TensorFlow's save reports a full disk.
NO_SPACE = ("{{function_node __wrapped__SaveV2_dtypes_3_device_/job:localhost/"
            "replica:0/task:0/device:CPU:0}} {prefix}_temp/part-00000-of-00001"
            ".data-00000-of-00001.tempstate6995516213684397185; No space left "
            "on device")


def failing_save(manager, fail_at):
  """Makes `manager`'s save of step `fail_at` fail as on a full disk, after
  leaving what TensorFlow leaves: its temporary folder, part of a file."""
  save = manager.save

  def saved(checkpoint_number):
    if checkpoint_number != fail_at:
      return save(checkpoint_number=checkpoint_number)
    prefix = f"{manager.directory}/ckpt-{checkpoint_number}"
    os.makedirs(f"{prefix}_temp")
    with open(f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001", "w"):
      pass
    raise tf.errors.ResourceExhaustedError(None, None,
                                           NO_SPACE.replace("{prefix}", prefix))

  manager.save = saved


@pytest.mark.parametrize("fail_at", [0, 2])
def test_a_save_on_a_full_disk_says_so_and_leaves_no_temporary(
    tmp_path, fail_at):
  output_dir = str(tmp_path)
  ctl = make_controller(FakeTrainer(), FakeEvaluator(), output_dir=output_dir)
  failing_save(ctl._manager, fail_at)
  directory = f"{output_dir}/checkpoints"
  with pytest.raises(run_files.RunError) as raised:
    ctl.start()
    ctl.train_and_evaluate(4)
  message = str(raised.value)
  assert message.startswith(
      f"cannot write to {directory}: No space left on device "
      f"({directory}/ckpt-{fail_at}_temp/part-00000-of-00001")
  if fail_at == 0:
    # Nothing to resume, and nothing that would read as a run.
    assert message.endswith("before its first checkpoint: run it again "
                            "without --resume")
    assert not os.path.exists(directory)
    assert not run_files.holds_checkpoints(output_dir)
  else:
    assert message.endswith("the run stops, its last checkpoint kept")
    assert sorted(os.listdir(directory)) == [
        "checkpoint", "ckpt-0.data-00000-of-00001", "ckpt-0.index",
        "ckpt-0.sha256"
    ]


def test_the_temporary_folder_of_a_cut_save_is_not_a_run(tmp_path):
  # A kill during a run's first save leaves checkpoints/ckpt-0_temp.
  (tmp_path / "checkpoints" / "ckpt-0_temp").mkdir(parents=True)
  assert not run_files.holds_checkpoints(str(tmp_path))
  with pytest.raises(run_files.RunError, match="holds no run"):
    run_files.check_resumable(str(tmp_path))
  records = run(2, output_dir=str(tmp_path))
  assert records == expected_records([0, 2])


@pytest.mark.parametrize("utility,jit_compile,when",
                         [("l1", False, "at step 1"), ("l1", True, "at step 1"),
                          ("zero_one", False, "at step 2")])
def test_diverging_run_names_its_step_and_keeps_its_checkpoint(
    digits, tmp_path, utility, jit_compile, when):
  # l1: step 1's update leaves NaN weights, so its utilities (of the updated
  # model) are NaN: the step reports them and the loop stops there, compiled
  # by XLA or not. zero_one stays finite, and the evaluation at step 2 finds
  # the NaN loss.
  config = tiny_config(model="cnn",
                       learning_rate=1e30,
                       utility=utility,
                       utility_at="updated",
                       steps=4,
                       eval_interval=2,
                       jit_compile=jit_compile,
                       output_dir=str(tmp_path))
  with pytest.raises(controller.DivergedError,
                     match=f"diverged {when} .*smaller than 1e\\+30"):
    loop.train(config, data=digits)
  assert [r["step"] for r in run_files.read_metrics(str(tmp_path))] == [0]
