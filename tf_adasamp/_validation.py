"""Argument checks shared by the library's Python API.

Each returns the checked value in the form the caller needs, or raises
`TypeError` (wrong type) or `ValueError` (wrong value) naming the argument,
before anything is created or changed. Only the checks of dtypes and tensors
import TensorFlow, when called: the trainer's settings use the others to
check its flags before TensorFlow loads.
"""

import math
import numbers
import re

import numpy as np


def positive_int(value, name):
  """`value` as an int >= 1; Python or NumPy integers, never bools."""
  if isinstance(value,
                (bool, np.bool_)) or not isinstance(value, numbers.Integral):
    raise TypeError(f"{name} must be an int, got {value!r}")
  if value < 1:
    raise ValueError(f"{name} must be >= 1, got {value}")
  return int(value)


# The most draws one call makes: TensorFlow's int32 shape limit.
MAX_BATCH_SIZE = 2**31 - 1


def batch_size(value):
  """A number of draws: an int in [1, MAX_BATCH_SIZE]."""
  value = positive_int(value, "batch_size")
  if value > MAX_BATCH_SIZE:
    raise ValueError(f"batch_size must be <= {MAX_BATCH_SIZE}, got {value}")
  return value


def float_dtype(dtype, name="dtype"):
  """`dtype` as tf.float32 or tf.float64."""
  import tensorflow as tf
  try:
    dtype = tf.as_dtype(dtype)
  except TypeError as error:
    raise TypeError(
        f"{name} must be float32 or float64, got {dtype!r}") from error
  if dtype not in (tf.float32, tf.float64):
    raise TypeError(f"{name} must be float32 or float64, got {dtype.name}")
  return dtype


def indices(value, name="indices"):
  """`value` as an int64 tensor; int32 tensors are widened, floats refused."""
  import tensorflow as tf
  value = tf.convert_to_tensor(value)
  if not value.dtype.is_integer:
    raise TypeError(f"{name} must be integers, got {value.dtype.name}")
  return tf.cast(value, tf.int64)


def real(value, name):
  """`value` as a Python float; numbers only (no bools, strings, tensors)."""
  if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
    raise TypeError(f"{name} must be a real number, got {value!r}")
  return float(value)


def amplitude(value, dtype=np.float64):
  """Algorithm 1's amplitude alpha: a real >= 0, finite in `dtype` (a NumPy
  float type, that of the weights)."""
  value = real(value, "amplitude")
  if not (math.isfinite(value) and value >= 0):
    raise ValueError(f"amplitude must be finite and >= 0, got {value}")
  if not np.isfinite(_rounded(value, dtype)):
    raise ValueError(f"amplitude = {value} overflows {np.dtype(dtype).name}; "
                     f"it must be at most {np.finfo(dtype).max}")
  return value


# The largest utility, in magnitude, whose log weights the sampler keeps
# finite (`log_weight_bound`); the built-in utilities stay below 1e3.
MAX_UTILITY = 1e8


def max_amplitude_ratio(dtype=np.float64):
  """The largest amplitude / (1 - decay) that `log_weight_bound` allows in
  `dtype` (a NumPy float type)."""
  return float(np.finfo(dtype).max) / MAX_UTILITY


def log_weight_bound(amplitude, decay, dtype=np.float64):
  """Refuses an amplitude and decay whose log weights could overflow.

  A log weight stays within amplitude * max|u| / (1 - decay) (sampler.py),
  finite in `dtype` for every utility up to MAX_UTILITY in magnitude while
  amplitude / (1 - decay) is at most `max_amplitude_ratio(dtype)`. Takes
  checked values (`amplitude`, `decay`).
  """
  ratio = amplitude / (1 - _rounded(decay, dtype))
  bound = max_amplitude_ratio(dtype)
  if ratio > bound:
    raise ValueError(
        f"amplitude / (1 - decay) must be at most {bound:.4g}, so that log "
        f"weights stay finite in {np.dtype(dtype).name} for utilities up to "
        f"{MAX_UTILITY:g} in magnitude; got amplitude {amplitude:g} and decay "
        f"{decay:g}")


