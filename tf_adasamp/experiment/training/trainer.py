"""Runs the compiled training steps: `Trainer.train(num_steps)`."""

import dataclasses
import time

import tensorflow as tf

# The clocks a run's records carry: what its training calls alone cost, the
# sampler's work included and evaluations and checkpoints not, so time to a
# target compares sampling schemes at their own cost.
CLOCKS = ("train_seconds", "train_cpu_seconds", "examples_forwarded",
          "examples_backpropagated")


@dataclasses.dataclass(frozen=True)
class TrainOutput:
  """What one `Trainer.train` call did.

  steps: the steps it completed; mean_loss, mean_accuracy: over their drawn
  batches (0 if none); finite: False if it stopped at a step whose
  utilities were not finite (the model diverged), which is not counted.
  """
  steps: int
  mean_loss: float
  mean_accuracy: float
  finite: bool


class Trainer(tf.Module):
  """Runs `train_step` in a while loop inside one `tf.function`.

  Each step updates `tracker` (a tf_adasamp.bound_tracker.BoundTracker)
  with its draws and counts the steps and the distinct draws since the last
  `reset_interval()` in variables, so the host reads nothing between
  evaluations and a checkpoint holds them too. The `CLOCKS` are variables
  as well, so a resumed run continues them.

  Args:
    train_step: the step function (`steps.make_train_step`).
    tracker: the run's BoundTracker.
    examples_per_step: (forwarded, backpropagated) examples of one step:
      a step with Algorithm 1's utility at h_t forwards its batch twice.
    jit_compile: compile the loop with XLA.
    extra_clocks: names of further float64 clocks, kept, read and saved
      with the `CLOCKS` but set by the caller (`loop`'s irreducible_seconds:
      the seconds a reducible-loss run spent on its irreducible losses).
    name: the module's name.
  """

  def __init__(self,
               train_step,
               tracker,
               examples_per_step,
               jit_compile=False,
               extra_clocks=(),
               name=None):
    super().__init__(name=name)
    self._train_step = train_step
    self.tracker = tracker
    self._examples_per_step = examples_per_step
    self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    self.clocks = {
        name: tf.Variable(0, dtype=dtype, trainable=False, name=name)
        for name, dtype in zip(CLOCKS, (tf.float64, tf.float64, tf.int64,
                                        tf.int64))
    }
    for clock in extra_clocks:
      self.clocks[clock] = tf.Variable(0,
                                       dtype=tf.float64,
                                       trainable=False,
                                       name=clock)
    self.interval_steps = tf.Variable(0,
                                      dtype=tf.int64,
                                      trainable=False,
                                      name="interval_steps")
    self.interval_distinct_draws = tf.Variable(0,
                                               dtype=tf.int64,
                                               trainable=False,
                                               name="interval_distinct_draws")
    self._loop = tf.function(self._run, jit_compile=jit_compile)

  def train(self, num_steps):
    """Runs up to `num_steps` steps; a TrainOutput."""
    steps_before = int(self.step)
    wall, cpu = time.perf_counter(), time.process_time()
    loss_sum, accuracy_sum, finite = self._loop(tf.constant(
        num_steps, tf.int64))
    steps = int(self.step) - steps_before  # Waits for the steps to finish.
    self.clocks["train_seconds"].assign_add(time.perf_counter() - wall)
    self.clocks["train_cpu_seconds"].assign_add(time.process_time() - cpu)
    forwarded, backpropagated = self._examples_per_step
    self.clocks["examples_forwarded"].assign_add(steps * forwarded)
    self.clocks["examples_backpropagated"].assign_add(steps * backpropagated)
    return TrainOutput(steps=steps,
                       mean_loss=float(loss_sum) / max(steps, 1),
                       mean_accuracy=float(accuracy_sum) / max(steps, 1),
                       finite=bool(finite))

  def read_clocks(self):
    """The `CLOCKS` since the run began, as Python numbers."""
    return {
        name: variable.numpy().item() for name, variable in self.clocks.items()
    }

  def distinct_draws_per_batch(self):
    """Distinct examples per batch since `reset_interval`, or None."""
    steps = int(self.interval_steps)
    return float(self.interval_distinct_draws) / steps if steps else None

  def reset_interval(self):
    self.interval_steps.assign(0)
    self.interval_distinct_draws.assign(0)

  def _run(self, count):
    loss_sum = accuracy_sum = tf.zeros([], tf.float32)
    finite = tf.constant(True)
    # A while loop, not `for _ in tf.range(count)`: that one gives XLA
    # `count` as its trip count, a compile-time constant, so every count
    # (a call that stops at an evaluation early) compiled the loop anew.
    done = tf.zeros([], tf.int64)
    while done < count:
      done += 1
      batch_loss, batch_accuracy, indices, batch_utilities = self._train_step()
      finite = tf.reduce_all(tf.math.is_finite(batch_utilities))
      if not finite:
        break
      self.interval_distinct_draws.assign_add(
          self.tracker.update(indices, batch_utilities))
      self.interval_steps.assign_add(1)
      self.step.assign_add(1)
      loss_sum += batch_loss
      accuracy_sum += batch_accuracy
    return loss_sum, accuracy_sum, finite
