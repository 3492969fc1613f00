"""NumPy references for the tests: the heap-layout sum-tree and Algorithm 1.

Written for clarity, not speed, and independently of the C++ kernels.
"""

import numpy as np


def capacity_of(num_leaves):
  capacity = 1
  while capacity < num_leaves:
    capacity *= 2
  return capacity


def heap_sums(values):
  """The heap-layout array of pairwise sums over `values`, node 0 zero
  (what build_tree and the entropy tree keep there is up to their callers)."""
  values = np.asarray(values)
  capacity = capacity_of(len(values))
  tree = np.zeros(2 * capacity, values.dtype)
  tree[capacity:capacity + len(values)] = values
  for node in range(capacity - 1, 0, -1):
    tree[node] = tree[2 * node] + tree[2 * node + 1]
  return tree


def build_tree(weights):
  """The tree the build op writes for `weights`: a subnormal weight is stored
  as 0, and node 0 holds the number of leaves."""
  weights = np.asarray(weights)
  tree = heap_sums(
      np.where(weights < np.finfo(weights.dtype).tiny, np.zeros_like(weights),
               weights))
  tree[0] = len(weights)
  return tree


def draw(weights, uniforms):
  """The smallest i with cumsum(w)[i] > u * total, for each u."""
  weights = np.asarray(weights, np.float64)
  cumulative = np.cumsum(weights)
  return np.searchsorted(cumulative,
                         np.asarray(uniforms) * cumulative[-1],
                         side="right")


class Algorithm1:
  """London (NIPS 2017) Algorithm 1 with mini-batches, in log space."""

  def __init__(self, num_examples, amplitude, decay):
    self.log_weights = np.zeros(num_examples)
    self.amplitude = amplitude
    self.decay = decay

  def probabilities(self):
    shifted = np.exp(self.log_weights - self.log_weights.max())
    return shifted / shifted.sum()

  def draw(self, uniforms):
    return draw(self.probabilities(), uniforms)

  def update(self, indices, utilities):
    """Reweights each unique index once, with its first utility."""
    _, firsts = np.unique(indices, return_index=True)
    for position in firsts:
      i = indices[position]
      self.log_weights[i] = (self.decay * self.log_weights[i] +
                             self.amplitude * utilities[position])

  def kl_divergence(self):
    q = self.probabilities()
    q = q[q > 0]
    return float(np.sum(q * np.log(len(self.log_weights) * q)))
