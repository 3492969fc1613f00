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
  FlashbaxSumTree  flashbax's sum-tree (JAX, prioritized replay), if
                 flashbax is installed: jitted, called per batch from
                 Python, and 64 batches in one jitted lax.fori_loop.
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
    self.buffer = cpprb.PrioritizedReplayBuffer(size,
                                                {"index": {
                                                    "dtype": np.int64
                                                }},
                                                alpha=1.0,
                                                eps=0.0)
    self.buffer.add(index=np.arange(size), priorities=np.asarray(weights))

  def sample(self, batch_size):
    return self.buffer.sample(batch_size, beta=0.0)["indexes"]

  def set(self, indices, weights):
    self.buffer.update_priorities(indices, weights)


def flashbax_version():
  """flashbax's version, or None if it is not installed."""
  try:
    return metadata.version("flashbax")
  except metadata.PackageNotFoundError:
    return None


def jax_backend():
  """The platform JAX computes on ("cpu", "gpu"), or None without flashbax."""
  if flashbax_version() is None:
    return None
  import jax  # pylint: disable=import-outside-toplevel
  return jax.default_backend()


class FlashbaxSumTree:
  """flashbax's sum-tree over n leaves (float32, JAX's default).

  `sample(B)` is its stratified_sample (B strata of the total, a uniform in
  each, drawn by JAX's PRNG), jitted and called once per batch; `sample_loop`
  runs LOOP such batches in one jitted `lax.fori_loop`, with nothing crossing
  back to Python in between (its best case, as in a jitted training loop).
  `set_loop` likewise runs LOOP set_batch_bincount calls, each on the next of
  LOOP batches of (indices, weights).
  """

  LOOP = 64

  def __init__(self, weights):
    # pylint: disable=import-outside-toplevel
    import jax
    import jax.numpy as jnp
    from flashbax.buffers import sum_tree
    self._jax = jax
    size = len(weights)
    state = sum_tree.init(size)
    self.state = jax.block_until_ready(
        sum_tree.set_batch_bincount(state, jnp.arange(size),
                                    jnp.asarray(weights, jnp.float32)))
    self._key = jax.random.PRNGKey(0)
    loop = self.LOOP

    def sample(state, key, batch_size):
      return sum_tree.stratified_sample(state, batch_size, key)

    def sample_loop(state, key, batch_size):

      def body(i, total):
        drawn = sum_tree.stratified_sample(state, batch_size,
                                           jax.random.fold_in(key, i))
        return total + drawn[0]

      return jax.lax.fori_loop(0, loop, body, jnp.zeros((), jnp.int32))

    def set_loop(state, indices, weights):

      def body(i, state):
        return sum_tree.set_batch_bincount(state, indices[i], weights[i])

      return jax.lax.fori_loop(0, loop, body, state)

    self._sample = jax.jit(sample, static_argnums=2)
    self._sample_loop = jax.jit(sample_loop, static_argnums=2)
    self._set_loop = jax.jit(set_loop)

  def sample(self, batch_size):
    self._key, key = self._jax.random.split(self._key)
    return self._jax.block_until_ready(self._sample(self.state, key,
                                                    batch_size))

  def sample_loop(self, batch_size):
    self._key, key = self._jax.random.split(self._key)
    return self._jax.block_until_ready(
        self._sample_loop(self.state, key, batch_size))

  def set_loop(self, indices, weights):
    """indices, weights: [LOOP, B] arrays."""
    return self._jax.block_until_ready(
        self._set_loop(self.state, indices, weights.astype(np.float32)))
