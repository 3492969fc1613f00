"""KLBoundTracker (tf_adasamp.host_bound_tracker): the sums on the host."""

import numpy as np
import pytest

from tf_adasamp import bounds


def random_run(seed, n, steps, batch, signed):
  rng = np.random.default_rng(seed)
  indices = rng.integers(0, n, size=(steps, batch))
  utilities = rng.normal(
      size=(steps, batch)) if signed else rng.uniform(0, 2, size=(steps, batch))
  # A repeated index within a step has one utility (same example, same h_t).
  for row_indices, row_utilities in zip(indices, utilities):
    for b, i in enumerate(row_indices):
      row_utilities[b] = row_utilities[list(row_indices).index(i)]
  return indices, utilities


@pytest.mark.parametrize("batch", [1, 4])
def test_tracker_agrees_with_functions_at_every_step(batch):
  n, steps = 5, 40
  indices, utilities = random_run(0, n, steps, batch, signed=False)
  tracker = bounds.KLBoundTracker(num_examples=n, amplitude=0.7, decay=0.8)
  for t in range(steps):
    tracker.update(indices[t], utilities[t])
    assert tracker.steps == t + 1 and tracker.batch_size == batch
    assert tracker.kl_bound == pytest.approx(
        bounds.adaptive_kl_bound(amplitude=0.7,
                                 decay=0.8,
                                 sampled_utilities=utilities[:t + 1]))
  # Theorem 4 from the transcription of the paper's formula.

  def cumulative(i, t):
    taus = [s for s in range(t) if i in indices[s]]
    return sum(utilities[tau][list(indices[tau]).index(i)] *
               0.8**(len(taus) - j) for j, tau in enumerate(taus, 1))

  expected = sum(0.7 / n *
                 sum(cumulative(i_t, t) - cumulative(i, t)
                     for i in range(n))
                 for t in range(1, steps)
                 for i_t in indices[t])
  assert tracker.kl_bound_general == pytest.approx(expected, rel=1e-10)


def test_tracker_theorem5_is_none_after_a_negative_utility():
  tracker = bounds.KLBoundTracker(num_examples=3, amplitude=1, decay=0.5)
  tracker.update([0, 1], [0.5, 1.0])
  assert tracker.kl_bound == 0.0  # Steps before the last: none.
  tracker.update([2, 1], [-0.5, 1.0])
  assert tracker.kl_bound is None
  assert isinstance(tracker.kl_bound_general, float)


def test_tracker_certificate_is_corollary1_with_clipped_kl():
  n, steps, batch = 20, 30, 3
  indices, utilities = random_run(1, n, steps, batch, signed=True)
  tracker = bounds.KLBoundTracker(num_examples=n, amplitude=0.5, decay=0.9)
  constants = dict(delta=0.05,
                   max_loss=1.0,
                   lipschitz=0.5,
                   strong_convexity=0.1)
  with pytest.raises(ValueError, match="no steps"):
    tracker.strongly_convex_sgd_bound(**constants)
  for t in range(steps):
    tracker.update(indices[t], utilities[t])
    assert tracker.strongly_convex_sgd_bound(
        **constants) == (bounds.strongly_convex_sgd_bound(kl=max(
            0.0, tracker.kl_bound_general),
                                                          n=n,
                                                          T=t + 1,
                                                          batch_size=batch,
                                                          **constants))


@pytest.mark.parametrize("indices, utilities, error, message", [
    ([0, 1, 2], [1.0, 1.0, 1.0], ValueError, "every step must draw 2"),
    ([0, 1], [1.0], ValueError, "must be the same"),
    ([0, 3], [1.0, 1.0], ValueError, r"in \[0, 3\), got 3"),
    ([0, 1], [1.0, float("nan")], ValueError, "finite"),
    ([0.0, 1.0], [1.0, 1.0], TypeError, "integers"),
])
def test_tracker_rejects_bad_step(indices, utilities, error, message):
  tracker = bounds.KLBoundTracker(num_examples=3, amplitude=1, decay=0.5)
  tracker.update([0, 0], [1.0, 1.0])
  with pytest.raises(error, match=message):
    tracker.update(indices, utilities)
