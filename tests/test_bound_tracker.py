"""The in-graph BoundTracker against bounds.KLBoundTracker, its reference."""

import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp import bound_tracker
from tf_adasamp import bounds
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import steps
from tf_adasamp.sampler import AdaptiveSampler


@pytest.fixture(scope="module")
def digits():
  return datasets.load("digits")


def assert_same_tracker_state(in_graph, host):
  ours, theirs = in_graph.read().state(), host.state()
  np.testing.assert_allclose(ours.pop("sums"),
                             theirs.pop("sums"),
                             rtol=1e-12,
                             atol=1e-12)
  for name in ["signed", "steps", "batch_size"]:
    assert ours.pop(name) == theirs.pop(name), name
  for name, value in theirs.items():
    assert ours[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name


@pytest.mark.parametrize("signed", [False, True])
# The sort of static shapes, on its own and compiled by XLA.
@pytest.mark.parametrize("static_shapes,jit_compile", [(False, False),
                                                       (True, False),
                                                       (True, True)])
def test_in_graph_bound_tracker_matches_host_tracker(signed, static_shapes,
                                                     jit_compile):
  # Few examples, so batches repeat indices; signed utilities too.
  n, batch_size = 7, 5
  tracker = bound_tracker.BoundTracker(n,
                                       amplitude=0.7,
                                       decay=0.6,
                                       static_shapes=static_shapes)
  host = bounds.KLBoundTracker(n, amplitude=0.7, decay=0.6)
  rng = np.random.default_rng(0)
  update = tf.function(tracker.update, jit_compile=jit_compile)
  for _ in range(12):
    indices = rng.integers(0, n, batch_size)
    batch_utilities = rng.uniform(-1 if signed else 0, 1, batch_size)
    distinct = update(tf.constant(indices),
                      tf.constant(batch_utilities, tf.float32))
    assert distinct == len(np.unique(indices))
    host.update(indices, np.float32(batch_utilities))
    assert_same_tracker_state(tracker, host)
  assert (host.kl_bound is None) == signed
  assert tracker.read().kl_bound == host.kl_bound


def test_bound_tracker_of_a_run_matches_host_tracker_fed_its_draws(digits):
  model = models.build("logistic", (8, 8, 1), 10, seed=0)
  sampler = AdaptiveSampler(len(digits.y_train),
                            amplitude=1.0,
                            decay=0.5,
                            seed=0)
  step = steps.make_train_step(model,
                               components.make_optimizer("sgd", 0.5, 0.0),
                               sampler,
                               tf.constant(digits.x_train),
                               tf.constant(digits.y_train),
                               batch_size=64,
                               utility="l1")
  tracker = bound_tracker.BoundTracker(len(digits.y_train), 1.0, 0.5)
  host = bounds.KLBoundTracker(len(digits.y_train), 1.0, 0.5)
  draws = []

  @tf.function
  def run_steps(count):
    # As train() does: the tracker is updated inside the compiled loop.
    for _ in tf.range(count):
      _, _, indices, batch_utilities = step()
      tracker.update(indices, batch_utilities)
    return indices, batch_utilities

  for _ in range(5):
    draws.append([x.numpy() for x in run_steps(tf.constant(1))])
  for indices, batch_utilities in draws:
    host.update(indices, batch_utilities)
  assert_same_tracker_state(tracker, host)
  assert host.kl_bound_general != 0
