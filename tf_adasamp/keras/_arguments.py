"""What `AdaptiveSamplingModel` and its `fit` are given, checked.

The sampler's options and placement, the data `fit` trains on (arrays, a
finite `tf.data.Dataset` read into memory, or the stage's dataset, told
apart by its batches), class weights, Keras's `verbose` and whether the
model outputs logits. Each check raises before `fit` changes any state.
"""

import inspect
import math
import numbers
import sys

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import _keras_internals
from tf_adasamp import _validation
from tf_adasamp.sampler import AdaptiveSampler

# What Keras's fit batches arrays in when not told.
KERAS_BATCH_SIZE = 32
# Where the utilities come from: the step's forward pass, or the updated model.
UTILITY_AT = ("step", "updated")
# The sampler's arguments that `sampler_options` may set: all but its size
# (fit's training examples) and its name.
SAMPLER_OPTIONS = tuple(
    name for name in inspect.signature(AdaptiveSampler).parameters
    if name not in ("num_examples", "name"))


def stage_dataset(stage, x, y, sample_weight, batch_size, validation_split):
  """`x`, the stage's dataset, checked for `fit` of a wrapper over `stage`.

  Returns:
    `x`.

  Raises:
    ValueError: as `fit` says.
  """
  if y is not None or sample_weight is not None:
    raise ValueError("x is a dataset, so y and sample_weight come from "
                     "its elements; do not pass them")
  if stage is None:
    raise ValueError("x is a stage's dataset, but this wrapper has no "
                     "stage; pass it the stage: AdaptiveSamplingModel("
                     "model, stage)")
  if batch_size is not None and batch_size != stage.batch_size:
    raise ValueError(f"batch_size={batch_size}, but the stage draws "
                     f"batches of {stage.batch_size}; leave it out")
  if validation_split:
    raise ValueError("validation_split cannot split the stage's dataset, "
                     "which draws from all of its source; pass "
                     "validation_data=(x_val, y_val)")
  if isinstance(x, tf.data.Dataset):
    _check_stage_batches(x.element_spec)
  return x


def examples_to_draw(stage, replicas, x, y, sample_weight, batch_size,
                     validation_split, validation_data):
  """The training examples that `fit` draws from, checked.

  For a wrapper over `stage` (None before the first `fit` made one) under
  a strategy of `replicas` replicas.

  Returns:
    (examples, validation_data, global batch size): examples the nest
    (x, y) or (x, y, sample_weight) of arrays or tensors, less the
    validation split, which becomes validation_data unless that is given.

  Raises:
    TypeError: if `x` is neither arrays nor a dataset.
    ValueError: as `fit` says.
  """
  if isinstance(x, tf.data.Dataset):
    if y is not None or sample_weight is not None:
      raise ValueError("x is a dataset, so y and sample_weight come from "
                       "its elements; do not pass them")
    examples, dataset_batch = _read_dataset(x)
    if batch_size is not None and batch_size != dataset_batch:
      raise ValueError(f"batch_size={batch_size}, but x is a dataset of "
                       f"batches of {dataset_batch}; leave it out")
    batch_size = dataset_batch
  else:
    if not _is_nest(x):
      kind = ("keras.utils.PyDataset"
              if isinstance(x, keras.utils.PyDataset) else type(x).__name__)
      raise TypeError(
          f"x is a {kind}, which yields batches where the sampler draws "
          "examples: pass the arrays, a tf.data.Dataset of (x, y) "
          "batches, or a random-access source to stage.dataset(source)")
    if y is None:
      raise ValueError("fit needs labels: pass x and y, or a dataset of "
                       "(x, y) batches")
    examples = (x, y) if sample_weight is None else (x, y, sample_weight)
  _check_rows(examples)
  if validation_split:
    examples, held_out = _keras_internals.train_validation_split(
        examples, validation_split)
    if validation_data is None:
      validation_data = held_out
  if batch_size is None:
    batch_size = (KERAS_BATCH_SIZE if stage is None else stage.batch_size *
                  replicas)
  batch_size = _validation.batch_size(batch_size)
  if batch_size % replicas:
    raise ValueError(f"batch_size={batch_size} does not split evenly "
                     f"among the strategy's {replicas} replicas; pass a "
                     f"multiple of {replicas}")
  num_examples = rows(examples)
  if stage is not None and (num_examples != stage.sampler.num_examples):
    split = (f" (after validation_split={validation_split})"
             if validation_split else "")
    raise ValueError(
        f"fit has {num_examples} training examples{split}, but the "
        f"stage's sampler draws from {stage.sampler.num_examples}; "
        f"make it with num_examples={num_examples}, or leave the stage "
        "out and fit makes it")
  return examples, validation_data, batch_size


