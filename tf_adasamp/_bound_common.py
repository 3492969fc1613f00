"""What tf_adasamp/bounds.py and tf_adasamp/host_bound_tracker.py share.

The checks of their arguments (numbers or arrays of them, finite and in
range: TypeError for a wrong type, ValueError naming the first bad entry),
and Theorem 5's closed form, which both evaluate. NumPy only, as both are.
"""

import numpy as np
from numpy.typing import ArrayLike


def finite_array(name: str, value: ArrayLike) -> np.ndarray:
  """`value` as a float64 array; TypeError if not numeric, ValueError if NaN."""
  if value is None or isinstance(value, (str, bytes)):
    raise TypeError(f"{name} must be a number or an array of numbers, "
                    f"got {value!r}")
  try:
    array = np.asarray(value, dtype=np.float64)
  except (TypeError, ValueError) as error:
    raise TypeError(f"{name} must be a number or an array of numbers, "
                    f"got {value!r}") from error
  return check(name, array, np.isfinite(array), "finite")


def check(name: str, array: np.ndarray, ok: ArrayLike,
          requirement: str) -> np.ndarray:
  """Raises ValueError naming the first entry of `array` where `ok` fails."""
  if not np.all(ok):
    bad = np.broadcast_to(array, np.shape(ok))[~np.asarray(ok)].flat[0]
    raise ValueError(f"{name} must be {requirement}, got {bad:g}")
  return array


def at_least(name: str, value: ArrayLike, minimum: float) -> np.ndarray:
  array = finite_array(name, value)
  return check(name, array, array >= minimum, f">= {minimum:g}")


def positive(name: str, value: ArrayLike) -> np.ndarray:
  array = finite_array(name, value)
  return check(name, array, array > 0, "> 0")


def unit_interval(name: str, value: ArrayLike) -> np.ndarray:
  array = finite_array(name, value)
  return check(name, array, (array > 0) & (array < 1), "in (0, 1)")


def step_size(eta, smoothness):
  """Checks the convex propositions' eta in [0, 2 / smoothness]."""
  ok = eta * smoothness <= 2
  if not np.all(ok):
    bad = np.broadcast_to(eta, np.shape(ok))[~ok].flat[0]
    raise ValueError(f"eta must be <= 2 / smoothness, got eta = {bad:g}")


def amplitude_decay(amplitude, decay):
  amplitude = float(at_least("amplitude", amplitude, 0))
  decay = float(unit_interval("decay", decay))
  return amplitude, decay


def steps(name: str, value: ArrayLike) -> np.ndarray:
  """A run's per-step record as a [T, B] array (a [T] record has B = 1)."""
  array = np.asarray(value)
  if array.ndim not in (1, 2) or array.shape[0] < 1 or array.size < 1:
    raise ValueError(f"{name} must have shape [T] or [T, B] with T, B >= 1, "
                     f"got shape {array.shape}")
  return array.reshape(array.shape[0], -1)


def nonnegative_bound(amplitude, decay, batch_size, utility_sum):
  """Theorem 5: alpha B / (1 - decay) times the utilities of steps < T."""
  return amplitude * batch_size / (1 - decay) * float(utility_sum)
