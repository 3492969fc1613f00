"""The checks a sampler's checkpoint passes before any of it is assigned.

`AdaptiveSampler` saves its state as one `_checkpointing.CheckedState`: the
tree, the entropy tree, the log weights, the log-scale, the generator's
state and, with a schedule, the update count. `restore` asserts that a
checkpoint's values are of this sampler (size, settings, shapes) and
consistent (finite, caches that agree with the log weights), then assigns
them all.
"""

import numpy as np
import tensorflow as tf

from tf_adasamp import _checkpointing
from tf_adasamp.sum_tree import assert_zero_padding
from tf_adasamp.sum_tree import checked_tree
from tf_adasamp.sum_tree import tree_capacity
from tf_adasamp.sum_tree import with_sums

# The state's variables a checkpoint must match in shape, with the words
# its errors use; the tree's shape is checked with its sums (checked_tree).
_SHAPED = {
    "entropy_tree": "entropy tree",
    "log_weights": "log weights",
    "log_scale": "log scale",
    "generator_state": "random state",
    "update_count": "update count",
}


def checked_entropy_tree(tree: tf.Tensor, entropy_tree: tf.Tensor,
                         log_weights: tf.Tensor, log_scale: tf.Tensor,
                         num_examples: int) -> tf.Tensor:
  """Checks a restored entropy tree and the caches against the log weights.

  Args:
    tree: the restored tree, checked and its sums rebuilt; it must hold
      leaves s_i = exp(l_i - c) up to round-off (the ops' exp and
      TensorFlow's may differ in the last bits; the ops store a subnormal
      s_i as 0).
    entropy_tree: the restored entropy tree; it must hold leaves
      s_i (l_i - c) exactly as the ops compute them, and zero padding.
    log_weights: the restored log weights l.
    log_scale: the restored log-scale c.
    num_examples: n.

  Returns:
    The entropy tree with its sums recomputed and node 0 set to the tree's
    total, as the reweight op keeps it.

  Raises:
    tf.errors.InvalidArgumentError: if the caches do not match the log
      weights.
  """
  capacity = tree_capacity(num_examples)
  dtype = tree.dtype
  leaves = tree[capacity:capacity + num_examples]
  entropy_leaves = entropy_tree[capacity:]
  log_scaled = log_weights - log_scale
  exact = tf.exp(tf.cast(log_scaled, tf.float64))
  finfo = np.finfo(dtype.as_numpy_dtype)
  close = tf.math.is_finite(exact) & (
      tf.abs(tf.cast(leaves, tf.float64) - exact)
      <= 8 * float(finfo.eps) * exact + float(finfo.tiny))
  checks = [
      tf.debugging.assert_equal(
          tf.reduce_all(close),
          True,
          message="the checkpoint's weights are not exp(log weights - log "
          "scale): its tree, log weights or log scale was edited"),
      tf.debugging.assert_equal(
          entropy_leaves[:num_examples],
          tf.where(leaves > 0, leaves * log_scaled, tf.zeros([], dtype)),
          message="the checkpoint's entropy tree does not match its "
          "weights: one of them was edited"),
      assert_zero_padding(entropy_leaves, num_examples, "entropy terms"),
  ]
  with tf.control_dependencies(checks):
    return with_sums(entropy_leaves, tree[1])


def restore(restored: dict[str, tf.Tensor], variables: dict[str, tf.Variable],
            num_examples: int, settings: dict[str, float]) -> tf.Operation:
  """Assigns a checkpoint's state once all of it is checked.

  Checks its size and settings, shapes, finite values, a positive total,
  and caches that agree with its log weights (`checked_entropy_tree`).

  Args:
    restored: the checkpoint's values, by name (those of `variables`, the
      number of examples and the settings).
    variables: the sampler's state, by name, as its `CheckedState` saves it.
    num_examples: the sampler's n.
    settings: the sampler's settings a checkpoint must agree with.

  Returns:
    The op that assigns the values.
  """
  checks = [
      _checkpointing.assert_size(restored["num_examples"], num_examples,
                                 "number of examples"),
      *(_checkpointing.assert_setting(restored[name], value, name)
        for name, value in settings.items()),
      *(_checkpointing.assert_shape(restored[name], variables[name].shape, what)
        for name, what in _SHAPED.items()
        if name in variables),
  ]
  with tf.control_dependencies(checks):
    checks = [
        tf.debugging.assert_all_finite(restored[name],
                                       f"the checkpoint's {name}")
        for name in ("entropy_tree", "log_weights", "log_scale")
    ]
    tree = checked_tree(restored["tree"], num_examples)
    checks.append(
        tf.debugging.assert_positive(
            tree[1], message="the checkpoint's total weight is not > 0"))
    if "update_count" in variables:
      checks.append(
          tf.debugging.assert_non_negative(
              restored["update_count"],
              message="the checkpoint's update count is negative"))
  with tf.control_dependencies(checks):
    entropy_tree = checked_entropy_tree(tree, restored["entropy_tree"],
                                        restored["log_weights"],
                                        restored["log_scale"], num_examples)
  values = {**restored, "tree": tree, "entropy_tree": entropy_tree}
  return tf.group(
      *(variable.assign(values[name]) for name, variable in variables.items()))
