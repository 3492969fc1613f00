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


def floored(probabilities, epsilon):
  """The mixture (1 - epsilon) Q + epsilon U of a distribution Q."""
  probabilities = np.asarray(probabilities, np.float64)
  return (1 - epsilon) * probabilities + epsilon / len(probabilities)


def floored_draw(probabilities, uniforms, epsilon):
  """Draws from the mixture, one uniform each: u < epsilon picks
  floor(u / epsilon * n), any other u draws from Q at
  (u - epsilon) / (1 - epsilon) (both capped below 1)."""
  num_examples = len(probabilities)
  below_one = np.nextafter(1.0, 0.0)
  indices = []
  for u in np.asarray(uniforms, np.float64):
    if u < epsilon:
      indices.append(int(np.floor(min(u / epsilon, below_one) * num_examples)))
    else:
      stretched = min((u - epsilon) / (1 - epsilon), below_one)
      indices.append(int(draw(probabilities, [stretched])[0]))
  return np.array(indices)


def kl_to_uniform(probabilities):
  """KL(P || uniform) of a distribution P."""
  probabilities = np.asarray(probabilities, np.float64)
  positive = probabilities[probabilities > 0]
  return float(np.sum(positive * np.log(len(probabilities) * positive)))


def piecewise_linear(steps, values, step):
  """A schedule linear between knots (steps[k], values[k]): values[0]
  before the first, the last value from the last knot on; at a step given
  twice, the second value."""
  if step >= steps[-1]:
    return values[-1]
  if step < steps[0]:
    return values[0]
  # The last knot at or before `step`; the next one lies after it.
  k = max(k for k in range(len(steps)) if steps[k] <= step)
  fraction = (step - steps[k]) / (steps[k + 1] - steps[k])
  return values[k] + (values[k + 1] - values[k]) * fraction


def importance_weights(probabilities, num_examples, beta):
  """(1 / (n p_i)) ** beta for draws of probabilities p_i."""
  return (num_examples * np.asarray(probabilities, np.float64))**-beta
