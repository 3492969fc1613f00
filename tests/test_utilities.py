"""The paper's utility functions (London, NIPS 2017, Eq. 17), and RHO-LOSS's
reducible loss."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
import tf_adasamp
from tf_adasamp import bounds
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
  custom = lambda labels, probs: tf.zeros([3])
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
  custom = lambda labels, probs: seen.append(probs) or tf.zeros([1])
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


def reducible_reference(losses, irreducible, bound):
  """RHO-LOSS's reducible loss mapped into [0, 1], in NumPy."""
  return np.clip(losses - irreducible, 0, bound) / bound


def cross_entropy_reference(labels, logits):
  """-log softmax(logits)[label], in float64."""
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  return -log_probs[np.arange(len(labels)), labels]


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5),
                                        (np.float64, 1e-12)])
@pytest.mark.parametrize("compiled", [False, True])
def test_reducible_loss_is_the_clipped_reducible_cross_entropy_over_its_bound(
    dtype, rtol, compiled):
  rng = np.random.default_rng(0)
  n, batch, classes, bound = 50, 40, 5, np.log(5)
  logits = (3 * rng.normal(size=(batch, classes))).astype(dtype)
  labels = rng.integers(0, classes, batch)
  indices = rng.integers(0, n, batch)
  # Irreducible losses below, near and far above the training losses.
  irreducible = rng.uniform(0, 4, n).astype(dtype)
  reducible = utilities.ReducibleLoss(irreducible, bound=bound)
  assert reducible.irreducible_losses.dtype == tf.as_dtype(dtype)
  assert not reducible.irreducible_losses.trainable
  from_logits = reducible.from_logits
  from_probs = reducible
  if compiled:
    from_logits, from_probs = tf.function(from_logits), tf.function(from_probs)
  expected = reducible_reference(cross_entropy_reference(labels, logits),
                                 irreducible[indices], bound)
  values = from_logits(indices, labels, logits)
  assert values.dtype == tf.as_dtype(dtype)
  np.testing.assert_allclose(values, expected, rtol=rtol, atol=rtol)
  np.testing.assert_allclose(from_probs(indices, labels, tf.nn.softmax(logits)),
                             expected,
                             rtol=100 * rtol,
                             atol=100 * rtol)
  # The clip bites at both ends in this draw.
  assert np.any(expected == 0) and np.any(expected == 1)


def test_irreducible_losses_are_the_models_cross_entropy_on_each_example():
  rng = np.random.default_rng(1)
  x = rng.normal(size=(7, 3)).astype(np.float32)
  y = rng.integers(0, 4, 7)
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
  # Three calls of the model, the last of one example.
  losses = utilities.irreducible_losses(model, x, y, batch_size=3)
  np.testing.assert_allclose(losses,
                             cross_entropy_reference(y, model(x)),
                             rtol=1e-5)
  probs = keras.Sequential([model, keras.layers.Softmax()])
  np.testing.assert_allclose(utilities.irreducible_losses(probs,
                                                          x,
                                                          y,
                                                          from_logits=False),
                             losses,
                             rtol=1e-5)


def test_reducible_utilities_keep_algorithm_1_within_its_bounds():
  """Mapped into [0, 1], the utilities of any losses (confident mistakes
  included) keep every log weight in [0, amplitude / (1 - decay)], and
  Theorem 5's bound takes them."""
  rng = np.random.default_rng(2)
  n, batch, amplitude, decay = 30, 8, 2.0, 0.5
  reducible = utilities.ReducibleLoss(rng.uniform(0, 1, n), bound=np.log(10))
  sampler = tf_adasamp.AdaptiveSampler(n, amplitude, decay, seed=0)
  drawn = []
  for _ in range(50):
    indices = sampler.sample(batch)
    logits = 50 * rng.normal(size=(batch, 10))  # losses up to ~200
    values = reducible.from_logits(indices, rng.integers(0, 10, batch), logits)
    sampler.update(indices, values)
    drawn.append(values.numpy())
  log_weights = sampler.log_weights.numpy()
  assert log_weights.min() >= 0
  assert log_weights.max() <= amplitude / (1 - decay) + 1e-12
  assert log_weights.max() > 0.9 * amplitude / (1 - decay)
  kl_bound = bounds.adaptive_kl_bound(amplitude, decay, np.array(drawn))
  assert kl_bound <= amplitude * batch**2 * 49 / (1 - decay)


