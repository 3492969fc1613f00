"""A sum-tree over nonnegative weights, kept in place in a `tf.Variable`.

The tree is a heap-layout array of 2 * capacity values (capacity: the power of
two that pads `num_leaves`): node 1 is the total, node k the sum of nodes 2k
and 2k + 1, leaf i node capacity + i. Drawing and updating cost O(log n) and
run as custom ops on the variable itself, inside or outside `tf.function`
(London, NIPS 2017, appendix "Efficient Iteratively Re-weighted Sampling").
"""
from typing import TypeAlias

import tensorflow as tf
from tensorflow.python.trackable import data_structures

from tf_adasamp import _checkpointing
from tf_adasamp import _validation
from tf_adasamp import ops

TensorLike: TypeAlias = tf.types.experimental.TensorLike


def tree_capacity(num_leaves: int) -> int:
  """The number of leaves a tree over `num_leaves` weights has.

  Args:
    num_leaves: the number of weights n, an int >= 1.

  Returns:
    The power of two that pads n leaves.
  """
  return 1 << max(num_leaves - 1, 0).bit_length()


def checked_tree(tree: tf.Tensor, num_leaves: int) -> tf.Tensor:
  """Checks a restored tree and rebuilds its sums.

  Asserts that it has 2 * capacity nodes, leaves finite and >= 0, zero
  padding and a finite total.

  Args:
    tree: the heap-layout tree read from a checkpoint.
    num_leaves: the number of weights n the tree holds.

  Returns:
    The tree with every parent recomputed from its children, as the ops
    compute them, so edited sums cannot survive (and node 0 recording
    num_leaves, as the build writes it).

  Raises:
    tf.errors.InvalidArgumentError: if an assertion fails.
  """
  capacity = tree_capacity(num_leaves)
  with tf.control_dependencies(
      [_checkpointing.assert_shape(tree, [2 * capacity], "tree")]):
    leaves = tf.reshape(tree, [2 * capacity])[capacity:]
  checks = [
      tf.debugging.assert_all_finite(leaves, "the checkpoint's weights"),
      tf.debugging.assert_non_negative(
          leaves, message="the checkpoint has a negative weight"),
      assert_zero_padding(leaves, num_leaves, "weights"),
  ]
  # Node 0 records num_leaves, as the build op writes it.
  rebuilt = with_sums(leaves, tf.constant(num_leaves, tree.dtype))
  checks.append(
      tf.debugging.assert_all_finite(rebuilt[1],
                                     "the checkpoint's total weight"))
  with tf.control_dependencies(checks):
    return tf.identity(rebuilt)


def assert_zero_padding(leaves, num_leaves, what):
  """Asserts that the leaves past `num_leaves` (the padding) are 0.

  Args:
    leaves: the tree's capacity leaves, padding included.
    num_leaves: the number of weights n.
    what: what the error message calls the leaves.

  Returns:
    The assertion op (None when executing eagerly).

  Raises:
    tf.errors.InvalidArgumentError: if a padding leaf is not 0, eagerly.
  """
  return tf.debugging.assert_equal(
      leaves[num_leaves:],
      tf.zeros(tf.shape(leaves[num_leaves:]), leaves.dtype),
      message=f"the checkpoint's padding {what} are not 0")


def with_sums(leaves: tf.Tensor, node_zero: tf.Tensor) -> tf.Tensor:
  """Builds the heap-layout tree over `leaves`.

  Args:
    leaves: [capacity] weights, padding included.
    node_zero: the scalar that node 0 holds.

  Returns:
    [2 * capacity] nodes, each parent the sum of its two children as the
    ops add them.
  """
  levels = [leaves]
  while levels[-1].shape[0] > 1:
    pairs = tf.reshape(levels[-1], [-1, 2])
    levels.append(pairs[:, 0] + pairs[:, 1])
  return tf.concat([tf.reshape(node_zero, [1]), *reversed(levels)], axis=0)


