"""A run's metric record at an evaluation point.

Each record holds the step and epoch; loss and accuracy on the training set
(or its fixed subset of `config.train_eval_size` examples,
`train_eval_indices`), on the whole validation split where the data hold one
out (`datasets.with_validation`: validation_loss and validation_accuracy)
and on the whole test set; the sampler's view of Q_t
(`tf_adasamp.diagnostics`, under the record keys of `DIAGNOSTIC_KEYS`): kl =
KL(Q_t || uniform), max_probability, ess_fraction (the effective sample size
as a fraction of n), misclassified_mass (Q_t's mass on the training examples
the model gets wrong) and, after the first step, unique_per_batch (distinct
examples per batch since the last record); the learning rate of the next
step; and the divergence bounds (`bound_metrics`); and the trainer's clocks
(`trainer.CLOCKS`): the wall and CPU seconds of the training calls since the
run began and the examples they forwarded and back-propagated (and, in a run
of utility reducible_loss, `loop.IRREDUCIBLE_SECONDS`: the wall seconds its
irreducible losses took before its first step). Under label noise, also
clean_train_loss and clean_train_accuracy (on the examples whose labels are
clean) and flipped_mass (Q_t's mass on the flipped ones). An adaptive run's
records end with heaviest: the `HEAVIEST_COUNT` examples Q_t favours most,
most probable first, as [[index, n q_i], ...] with n q_i (the probability
relative to uniform's) to 4 significant digits (`heaviest_pairs`). """

import dataclasses
import math

import numpy as np
import tensorflow as tf

from tf_adasamp import diagnostics

# Record key -> the tf_adasamp.diagnostics quantity it holds.
DIAGNOSTIC_KEYS = {
    "kl": "kl_divergence",
    "max_probability": "max_probability",
    "ess_fraction": "effective_sample_size",
    "misclassified_mass": "misclassified_mass",
    "unique_per_batch": "distinct_draws",
}
# How many of the examples Q_t favours most an adaptive run's records list.
HEAVIEST_COUNT = 16


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """record: the metric record (JSON-ready); log_probabilities: log q_i of
  every example, float64 [n]."""
  record: dict
  log_probabilities: np.ndarray


class Evaluator:
  """Computes the metric record of a run's model, sampler and optimizer."""

  def __init__(self, model, sampler, optimizer, tracker, data, config):
    self._sampler, self._optimizer, self._tracker = sampler, optimizer, tracker
    self._data, self._config = data, config
    self._evaluated = train_eval_indices(data.num_train, config.train_eval_size)
    self._split_metrics = _make_split_metrics(model)
    self._lipschitz = (max(
        cross_entropy_lipschitz(images)
        for images in data.training_image_chunks())
                       if config.model == "logistic" else None)

  def evaluate(self, step, distinct_draws_per_batch=None, clocks=None):
    """The Evaluation at `step`.

    Args:
      step: the steps trained.
      distinct_draws_per_batch: the distinct draws per batch since the last
        evaluation (None before the first step).
      clocks: the trainer's clocks (`trainer.CLOCKS`), recorded as they are.

    Returns:
      An Evaluation.
    """
    data, config = self._data, self._config
    train_loss, train_accuracy, misclassified = self._split_metrics(
        *data.training_examples(self._evaluated))
    held_out = {}
    if getattr(data, "x_validation", None) is not None:
      loss, accuracy, _ = self._split_metrics(data.x_validation,
                                              data.y_validation)
      held_out = {"validation_loss": loss, "validation_accuracy": accuracy}
    test_loss, test_accuracy, _ = self._split_metrics(data.x_test, data.y_test)
    log_q = diagnostics.log_probabilities(self._sampler)
    sampler_view = diagnostics.compute(self._sampler)
    sampler_view["misclassified_mass"] = self._misclassified_mass(misclassified)
    viewed = {
        key: float(sampler_view[name])
        for key, name in DIAGNOSTIC_KEYS.items()
        if name in sampler_view
    }
    record = {
        "step": step,
        "epoch": step * config.batch_size / data.num_train,
        "train_loss": train_loss,
        "train_accuracy": train_accuracy,
        **held_out,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        **viewed,
        "learning_rate": float(self._optimizer.learning_rate),
    }
    if distinct_draws_per_batch is not None:
      record["unique_per_batch"] = distinct_draws_per_batch
    record.update(self._noise_metrics())
    record.update(clocks or {})
    record.update(
        bound_metrics(self._tracker.read(), config.l2, self._lipschitz))
    if config.model == "logistic":
      record["zero_one_gap"] = train_accuracy - test_accuracy
    if config.sampling == "adaptive":
      record["heaviest"] = heaviest_pairs(log_q)
    return Evaluation(record, log_q.numpy())

  def _noise_metrics(self):
    """Under label noise: the loss and accuracy on the evaluated examples
    whose labels are clean, and Q_t's mass on the flipped ones."""
    flipped = getattr(self._data, "flipped", None)
    if flipped is None:
      return {}
    evaluated = flipped[self._evaluated]
    clean = self._evaluated[~evaluated]
    loss, accuracy, _ = self._split_metrics(
        *self._data.training_examples(clean))
    return {
        "clean_train_loss": loss,
        "clean_train_accuracy": accuracy,
        "flipped_mass": float(self._misclassified_mass(evaluated)),
    }

  def _misclassified_mass(self, misclassified):
    """Q_t's mass on the evaluated examples marked in `misclassified`: over
    a subset S of the n, estimated as n / |S| times the mass on S's marked
    ones."""
    log_q = tf.gather(diagnostics.log_probabilities(self._sampler),
                      self._evaluated)
    scale = self._data.num_train / len(self._evaluated)
    return scale * diagnostics.misclassified_mass(log_q, misclassified)