def test_reducible_loss_refuses_bad_arguments_and_keeps_its_losses(on_cpu):
  reducible = utilities.ReducibleLoss([0.5, 1.0, 2.0], bound=1.0)
  for bound, error in [(0.0, ValueError), (math.inf, ValueError),
                       (math.nan, ValueError), ("1", TypeError),
                       (True, TypeError)]:
    with pytest.raises(error, match="bound must be"):
      utilities.ReducibleLoss([0.5], bound=bound)
  for losses, error, message in [
      ([-0.1, 1.0, 2.0], tf.errors.InvalidArgumentError, "finite and >= 0"),
      ([math.nan, 1.0, 2.0], tf.errors.InvalidArgumentError, "finite and >= 0"),
      ([0.1, math.inf, 2.0], tf.errors.InvalidArgumentError, "finite and >= 0"),
      ([1, 2, 3], TypeError, "float32 or float64"),
      ([[0.5, 1.0, 2.0]], ValueError, "nonempty vector"),
      ([0.5, 1.0], ValueError, "must hold 3 losses"),
  ]:
    with pytest.raises(error, match=message):
      reducible.assign(np.asarray(losses))
    np.testing.assert_array_equal(reducible.irreducible_losses, [0.5, 1, 2])
  with pytest.raises(ValueError, match="nonempty vector"):
    utilities.ReducibleLoss(np.zeros([0], np.float32), bound=1.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="finite and >= 0"):
    utilities.ReducibleLoss([-1.0], bound=1.0)
  for indices in ([3], [-1]):
    with pytest.raises(tf.errors.InvalidArgumentError, match="indices must"):
      reducible.from_logits(indices, [0], [[1.0, 2.0]])
  with pytest.raises(TypeError, match="indices must be integers"):
    reducible.from_logits([0.0], [0], [[1.0, 2.0]])
  reducible.assign(np.array([0.0, 3.0, 4.0]))  # float64 into float32
  np.testing.assert_array_equal(reducible.irreducible_losses, [0, 3, 4])


def test_reducible_loss_checkpoints_restore_exactly_or_change_nothing(
    tmp_path, on_cpu):
  losses = np.random.default_rng(3).uniform(0, 5, 10).astype(np.float32)
  path = tf.train.Checkpoint(
      reducible=utilities.ReducibleLoss(losses, bound=2.0)).write(
          str(tmp_path / "ckpt"))
  restored = utilities.ReducibleLoss(np.zeros(10, np.float32), bound=2.0)
  tf.train.Checkpoint(reducible=restored).read(path).assert_consumed()
  np.testing.assert_array_equal(restored.irreducible_losses, losses)
  key = "irreducible_losses"
  for edit, other, message in [
      (None, dict(bound=3.0), "bound differs"),
      (None, dict(irreducible_losses=np.zeros(11, np.float32)),
       "number of examples differs"),
      (lambda value: np.where(np.arange(10) == 4, np.nan, value), {},
       "finite and >= 0"),
      (lambda value: -value, {}, "finite and >= 0"),
  ]:
    edited = checkpoint_edits.edited_checkpoint(path, key,
                                                edit) if edit else (path)
    settings = dict(irreducible_losses=np.ones(10, np.float32), bound=2.0)
    settings.update(other)
    target = utilities.ReducibleLoss(**settings)
    before = target.irreducible_losses.numpy()
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
      tf.train.Checkpoint(reducible=target).read(edited)
    np.testing.assert_array_equal(target.irreducible_losses, before)


@pytest.mark.usefixtures("on_cpu")
def test_utilities_refuse_labels_out_of_range_and_flat_probabilities():
  probs = tf.constant([[0.9, 0.1], [0.2, 0.8]])
  for utility in (utilities.zero_one, utilities.l1, utilities.cross_entropy):
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels"):
      utility([0, 2], probs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels"):
      utility([-1, 0], probs)
    with pytest.raises(ValueError, match="probs"):
      utility([0, 1], tf.constant([0.9, 0.1]))


@pytest.mark.usefixtures("on_cpu")
def test_utilities_take_one_hot_labels():
  probs = tf.constant([[0.9, 0.1], [0.2, 0.8]])
  one_hot = tf.constant([[0.0, 1.0], [0.0, 1.0]])
  for utility in (utilities.zero_one, utilities.l1, utilities.cross_entropy):
    np.testing.assert_array_equal(utility(one_hot, probs), utility([1, 1],
                                                                   probs))
