"""The paper's utility functions (London, NIPS 2017, Eq. 17)."""

import numpy as np
import pytest
import tensorflow as tf

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


@pytest.mark.parametrize("name", ["zero_one", "l1", "cross_entropy"])
def test_utilities_accept_column_labels_and_float32(name):
  utility = utilities.get(name)
  values = utility(LABELS[:, None], PROBS.astype(np.float32))
  assert values.shape == (3,) and values.dtype == tf.float32


def test_get_accepts_callable_and_rejects_unknown_name():
  custom = lambda labels, probs: tf.zeros([3])  # pylint: disable=g-long-lambda
  assert utilities.get(custom) is custom
  with pytest.raises(ValueError, match="unknown utility 'hinge'"):
    utilities.get("hinge")