def heaviest_pairs(log_q, count=HEAVIEST_COUNT):
  """[[index, n q_i], ...] of the `count` examples (all, where fewer) that
  Q_t favours most, most probable first (`diagnostics.heaviest`), n q_i to
  4 significant digits: short in a record, and the same after a JSON round
  trip."""
  indices, relative = diagnostics.heaviest(log_q, min(count, len(log_q)))
  return [[int(index), float(f"{weight:.4g}")]
          for index, weight in zip(indices.numpy(), relative.numpy())]


def train_eval_indices(num_examples, size, seed=0):
  """The sorted indices of the training examples that evaluations read: a
  fixed random `size` of them (drawn with `seed`), or all where `size` is
  None or not below `num_examples`."""
  if size is None or size >= num_examples:
    return np.arange(num_examples)
  return np.sort(np.random.default_rng(seed).permutation(num_examples)[:size])


def _make_split_metrics(model, batch_size=1000):
  """Returns split_metrics(images, labels) -> (mean cross-entropy, accuracy,
  [n] bool misclassified), the model in inference mode over the split in
  batches of `batch_size`."""

  @tf.function(reduce_retracing=True)
  def batch_metrics(batch_images, batch_labels):
    logits = model(batch_images, training=False)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch_labels, logits)
    correct = tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                       batch_labels)
    return tf.reduce_sum(tf.cast(cross_entropy, tf.float64)), correct

  def split_metrics(images, labels):
    loss, correct = 0.0, []
    for start in range(0, len(labels), batch_size):
      batch = slice(start, start + batch_size)
      batch_loss, batch_correct = batch_metrics(images[batch], labels[batch])
      loss += float(batch_loss)
      correct.append(batch_correct.numpy())
    correct = np.concatenate(correct)
    return loss / len(labels), float(correct.mean()), ~correct

  return split_metrics


def cross_entropy_lipschitz(images):
  """Lipschitz constant of softmax regression's cross-entropy in its weights.

  The gradient in the weights of example (x, y) is (p - e_y) (x, 1), of norm
  at most sqrt(2) ||(x, 1)||.
  """
  flat = images.reshape(len(images), -1)
  squared_norms = np.einsum("ij,ij->i", flat, flat, dtype=np.float64)
  return math.sqrt(2 * (squared_norms.max() + 1))


def bound_metrics(tracker, l2, lipschitz=None):
  """The run's divergence bounds and, given `lipschitz`, Corollary 1's.

  kl_bound: Theorem 5's bound on KL(Q || P) (nonnegative utilities);
  kl_bound_general: Theorem 4's. Both are the plug-in values of
  `bounds.KLBoundTracker` (one run standing in for the expectation over Q).
  For the logistic model, corollary1_bound bounds the zero-one
  generalization gap (logged beside it as zero_one_gap) at 95% confidence,
  with the cross-entropy's Lipschitz constant and strong convexity l2.
  Corollary 1 also assumes step sizes 1 / (l2 t + smoothness) and a
  Lipschitz loss, which a run need not have: the value shows the bound's
  scale, not a guarantee.
  """
  if not tracker.steps:
    return {"kl_bound": 0.0, "kl_bound_general": 0.0}
  metrics = {
      "kl_bound": tracker.kl_bound,
      "kl_bound_general": tracker.kl_bound_general
  }
  if lipschitz is not None:
    metrics["corollary1_bound"] = tracker.strongly_convex_sgd_bound(
        delta=0.05, max_loss=1.0, lipschitz=lipschitz, strong_convexity=l2)
  return metrics
