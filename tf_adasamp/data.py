"""Adaptive sampling as a `tf.data` stage (London, NIPS 2017, Algorithm 1).

`AdaptiveSampling` turns a finite, random-access source into an endless
dataset of batches drawn from an `AdaptiveSampler`. Each element is the
source's batch with the drawn indices and their probabilities Q_t(i)
appended: a tuple source (x, y) gives (x, y, indices, probabilities), any
other source s gives (s, indices, probabilities). The train step reports its
utilities through `AdaptiveSampling.update`. The sampler's controls come
with it: with a floor, the draws and probabilities are those of
(1 - epsilon) Q_t + epsilon U; its schedules count the updates reported;
`sampler.importance_weights(probabilities)` gives weights with its `beta`.

Staleness. Algorithm 1 draws batch t after the update of step t - 1. A
pipeline that prefetches draws ahead, so `max_lag` bounds how far: batch t of
an iterator is drawn only once at least t - max_lag updates have been
reported since that iterator began, i.e. it misses at most `max_lag` of the
updates before it. The bound holds whatever `map` and `prefetch` follow the
stage; with max_lag=0 the draws are exactly Algorithm 1's. `sample_batch`
draws inside the step instead, exact with no pipeline at all. The default,
max_lag=None, never waits: a dataset one only looks at (`take`, `list`, a
validation pass) must not stall for updates that nobody reports.

Ending a loop. With a lag bound, a draw ahead of the step can wait for an
update that never comes once training stops. Ending the loop ends the wait:
`Dataset.take` after the stage, `break`, `itertools.islice` or deleting the
iterator all tear the pipeline down, which cancels a waiting draw; Ctrl-C
interrupts it (see `_InterruptWatcher`).
"""

import functools
import itertools
import math
import os
import signal
import threading
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from tf_adasamp import _validation
from tf_adasamp import distribute
from tf_adasamp import ops
from tf_adasamp import sources
from tf_adasamp.sampler import AdaptiveSampler
from tf_adasamp.sum_tree import TensorLike

_stage_ids = itertools.count()
# The largest lag bound: (max_lag + 1) permits per replica must fit the
# permits' int64 count, and a larger lag is no bound (max_lag=None).
_MAX_LAG = 2**31 - 1


def importance_weights(probabilities: TensorLike,
                       num_examples: int) -> tf.Tensor:
  """Computes the importance weights 1 / (n Q_t(i)) of a batch's draws.

  Weighting each example's loss by them makes the adaptive batch's mean
  loss an unbiased estimate of the uniform (full-data) mean loss; with an
  exponent beta, `AdaptiveSampler.importance_weights`.

  Args:
    probabilities: [B] probabilities Q_t(i) of the draws, as the stage
      yields them.
    num_examples: n.

  Returns:
    [B] weights, of `probabilities`' dtype.
  """
  probabilities = tf.convert_to_tensor(probabilities)
  return 1 / (num_examples * probabilities)


def _with_sampling(batch, indices, probabilities):
  """Appends indices and probabilities to a batch, as the stage yields it."""
  if type(batch) is tuple:
    return (*batch, indices, probabilities)
  return (batch, indices, probabilities)


def sample_batch(sampler: AdaptiveSampler, source, batch_size: int) -> tuple:
  """Draws a batch inside the train step: Algorithm 1 exactly, zero lag.

  Args:
    sampler: the `AdaptiveSampler`; the step reports utilities with
      `sampler.update(indices, utilities)`.
    source: a nest of tensors with n = `sampler.num_examples` rows (convert
      NumPy arrays once, outside `tf.function`).
    batch_size: B, an int >= 1.

  Returns:
    The batch with indices and probabilities appended, as the stage yields
    it (see the module docstring).

  Raises:
    TypeError: if `batch_size` is not an int, or `source` is neither a nest
      of tensors nor a random-access source.
    ValueError: if `batch_size` is out of [1, 2**31 - 1], or a
      random-access source is empty.
  """
  batch_size = _validation.batch_size(batch_size)
  indices, probabilities = sampler.sample_with_probabilities(batch_size)
  gather = (functools.partial(_gather, source)
            if _is_nest(source) else sources.index_reader(source)[1])
  return _with_sampling(gather(indices), indices, probabilities)


