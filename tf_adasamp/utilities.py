"""Utility functions for adaptive sampling (London, NIPS 2017, Eq. 17).

Each maps a batch of integer labels [B] (or one-hot labels [B, C]) and
predicted class probabilities [B, C] to a [B] vector of utilities; the
sampler raises the weight of an example by exp(amplitude * utility).
`from_logits` computes them from a model's logits. `UTILITIES` is the
registry that `get`, `from_logits` and the trainer's --utility read;
`register_utility` adds one to it.

`ReducibleLoss` extends Algorithm 1 with RHO-LOSS's utility (Mindermann et
al., ICML 2022), which also reads each example's irreducible loss: a
per-example vector it keeps in a variable, so it takes the drawn indices
too.
"""

from collections.abc import Callable
import math
from typing import TypeAlias

import ml_dtypes
import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import data_structures

from tf_adasamp import _checkpointing
from tf_adasamp import _validation

TensorLike: TypeAlias = tf.types.experimental.TensorLike
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


def irreducible_losses(model: Callable[..., tf.Tensor],
                       images: TensorLike,
                       labels: TensorLike,
                       from_logits: bool = True,
                       batch_size: int = 1000) -> tf.Tensor:
  """The cross-entropy of `model` on each example: irreducible losses.

  RHO-LOSS's irreducible loss of a training example is the loss on it of a
  model trained on a held-out split alone, computed once before training
  (`ReducibleLoss`). Computed as `cross_entropy` computes it (p(y) floored
  at the smallest normal number), in inference mode, `batch_size` examples
  at a time.

  Args:
    model: the model trained on the held-out split, e.g. a Keras model;
      called as `model(images, training=False)` and returning [b, C] logits
      (or probabilities, with `from_logits=False`).
    images: the n training examples, [n, ...].
    labels: their [n] (or [n, 1]) class indices, or [n, C] one-hot rows.
    from_logits: whether `model` returns logits.
    batch_size: examples per call of `model`, an int >= 1.

  Returns:
    [n] losses >= 0, of the model's output dtype.

  Raises:
    TypeError, ValueError: as `cross_entropy`, and for a `batch_size` that is
      not an int >= 1.
  """
  batch_size = _validation.positive_int(batch_size, "batch_size")
  compute = _cross_entropy_from_logits if from_logits else cross_entropy
  losses = []
  for start in range(0, len(images), batch_size):
    outputs = model(images[start:start + batch_size], training=False)
    checked = _checked(labels[start:start + batch_size], outputs,
                       "model outputs")
    losses.append(compute(*checked))
  return tf.concat(losses, axis=0)


