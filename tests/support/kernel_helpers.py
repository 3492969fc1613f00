"""Helpers for the tests of the kernels: inputs, the ops on a device, a
sampler's steps in one tf.function, and snapshots of state."""

import numpy as np
import tensorflow as tf

import reference
from tf_adasamp import AdaptiveSampler
from tf_adasamp import ops


def state_of(module):
  """Every value that makes up a module's state, as NumPy arrays."""
  values = [v.numpy().copy() for v in module.variables]
  if isinstance(module, AdaptiveSampler):
    values.append(module.generator.state.numpy().copy())
  return values


def train(sampler, steps, batch_size, jit_compile):
  """Algorithm 1 for `steps` steps in one tf.function loop, with a utility of
  the indices; returns the last batch's indices and probabilities."""

  @tf.function(jit_compile=jit_compile)
  def loop(steps):
    indices = tf.zeros([batch_size], tf.int64)
    probabilities = tf.zeros([batch_size], sampler.dtype)
    for _ in tf.range(steps):
      indices, probabilities = sampler.sample_with_probabilities(batch_size)
      sampler.update(indices, tf.cast(indices % 3, sampler.dtype))
    return indices, probabilities

  return [t.numpy() for t in loop(tf.constant(steps))]


def random_weights(num_leaves, dtype, seed):
  """Gamma weights, a fifth of them zero, at least one positive."""
  rng = np.random.default_rng(seed)
  weights = rng.gamma(0.5, size=num_leaves)
  weights[rng.random(num_leaves) < 0.2] = 0
  weights[rng.integers(num_leaves)] = 1.0
  return weights.astype(dtype)


class ReweightState:
  """The four arrays AdaptiveReweight updates, consistent with each other.

  The trees cache s_i = exp(l_i - log_scale) and s_i log s_i of the log
  weights l_i, as the sampler keeps them; node 0 of the entropy tree holds
  the tree's total, as the op leaves it.
  """

  def __init__(self, log_weights, log_scale):
    dtype = log_weights.dtype
    self.log_weights = log_weights.copy()
    self.log_scale = np.array(log_scale, dtype)
    log_scaled = log_weights - self.log_scale
    scaled = np.exp(log_scaled)
    self.tree = reference.build_tree(scaled)
    self.entropy_tree = reference.heap_sums(
        np.where(scaled > 0, scaled * log_scaled, 0).astype(dtype))
    self.entropy_tree[0] = self.tree[1]

  def arrays(self):
    """log_weights, log_scale, tree, entropy_tree."""
    return [self.log_weights, self.log_scale, self.tree, self.entropy_tree]

  def copy(self):
    state = ReweightState.__new__(ReweightState)
    (state.log_weights, state.log_scale, state.tree,
     state.entropy_tree) = [a.copy() for a in self.arrays()]
    return state


def variable_on(device, values):
  with tf.device(device):
    return tf.Variable(values)


def build_on(device, weights):
  """A tree variable on `device`, built from `weights` by the op there."""
  tree = variable_on(
      device, np.zeros(2 * reference.capacity_of(len(weights)), weights.dtype))
  with tf.device(device):
    ops.sum_tree_build(tree.handle, weights, num_leaves=len(weights))
  return tree


def reweight_on(device, state, indices, utilities, amplitude, decay):
  """The op on `device`, on variables holding `state`; the new arrays."""
  log_weights, log_scale, tree, entropy_tree = [
      variable_on(device, a) for a in state.arrays()
  ]
  dtype = state.tree.dtype
  with tf.device(device):
    ops.adaptive_reweight(tree.handle, entropy_tree.handle, log_weights.handle,
                          log_scale.handle, indices, utilities,
                          dtype.type(amplitude), dtype.type(decay))
  return [v.numpy() for v in (log_weights, log_scale, tree, entropy_tree)]


def assert_same_state(arrays, expected, rtol=0):
  """Bit for bit, or to `rtol` (the entropy tree's to rtol of its largest
  value, as its sums mix signs)."""
  for array, expected_array in zip(arrays, expected, strict=True):
    if rtol:
      np.testing.assert_allclose(array,
                                 expected_array,
                                 rtol=rtol,
                                 atol=rtol * np.abs(expected_array).max())
    else:
      np.testing.assert_array_equal(array, expected_array)


def assert_unchanged(module, before):
  """Asserts that `module`'s state is `before` (a `state_of`), bit for bit."""
  assert_same_state(state_of(module), before)


def save(module, path):
  """Saves `module` in a tf.train.Checkpoint under the directory `path`."""
  return tf.train.Checkpoint(module=module).save(str(path / "ckpt"))


def restore(module, path):
  """Restores `module` from the checkpoint `save` wrote at `path`."""
  tf.train.Checkpoint(module=module).restore(path).assert_consumed()