class AdaptiveSampling:
  """A tf.data stage that draws batches from an `AdaptiveSampler`.

  Example:
    sampler = tf_adasamp.AdaptiveSampler(len(x), amplitude=1.0, decay=0.5,
                                         seed=0)
    stage = tf_adasamp.data.AdaptiveSampling(sampler, batch_size=100)
    dataset = stage.dataset((x, y)).prefetch(tf.data.AUTOTUNE)
    for x_batch, y_batch, indices, probabilities in dataset.take(steps):
      ... forward/backward, utilities ...
      stage.update(indices, utilities)

  `stage(source)` is `stage.dataset(source)`, so `ds.apply(stage)` turns a
  dataset of examples into one of adaptive batches. Use one iterator at a
  time: a new iterator starts a fresh lag count, forgetting draws that an
  abandoned one prefetched but never trained on; with a lag bound, the
  permits are then the new one's, and a draw of an older iterator fails
  (FailedPreconditionError) instead of taking them. To resume training,
  checkpoint the sampler and start a new iterator: the iterator itself cannot
  be saved (with a lag bound, saving waits for a draw that waits for the
  step).
  """

  def __init__(self,
               sampler: AdaptiveSampler,
               batch_size: int,
               max_lag: int | None = None,
               wait_timeout: float | None = 60.0):
    """Creates the stage.

    Args:
      sampler: the `AdaptiveSampler` to draw from, over the source's n
        examples. The stage is its only user of the sampler's generator, so
        with a seed and max_lag=0 the draws are reproducible. tf.data runs
        on the host: on a machine with a GPU, create the sampler under
        `tf.device("/cpu:0")`.
      batch_size: B, an int >= 1.
      max_lag: how many reported updates a draw may miss, an int >= 0; or
        None (the default) for no bound: draws run as far ahead as the
        buffers after the stage allow, and `update` need not be called. With
        an int, every consumed batch must be reported through `update`, or
        the pipeline waits for it (Ctrl-C interrupts the wait).
      wait_timeout: with a lag bound, how many seconds a draw waits for an
        update before it fails with DeadlineExceededError naming the fix;
        None to wait as long as it takes (for steps slower than that).

    Raises:
      TypeError: if `batch_size` or `max_lag` is not an int, or
        `wait_timeout` not a number.
      ValueError: if `batch_size` or `max_lag` is out of its range
        ([1, 2**31 - 1], [0, 2**31 - 1]), or `wait_timeout` is not finite
        and > 0.
    """
    self._sampler = sampler
    self._batch_size = _validation.batch_size(batch_size)
    if max_lag is not None:
      if isinstance(max_lag, bool) or not isinstance(max_lag, int):
        raise TypeError(f"max_lag must be an int or None, got {max_lag!r}")
      if not 0 <= max_lag <= _MAX_LAG:
        raise ValueError(f"max_lag must be in [0, {_MAX_LAG}] (None for no "
                         f"bound), got {max_lag}")
      # One permit per draw allowed: max_lag + 1 steps' worth at an
      # iterator's start, one more per reported update; see
      # cc/kernels/draw_permits.cc. They live in the host's resource manager
      # until the process exits, as a pipeline may still wait on them.
      self._permits = ops.draw_permits_handle(
          shared_name=f"adaptive_sampling_permits_{next(_stage_ids)}")
      _InterruptWatcher.watch(self)
    self._max_lag = max_lag
    if wait_timeout is None:
      self._wait_timeout = math.inf
    else:
      self._wait_timeout = _validation.real(wait_timeout, "wait_timeout")
      if not 0 < self._wait_timeout < math.inf:
        raise ValueError("wait_timeout must be finite and > 0, or None, got "
                         f"{wait_timeout}")

  @property
  def sampler(self) -> AdaptiveSampler:
    """The `AdaptiveSampler` the stage draws from."""
    return self._sampler

  @property
  def batch_size(self) -> int:
    """B, the draws of a batch."""
    return self._batch_size

  @property
  def max_lag(self) -> int | None:
    """How many reported updates a draw may miss; None for no bound."""
    return self._max_lag

  def dataset(self,
              source,
              input_context: tf.distribute.InputContext | None = None
             ) -> tf.data.Dataset:
    """Makes an endless dataset of adaptive batches from `source`.

    Args:
      source: a nest (tuples, dicts) of tensors or arrays with n rows; a
        finite `tf.data.Dataset` that fits in memory (read once, stacked);
        or a random-access source, any object with `__len__` and
        `__getitem__` (or `__getitems__`) returning nests of equally shaped
        arrays, such as `tf_adasamp.sources`' memory-mapped arrays and
        ArrayRecord files or a `tfds.data_source(...)` (only the drawn
        records are read, with `tf.numpy_function`, in parallel). A dataset
        that reads TFRecord files is refused: convert it (see
        `tf_adasamp.sources`).
      input_context: under a `tf.distribute` strategy, the
        `tf.distribute.InputContext` that
        `strategy.distribute_datasets_from_function` passes. The dataset
        then yields this worker's per-replica batches of `batch_size`, each
        a share of one step's draws from the one Q_t
        (`tf_adasamp.distribute.sample_share`), and the lag counts steps of
        all local replicas.

    Returns:
      A `tf.data.Dataset` of the source's batches with indices and
      probabilities appended (see the module docstring).

    Raises:
      TypeError: if `source` is none of the above, or a dataset that reads
        TFRecord files.
      ValueError: if `source` does not have the sampler's n examples (a
        dataset: if it is empty, infinite or longer), or its tensors differ
        in their number of rows.
    """
    num_examples, gather = _as_source(source, self._sampler.num_examples)
    if num_examples != self._sampler.num_examples:
      raise ValueError(f"the source has {num_examples} examples but the "
                       f"sampler {self._sampler.num_examples}")

    share, num_shares, per_step = 0, 1, 1
    if input_context is not None:
      share = input_context.input_pipeline_id
      num_shares = input_context.num_input_pipelines
      # Local replicas: each takes one batch, and reports one update, a step.
      per_step = input_context.num_replicas_in_sync // num_shares

    def draw(_):
      return tuple(
          distribute.sample_share(self._sampler, self._batch_size, share,
                                  num_shares))

    def load(indices, probabilities):
      return _with_sampling(gather(indices), indices, probabilities)

    steps = tf.data.Dataset.counter()
    if self._max_lag is not None:
      steps = _DrawPermitDataset(steps, self._permits,
                                 (self._max_lag + 1) * per_step,
                                 self._wait_timeout)
    # Draws run in order, one at a time, so that a seeded sampler's
    # generator gives the same sequence; loading overlaps with them.
    return (steps.map(draw).map(load,
                                num_parallel_calls=tf.data.AUTOTUNE,
                                deterministic=True))

  __call__ = dataset

  def update(self, indices: TensorLike, utilities: TensorLike) -> None:
    """Reweights the drawn `indices` and lets the pipeline draw one further.

    Algorithm 1, line 5, as `AdaptiveSampler.update`; call once per consumed
    batch (under a strategy, in every replica). The pipeline draws one batch
    further even when the update is rejected (the error is raised, the
    sampler is left as it was), so that a loop that goes on after the error
    does not wait forever.

    Args:
      indices: the batch's [B] drawn indices.
      utilities: [B] finite utilities of the drawn examples.

    Raises:
      TypeError: as `AdaptiveSampler.update` does.
      ValueError: as `AdaptiveSampler.update` does.
      tf.errors.InvalidArgumentError: as `AdaptiveSampler.update` does.
    """
    if self._max_lag is None:
      self._sampler.update(indices, utilities)
    elif tf.executing_eagerly():
      try:
        self._sampler.update(indices, utilities)
      finally:
        ops.release_draw_permits(self._permits, 1)
    else:
      self._update_then_release(indices, utilities)

  def _update_then_release(self, indices, utilities):
    """In a graph: the update, then the permit, even if the update fails.

    A failing op ends the graph's run before any op ordered after it, so
    the update runs inside one op that releases the permit on either
    outcome (cc/kernels/draw_permits.cc), whatever the update rejects.

    Args:
      indices: the batch's [B] drawn indices.
      utilities: [B] utilities.

    Raises:
      TypeError: if the update is refused as it is traced.
      ValueError: if the update is refused as it is traced.
    """
    if tf.distribute.has_strategy() or self._sampler.strategy is not None:
      # Under a strategy the update's all-gather stays in each replica's
      # step, as every replica must run it; the release follows an update
      # that completed.
      self._sampler.update(indices, utilities)
      self._release_after_update()
      return
    try:
      indices = _validation.indices(indices)
      utilities = tf.convert_to_tensor(utilities,
                                       dtype_hint=self._sampler.dtype)
      update = tf.function(self._sampler.update,
                           autograph=False).get_concrete_function(
                               indices, utilities)
    except (TypeError, ValueError):
      # Refused as it is traced (e.g. static shapes that differ): the step
      # never runs, and the draw it consumed gets its permit back now.
      with tf.init_scope():
        ops.release_draw_permits(self._permits, 1)
      raise
    ops.call_then_release_draw_permit(
        self._permits, [indices, utilities, *update.captured_inputs], f=update)

  def _release_after_update(self):
    # Nothing orders ops on different resources; a read of the sampler comes
    # after its update, so the permit does too.
    with tf.control_dependencies([self._sampler.kl_divergence()]):
      ops.release_draw_permits(self._permits, 1)


