"""AdaptiveSampler under concurrent use (issue 16, item 5: torn reads).

Threads update and reset one sampler while others read every public quantity.
Each read must be of a state that existed: the ops hold the variables' locks,
so one read of one variable is of one state, and what needs two totals (the
KL) reads them from one variable (node 0 of the entropy tree holds the tree's
total). A reset is one reweight op over every index, so no update runs
halfway through one. After the threads join, the state must be consistent.

Before both fixes, the KL read the two totals apart and returned values up to
1e47 for n = 1000 (log n = 6.9), and a reset racing an update left the tree
and the log weights disagreeing: the eager variants failed on every run. In
a tf.function the old reads and a reset's four assignments run back to back
and rarely interleave; those variants check the graph path of the fix.
"""

import math
import threading

import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp import AdaptiveSampler

NUM_EXAMPLES = 1000
BATCH_SIZE = 32
# log n, and room for its round-off.
MAX_KL = math.log(NUM_EXAMPLES) + 1e-9
# Per thread: reads by each reader, and at most this many updates by each
# updater (they stop once the readers are done).
READS = 150
MAX_UPDATES = 20_000
RESETS = 20


def make_sampler():
  # Utilities in [0, 6] raise the weights they touch by up to exp(60), so a
  # KL read of W before an update and H after it is far above log n; each
  # 50th update has utility 20, past the safe range: a rescale.
  return AdaptiveSampler(NUM_EXAMPLES, amplitude=10.0, decay=0.5, seed=0)


def utilities_for(step, rng):
  return rng.uniform(0, 6, size=BATCH_SIZE) + (20 if step % 50 == 0 else 0)


def maybe_compiled(function, compiled):
  return tf.function(function) if compiled else function


class Reads:
  """The sampler's public reads, each checked to be of a state that
  existed."""

  def __init__(self, sampler, compiled):
    self.kl_divergence = maybe_compiled(sampler.kl_divergence, compiled)
    self.probabilities = maybe_compiled(sampler.probabilities, compiled)
    self.total = maybe_compiled(sampler.tree.total, compiled)
    self.weights = maybe_compiled(sampler.tree.weights, compiled)
    self.sample = maybe_compiled(
        lambda: sampler.sample_with_probabilities(BATCH_SIZE), compiled)
    self.log_weights = maybe_compiled(sampler.log_weights.read_value, compiled)

  def check_kl(self):
    kl = float(self.kl_divergence())
    assert 0 <= kl <= MAX_KL, f"KL = {kl} is outside [0, log n]"

  def check_all(self):
    self.check_kl()
    probabilities = self.probabilities().numpy()
    assert np.all(np.isfinite(probabilities) & (probabilities >= 0))
    assert abs(probabilities.sum() - 1) < 1e-9, probabilities.sum()
    total = float(self.total())
    assert math.isfinite(total) and total > 0, total
    weights = self.weights().numpy()
    assert np.all(np.isfinite(weights) & (weights >= 0)) and weights.sum() > 0
    indices, drawn = [t.numpy() for t in self.sample()]
    assert np.all((indices >= 0) & (indices < NUM_EXAMPLES)), indices
    assert np.all(np.isfinite(drawn) & (drawn > 0) & (drawn <= 1)), drawn
    assert np.all(np.isfinite(self.log_weights().numpy()))


def assert_consistent(sampler):
  """Tree, entropy tree, log weights and log-scale of one state."""
  tree = sampler.tree.variable.numpy()
  entropy_tree = sampler._entropy_tree.numpy()
  log_scaled = sampler.log_weights.numpy() - sampler._log_scale.numpy()
  capacity = sampler.tree.capacity
  scaled = np.exp(log_scaled)
  scaled[scaled < np.finfo(scaled.dtype).tiny] = 0  # Stored as 0.
  np.testing.assert_allclose(tree[capacity:capacity + NUM_EXAMPLES],
                             scaled,
                             rtol=1e-12)
  entropy = np.where(scaled > 0, scaled * log_scaled, 0)
  np.testing.assert_allclose(entropy_tree[capacity:capacity + NUM_EXAMPLES],
                             entropy,
                             rtol=1e-12,
                             atol=1e-12 * np.abs(entropy).max())
  for values in (tree, entropy_tree):
    np.testing.assert_array_equal(values[capacity + NUM_EXAMPLES:], 0)
    internal = np.arange(1, capacity)
    np.testing.assert_array_equal(
        values[internal], values[2 * internal] + values[2 * internal + 1])
  assert tree[0] == NUM_EXAMPLES
  assert entropy_tree[0] == tree[1]


def run_threads(targets):
  """Runs each target in a thread of its own; re-raises the first failure."""
  errors = []

  def guarded(target):

    def run():
      try:
        target()
      except Exception as error:
        errors.append(error)

    return run

  threads = [threading.Thread(target=guarded(target)) for target in targets]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  if errors:
    raise errors[0]


@pytest.mark.parametrize("compiled", [False, True],
                         ids=["eager", "tf_function"])
def test_reads_racing_updates_and_resets_see_states_that_existed(compiled):
  sampler = make_sampler()
  reads = Reads(sampler, compiled)
  update = maybe_compiled(sampler.update, compiled)
  reset = maybe_compiled(sampler.reset, compiled)
  readers_done = threading.Event()
  num_readers = 3
  finished = []

  def updater(seed):

    def run():
      rng = np.random.default_rng(seed)
      for step in range(MAX_UPDATES):
        if readers_done.is_set():
          return
        update(rng.integers(NUM_EXAMPLES, size=BATCH_SIZE),
               utilities_for(step, rng))

    return run

  def reader(check):

    def run():
      try:
        for _ in range(READS):
          check()
      finally:
        finished.append(True)
        if len(finished) == num_readers:
          readers_done.set()

    return run

  def resetter():
    for _ in range(RESETS):
      if readers_done.wait(0.05):
        return
      reset()

  run_threads([
      updater(1),
      updater(2), resetter,
      reader(reads.check_all),
      reader(reads.check_kl),
      reader(reads.check_kl)
  ])
  assert_consistent(sampler)


@pytest.mark.parametrize("compiled", [False, True],
                         ids=["eager", "tf_function"])
def test_resets_racing_updates_leave_a_consistent_state(compiled):
  sampler = make_sampler()
  update = maybe_compiled(sampler.update, compiled)
  reset = maybe_compiled(sampler.reset, compiled)
  rng = np.random.default_rng(0)
  for _ in range(60):
    # Every log weight away from 0, so an update that runs halfway through a
    # reset leaves a leaf that its log weight disagrees with.
    update(np.arange(NUM_EXAMPLES), rng.uniform(0, 1, NUM_EXAMPLES))
    start = threading.Barrier(2)

    def resetter(start=start):
      start.wait()
      reset()

    def updater(start=start):
      start.wait()
      for _ in range(3):
        update(rng.integers(NUM_EXAMPLES, size=BATCH_SIZE),
               rng.uniform(0, 1, BATCH_SIZE))

    run_threads([resetter, updater])
    assert_consistent(sampler)
