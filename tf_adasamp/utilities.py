"""Utility functions for adaptive sampling (London, NIPS 2017, Eq. 17).

Each maps a batch of integer labels [B] (or one-hot labels [B, C]) and
predicted class probabilities [B, C] to a [B] vector of utilities; the
sampler raises the weight of an example by exp(amplitude * utility).
`from_logits` computes them from a model's logits. `UTILITIES` is the
registry that `get`, `from_logits` and the trainer's --utility read;
`register_utility` adds one to it.
"""

from collections.abc import Callable

import ml_dtypes
import numpy as np
import tensorflow as tf

from tf_adasamp import _validation

TensorLike = tf.types.experimental.TensorLike
# (labels, probs) -> [B] utilities.
Utility = Callable[[TensorLike, TensorLike], tf.Tensor]


def _checked(labels, probs, name="probs"):
  """Checks labels and probabilities (or logits) as the utilities take them.

  Args:
    labels: class indices, [B] (or [B, 1]), or one-hot rows, [B, C].
    probs: [B, C] probabilities, or logits.
    name: what the error for another rank calls `probs`.

  Returns:
    (int32 labels [B], probs [B, C]); the labels assert that they lie in
    [0, C).

  Raises:
    ValueError: if `probs` has a static rank other than 2.
  """
  probs = tf.convert_to_tensor(probs)
  if probs.shape.rank is not None and probs.shape.rank != 2:
    raise ValueError(f"{name} must be [batch, classes], got shape "
                     f"{probs.shape}")
  labels = tf.convert_to_tensor(labels)
  if labels.shape.rank == 2 and labels.shape[1] not in (None, 1):
    labels = tf.argmax(labels, axis=-1)  # One-hot.
  labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
  num_classes = tf.shape(probs, out_type=tf.int32)[1]
  with tf.control_dependencies([
      tf.debugging.assert_non_negative(labels, message="labels must be >= 0"),
      tf.debugging.assert_less(labels,
                               num_classes,
                               message="labels must be < the number of "
                               "classes")
  ]):
    return tf.identity(labels), probs


def _smallest_normal(dtype):
  """The smallest normal number of a float `tf.DType`.

  Args:
    dtype: a float `tf.DType`, bfloat16 included (which NumPy's finfo does
      not know).

  Returns:
    The number, a NumPy scalar.
  """
  return ml_dtypes.finfo(dtype.as_numpy_dtype).tiny


def _true_class_probability(labels, probs):
  labels, probs = _checked(labels, probs)
  return tf.gather(probs, labels, axis=1, batch_dims=1)


def _mistakes(labels, scores):
  """The 0-1 loss of checked labels, 1{argmax scores != labels}.

  Args:
    labels: int32 [B] class indices, as `_checked` returns them.
    scores: [B, C] probabilities or logits, whose argmax is the same class.

  Returns:
    [B] of `scores`' dtype: 1 for a mistake, 0 otherwise.
  """
  predicted = tf.argmax(scores, axis=-1, output_type=tf.int32)
  return tf.cast(tf.not_equal(predicted, labels), scores.dtype)


def zero_one(labels: TensorLike, probs: TensorLike) -> tf.Tensor:
  """The 0-1 loss, 1{argmax_y' p(y') != y}.

  Args:
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    probs: [B, C] predicted class probabilities.

  Returns:
    [B] utilities, of `probs`' dtype.

  Raises:
    ValueError: if `probs` has a static rank other than 2.
    tf.errors.InvalidArgumentError: if a label is outside [0, C).
  """
  return _mistakes(*_checked(labels, probs))


def l1(labels: TensorLike, probs: TensorLike) -> tf.Tensor:
  """The L1 loss, 1 - p(y).

  Args:
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    probs: [B, C] predicted class probabilities.

  Returns:
    [B] utilities, of `probs`' dtype.

  Raises:
    ValueError: if `probs` has a static rank other than 2.
    tf.errors.InvalidArgumentError: if a label is outside [0, C).
  """
  return 1 - _true_class_probability(labels, probs)


def cross_entropy(labels: TensorLike, probs: TensorLike) -> tf.Tensor:
  """The cross-entropy, -log p(y).

  p(y) is floored at the dtype's smallest normal number, so that a confident
  mistake gives a large but finite utility.

  Args:
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    probs: [B, C] predicted class probabilities.

  Returns:
    [B] utilities, of `probs`' dtype.

  Raises:
    ValueError: if `probs` has a static rank other than 2.
    tf.errors.InvalidArgumentError: if a label is outside [0, C).
  """
  p = _true_class_probability(labels, probs)
  return -tf.math.log(tf.maximum(p, _smallest_normal(p.dtype)))


def log_cross_entropy(labels: TensorLike, probs: TensorLike) -> tf.Tensor:
  """The log of the cross-entropy, log(-log p(y)), for loss-proportional draws.

  Under it `AdaptiveSampler`'s weight of an example is its cross-entropy at
  its last visit to the power amplitude (times its older weight to the power
  decay): amplitude 1 with a decay near 0 draws in proportion to the loss,
  the importance sampling of Katharopoulos & Fleuret (ICML 2018), whose
  additive smoothing is the sampler's `epsilon` and whose unbiased weights
  are `beta=1`. The cross-entropy is floored at the dtype's smallest normal
  number, so that a certain prediction gives a finite utility.

  Args:
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    probs: [B, C] predicted class probabilities.

  Returns:
    [B] utilities, of `probs`' dtype.

  Raises:
    ValueError: if `probs` has a static rank other than 2.
    tf.errors.InvalidArgumentError: if a label is outside [0, C).
  """
  return _log_floored(cross_entropy(labels, probs))