class _InterruptWatcher:
  """Lets Ctrl-C end a draw that waits for an update.

  The wait holds the calling thread inside TensorFlow, where Python cannot
  run its SIGINT handler until the call returns. The signal still writes its
  number to Python's wakeup fd (`signal.set_wakeup_fd`) as it arrives: a
  thread reads it there, hands each bounded stage one more permit so that
  the waiting draw goes on and the call returns, and Python then raises
  KeyboardInterrupt (a stage that was not waiting keeps that permit: one
  batch more of lag, until its next iterator). Bytes go on to the fd that
  listened before, if any.
  """

  _lock = threading.Lock()
  _stages: "weakref.WeakSet[AdaptiveSampling]" = weakref.WeakSet()
  _started = False

  @classmethod
  def watch(cls, stage):
    with cls._lock:
      cls._stages.add(stage)
      # Only the main thread may set the wakeup fd.
      if cls._started or threading.current_thread() is not (
          threading.main_thread()):
        return
      read, write = os.pipe()
      os.set_blocking(write, False)
      try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
      except ValueError:  # A subinterpreter.
        os.close(read)
        os.close(write)
        return
      cls._started = True
    threading.Thread(target=cls._run,
                     args=(read, previous),
                     daemon=True,
                     name="tf_adasamp_interrupts").start()

  @classmethod
  def _run(cls, read, previous):
    while True:
      signals = os.read(read, 64)
      # One permit per Ctrl-C, also where one read gets several.
      interrupts = signals.count(signal.SIGINT)
      if interrupts:
        with cls._lock:
          permits = [stage._permits for stage in cls._stages]
        for handle in permits:
          ops.release_draw_permits(handle, interrupts)
      if previous != -1:
        try:
          os.write(previous, signals)
        except OSError:
          pass


