"""The trainer's compiled loop (tf_adasamp.experiment.training.trainer)."""

import pytest
import tensorflow as tf

from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp.bound_tracker import BoundTracker
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training.trainer import Trainer


def constant_step():
  """A train step's outputs: loss, accuracy, drawn indices, utilities."""
  return (tf.constant(1.0), tf.constant(0.5), tf.constant([1, 2], tf.int64),
          tf.constant([0.0, 1.0], tf.float64))


def test_the_compiled_loop_is_one_program_for_every_step_count():
  # A call that stops at an evaluation runs fewer steps than the others: a
  # trip count baked into the program would compile the loop once per count
  # (seconds each for the paper's CNN on a GPU).
  tracker = BoundTracker(10, 1.0, 0.5, static_shapes=True)
  trainer = Trainer(constant_step, tracker, (2, 2), jit_compile=True)
  programs = [
      trainer._loop.experimental_get_compiler_ir(tf.constant(
          count, tf.int64))(stage="hlo") for count in (3, 5)
  ]
  assert programs[0] == programs[1]
  assert [trainer.train(count).steps for count in (3, 2)] == [3, 2]
  assert int(trainer.step) == 5
  assert trainer.distinct_draws_per_batch() == 2.0


@pytest.mark.parametrize("sampling,utility_at,forward_passes",
                         [("uniform", "updated", 1), ("adaptive", "step", 1),
                          ("adaptive", "updated", 2)])
def test_records_carry_the_training_calls_clocks(digits, sampling, utility_at,
                                                 forward_passes):
  # Algorithm 1's utility at h_t forwards each batch a second time.
  records = loop.train(tiny_config(sampling=sampling, utility_at=utility_at),
                       data=digits)
  for record in records:
    assert record["examples_forwarded"] == forward_passes * 16 * record["step"]
    assert record["examples_backpropagated"] == 16 * record["step"]
  assert records[0]["train_seconds"] == records[0]["train_cpu_seconds"] == 0
  seconds = [record["train_seconds"] for record in records]
  assert 0 < seconds[1] < seconds[2]


def test_a_resumed_run_continues_its_clocks(digits, tmp_path):
  settings = dict(sampling="adaptive", output_dir=str(tmp_path), steps=6)
  stopped = loop.train(tiny_config(**dict(settings, steps=4)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **settings), data=digits)
  assert resumed[:3] == stopped
  assert resumed[3]["examples_backpropagated"] == 6 * 16
  for clock in ("train_seconds", "train_cpu_seconds"):
    assert resumed[3][clock] > stopped[-1][clock]


def test_a_run_compiled_by_xla_trains_as_one_not_compiled_and_resumes_exactly(
    digits, tmp_path):
  settings = dict(sampling="adaptive", steps=6, eval_interval=2)
  plain = loop.train(tiny_config(**settings), data=digits)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 jit_compile=True,
                                 **settings),
                     data=digits)
  # The same draws and steps, up to the rounding of XLA's fused kernels.
  assert [r["step"] for r in whole] == [r["step"] for r in plain]
  for compiled, not_compiled in zip(whole, without_clocks(plain)):
    for name, value in not_compiled.items():
      if name == "heaviest":  # Near-ties may trade places; the weights, to
        # their 4 digits, in order.
        assert [w for _, w in compiled[name]
               ] == pytest.approx([w for _, w in value], rel=2e-3)
      else:
        assert compiled[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
  stopped = dict(settings,
                 output_dir=str(tmp_path / "stopped"),
                 jit_compile=True)
  loop.train(tiny_config(**dict(stopped, steps=4)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **stopped), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)


def test_steps_per_execution_does_not_change_the_run(digits, on_cpu):
  settings = dict(model="cnn", steps=7, eval_interval=3)
  one = loop.train(tiny_config(steps_per_execution=1, **settings), data=digits)
  many = loop.train(tiny_config(steps_per_execution=2, **settings), data=digits)
  assert [r["step"] for r in many] == [0, 3, 6, 7]
  assert without_clocks(many) == without_clocks(one)