def _log_floored(loss):
  return tf.math.log(tf.maximum(loss, _smallest_normal(loss.dtype)))


UTILITIES = {
    "zero_one": zero_one,
    "l1": l1,
    "cross_entropy": cross_entropy,
    "log_cross_entropy": log_cross_entropy
}


def register_utility(name: str, utility: Utility | None = None) -> Callable:
  """Adds a utility to `UTILITIES`, so that it can be named.

  `get`, `from_logits`, `tf_adasamp.keras` and the trainer's --utility then
  take `name`; `from_logits` calls the utility on the softmax of the logits.

  Args:
    name: the utility's name, a str not registered yet: letters, digits,
      '_' and '-', not first (a command-line choice).
    utility: a function (labels, probs) -> [B] utilities, taking labels and
      probabilities as the utilities above do. Without it,
      `register_utility(name)` is a decorator.

  Returns:
    `utility`, or without it a decorator that registers and returns the
    function it decorates.

  Raises:
    TypeError: if `name` is not a str or `utility` is not callable.
    ValueError: if `name` is empty, not such a word, or already registered.
  """
  return _validation.register(UTILITIES, "utility", name, utility)


def get(utility: str | Utility) -> Utility:
  """Looks a utility function up by name.

  Args:
    utility: a name in `UTILITIES` ("zero_one", "l1", "cross_entropy",
      "log_cross_entropy"), or
      a callable (labels, probs) -> [B] utilities.

  Returns:
    The utility function named `utility`, or `utility` if it is callable.

  Raises:
    ValueError: if `utility` is a name not in `UTILITIES`.
  """
  if callable(utility):
    return utility
  if utility not in UTILITIES:
    raise ValueError(f"unknown utility {utility!r}; choose one of "
                     f"{sorted(UTILITIES)} or pass a callable")
  return UTILITIES[utility]


def evaluate(utility: str | Utility, labels: TensorLike,
             probs: TensorLike) -> tf.Tensor:
  """Computes `utility(labels, probs)`, checked to be one utility a label.

  Args:
    utility: a name in `UTILITIES`, or a callable (labels, probs) -> [B].
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    probs: [B, C] predicted class probabilities.

  Returns:
    [B] utilities.

  Raises:
    ValueError: if `utility` is a name not in `UTILITIES`, or returns a
      tensor that is not [B] (where its shape is known).
  """
  function = get(utility)
  values = tf.convert_to_tensor(function(labels, probs))
  batch = tf.TensorShape(tf.convert_to_tensor(probs).shape)[:1]
  if values.shape.rank is not None and not values.shape.is_compatible_with(
      batch):
    name = utility if isinstance(utility, str) else getattr(
        function, "__name__", repr(function))
    raise ValueError(f"utility {name!r} must return one utility an example, "
                     f"[batch] = {batch}, got shape {values.shape}")
  return values


def from_logits(utility: str | Utility, labels: TensorLike,
                logits: TensorLike) -> tf.Tensor:
  """Computes `utility(labels, tf.nn.softmax(logits))` from a model's logits.

  The utilities above skip the softmax: the 0-1 loss needs only the logits'
  argmax (the same class, but for a tie that rounding the probabilities
  would make), the others the true class's log-probability,
  -sparse_softmax_cross_entropy (the same values up to round-off). On a CPU,
  the softmax of a small batch can cost more than the sampler's ops
  (benchmarks/RESULTS.md).

  Args:
    utility: a name in `UTILITIES`, or a callable (labels, probs) -> [B].
    labels: [B] (or [B, 1]) integer class indices, or [B, C] one-hot rows.
    logits: [B, C] logits.

  Returns:
    [B] utilities, of `logits`' dtype for the utilities above.

  Raises:
    ValueError: if `utility` is a name not in `UTILITIES`, `logits` has
      a static rank other than 2 (for the utilities above), or another
      utility returns a tensor that is not [B] (`evaluate`).
    tf.errors.InvalidArgumentError: if a label is outside [0, C) (for the
      utilities above).
  """
  function = get(utility)
  if function not in _FROM_LOGITS:
    return evaluate(utility, labels, tf.nn.softmax(logits))
  return _FROM_LOGITS[function](*_checked(labels, logits, "logits"))


def _l1_from_logits(labels, logits):
  return 1 - tf.exp(
      -tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))


def _cross_entropy_from_logits(labels, logits):
  loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
  # As cross_entropy floors p(y) at the smallest normal number.
  return tf.minimum(loss, -np.log(_smallest_normal(loss.dtype)))


def _log_cross_entropy_from_logits(labels, logits):
  return _log_floored(_cross_entropy_from_logits(labels, logits))


# The utilities above, each computed from checked labels and the logits;
# any other utility is called on the softmax.
_FROM_LOGITS = {
    zero_one: _mistakes,
    l1: _l1_from_logits,
    cross_entropy: _cross_entropy_from_logits,
    log_cross_entropy: _log_cross_entropy_from_logits
}
