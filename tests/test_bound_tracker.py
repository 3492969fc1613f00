"""The in-graph BoundTracker against bounds.KLBoundTracker, its reference."""

import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
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


def tracked(signed=False, amplitude=0.7):
  """A BoundTracker of a few steps, of unsigned or signed utilities."""
  tracker = bound_tracker.BoundTracker(7, amplitude=amplitude, decay=0.6)
  rng = np.random.default_rng(1)
  for _ in range(4):
    tracker.update(rng.integers(0, 7, 5), rng.uniform(-1 if signed else 0, 1,
                                                      5))
  return tracker


def tracker_state(tracker):
  return [variable.numpy() for variable in tracker.variables]


def set_at(position, value):
  """An edit that sets entry `position` of an array (a scalar: itself)."""

  def edit(saved):
    edited = np.array(saved, copy=True)
    if edited.ndim == 0:
      return np.array(value, edited.dtype)
    edited[position] = value
    return edited

  return edit


# Edits of a checkpointed tracker of unsigned utilities, and what the
# refusal names.
TRACKER_EDITS = [
    ("total", set_at(0, -1e9), "sums are negative"),
    ("sums", set_at(2, -1.0), "sums are negative"),
    ("sums", set_at(2, np.nan), "bound-tracker sums"),
    ("total", set_at(0, np.inf), "bound-tracker total"),
    ("general", set_at(0, np.nan), "bound-tracker general"),
    ("utilities_before_last", set_at(0, -3.0), "sums are negative"),
    ("last_utilities", set_at(0, np.nan), "bound-tracker last_utilities"),
    ("steps", set_at(0, -5), "steps are < 0"),
    ("steps", set_at(0, 0), "a batch size but no steps"),
    ("batch_size", set_at(0, -1), "batch size is < 0"),
    ("sums", lambda value: value[:3], "bound-tracker sums is not of shape"),
    ("num_examples", set_at(0, 8), "number of examples"),
    ("amplitude", set_at(0, 0.5), "amplitude"),
    ("decay", set_at(0, 0.9), "decay"),
]


@pytest.mark.parametrize("name, edit, message", TRACKER_EDITS)
def test_an_edited_bound_tracker_checkpoint_is_refused_before_any_change(
    tmp_path, name, edit, message):
  path = tf.train.Checkpoint(tracker=tracked()).write(str(tmp_path / "ckpt"))
  edited = checkpoint_edits.edited_checkpoint(path, name, edit)
  tracker = tracked(signed=True)
  before = tracker_state(tracker)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    tf.train.Checkpoint(tracker=tracker).read(edited)
  for value, value_before in zip(tracker_state(tracker), before):
    np.testing.assert_array_equal(value, value_before)


@pytest.mark.parametrize("signed", [False, True])
def test_a_bound_tracker_checkpoint_restores_every_sum(tmp_path, signed):
  saved = tracked(signed=signed)
  path = tf.train.Checkpoint(tracker=saved).write(str(tmp_path / "ckpt"))
  tracker = bound_tracker.BoundTracker(7, amplitude=0.7, decay=0.6)
  tf.train.Checkpoint(tracker=tracker).read(path).assert_consumed()
  assert_same_tracker_state(tracker, saved.read())
  assert tracker.read().kl_bound_general == saved.read().kl_bound_general
