"""The schedules of a sampler's amplitude or importance exponent
(tf_adasamp.schedules)."""

import math

import pytest
import tensorflow as tf

import reference
from tf_adasamp import schedules


def test_schedules_take_their_values_at_the_given_steps():
  assert [float(schedules.warmup(2.0, 10)(s)) for s in [0, 5, 10, 11, 1000]
         ] == [0.0, 1.0, 2.0, 2.0, 2.0]
  assert [float(schedules.anneal(2.0, 4)(s)) for s in [0, 1, 4, 9]
         ] == [2.0, 1.5, 0.0, 0.0]
  # InfoBatch's delta = 0.875 of 100 updates: uniform from update 88 on.
  final = schedules.final_uniform(1.5, total_steps=100)
  assert [float(final(s)) for s in [0, 87, 88, 100]] == [1.5, 1.5, 0.0, 0.0]
  # Its mirror: uniform for the first quarter of 10 updates (2.5 rounds to
  # 2), then the amplitude.
  initial = schedules.initial_uniform(1.5, total_steps=10, fraction=0.25)
  assert [float(initial(s)) for s in [0, 1, 2, 9, 50]] == [0, 0, 1.5, 1.5, 1.5]
  assert float(schedules.initial_uniform(1.5, 10, fraction=0)(0)) == 1.5
  assert float(schedules.initial_uniform(1.5, 10, fraction=1)(9)) == 0
  # Warm-up, a plateau, a jump and an annealing, against the reference at
  # every step, also as tensors of both integer widths.
  steps, values = [3, 10, 20, 20, 30], [0.0, 1.0, 1.0, 0.4, 0.1]
  schedule = schedules.PiecewiseLinear(steps, values)
  for step in range(40):
    expected = reference.piecewise_linear(steps, values, step)
    assert float(schedule(step)) == pytest.approx(expected, rel=1e-15)
    assert float(schedule(tf.constant(step,
                                      tf.int64))) == pytest.approx(expected,
                                                                   rel=1e-15)
    assert float(schedule(tf.constant(step,
                                      tf.int32))) == pytest.approx(expected,
                                                                   rel=1e-15)


@pytest.mark.parametrize("arguments,error,message", [
    (([], []), ValueError, "at least one knot"),
    (([0, 1], [1.0]), ValueError, "equally long"),
    (([1, 0], [1.0, 2.0]), ValueError, "nondecreasing"),
    (([-1], [1.0]), ValueError, ">= 0"),
    (([0, 2, 2, 2], [1.0, 1.0, 0.0, 1.0]), ValueError, "at most twice"),
    (([0.5], [1.0]), TypeError, "steps must be ints"),
    (([0], [math.nan]), ValueError, "values must be finite"),
    (([0], ["1"]), TypeError, "values must be a real number"),
])
def test_bad_schedules_are_refused(arguments, error, message):
  with pytest.raises(error, match=message):
    schedules.PiecewiseLinear(*arguments)


@pytest.mark.parametrize("make,error,message", [
    (lambda: schedules.warmup(1.0, 0), ValueError, "steps must be >= 1"),
    (lambda: schedules.final_uniform(1.0, 10, delta=1.5), ValueError,
     r"delta must be in \[0, 1\]"),
    (lambda: schedules.final_uniform(1.0, 10, delta=math.nan), ValueError,
     r"delta must be in \[0, 1\]"),
    (lambda: schedules.initial_uniform(1.0, 10, fraction=-0.1), ValueError,
     r"fraction must be in \[0, 1\]"),
    (lambda: schedules.initial_uniform(1.0, 0), ValueError,
     "total_steps must be >= 1"),
])
def test_bad_schedule_helpers_are_refused(make, error, message):
  with pytest.raises(error, match=message):
    make()
