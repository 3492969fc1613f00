"""The paper's utility functions (London, NIPS 2017, Eq. 17)."""

import numpy as np
import pytest
import tensorflow as tf

import tf_adasamp
from tf_adasamp import utilities

LABELS = np.array([0, 2, 1])
PROBS = np.array([
    [0.7, 0.2, 0.1],  # Right, confident.
    [0.5, 0.1, 0.4],  # Wrong.
    [0.0, 0.0, 1.0]
])  # Wrong, and p(y) = 0.


def test_zero_one_marks_mistakes():
  np.testing.assert_array_equal(
      utilities.zero_one(LABELS, PROBS).numpy(), [0.0, 1.0, 1.0])


def test_l1_is_one_minus_true_class_probability():
  np.testing.assert_allclose(
      utilities.l1(LABELS, PROBS).numpy(), [0.3, 0.6, 1.0])


def test_cross_entropy_is_finite_when_true_class_has_zero_probability():
  values = utilities.cross_entropy(LABELS, PROBS).numpy()
  np.testing.assert_allclose(values[:2], -np.log([0.7, 0.4]))
  assert np.isfinite(values[2]) and values[2] > 700


def test_log_cross_entropy_is_finite_when_the_prediction_is_certain():
  probs = np.array([[0.7, 0.2, 0.1], [1.0, 0.0, 0.0]])
  values = utilities.log_cross_entropy([0, 0], probs).numpy()
  assert values[0] == pytest.approx(np.log(-np.log(0.7)))
  # -log 1 = 0, floored at the smallest normal float64.
  assert values[1] == pytest.approx(np.log(np.finfo(np.float64).tiny))


def test_log_cross_entropy_draws_in_proportion_to_the_loss():
  """Amplitude 1 turns the first update's utilities into weights equal to
  the losses; with a floor epsilon the draws are (1 - epsilon) of the
  loss-proportional distribution plus epsilon of the uniform one."""
  rng = np.random.default_rng(0)
  n, epsilon = 6, 1 / 3
  logits = rng.normal(size=(n, 4))
  labels = rng.integers(0, 4, n)
  sampler = tf_adasamp.AdaptiveSampler(n,
                                       amplitude=1.0,
                                       decay=0.001,
                                       epsilon=epsilon)
  sampler.update(np.arange(n),
                 utilities.from_logits("log_cross_entropy", labels, logits))
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels,
                                                          logits).numpy()
  np.testing.assert_allclose(sampler.probabilities(),
                             (1 - epsilon) * losses / losses.sum() +
                             epsilon / n,
                             rtol=1e-12)


@pytest.mark.parametrize("name", sorted(utilities.UTILITIES))
def test_utilities_accept_column_labels_and_float32(name):
  utility = utilities.get(name)
  values = utility(LABELS[:, None], PROBS.astype(np.float32))
  assert values.shape == (3,) and values.dtype == tf.float32


def test_get_accepts_callable_and_rejects_unknown_name():
  custom = lambda labels, probs: tf.zeros([3])  # pylint: disable=g-long-lambda
  assert utilities.get(custom) is custom
  with pytest.raises(ValueError, match="unknown utility 'hinge'"):
    utilities.get("hinge")


@pytest.mark.parametrize("name", sorted(utilities.UTILITIES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_from_logits_is_the_utility_of_the_softmax(name, dtype):
  rng = np.random.default_rng(0)
  logits = (4 * rng.normal(size=(200, 10))).astype(dtype)
  labels = rng.integers(0, 10, 200)
  expected = utilities.get(name)(labels, tf.nn.softmax(logits)).numpy()
  values = utilities.from_logits(name, labels, logits)
  assert values.dtype == dtype
  if name == "zero_one":
    np.testing.assert_array_equal(values, expected)
    assert 0 < expected.mean() < 1
  elif name == "log_cross_entropy":
    # Compared as losses: the log magnifies a loss's round-off near 0.
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(np.exp(values),
                               np.exp(expected),
                               rtol=64 * eps,
                               atol=4 * eps)
  else:
    # Up to round-off: a few ulps of the values, or of 1 near 0.
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(values, expected, rtol=64 * eps, atol=4 * eps)


def test_from_logits_floors_the_true_class_probability_as_cross_entropy():
  # p(y) = exp(-1000) is 0 in float64: both floor it at the smallest normal.
  logits = np.array([[0.0, 1000.0]])
  values = utilities.from_logits("cross_entropy", [0], logits).numpy()
  np.testing.assert_allclose(values,
                             utilities.cross_entropy(
                                 [0], tf.nn.softmax(logits)).numpy(),
                             rtol=1e-12)
  assert np.isfinite(values).all() and values[0] > 700


def test_from_logits_passes_a_custom_utility_the_probabilities():
  logits = np.array([[0.0, np.log(3.0)]])
  seen = []
  custom = lambda labels, probs: seen.append(probs) or tf.zeros([1])  # pylint: disable=g-long-lambda
  utilities.from_logits(custom, [0], logits)
  np.testing.assert_allclose(seen[0], [[0.25, 0.75]])


def test_from_logits_checks_labels_as_the_utilities_do():
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="labels must be < the number of classes"):
    utilities.from_logits("l1", [3], np.zeros([1, 3]))


@pytest.mark.parametrize("name", sorted(utilities.UTILITIES))
def test_utilities_take_bfloat16_as_mixed_precision_gives_them(name):
  # NumPy's finfo does not know bfloat16, which cross-entropy's floor needs.
  values = utilities.get(name)(LABELS, tf.cast(PROBS, tf.bfloat16))
  from_logits = utilities.from_logits(
      name, LABELS, tf.cast(np.log(PROBS + 1e-30), tf.bfloat16))
  for v in (values, from_logits):
    assert v.dtype == tf.bfloat16
    assert np.isfinite(tf.cast(v, tf.float32).numpy()).all()


def test_from_logits_names_logits_of_the_wrong_rank():
  with pytest.raises(ValueError, match=r"logits must be \[batch, classes\]"):
    utilities.from_logits("zero_one", [0], np.zeros([3]))
