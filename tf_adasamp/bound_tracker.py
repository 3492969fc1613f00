"""Theorems 4 and 5's running sums in tf.Variables, updated inside a step.

`bounds.KLBoundTracker` (host_bound_tracker.py) keeps the sums on the host
and reads the bounds from them; `BoundTracker` keeps the same sums in
tf.Variables and updates them with TensorFlow ops, so a training loop inside
`tf.function` (compiled by XLA or not) tracks the bounds without a host
round-trip. `read()` hands the sums to a KLBoundTracker, which computes the
bounds, at evaluation points. The sums checkpoint with the run (variables
only), and are restored only once checked.
"""

import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import data_structures

from tf_adasamp import _checkpointing
from tf_adasamp import bounds
from tf_adasamp import diagnostics

# The running sums, saved under these names.
_STATE = ("sums", "total", "general", "utilities_before_last", "last_utilities",
          "signed", "steps", "batch_size")
# Those of them that are sums of utilities.
_SUMS = ("sums", "total", "general", "utilities_before_last", "last_utilities")


class BoundTracker(tf.Module):
  """bounds.KLBoundTracker's running sums, updated in-graph.

  `static_shapes=True` updates in ops that XLA compiles (for a loop with
  jit_compile=True): `tf.unique` has no XLA kernel, so the draws are sorted
  and an index's draws form a run. The sort's ops cost more where each op is
  dispatched, so only a compiled loop should ask for it.
  """

  def __init__(self,
               num_examples,
               amplitude,
               decay,
               static_shapes=False,
               name=None):
    """Starts a run of Algorithm 1: all weights 1, all sums 0.

    Args:
      num_examples: n, an integer >= 1.
      amplitude: alpha >= 0.
      decay: in (0, 1).
      static_shapes: whether to update in ops that XLA compiles.
      name: name of the module.

    Raises:
      TypeError: if `num_examples` is not an int, or `amplitude` or `decay`
        not a number.
      ValueError: if an argument is outside its range above.
    """
    super().__init__(name=name)
    # Validates the arguments the way the host tracker does.
    bounds.KLBoundTracker(num_examples, amplitude, decay)
    self._num_examples = int(num_examples)
    self._amplitude, self._decay = float(amplitude), float(decay)
    self._static_shapes = static_shapes

    # The state is saved as one (CheckedState), its parts untracked.
    def variable(name, value, dtype):
      return data_structures.NoDependency(
          tf.Variable(tf.constant(value, dtype), trainable=False, name=name))

    with self.name_scope:
      self.sums = variable("sums", np.zeros(num_examples), tf.float64)
      self.total = variable("total", 0, tf.float64)
      self.general = variable("general", 0, tf.float64)
      self.utilities_before_last = variable("utilities_before_last", 0,
                                            tf.float64)
      self.last_utilities = variable("last_utilities", 0, tf.float64)
      self.signed = variable("signed", False, tf.bool)
      self.steps = variable("steps", 0, tf.int64)
      self.batch_size = variable("batch_size", 0, tf.int64)
    self._checkpointed = _checkpointing.CheckedState(
        {name: getattr(self, name) for name in _STATE}, {
            "num_examples": self._num_examples,
            "amplitude": self._amplitude,
            "decay": self._decay
        }, self._restore)

  def update(self, indices, utilities):
    """Records one step's draws and their utilities, as KLBoundTracker does.

    Args:
      indices: the step's [B] drawn indices, integers in [0, n).
      utilities: [B] finite utilities; a repeated index is reweighted once,
        with its first utility.

    Returns:
      The number of distinct indices drawn, an int64 scalar.
    """
    indices = tf.reshape(tf.cast(indices, tf.int64), [-1])
    utilities = tf.reshape(tf.cast(utilities, tf.float64), [-1])
    size = tf.size(indices, out_type=tf.int64)
    # Theorem 4's term for this step, from the sums before its reweighting.
    self.general.assign_add(
        self._amplitude *
        (tf.reduce_sum(tf.gather(self.sums, indices)) -
         tf.cast(size, tf.float64) * self.total / self._num_examples))
    # Each distinct index takes the utility of its first draw.
    keys, first, starts = _first_draws(indices, self._static_shapes)
    before = tf.gather(self.sums, keys)
    updated = self._decay * before + tf.gather(utilities, first)
    change = updated - before
    if starts is not None:  # a run's other keys write its value again
      change = tf.where(starts, change, 0.0)
    self.total.assign_add(tf.reduce_sum(change))
    self.sums.scatter_update(tf.IndexedSlices(updated, keys))
    self.utilities_before_last.assign_add(self.last_utilities)
    self.last_utilities.assign(tf.reduce_sum(utilities))
    self.signed.assign(tf.logical_or(self.signed, tf.reduce_any(utilities < 0)))
    self.batch_size.assign(size)
    self.steps.assign_add(1)
    if starts is None:
      return tf.size(keys, out_type=tf.int64)
    return tf.math.count_nonzero(starts)

  def read(self):
    """Copies the sums to the host.

    Returns:
      A `bounds.KLBoundTracker` holding the sums now.

    Raises:
      ValueError: if the sums are not finite.
    """
    steps = int(self.steps)
    return bounds.KLBoundTracker.from_state(
        self._num_examples, self._amplitude, self._decay, {
            "sums": self.sums.numpy(),
            "total": self.total.numpy(),
            "general": self.general.numpy(),
            "utilities_before_last": self.utilities_before_last.numpy(),
            "last_utilities": self.last_utilities.numpy(),
            "signed": self.signed.numpy(),
            "steps": steps,
            "batch_size": int(self.batch_size) if steps else None
        })

  def _restore(self, restored):
    """Assigns a checkpoint's sums once all of them are checked.

    Checked as a CheckedState: the tracker's size and settings, finite
    sums, and the signs and counts a run leaves: an edited sum would bend
    the bounds read from it.

    Args:
      restored: the checkpoint's values by name.

    Returns:
      The assignments, once the checks pass.
    """
    checks = [
        _checkpointing.assert_size(restored["num_examples"], self._num_examples,
                                   "number of examples"),
        _checkpointing.assert_setting(restored["amplitude"], self._amplitude,
                                      "amplitude"),
        _checkpointing.assert_setting(restored["decay"], self._decay, "decay"),
        *[
            _checkpointing.assert_shape(restored[name],
                                        getattr(self, name).shape,
                                        f"bound-tracker {name}")
            for name in _STATE
        ],
    ]
    with tf.control_dependencies(checks):
      checks = [
          tf.debugging.assert_all_finite(
              restored[name], f"the checkpoint's bound-tracker {name}")
          for name in _SUMS
      ]
      steps, batch_size = restored["steps"], restored["batch_size"]
      checks += [
          tf.debugging.assert_non_negative(
              steps, message="the checkpoint's bound-tracker steps are < 0"),
          tf.debugging.assert_non_negative(
              batch_size,
              message="the checkpoint's bound-tracker batch size is < 0"),
          tf.debugging.assert_equal(
              (steps > 0) | (batch_size == 0),
              True,
              message="the checkpoint's bound tracker has a batch size but "
              "no steps"),
      ]
    with tf.control_dependencies(checks):
      # Without a negative utility, every sum is >= 0; the total, a running
      # sum of changes, up to its round-off.
      sums = restored["sums"]
      nonnegative = tf.reduce_all([
          tf.reduce_all(sums >= 0), restored["utilities_before_last"] >= 0,
          restored["last_utilities"] >= 0, restored["total"]
          >= -1e-6 * (1 + tf.reduce_sum(sums))
      ])
      checks = [
          tf.debugging.assert_equal(
              restored["signed"] | nonnegative,
              True,
              message="the checkpoint's bound-tracker sums are negative, but "
              "it records no negative utility: they were edited")
      ]
    with tf.control_dependencies(checks):
      return tf.group(
          *[getattr(self, name).assign(restored[name]) for name in _STATE])


def _first_draws(indices, static_shapes):
  """Finds each distinct index of `indices` and the position of its first draw.

  Args:
    indices: int64 [B] draws.
    static_shapes: whether the results take static shapes (for XLA).

  Returns:
    (keys, first, starts): either one key per distinct index (`starts`
    None) or, in static shapes, one per draw, sorted, with `starts` [B]
    bool marking the first key of each run.
  """
  if not static_shapes:
    keys, position = tf.unique(indices)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(indices)), position,
                                         tf.size(keys))
    return keys, first, None
  order = tf.argsort(indices)
  keys = tf.gather(indices, order)
  starts = diagnostics.starts_of_runs(keys)
  run = tf.cumsum(tf.cast(starts, tf.int32)) - 1
  first = tf.math.unsorted_segment_min(order, run, tf.size(keys))
  return keys, tf.gather(first, run), starts
