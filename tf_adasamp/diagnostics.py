"""What a sampling distribution Q_t looks like, and its TensorBoard names.

Every quantity is computed from the sampler's log weights, the exact state:
log q_i = log w_i - logsumexp(log w). Reading `sampler.probabilities()`
instead would read the sum-tree's cached weights, which underflow to 0 once
an example's weight falls far enough below the largest, and log 0 is -inf.

The quantities, keyed by their names in `TAGS`:

  kl_divergence          KL(Q_t || uniform) = sum_i q_i log(n q_i); 0 when
                         uniform, log n when one example takes all.
  max_probability        max_i q_i; 1 / n when uniform.
  effective_sample_size  1 / (n sum_i q_i^2), the effective sample size as a
                         fraction of n: 1 when uniform, 1 / n when one
                         example takes all.
  heaviest_share         the share of the draws that go to the heaviest
                         1% of the examples (`heaviest_count`), the sum of
                         their q_i; 0.01 when uniform, 1 when they take all.
  distinct_draws         distinct examples in a batch of draws.
  misclassified_mass     sum of q_i over the training examples the model gets
                         wrong; uniform sampling gives them the error rate.
  log_n_probability      log(n q_i) for each example, a histogram; 0 when
                         uniform.

`compute` returns them as a dict, `write` writes such a dict to the default
`tf.summary` writer under `TAGS`, so every writer (the experiment's trainer,
`tf_adasamp.keras.SamplingTensorBoard`) uses the same names.

What the sampler favours: `heaviest` gives the k examples it draws most with
their n q_i, and `heaviest_summary` writes them to TensorBoard (their images
and a table of their labels and weights) under `HEAVIEST_TAG`.
"""

import math

import numpy as np
import tensorflow as tf

from tf_adasamp import _validation

# Quantity -> its TensorBoard tag. `log_n_probability` is a histogram, the
# rest are scalars.
TAGS = {
    "kl_divergence": "sampler/kl_divergence",
    "max_probability": "sampler/max_probability",
    "effective_sample_size": "sampler/effective_sample_size",
    "heaviest_share": "sampler/heaviest_share",
    "distinct_draws": "sampler/distinct_draws",
    "misclassified_mass": "sampler/misclassified_mass",
    "log_n_probability": "sampler/log_n_probability",
}
HISTOGRAMS = frozenset({"log_n_probability"})
# The heaviest examples whose share of the draws `compute` gives: 1% of n.
HEAVIEST_FRACTION = 0.01
# `heaviest_summary`'s default name: its images are written under
# HEAVIEST_TAG + "/images", its table under HEAVIEST_TAG + "/table".
HEAVIEST_TAG = "sampler/heaviest"


def log_probabilities(sampler):
  """Log probabilities log q_i of the sampler's n examples.

  From `sampler.log_weights` (an AdaptiveSampler's); a sampler without log
  weights (the uniform one) has q_i = 1 / n. With the sampler's floor
  epsilon, the distribution its draws follow, (1 - epsilon) Q_t + epsilon U,
  as `AdaptiveSampler.probabilities` and `kl_divergence` give it.

  Args:
    sampler: an `AdaptiveSampler`, or a sampler with `num_examples` and no
      log weights.

  Returns:
    A float64 [n] tensor.
  """
  log_weights = getattr(sampler, "log_weights", None)
  n = sampler.num_examples
  if log_weights is None:
    return tf.fill([n], tf.constant(-math.log(n), tf.float64))
  log_weights = tf.cast(tf.convert_to_tensor(log_weights), tf.float64)
  log_q = log_weights - tf.reduce_logsumexp(log_weights)
  epsilon = getattr(sampler, "epsilon", 0)
  if not epsilon:
    return log_q
  # log((1 - epsilon) q_i + epsilon / n), exact where q_i underflows;
  # log(1 - epsilon) is -inf at epsilon = 1, which logsumexp takes.
  log_kept = tf.math.log1p(tf.constant(-epsilon, tf.float64))
  floor = tf.fill([n], tf.constant(math.log(epsilon / n), tf.float64))
  return tf.reduce_logsumexp(tf.stack([log_kept + log_q, floor]), axis=0)


