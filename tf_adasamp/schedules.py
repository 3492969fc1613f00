"""Schedules of a sampler's amplitude or importance exponent over its updates.

`AdaptiveSampler` takes, for `amplitude` and `beta`, a float or a schedule:
any callable of the sampler's update count (an int64 scalar tensor: the
number of updates applied so far) returning a scalar, such as a Keras
`LearningRateSchedule`. The helpers here give the shapes the field uses, as
`PiecewiseLinear` schedules:

- `warmup`: from uniform (amplitude 0) up to the amplitude, then constant;
- `anneal`: from the amplitude down to 0, then uniform sampling;
- `final_uniform`: the amplitude, then 0 for the last `1 - delta` of the
  run, InfoBatch's full-data phase;
- `initial_uniform`: 0 for the first `fraction` of the run, then the
  amplitude, Katharopoulos & Fleuret's importance sampling switched on once
  it pays (and Selective-Backprop's start in Composer).

Amplitude 0 makes an update w_i <- w_i ** decay * exp(0): the weights decay
toward uniform and the utilities no longer count (Algorithm 1).
"""

import math
import numbers

import tensorflow as tf

from tf_adasamp import _validation


class PiecewiseLinear:
  """A schedule linear between knots (step, value), constant outside them.

  Before the first knot it is the first value, from the last knot on the
  last value. A step given twice is a jump: from that step on, the second
  value holds.

  Example, warm up over 1000 updates, then the amplitude 1 until update
  8750, then uniform sampling:
    PiecewiseLinear([0, 1000, 8750, 8750], [0.0, 1.0, 1.0, 0.0])
  """

  def __init__(self, steps, values):
    """Creates the schedule.

    Args:
      steps: the knots' update counts, ints >= 0 in nondecreasing order, at
        least one; a step may repeat once (a jump).
      values: the values at the knots, finite reals, one per step.

    Raises:
      TypeError: a step that is not an int, a value that is not a real.
      ValueError: no knots, lengths that differ, a negative or decreasing
        step, a step given three times, a value that is not finite.
    """
    steps, values = list(steps), list(values)
    if not steps or len(steps) != len(values):
      raise ValueError("steps and values must be equally long, at least one "
                       f"knot; got {len(steps)} steps and {len(values)} values")
    for step in steps:
      if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"steps must be ints, got {step!r}")
    for value in values:
      if not math.isfinite(_validation.real(value, "values")):
        raise ValueError(f"values must be finite, got {value}")
    if steps[0] < 0 or any(b < a for a, b in zip(steps, steps[1:])):
      raise ValueError(f"steps must be >= 0 and nondecreasing, got {steps}")
    if any(a == c for a, c in zip(steps, steps[2:])):
      raise ValueError(f"a step may be given at most twice, got {steps}")
    self.steps = [int(step) for step in steps]
    self.values = [float(value) for value in values]

  def __call__(self, step):
    """The value at update count `step` (an int scalar or tensor), float64."""
    step = tf.cast(step, tf.float64)
    knots = list(zip(self.steps, self.values))
    value = tf.constant(self.values[0], tf.float64)
    # Each segment from its first knot on; a later one overrides it, the
    # last value holds from the last knot. A jump has no segment of its own.
    for (start, first), (end, last) in zip(knots, knots[1:]):
      if end > start:
        value = tf.where(
            step >= start,
            first + (last - first) * (step - start) / (end - start), value)
    return tf.where(step >= self.steps[-1],
                    tf.constant(self.values[-1], tf.float64), value)

  def get_config(self):
    """{steps, values}, for Keras's serialization (a saved trainer)."""
    return {"steps": self.steps, "values": self.values}

  @classmethod
  def from_config(cls, config):
    """The schedule of a `get_config`."""
    return cls(**config)

  def __repr__(self):
    """The call that makes this schedule."""
    return f"PiecewiseLinear(steps={self.steps}, values={self.values})"


def warmup(value: float, steps: int) -> PiecewiseLinear:
  """A warm-up: starts from uniform sampling.

  0 at update 0, rising linearly to `value` at update `steps`, then `value`.

  Args:
    value: the value after the warm-up, a finite real.
    steps: the warm-up's length in updates, an int >= 1.

  Returns:
    The schedule.
  """
  return PiecewiseLinear([0, _validation.positive_int(steps, "steps")],
                         [0.0, value])


def anneal(value: float, steps: int) -> PiecewiseLinear:
  """An annealing: ends in uniform sampling.

  `value` at update 0, falling linearly to 0 at update `steps`, then 0.

  Args:
    value: the value at the start, a finite real.
    steps: the annealing's length in updates, an int >= 1.

  Returns:
    The schedule.
  """
  return PiecewiseLinear([0, _validation.positive_int(steps, "steps")],
                         [value, 0.0])


def final_uniform(value: float,
                  total_steps: int,
                  delta: float = 0.875) -> PiecewiseLinear:
  """A final uniform phase: `value`, then 0 for the run's last `1 - delta`.

  `value` for the first `delta` of `total_steps` updates, then 0: the
  last `1 - delta` of the run samples uniformly, as InfoBatch trains on the
  full data at the end (its default delta=0.875).

  Args:
    value: the value before the final phase, a finite real.
    total_steps: the run's length in updates, an int >= 1.
    delta: the fraction of the run before the final phase, in [0, 1]; the
      phase starts at update round(delta * total_steps).

  Returns:
    The schedule.
  """
  total_steps = _validation.positive_int(total_steps, "total_steps")
  delta = _validation.fraction(delta, "delta")
  start = round(delta * total_steps)
  return PiecewiseLinear([start, start], [value, 0.0])


def initial_uniform(value: float,
                    total_steps: int,
                    fraction: float = 0.125) -> PiecewiseLinear:
  """An initial uniform phase: 0 for the run's first `fraction`, then `value`.

  The first `fraction` of `total_steps` updates sample uniformly (amplitude
  0 leaves every log weight at 0), then the weights follow `value`; the
  mirror of `final_uniform`.

  Args:
    value: the value after the initial phase, a finite real.
    total_steps: the run's length in updates, an int >= 1.
    fraction: the fraction of the run sampled uniformly, in [0, 1]; `value`
      holds from update round(fraction * total_steps) on.

  Returns:
    The schedule.
  """
  total_steps = _validation.positive_int(total_steps, "total_steps")
  fraction = _validation.fraction(fraction, "fraction")
  start = round(fraction * total_steps)
  return PiecewiseLinear([start, start], [0.0, value])