def decay(value, dtype=np.float64):
  """Algorithm 1's decay lambda: a real in (0, 1), also once rounded to
  `dtype` (a NumPy float type, that of the weights)."""
  value = real(value, "decay")
  if not 0 < value < 1:
    raise ValueError(f"decay must be in (0, 1), got {value}")
  rounded = _rounded(value, dtype)
  if not 0 < rounded < 1:
    raise ValueError(f"decay = {value} rounds to {rounded} in "
                     f"{np.dtype(dtype).name}; it must be in (0, 1) there")
  return value


def fraction(value, name):
  """`value` as a Python float in [0, 1] (NaN refused)."""
  value = real(value, name)
  if not 0 <= value <= 1:
    raise ValueError(f"{name} must be in [0, 1], got {value}")
  return value


def schedule_value(schedule, count, name, dtype, upper=math.inf):
  """A schedule's value at the update count `count`, checked in the graph.

  A value out of [0, upper] raises InvalidArgumentError before anything
  that depends on the returned value runs; inside `jit_compile=True`, where
  XLA drops the assertion, the value is NaN instead (an amplitude's then
  makes NaN utilities, which the reweight op refuses).

  Returns:
    (value as `dtype`, whether it is finite and in [0, upper]).

  Raises:
    ValueError: if the schedule returns a tensor that is not a scalar.
    TypeError: if it returns one that is not a real number.
  """
  import tensorflow as tf

  count = tf.convert_to_tensor(count)
  value = tf.convert_to_tensor(schedule(count))
  if value.shape.rank not in (None, 0):
    raise ValueError(f"the {name} schedule must return a scalar, got one "
                     f"of shape {value.shape}")
  if not (value.dtype.is_floating or value.dtype.is_integer):
    raise TypeError(f"the {name} schedule must return a real number, got "
                    f"a {value.dtype.name} tensor")
  value = tf.cast(value, dtype)
  valid = tf.math.is_finite(value) & (value >= 0) & (value <= upper)
  interval = f"[0, {upper:g}]"
  check = tf.debugging.Assert(valid, [
      f"the {name} schedule returned a value outside {interval} at update "
      "count", count, ":", value
  ])
  with tf.control_dependencies([check]):
    value = tf.where(valid, value, tf.constant(math.nan, dtype))
  return value, valid


def _rounded(value, dtype):
  with np.errstate(over="ignore", under="ignore"):
    return float(np.asarray(value, dtype=dtype))


def boolean(value, name):
  """`value` as a bool; only True, False (or NumPy's)."""
  if not isinstance(value, (bool, np.bool_)):
    raise TypeError(f"{name} must be True or False, got {value!r}")
  return bool(value)


def seed(value):
  """A random seed: None or an int in [0, 2**64)."""
  if value is None:
    return None
  if isinstance(value,
                (bool, np.bool_)) or not isinstance(value, numbers.Integral):
    raise TypeError(f"seed must be an int or None, got {value!r}")
  if not 0 <= value < 2**64:
    raise ValueError(f"seed must be in [0, 2**64), got {value}")
  return int(value)


# What a registered name may be: a word that --utility and --model take, also
# in a comma-separated list, and not read as a flag.
_REGISTERED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def register(registry, kind, name, item):
  """Adds `item` to `registry` under `name`, a new name; returns `item`.

  `kind` names what is registered in the errors ("model", "utility").
  Without `item` (None) it returns a decorator that registers what it
  decorates.
  """
  if not isinstance(name, str):
    raise TypeError(f"a {kind}'s name must be a str, got {name!r}")
  if name and not _REGISTERED_NAME.fullmatch(name):
    raise ValueError(
        f"a {kind}'s name is a command-line choice, in lists too: letters, "
        f"digits, '_' and '-', not first; got {name!r}")
  if not name or name in registry:
    raise ValueError(f"a {kind} needs a new, non-empty name, got {name!r}; "
                     f"registered: {sorted(registry)}")
  if item is None:
    return lambda function: register(registry, kind, name, function)
  if not callable(item):
    raise TypeError(f"{kind} {name!r} must be callable, got {item!r}")
  registry[name] = item
  return item