def check_sampler_options(options, stage):
  """`options` as a dict of the sampler's arguments, checked by name."""
  if options is None:
    return {}
  if not isinstance(options, dict):
    raise TypeError("sampler_options must be a dict of AdaptiveSampler's "
                    f"arguments, got {type(options).__name__}")
  if stage is not None and options:
    raise ValueError(
        "sampler_options set the sampler that fit makes, but the stage "
        "brings its own: set them on it, or leave the stage out")
  unknown = sorted(set(options) - set(SAMPLER_OPTIONS))
  if unknown:
    raise ValueError(f"sampler_options names {unknown}, which "
                     f"AdaptiveSampler does not take; choose among "
                     f"{list(SAMPLER_OPTIONS)}")
  return dict(options)


def check_sampler_placement(sampler):
  """Refuses a sampler without a copy per replica of the scope's strategy.

  Raises:
    ValueError: if the wrapper is built in a strategy's scope, and the
      sampler is not that strategy's.
  """
  if not tf.distribute.has_strategy():
    return
  if sampler.strategy is not tf.distribute.get_strategy():
    raise ValueError(
        "the wrapper is built in a tf.distribute strategy's scope, but the "
        "stage's sampler is not that strategy's; make it with "
        "tf_adasamp.distribute.create_sampler(strategy, ...), or leave the "
        "stage out and fit makes it")


def check_class_weight(class_weight):
  if class_weight is None:
    return None
  if not (isinstance(class_weight, dict) and all(
      isinstance(k, numbers.Integral) and k >= 0 and
      isinstance(v, numbers.Real) and math.isfinite(v) and v >= 0
      for k, v in class_weight.items())):
    raise ValueError("class_weight must map class ids (ints >= 0) to "
                     f"finite weights >= 0; got {class_weight!r}")
  return {int(k): float(v) for k, v in class_weight.items()}


def verbosity(verbose):
  """Resolves Keras's `verbose="auto"` by where stdout goes.

  Keras's progress bar (1) writes terminal control codes even into a file.

  Args:
    verbose: Keras's `verbose`.

  Returns:
    `verbose`, or for "auto" 1 on a terminal and 2 otherwise.
  """
  if verbose != "auto":
    return verbose
  return 1 if sys.stdout.isatty() else 2


def outputs_logits(from_logits, loss):
  """Decides whether the model outputs logits.

  Args:
    from_logits: the wrapper's argument; None to ask the loss.
    loss: the compiled loss.

  Returns:
    `from_logits`, else what the compiled `loss` says.

  Raises:
    ValueError: if `from_logits` contradicts the loss.
  """
  loss_says = (loss.get_config().get("from_logits") if isinstance(
      loss, keras.losses.Loss) else None)
  if from_logits is None:
    return bool(loss_says)
  if loss_says is not None and bool(loss_says) != from_logits:
    raise ValueError(
        f"from_logits={from_logits}, but the compiled loss has "
        f"from_logits={loss_says}: the utilities would be computed from "
        "outputs the loss reads otherwise; leave from_logits out to take the "
        "loss's")
  return from_logits


def is_stage_dataset(x):
  """Whether `x` is a dataset of the stage's batches.

  A finite dataset of three-part batches is Keras's (x, y, sample_weight);
  the stage's datasets are endless.

  Returns:
    A bool.
  """
  if isinstance(x, tf.distribute.DistributedDataset):
    return True
  if not isinstance(x, tf.data.Dataset) or not is_stage_batch(x.element_spec):
    return False
  return len(x.element_spec) > 3 or is_endless(x)


def is_stage_batch(spec):
  """Checks whether an element spec, or a batch, is of the stage.

  Args:
    spec: an element spec, or a batch.

  Returns:
    Whether it ends with the stage's indices and Q_t(i).
  """
  if not isinstance(spec, tuple) or len(spec) < 3:
    return False
  indices, probabilities = spec[-2:]

  def tensor_like(t):
    return isinstance(t, tf.TensorSpec) or tf.is_tensor(t)

  return (tensor_like(indices) and tensor_like(probabilities) and
          indices.dtype == tf.int64 and indices.shape.rank == 1 and
          probabilities.dtype.is_floating and probabilities.shape.rank == 1)


