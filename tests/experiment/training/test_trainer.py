"""The trainer's compiled loop (tf_adasamp.experiment.training.trainer)."""

import tensorflow as tf

from tf_adasamp.bound_tracker import BoundTracker
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