def heaviest(log_q, k):
  """The `k` examples the sampler draws most, for a look at what it favours.

  Args:
    log_q: [n] log probabilities (`log_probabilities`).
    k: how many, an int in [1, n].

  Returns:
    (indices, relative): int64 [k] example indices, most probable first
    (the lower index first among equals), and float64 [k] their
    probabilities relative to uniform's, n q_i.

  Raises:
    TypeError: if `k` is not an int.
    ValueError: if `log_q` is not a vector, or `k` is below 1 or (where n
      is static) above n.
    tf.errors.InvalidArgumentError: if `log_q` are not log probabilities
      (their exponentials do not sum to 1: log weights, say).
  """
  log_q = tf.convert_to_tensor(log_q)
  if log_q.shape.rank != 1:
    raise ValueError(f"log_q must be a vector, got shape {log_q.shape}")
  _check_count(k, log_q.shape[0])
  # n q_i of log weights would read as a probability relative to uniform's;
  # 1e-3 is far above any round-off of a sum of probabilities.
  log_total = tf.reduce_logsumexp(tf.cast(log_q, tf.float64))
  check = tf.debugging.Assert(
      tf.abs(log_total) <= 1e-3, [
          "log_q must be log probabilities, whose exponentials sum to 1 (pass "
          "diagnostics.log_probabilities(sampler), not log weights); "
          "log(sum(exp(log_q))) =", log_total
      ])
  with tf.control_dependencies([check]):
    values, indices = tf.math.top_k(log_q, k=k)
  n = tf.cast(tf.size(log_q), tf.float64)
  return tf.cast(indices, tf.int64), n * tf.exp(tf.cast(values, tf.float64))


def heaviest_summary(distribution,
                     images,
                     labels,
                     k=16,
                     step=None,
                     name=HEAVIEST_TAG,
                     class_names=None):
  """Writes the `k` examples the sampler draws most to TensorBoard.

  Under `name`/images, their images, most probable first (one image
  summary of k samples); under `name`/table, a markdown table of each
  one's rank, index, label and n q_i, its probability relative to
  uniform's 1 / n (`heaviest`). As `tf.summary.image` does, it writes to
  the default `tf.summary` writer, and nothing without one. Only the k
  chosen rows of `images` and `labels` are read: a NumPy array is indexed
  on the host (when executing eagerly), not copied whole into a tensor.

  For example, in a custom training loop over `x_train`, `y_train`:

    writer = tf.summary.create_file_writer("logs/train")
    with writer.as_default(step=step):
      tf_adasamp.diagnostics.heaviest_summary(sampler, x_train, y_train)

  Args:
    distribution: an `AdaptiveSampler` (read by `log_probabilities`, so
      with its floor epsilon), or the [n] log probabilities log q_i of the
      n examples.
    images: the n examples' images, [n, H, W, C] with C 1, 3 or 4, or
      [n, H, W] for grayscale: floats in [0, 1] or uint8, as
      `tf.summary.image` takes them; a tensor or a NumPy array.
    labels: the n examples' integer class ids, [n] (not one-hot).
    k: how many examples, an int in [1, n].
    step: the summary step; None for the writer's default step.
    name: the tags' prefix.
    class_names: optional names of the class ids, a list or tuple of str
      with a name for each id, shown in the table in place of the ids.

  Returns:
    True if the summaries were written, False if there is no default
    writer (a bool tensor, as `tf.summary.image` returns).

  Raises:
    TypeError: if `k` is not an int, `labels` are not integers, or
      `class_names` is not a list or tuple of str.
    ValueError: if n is not static, `k` is not in [1, n], `images` or
      `labels` do not hold n examples, `labels` is not [n], `images` is not
      of a shape above, or `class_names` is empty.
    tf.errors.InvalidArgumentError: if a chosen example's label has no
      name in `class_names`, or a `distribution` of log probabilities
      does not sum to 1 (`heaviest`).
  """
  log_q = (log_probabilities(distribution) if hasattr(
      distribution, "num_examples") else tf.convert_to_tensor(distribution))
  n = _num_examples(log_q)
  _check_count(k, n)
  image_shape = tuple(images.shape)
  if len(image_shape) not in (3, 4) or (len(image_shape) == 4 and
                                        image_shape[-1] not in (1, 3, 4)):
    raise ValueError("images must be [n, H, W] or [n, H, W, C] with C 1, 3 "
                     f"or 4, got shape {image_shape}")
  for argument, shape in (("images", image_shape), ("labels",
                                                    tuple(labels.shape))):
    if shape[0] != n:
      raise ValueError(f"{argument} must hold the {n} examples of the "
                       f"distribution, got shape {shape}")
  _check_labels(labels, class_names)
  indices, relative = heaviest(log_q, k)
  chosen = _rows(images, indices)
  if len(image_shape) == 3:
    chosen = chosen[..., tf.newaxis]
  label_ids = tf.cast(_rows(labels, indices), tf.int64)
  if class_names is None:
    label_text = tf.strings.as_string(label_ids)
  else:
    named = tf.debugging.Assert(
        tf.reduce_all((label_ids >= 0) & (label_ids < len(class_names))), [
            f"labels must be ids of the {len(class_names)} class_names, "
            "in [0, len(class_names)); got", label_ids
        ])
    with tf.control_dependencies([named]):
      label_text = tf.gather(tf.constant(list(class_names)), label_ids)
  rows = tf.strings.join([
      "| ",
      tf.strings.as_string(tf.range(1, k + 1)), " | ",
      tf.strings.as_string(indices), " | ", label_text, " | ",
      tf.strings.as_string(relative, precision=4, shortest=True), " |"
  ])
  table = tf.strings.reduce_join(tf.concat(
      [["| rank | index | label | n·q |", "|---|---|---|---|"], rows], 0),
                                 separator="\n")
  description = (f"The {k} examples the sampler draws most, most probable "
                 "first; n·q is an example's probability relative to "
                 "uniform's 1/n.")
  written = tf.summary.image(f"{name}/images",
                             chosen,
                             step=step,
                             max_outputs=k,
                             description=description)
  return tf.logical_and(
      written,
      tf.summary.text(f"{name}/table",
                      table,
                      step=step,
                      description=description))