class SumTree(tf.Module):
  """Weighted sampling with O(log n) draws and updates, in a `tf.Variable`.

  Example:
    tree = tf_adasamp.SumTree(4, initial_weights=[1., 0., 3., 4.])
    uniforms = tf.random.uniform([8], dtype=tf.float64)
    indices, probabilities = tree.sample(uniforms)
    tree.set([0], [2.])
  """

  def __init__(self,
               num_leaves: int,
               initial_weights: TensorLike | None = None,
               dtype: tf.DType = tf.float64,
               name: str | None = None):
    """Creates the tree.

    Args:
      num_leaves: number of weights n, an int >= 1.
      initial_weights: [n] finite, nonnegative weights; all ones by default.
      dtype: tf.float64 (default) or tf.float32, for weights and sums.
      name: name of the module.

    Raises:
      TypeError: if `num_leaves` is not an int or `dtype` is not a float
        type.
      ValueError: if `num_leaves` is < 1.
      tf.errors.InvalidArgumentError: if `initial_weights` are not [n],
        finite and >= 0.
    """
    super().__init__(name=name)
    self._num_leaves = _validation.positive_int(num_leaves, "num_leaves")
    self._dtype = _validation.float_dtype(dtype)
    self._capacity = tree_capacity(self._num_leaves)
    if initial_weights is None:
      initial_weights = tf.ones([self._num_leaves], self._dtype)
    with self.name_scope:
      self.variable = data_structures.NoDependency(
          tf.Variable(tf.zeros([2 * self._capacity], self._dtype),
                      trainable=False,
                      name="tree"))
    self._checkpointed = _checkpointing.CheckedState(
        {"tree": self.variable}, {"num_leaves": self._num_leaves},
        self._restore)
    self.assign(initial_weights)

  @property
  def num_leaves(self) -> int:
    """The number of weights n."""
    return self._num_leaves

  @property
  def capacity(self) -> int:
    """The number of leaves: n padded to a power of two."""
    return self._capacity

  @property
  def dtype(self) -> tf.DType:
    """The dtype of the weights and sums."""
    return self._dtype

  def total(self) -> tf.Tensor:
    """Reads the sum of all weights, in O(1).

    Returns:
      A scalar of the tree's dtype.
    """
    # tf.gather reads a plain variable in place (its sparse_read), and also
    # takes the mirrored variables of tf_adasamp.distribute, which lack one.
    return tf.gather(self.variable, 1)

  def weights(self) -> tf.Tensor:
    """Reads all n weights.

    Returns:
      [n] weights, of the tree's dtype.
    """
    return tf.gather(
        self.variable,
        tf.range(self._capacity, self._capacity + self._num_leaves))

  def probabilities(self, indices: TensorLike | None = None) -> tf.Tensor:
    """Reads the probabilities w_i / total of drawing some indices.

    Args:
      indices: [B] integer indices in [0, n); None for all n.

    Returns:
      [B] (or [n]) probabilities, of the tree's dtype.

    Raises:
      TypeError: if `indices` are not integers.
      tf.errors.InvalidArgumentError: if an index is out of range or the
        total weight is 0.
    """
    if indices is None:
      indices = tf.range(self._num_leaves, dtype=tf.int64)
    indices = _validation.indices(indices)
    tf.debugging.assert_less(indices,
                             tf.constant(self._num_leaves, tf.int64),
                             message="indices out of range")
    tf.debugging.assert_non_negative(indices, message="indices out of range")
    # One read of the total and the leaves, so they agree.
    values = tf.gather(self.variable,
                       tf.concat([[1], indices + self._capacity], axis=0))
    with tf.control_dependencies([
        tf.debugging.assert_positive(
            values[0], message="the total weight is 0: no probabilities")
    ]):
      return values[1:] / values[0]

  def assign(self, weights: TensorLike) -> None:
    """Sets all n weights and rebuilds the tree, in O(n).

    Args:
      weights: [n] finite weights >= 0.

    Raises:
      tf.errors.InvalidArgumentError: if `weights` are not [n], finite and
        >= 0, or their sums overflow; the tree is left as it was.
    """
    ops.sum_tree_build(self.variable.handle,
                       tf.convert_to_tensor(weights, self._dtype),
                       num_leaves=self._num_leaves)

  def set(self, indices: TensorLike, weights: TensorLike) -> None:
    """Sets the weights of `indices` ([B] ints) to `weights` ([B]).

    Each touched ancestor is recomputed from its two children, O(B log n),
    so repeated updates never drift. Where an index repeats, its last weight
    wins, as in numpy's `w[indices] = weights`.

    Args:
      indices: [B] integer indices in [0, n).
      weights: [B] finite weights >= 0.

    Raises:
      TypeError: if `indices` are not integers.
      tf.errors.InvalidArgumentError: if an index is out of range, a weight
        negative or not finite, the shapes differ, or the sums would
        overflow; the tree is left as it was.
    """
    ops.sum_tree_set(self.variable.handle,
                     _validation.indices(indices),
                     tf.convert_to_tensor(weights, self._dtype),
                     num_leaves=self._num_leaves)

  def sample(self, uniforms: TensorLike) -> tuple[tf.Tensor, tf.Tensor]:
    """Draws one index per uniform in [0, 1).

    Returns, for each u, the smallest index i with cumsum(w)[i] > u * total,
    so i is drawn with probability w_i / total; deterministic given the
    uniforms, never a zero-weight or padding leaf.

    Args:
      uniforms: [B] values in [0, 1), of the tree's dtype.

    Returns:
      (indices, probabilities): int64 [B] and [B] w_i / total.

    Raises:
      tf.errors.InvalidArgumentError: if a uniform is outside [0, 1) or the
        total weight is 0.
    """
    return ops.sum_tree_sample(self.variable.handle,
                               tf.convert_to_tensor(uniforms, self._dtype))

  def _restore(self, restored):
    """Assigns a checkpoint's tree once it is checked (CheckedState)."""
    with tf.control_dependencies([
        _checkpointing.assert_size(restored["num_leaves"], self._num_leaves,
                                   "number of leaves")
    ]):
      tree = checked_tree(restored["tree"], self._num_leaves)
    return self.variable.assign(tree)