class ReducibleLoss(tf.Module):
  """RHO-LOSS's reducible loss as Algorithm 1's utility, mapped into [0, 1].

  An extension of Algorithm 1 (London, NIPS 2017) with the selection rule of
  Mindermann et al. (ICML 2022): an example is worth drawing when its
  training loss exceeds its irreducible loss, the loss on it of a model
  trained on a held-out split alone (`irreducible_losses`), which an
  example with a wrong or ambiguous label keeps high. For example i, the
  model's cross-entropy l_i(h) and its irreducible loss l*_i,

      r_i = l_i(h) - l*_i                       (the reducible loss)
      u_i = min(max(r_i, 0), U) / U  in [0, 1]  (the utility)

  with U = `bound`: clipped at 0, an example the model fits at least as well
  as the held-out model gains nothing, and divided by U, the utility has the
  range of `zero_one` and `l1`. What the mapping gives the paper's bounds
  (T steps of B draws, amplitude alpha, decay lambda; docs/bounds.md):

  - The sampler: a log weight stays in [0, alpha / (1 - lambda)], so the
    most-drawn example is at most exp(alpha / (1 - lambda)) times as likely
    as the least; unclipped, the cross-entropy (up to -log of the smallest
    normal number: 87 in float32) would multiply that exponent.
  - Theorem 5 needs u >= 0, which the clip at 0 gives:
    KL(Q || P) <= alpha B / (1 - lambda) * E[sum_{t<T} sum_b u_tb]
              <= alpha B^2 (T - 1) / (1 - lambda),
    and in terms of r the amplitude acts as alpha / U on min(r+, U); the
    examples with r <= 0 (fit, or noise the held-out model cannot fit
    either) add nothing to the sum.
  - Theorem 4: each decayed sum of utilities lies in [0, 1 / (1 - lambda)),
    so each draw's term is at most alpha / (1 - lambda) and
    KL(Q || P) <= alpha B (T - 1) / (1 - lambda); with u >= 0 its plug-in
    estimate is never above Theorem 5's.
  - Theorem 3 (and 2): the utility enters only through KL(Q || P), bounded
    as above; their loss bound M and stabilities beta, theta are those of
    the training loss, which the mapping leaves as they are. Theorem 3
    needs a product posterior, which Algorithm 1's is not, whatever the
    utility; Theorem 2 takes the same KL.

  The irreducible losses are a non-trainable variable, saved with a
  `tf.train.Checkpoint` of this module beside the sampler's and restored
  exactly, all or nothing: a checkpoint of another size or bound, or with
  a loss that is not finite and >= 0, is refused and changes nothing.

  Example, inside a train step that draws its batch (guide.md):
    reducible = tf_adasamp.utilities.ReducibleLoss(
        tf_adasamp.utilities.irreducible_losses(holdout_model, x, y),
        bound=math.log(num_classes))
    ...
    sampler.update(indices, reducible.from_logits(indices, labels, logits))
  """

  def __init__(self,
               irreducible_losses: TensorLike,
               bound: float,
               name: str | None = None):
    """Keeps the irreducible losses of n examples.

    Args:
      irreducible_losses: [n] finite losses >= 0, float32 or float64 (kept
        in that dtype; Python floats are float32), the i-th that of example
        i; n >= 1.
      bound: U, a finite real > 0: a reducible loss of U or more is worth
        the utility 1. log(C) for C classes, the cross-entropy of a uniform
        prediction, counts in full every loss an untrained model starts
        from.
      name: the module's name.

    Raises:
      TypeError: if the losses are not floats, or `bound` not a real.
      ValueError: if the losses are not one nonempty vector, or `bound`
        not finite and > 0.
      tf.errors.InvalidArgumentError: if a loss is not finite or < 0.
    """
    super().__init__(name=name)
    bound = _validation.real(bound, "bound")
    if not 0 < bound < math.inf:
      raise ValueError(f"bound must be finite and > 0, got {bound}")
    losses = self._checked_losses(irreducible_losses)
    self._bound = bound
    self._num_examples = int(losses.shape[0])
    with self.name_scope:
      self._irreducible = data_structures.NoDependency(
          tf.Variable(losses, trainable=False, name="irreducible_losses"))
    self._checkpointed = _checkpointing.CheckedState(
        {"irreducible_losses": self._irreducible}, {
            "num_examples": self._num_examples,
            "bound": bound
        }, self._restore)

  @property
  def irreducible_losses(self) -> tf.Variable:
    """The [n] irreducible losses, a non-trainable variable."""
    return self._irreducible

  @property
  def bound(self) -> float:
    """U: the reducible loss that the utility 1 stands for."""
    return self._bound

  @property
  def num_examples(self) -> int:
    """The number of examples n."""
    return self._num_examples

  def assign(self, irreducible_losses: TensorLike) -> None:
    """Replaces the irreducible losses, all or nothing.

    Args:
      irreducible_losses: [n] finite losses >= 0, of this module's dtype or
        the other float dtype (cast).

    Raises:
      TypeError: if the losses are not floats.
      ValueError: if they are not a vector of n.
      tf.errors.InvalidArgumentError: if a loss is not finite or < 0.
    """
    losses = self._checked_losses(irreducible_losses, self._num_examples)
    self._irreducible.assign(tf.cast(losses, self._irreducible.dtype))

  def __call__(self, indices: TensorLike, labels: TensorLike,
               probs: TensorLike) -> tf.Tensor:
    """The utilities of drawn examples from their predicted probabilities.

    Args:
      indices: [B] indices of the examples in [0, n), as drawn.
      labels: their [B] (or [B, 1]) class indices, or [B, C] one-hot rows.
      probs: [B, C] predicted class probabilities.

    Returns:
      [B] utilities in [0, 1], of `probs`' dtype (NaN where the loss is).

    Raises:
      TypeError: if `indices` are not integers.
      ValueError: as `cross_entropy`.
      tf.errors.InvalidArgumentError: if an index is outside [0, n) or a
        label outside [0, C) (on a GPU an index is not checked).
    """
    return self._utilities(indices, cross_entropy(labels, probs))

  def from_logits(self, indices: TensorLike, labels: TensorLike,
                  logits: TensorLike) -> tf.Tensor:
    """The utilities of drawn examples from a model's logits.

    `self(indices, labels, tf.nn.softmax(logits))` but for round-off, with
    the cross-entropy computed from the logits (`from_logits`).

    Args:
      indices: [B] indices of the examples in [0, n), as drawn.
      labels: their [B] (or [B, 1]) class indices, or [B, C] one-hot rows.
      logits: [B, C] logits.

    Returns:
      [B] utilities in [0, 1], of `logits`' dtype (NaN where the loss is).

    Raises:
      As `__call__`.
    """
    return self._utilities(
        indices,
        _cross_entropy_from_logits(*_checked(labels, logits, "logits")))

  def _utilities(self, indices, losses):
    indices = _validation.indices(indices)
    with tf.control_dependencies([
        tf.debugging.assert_non_negative(indices,
                                         message="indices must be >= 0"),
        tf.debugging.assert_less(indices,
                                 tf.constant(self._num_examples, tf.int64),
                                 message="indices must be < the number of "
                                 "examples")
    ]):
      irreducible = tf.gather(self._irreducible, indices)
    reducible = losses - tf.cast(irreducible, losses.dtype)
    return tf.clip_by_value(reducible, 0, self._bound) / self._bound

  def _checked_losses(self, losses, num_examples=None):
    """Checks irreducible losses as this module keeps them.

    Args:
      losses: the losses.
      num_examples: the n they must number, if given.

    Returns:
      `losses` as a float tensor [n], asserted finite and >= 0.

    Raises:
      TypeError: if the losses are not floats.
      ValueError: if they are not one nonempty vector (of `num_examples`).
    """
    losses = tf.convert_to_tensor(losses)
    if losses.dtype not in (tf.float32, tf.float64):
      raise TypeError("irreducible_losses must be float32 or float64, got "
                      f"{losses.dtype.name}")
    if losses.shape.rank != 1 or not losses.shape[0]:
      raise ValueError("irreducible_losses must be a nonempty vector, got "
                       f"shape {losses.shape}")
    if num_examples is not None and losses.shape[0] != num_examples:
      raise ValueError(f"irreducible_losses must hold {num_examples} losses, "
                       f"got {losses.shape[0]}")
    with tf.control_dependencies([_assert_losses(losses,
                                                 "irreducible_losses")]):
      return tf.identity(losses)

  def _restore(self, restored):
    """Assigns a checkpoint's irreducible losses once checked (CheckedState).

    Args:
      restored: the checkpoint's values, by name.

    Returns:
      The op that assigns them, after asserting the checkpoint's size,
      bound and shape, and finite losses >= 0.
    """
    checks = [
        _checkpointing.assert_size(restored["num_examples"], self._num_examples,
                                   "number of examples"),
        tf.debugging.assert_equal(
            tf.cast(restored["bound"], tf.float64),
            tf.constant(self._bound, tf.float64),
            message=f"the checkpoint's bound differs from this one's "
            f"{self._bound}"),
        _checkpointing.assert_shape(restored["irreducible_losses"],
                                    [self._num_examples], "irreducible losses"),
    ]
    with tf.control_dependencies(checks):
      check = _assert_losses(restored["irreducible_losses"],
                             "the checkpoint's irreducible losses")
    with tf.control_dependencies([check]):
      return self._irreducible.assign(restored["irreducible_losses"])


def _assert_losses(losses, what):
  """Asserts that `losses` are finite and >= 0."""
  return tf.debugging.Assert(
      tf.reduce_all(tf.math.is_finite(losses) & (losses >= 0)),
      [f"{what} must be finite and >= 0"])