def is_endless(dataset):
  if isinstance(dataset, tf.distribute.DistributedDataset):
    # From strategy.distribute_datasets_from_function: as its datasets.
    cardinality = getattr(dataset, "cardinality", None)
  else:
    cardinality = dataset.cardinality()
  return cardinality == tf.data.INFINITE_CARDINALITY


def _check_stage_batches(spec):
  """Raises unless `spec` is of the stage's batches with labels, for `fit`."""
  if len(spec) == 3:
    source = spec[0]
    kind = (f"a dict with keys {sorted(source)}"
            if isinstance(source, dict) else "a single tensor")
    raise ValueError(
        f"the stage's source is {kind}, so its batches have no labels for "
        "fit; pass a tuple, stage.dataset((features, labels)) (for TFDS, "
        "tfds.load(..., as_supervised=True), or (d['image'], d['label']) "
        "from a dict d)")


def refuse_stage_batches(spec, what):
  """Raises if `spec` (or a batch) is of the stage's batches with labels."""
  if is_stage_batch(spec) and len(spec) > 3:
    raise ValueError(
        f"{what} is the stage's dataset, which draws the examples the model "
        "gets wrong, and without end; pass ordinary data, e.g. "
        "validation_data=(x_val, y_val)")


def _is_nest(x):
  """Whether `x` is arrays or tensors, or a nest (tuple, list, dict) of them."""
  leaves = tf.nest.flatten(x)
  return bool(leaves) and all(
      isinstance(leaf, np.ndarray) or tf.is_tensor(leaf) for leaf in leaves)


def rows(examples):
  return int(tf.nest.flatten(examples)[0].shape[0])


def _check_rows(examples):
  """Raises unless every array of `examples` has the same rows, at least 1."""
  rows = sorted({
      int(leaf.shape[0]) if len(leaf.shape) else 0
      for leaf in tf.nest.flatten(examples)
  })
  if len(rows) != 1 or rows[0] == 0:
    raise ValueError("x, y and sample_weight must have the same number of "
                     f"rows, at least 1; got {rows}")


def same_examples(tensors, examples):
  """Whether `examples` hold what `tensors` hold."""
  try:
    tf.nest.assert_same_structure(tensors, examples)
  except (TypeError, ValueError):
    return False
  return all(
      tuple(tensor.shape) == tuple(leaf.shape) and tensor.dtype == tf.as_dtype(
          leaf.dtype) and np.array_equal(tensor.numpy(), np.asarray(leaf)) for
      tensor, leaf in zip(tf.nest.flatten(tensors), tf.nest.flatten(examples)))


def _read_dataset(dataset):
  """Reads a finite dataset of (x, y) or (x, y, sample_weight) batches.

  Returns:
    (examples, batch size): every batch's rows, stacked, and the rows of
    its first batch.

  Raises:
    ValueError: if the dataset is endless, of unknown length, empty, or not
      of such batches.
  """
  cardinality = int(dataset.cardinality())
  if cardinality == tf.data.INFINITE_CARDINALITY:
    raise ValueError(
        "x is an endless tf.data.Dataset (after repeat()?), whose examples "
        "the sampler cannot count; pass one epoch of it")
  if cardinality == tf.data.UNKNOWN_CARDINALITY:
    raise ValueError(
        "x is a tf.data.Dataset of unknown length (after filter() or from a "
        "generator), so the sampler cannot be sized before it is read; "
        "state its number of batches with x.apply(tf.data.experimental."
        "assert_cardinality(num_batches)), or pass arrays")
  spec = dataset.element_spec
  if not (isinstance(spec, tuple) and len(spec) in (2, 3)):
    raise ValueError("fit takes a dataset of (x, y) or (x, y, sample_weight) "
                     f"batches; its elements are {spec}")
  if any(leaf.shape.rank == 0 for leaf in tf.nest.flatten(spec)):
    raise ValueError("x's elements are single examples, not batches; batch "
                     "it, e.g. x.batch(32)")
  batches = list(dataset)
  if not batches:
    raise ValueError("x is an empty tf.data.Dataset")
  examples = tf.nest.map_structure(lambda *parts: tf.concat(parts, 0), *batches)
  return examples, rows(batches[0])