def _check_labels(labels, class_names):
  """Refuses labels and class names that the table would misread.

  A float label would be truncated, a one-hot row read as several ids, a
  str's characters as names.

  Raises:
    TypeError: if `labels` are not integers, or `class_names` is not a list
      or tuple of str.
    ValueError: if `labels` is not [n], or `class_names` is empty.
  """
  if not tf.as_dtype(labels.dtype).is_integer:
    raise TypeError("labels must be integer class ids, got "
                    f"{tf.as_dtype(labels.dtype).name}")
  if len(labels.shape) != 1:
    raise ValueError("labels must be [n] class ids (not one-hot rows or "
                     f"[n, 1]), got shape {tuple(labels.shape)}")
  if class_names is None:
    return
  if not (isinstance(class_names, (list, tuple)) and
          all(isinstance(name, str) for name in class_names)):
    raise TypeError("class_names must be a list or tuple of str, got "
                    f"{class_names!r}")
  if not class_names:
    raise ValueError("class_names must name at least one class")


def _rows(values, indices):
  """values[indices]: a NumPy array indexed on the host where eager."""
  if isinstance(values, np.ndarray) and tf.executing_eagerly():
    return tf.constant(values[indices.numpy()])
  return tf.gather(values, indices)


def kl_divergence(log_q):
  """KL(Q || uniform) of a distribution given by its log probabilities.

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.

  Returns:
    A scalar of `log_q`'s dtype, >= 0.

  Raises:
    ValueError: if n, `log_q`'s length, is not static.
  """
  n = _num_examples(log_q)
  kl = tf.reduce_sum(tf.exp(log_q) * (log_q + math.log(n)))
  # Round-off can leave a uniform distribution a hair below zero.
  return tf.maximum(kl, tf.zeros([], log_q.dtype))


def max_probability(log_q):
  """The largest probability max_i q_i.

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.

  Returns:
    A scalar of `log_q`'s dtype.
  """
  return tf.exp(tf.reduce_max(log_q))


def effective_sample_size(log_q):
  """The effective sample size as a fraction of n, 1 / (n sum_i q_i^2).

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.

  Returns:
    A scalar of `log_q`'s dtype, in (0, 1].

  Raises:
    ValueError: if n, `log_q`'s length, is not static.
  """
  n = _num_examples(log_q)
  return tf.exp(-tf.reduce_logsumexp(2 * log_q) - math.log(n))


def heaviest_count(num_examples):
  """How many examples `compute`'s heaviest_share is of: 1% of n, at least 1.

  Args:
    num_examples: n, an int >= 1.

  Returns:
    An int in [1, n].
  """
  return math.ceil(HEAVIEST_FRACTION *
                   _validation.positive_int(num_examples, "num_examples"))


def heaviest_share(log_q, k):
  """The share of the draws that go to the `k` examples drawn most.

  The sum of their q_i: k / n when Q is uniform.

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.
    k: how many examples, an int in [1, n].

  Returns:
    A scalar of `log_q`'s dtype, in (0, 1].

  Raises:
    TypeError: if `k` is not an int.
    ValueError: if `log_q` is not a vector, or `k` is below 1 or (where n
      is static) above n.
  """
  log_q = tf.convert_to_tensor(log_q)
  if log_q.shape.rank != 1:
    raise ValueError(f"log_q must be a vector, got shape {log_q.shape}")
  _check_count(k, log_q.shape[0])
  return tf.reduce_sum(tf.exp(tf.math.top_k(log_q, k=k).values))