class _DrawPermitDataset(dataset_ops.UnaryUnchangedStructureDataset):
  """`input_dataset`, each element after a draw permit (DrawPermitDataset)."""

  def __init__(self, input_dataset, permits, initial_permits, timeout_seconds):
    self._input_dataset = input_dataset
    variant_tensor = ops.draw_permit_dataset(
        input_dataset._variant_tensor, permits, initial_permits,
        tf.constant(timeout_seconds, tf.float64), **self._flat_structure)
    super().__init__(input_dataset, variant_tensor)


def _gather(nest, indices):
  return tf.nest.map_structure(lambda t: tf.gather(t, indices), nest)


def _as_source(source, num_examples):
  """Reads the size of a source and how to gather a batch from it.

  A dataset is read up to `num_examples` + 1 elements, so that one longer
  than the sampler (or endless, whatever its cardinality says) is refused
  instead of filling the memory.

  Args:
    source: a nest of tensors or arrays, a finite dataset, or a
      random-access source.
    num_examples: the sampler's n.

  Returns:
    (n, gather): gather maps int64 indices to a batch.

  Raises:
    ValueError: if the source's tensors differ in their number of rows, or
      have none.
  """
  if isinstance(source, tf.data.Dataset):
    sources.refuse_record_streams(source)
    source = _materialize(source, num_examples)
  elif not _is_nest(source):
    return sources.index_reader(source)
  tensors = tf.nest.map_structure(tf.convert_to_tensor, source)
  lengths = {
      int(t.shape[0]) if t.shape.rank else 0 for t in tf.nest.flatten(tensors)
  }
  if len(lengths) != 1 or 0 in lengths:
    raise ValueError("a source's tensors must all have the same number of "
                     f"rows, at least 1; got {sorted(lengths)}")
  return lengths.pop(), lambda indices: _gather(tensors, indices)


def _is_nest(source):
  return (isinstance(source, (tuple, list, dict, np.ndarray)) or
          tf.is_tensor(source))


def _materialize(dataset, num_examples):
  """A finite dataset's elements, stacked into one nest of tensors."""
  if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
    raise ValueError("the dataset is infinite; pass a finite one")
  limit = num_examples + 1
  everything = list(dataset.take(limit).batch(limit))
  if not everything:
    raise ValueError("the dataset is empty")
  rows = {int(tf.shape(t)[0]) for t in tf.nest.flatten(everything[0])}
  if rows == {limit}:
    raise ValueError(
        f"the dataset has more than {num_examples} elements, the sampler's "
        "num_examples (is it endless, e.g. after repeat()?); pass one epoch "
        "of the training set")
  return everything[0]
