"""What a user would reach for instead of tf_adasamp's sum-tree ops.

  categorical    tf.random.categorical over the log weights: no state to
                 update, but O(n) work per batch of draws.
  numpy_choice   numpy.random.Generator.choice(n, B, p=w / sum(w)): O(n) per
                 batch, on the host.
  NumpySumTree   the same heap-layout sum-tree in plain NumPy, vectorized
                 over the batch one level at a time: O(B log n) per batch,
                 with NumPy's per-call overhead at every level.
  CpprbSumTree   cpprb's PrioritizedReplayBuffer (a C++ segment tree for
                 prioritized experience replay), if cpprb is installed.
"""

from importlib import metadata

import numpy as np
import tensorflow as tf


def categorical(log_weights, batch_size):
  """[batch_size] draws from softmax(log_weights), a [n] tensor."""
  return tf.random.categorical(log_weights[tf.newaxis], batch_size)[0]


def numpy_choice(rng, probabilities, batch_size):
  """[batch_size] draws from `probabilities` (summing to 1)."""
  return rng.choice(len(probabilities), batch_size, p=probabilities)


class NumpySumTree:
  """tf_adasamp's tree layout and draw rule, in NumPy."""

  def __init__(self, weights):
    weights = np.asarray(weights, np.float64)
    self.capacity = 1 << max(len(weights) - 1, 0).bit_length()
    self.tree = np.zeros(2 * self.capacity)
    self.tree[self.capacity:self.capacity + len(weights)] = weights
    start = self.capacity // 2
    while start >= 1:
      level = np.arange(start, 2 * start)
      self.tree[level] = self.tree[2 * level] + self.tree[2 * level + 1]
      start //= 2

  def sample(self, uniforms):
    """(indices, probabilities): the smallest i with cumsum(w)[i] > u * total
    for each uniform, walking all of them down one level at a time."""
    total = self.tree[1]
    target = uniforms * total
    node = np.ones(len(uniforms), np.int64)
    for _ in range(self.capacity.bit_length() - 1):
      left = self.tree[2 * node]
      go_right = (target >= left) & (self.tree[2 * node + 1] > 0)
      target = np.where(go_right, target - left, target)
      node = 2 * node + go_right
    return node - self.capacity, self.tree[node] / total

  def set(self, indices, weights):
    """Sets leaves (the last of repeated indices wins) and recomputes each
    touched ancestor once per level."""
    nodes = self.capacity + np.asarray(indices)
    self.tree[nodes] = weights
    nodes = np.unique(nodes)
    while nodes[0] > 1:
      nodes = np.unique(nodes // 2)
      self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]


def cpprb_version():
  """cpprb's version, or None if it is not installed."""
  try:
    return metadata.version("cpprb")
  except metadata.PackageNotFoundError:
    return None


class CpprbSumTree:
  """cpprb's prioritized replay buffer over n slots holding their own index.

  With alpha = 1 and eps = 0 its priorities are the weights. Its sample(B)
  draws one index from each of B equal strata of the total (stratified, as
  in prioritized replay) and also returns the slots' contents and
  importance weights, which is what a cpprb user pays for a batch.
  """

  def __init__(self, weights):
    import cpprb  # pylint: disable=import-outside-toplevel
    size = len(weights)
    self.buffer = cpprb.PrioritizedReplayBuffer(
        size, {"index": {"dtype": np.int64}}, alpha=1.0, eps=0.0)
    self.buffer.add(index=np.arange(size), priorities=np.asarray(weights))

  def sample(self, batch_size):
    return self.buffer.sample(batch_size, beta=0.0)["indexes"]

  def set(self, indices, weights):
    self.buffer.update_priorities(indices, weights)