def misclassified_mass(log_q, misclassified):
  """The probability of drawing a misclassified example, sum_i q_i over them.

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.
    misclassified: [n] bool, the examples the model gets wrong.

  Returns:
    A scalar of `log_q`'s dtype.
  """
  misclassified = tf.convert_to_tensor(misclassified, tf.bool)
  return tf.reduce_sum(
      tf.where(misclassified, tf.exp(log_q), tf.zeros_like(log_q)))


def distinct_draws(indices):
  """How many distinct examples a batch of draws holds.

  Counts the runs of the sorted draws rather than calling `tf.unique`, which
  has no XLA kernel, so a loop compiled with jit_compile=True can call it.

  Args:
    indices: the [B] integer indices drawn.

  Returns:
    An int64 scalar.
  """
  indices = tf.sort(tf.reshape(indices, [-1]))
  return tf.math.count_nonzero(starts_of_runs(indices))


def starts_of_runs(values):
  """Marks where each run of equal values begins.

  Args:
    values: a sorted [B] tensor.

  Returns:
    A [B] bool tensor: whether each value starts a run of equal ones.
  """
  return tf.concat(
      [tf.ones_like(values[:1], tf.bool), values[1:] != values[:-1]], 0)


def log_n_probability(log_q):
  """log(n q_i) of each example: 0 for each when Q is uniform.

  Args:
    log_q: [n] log probabilities, as `log_probabilities` returns them.

  Returns:
    An [n] tensor of `log_q`'s dtype.

  Raises:
    ValueError: if n, `log_q`'s length, is not static.
  """
  return log_q + math.log(_num_examples(log_q))


def compute(sampler, indices=None, misclassified=None):
  """Computes the diagnostics of `sampler`'s distribution now.

  Args:
    sampler: an AdaptiveSampler, or a sampler without log weights (uniform).
    indices: optional [B] draws of one batch, for `distinct_draws`.
    misclassified: optional [n] bool, the training examples the model gets
      wrong, for `misclassified_mass`.

  Returns:
    A dict with the scalars kl_divergence, max_probability,
    effective_sample_size, heaviest_share (of `heaviest_count(n)`
    examples), the [n] log_n_probability and, given their
    inputs, distinct_draws and misclassified_mass: {quantity: tensor}.

  Raises:
    ValueError: if the sampler's n is not static.
  """
  log_q = log_probabilities(sampler)
  values = {
      "kl_divergence":
          kl_divergence(log_q),
      "max_probability":
          max_probability(log_q),
      "effective_sample_size":
          effective_sample_size(log_q),
      "heaviest_share":
          heaviest_share(log_q, heaviest_count(_num_examples(log_q))),
      "log_n_probability":
          log_n_probability(log_q),
  }
  if indices is not None:
    values["distinct_draws"] = distinct_draws(indices)
  if misclassified is not None:
    values["misclassified_mass"] = misclassified_mass(log_q, misclassified)
  return values


def write(values, step=None):
  """Writes diagnostics to the default `tf.summary` writer under `TAGS`.

  Quantities whose value is None are left out. Without a default writer
  nothing is written, as with `tf.summary` itself.

  Args:
    values: {quantity: value}, e.g. from `compute`.
    step: the summary step; None for the writer's default step.

  Raises:
    ValueError: if a quantity is not in `TAGS`.
  """
  unknown = sorted(set(values) - set(TAGS))
  if unknown:
    raise ValueError(f"values has quantities {unknown} that are not "
                     f"diagnostics; choose among {sorted(TAGS)}")
  for name, value in values.items():
    if value is not None:
      summary = (tf.summary.histogram
                 if name in HISTOGRAMS else tf.summary.scalar)
      summary(TAGS[name], value, step=step)


def _num_examples(log_q):
  shape = tf.TensorShape(log_q.shape)
  if shape.rank != 1 or shape[0] is None:
    raise ValueError("log_q must be a vector of static length n, got shape "
                     f"{shape}")
  return shape[0]


def _check_count(k, n):
  """Refuses a count `k` of examples out of n (None: not known yet)."""
  _validation.positive_int(k, "k")
  if n is not None and k > n:
    raise ValueError(f"k must be in [1, {n}], the number of examples; got {k}")
