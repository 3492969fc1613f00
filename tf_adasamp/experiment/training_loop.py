"""Training with adaptive or uniform sampling (London, NIPS 2017, Algorithm 1).

One training step runs inside one `tf.function`, with no host round-trip:

    indices ~ Q_t (B independent draws)        sampler.sample(B)
    batch = gather(data, indices)
    h_t = update(h_{t-1}, batch)               forward/backward, SGD/AdaGrad
    w_i <- w_i ** decay * exp(amplitude * utility(z_i, h_t))

Where the utility comes from (`utility_at`):
  "updated"   Algorithm 1 as written: the utility of the model *after* the
              update, h_t. Costs a second forward pass over the batch, in
              inference mode (no dropout). The default.
  "step"      the cheaper option: the step's own training forward pass, i.e.
              h_{t-1} with dropout active. No extra pass; utilities lag the
              update by one step and are noisier.

Uniform sampling takes the same step with `UniformSampler`, which draws from
the same seeded random stream as `AdaptiveSampler` and skips the utility and
the reweighting. With a shared seed, uniform and adaptive runs start from the
same model (see `models.build`) and draw the same first batch.

With `strategy` "mirrored" or "multi_worker" the step runs on every
tf.distribute replica, each drawing its share of the batch from one adaptive
distribution whose copies stay identical (tf_adasamp.distribute).

`train(config)` runs the loop: `steps_per_execution` steps per call of one
`tf.function` (a `tf.range` loop), the divergence bounds' running sums kept in
tf.Variables and updated in that loop (`BoundTracker`), so the host reads
nothing between evaluations; metrics of the whole train and test sets every
`eval_interval` steps, as JSON lines and TensorBoard summaries; checkpoints of
everything that shapes the run (model, dropout and sampler random state,
optimizer, step, bound sums: variables only, no Python objects), and
`resume=True` to continue a run exactly where it stopped.
"""

import dataclasses
import hashlib
import json
import math
import os

import numpy as np
import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp import bounds
from tf_adasamp import distribute
from tf_adasamp import utilities
from tf_adasamp.experiment import cluster
from tf_adasamp.experiment import datasets
from tf_adasamp.experiment import models
from tf_adasamp.experiment import run_files
from tf_adasamp.experiment import train_config
from tf_adasamp.sampler import make_generator


class DivergedError(run_files.RunError):
  """The model's parameters or losses stopped being finite."""


class UniformSampler(tf.Module):
  """Uniform draws behind AdaptiveSampler's interface, for a fair baseline.

  Draws index floor(u * n) for each uniform u of `generator.uniform([B],
  float64)`, the very stream and call that AdaptiveSampler makes, and the
  index its sum-tree walk returns while Q_t is uniform: so with a shared seed
  both samplers draw the same first batch, and an AdaptiveSampler with
  amplitude 0 would draw the same indices forever. `update` does nothing.
  """

  def __init__(self, num_examples, seed=None, name=None):
    super().__init__(name=name)
    self._num_examples = _validation.positive_int(num_examples, "num_examples")
    with self.name_scope:
      self.generator = make_generator(seed)

  @property
  def num_examples(self):
    return self._num_examples

  def sample(self, batch_size):
    """Draws `batch_size` indices uniformly; int64 [batch_size]."""
    uniforms = self.generator.uniform([batch_size], dtype=tf.float64)
    indices = tf.cast(tf.floor(uniforms * self._num_examples), tf.int64)
    # u * n can round up to n in floating point.
    return tf.minimum(indices, self._num_examples - 1)

  def update(self, indices, utilities):  # pylint: disable=unused-argument
    """Uniform sampling ignores utilities."""

  def probabilities(self):
    return tf.fill([self._num_examples],
                   tf.constant(1 / self._num_examples, tf.float64))

  def kl_divergence(self):
    return tf.zeros([], tf.float64)


# tf.unique has no XLA kernel (its shape depends on the values), so a loop
# compiled by XLA sorts the draws instead: an index's draws form a run. The
# sort's ops cost more where each op is dispatched (the bound tracker's
# update about 50 us more a step on a CPU), so only a compiled loop sorts.


def _first_draws(indices, static_shapes):
  """Each distinct index of `indices` with the position of its first draw:
  (keys, first, starts). Either one key per distinct index (`starts` None)
  or, in static shapes, one per draw, sorted, with `starts` [B] bool marking
  the first key of each run."""
  if not static_shapes:
    keys, position = tf.unique(indices)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(indices)), position,
                                         tf.size(keys))
    return keys, first, None
  order = tf.argsort(indices)
  keys = tf.gather(indices, order)
  starts = _starts_of_runs(keys)
  run = tf.cumsum(tf.cast(starts, tf.int32)) - 1
  first = tf.math.unsorted_segment_min(order, run, tf.size(keys))
  return keys, tf.gather(first, run), starts


def _starts_of_runs(values):
  """[B] bool: whether each of the sorted `values` starts a run of equal
  ones."""
  return tf.concat(
      [tf.ones_like(values[:1], tf.bool), values[1:] != values[:-1]], 0)


class BoundTracker(tf.Module):
  """bounds.KLBoundTracker's running sums in tf.Variables, updated in-graph.

  `update` does KLBoundTracker.update's arithmetic with TensorFlow ops, so a
  training loop inside `tf.function` tracks Theorems 4 and 5 without a host
  round-trip; `read()` copies the sums into a KLBoundTracker, which computes
  the bounds, at evaluation points. The sums checkpoint with the run.
  `static_shapes=True` updates in ops that XLA compiles (for a loop with
  jit_compile=True).
  """

  def __init__(self,
               num_examples,
               amplitude,
               decay,
               static_shapes=False,
               name=None):
    super().__init__(name=name)
    # Validates the arguments the way the host tracker does.
    bounds.KLBoundTracker(num_examples, amplitude, decay)
    self._num_examples = num_examples
    self._amplitude, self._decay = float(amplitude), float(decay)
    self._static_shapes = static_shapes

    def variable(name, value, dtype):
      return tf.Variable(tf.constant(value, dtype), trainable=False, name=name)

    with self.name_scope:
      self.sums = variable("sums", np.zeros(num_examples), tf.float64)
      self.total = variable("total", 0, tf.float64)
      self.general = variable("general", 0, tf.float64)
      self.utilities_before_last = variable("utilities_before_last", 0,
                                            tf.float64)
      self.last_utilities = variable("last_utilities", 0, tf.float64)
      self.signed = variable("signed", False, tf.bool)
      self.steps = variable("steps", 0, tf.int64)
      self.batch_size = variable("batch_size", 0, tf.int64)

  def update(self, indices, utilities):
    """Records one step: its [B] draws and their utilities. Returns the
    number of distinct indices drawn, int64."""
    indices = tf.reshape(tf.cast(indices, tf.int64), [-1])
    utilities = tf.reshape(tf.cast(utilities, tf.float64), [-1])
    size = tf.size(indices, out_type=tf.int64)
    self.general.assign_add(
        self._amplitude *
        (tf.reduce_sum(tf.gather(self.sums, indices)) -
         tf.cast(size, tf.float64) * self.total / self._num_examples))
    # Each distinct index takes the utility of its first draw.
    keys, first, starts = _first_draws(indices, self._static_shapes)
    before = tf.gather(self.sums, keys)
    updated = self._decay * before + tf.gather(utilities, first)
    change = updated - before
    if starts is not None:  # a run's other keys write its value again
      change = tf.where(starts, change, 0.0)
    self.total.assign_add(tf.reduce_sum(change))
    self.sums.scatter_update(tf.IndexedSlices(updated, keys))
    self.utilities_before_last.assign_add(self.last_utilities)
    self.last_utilities.assign(tf.reduce_sum(utilities))
    self.signed.assign(tf.logical_or(self.signed, tf.reduce_any(utilities < 0)))
    self.batch_size.assign(size)
    self.steps.assign_add(1)
    if starts is None:
      return tf.size(keys, out_type=tf.int64)
    return tf.math.count_nonzero(starts)

  def read(self):
    """A bounds.KLBoundTracker holding the sums now (copied to the host)."""
    steps = int(self.steps)
    return bounds.KLBoundTracker.from_state(
        self._num_examples, self._amplitude, self._decay, {
            "sums": self.sums.numpy(),
            "total": self.total.numpy(),
            "general": self.general.numpy(),
            "utilities_before_last": self.utilities_before_last.numpy(),
            "last_utilities": self.last_utilities.numpy(),
            "signed": self.signed.numpy(),
            "steps": steps,
            "batch_size": int(self.batch_size) if steps else None
        })


def make_strategy(name,
                  cluster_timeout=train_config.TrainConfig.cluster_timeout):
  """The tf.distribute strategy called `name` (one of train_config.STRATEGIES).

  default: this process's default devices, no replication; mirrored: a
  replica per local GPU (per logical CPU device if none); multi_worker: the
  cluster of TF_CONFIG, a replica per GPU of every worker, once every worker
  has started (`cluster.join`, which waits `cluster_timeout` seconds at
  most).
  """
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    devices = (tf.config.list_logical_devices("GPU") or
               tf.config.list_logical_devices("CPU"))
    return tf.distribute.MirroredStrategy([d.name for d in devices])
  if name == "multi_worker":
    try:
      return cluster.join(cluster_timeout)
    except cluster.TFConfigError as error:
      raise run_files.RunError(str(error)) from None
  raise ValueError(
      f"unknown strategy {name!r}; choose one of {train_config.STRATEGIES}")


def make_sampler(sampling, num_examples, amplitude, decay, seed, strategy=None):
  """A UniformSampler or AdaptiveSampler over `num_examples` examples.

  Under `strategy`, with a copy per replica: each replica draws its share of
  the batch from one distribution (tf_adasamp.distribute).
  """
  strategy = strategy or tf.distribute.get_strategy()
  if sampling == "uniform":
    with strategy.scope():
      return UniformSampler(num_examples, seed=seed)
  if sampling == "adaptive":
    return distribute.create_sampler(strategy,
                                     num_examples,
                                     amplitude,
                                     decay,
                                     seed=seed)
  raise ValueError(f"unknown sampling {sampling!r}; choose one of "
                   f"{train_config.SAMPLINGS}")


def make_optimizer(name, learning_rate, lr_decay):
  """SGD or AdaGrad with step size learning_rate / (1 + lr_decay * t).

  The paper's SGD schedule eta / (1 + gamma t), with t the number of updates
  made before this one; lr_decay = 0 keeps the step size constant.
  """
  schedule = tf.keras.optimizers.schedules.InverseTimeDecay(learning_rate,
                                                            decay_steps=1,
                                                            decay_rate=lr_decay)
  if name == "sgd":
    return tf.keras.optimizers.SGD(schedule)
  if name == "adagrad":
    return tf.keras.optimizers.Adagrad(schedule)
  raise ValueError(
      f"unknown optimizer {name!r}; choose one of {train_config.OPTIMIZERS}")


def make_train_step(model,
                    optimizer,
                    sampler,
                    images,
                    labels,
                    batch_size,
                    utility="zero_one",
                    utility_at="updated",
                    strategy=None):
  """One training step as a `tf.function` of no arguments.

  Under `strategy` (model, optimizer and sampler made in its scope), each of
  its R replicas draws batch_size / R examples, and the gradients and the
  sampler's update cover the whole batch.

  Returns the batch's mean cross-entropy and accuracy, its indices ([B]
  int64) and the utilities the sampler was updated with ([B]; zeros for a
  UniformSampler).
  """
  if utility_at not in train_config.UTILITY_AT:
    raise ValueError(f"unknown utility_at {utility_at!r}; choose one of "
                     f"{train_config.UTILITY_AT}")
  strategy = strategy or tf.distribute.get_strategy()
  num_replicas = strategy.num_replicas_in_sync
  if batch_size % num_replicas:
    raise ValueError(f"batch_size {batch_size} must be a multiple of the "
                     f"{num_replicas} replicas")
  replica_batch_size = batch_size // num_replicas
  utility_fn = utilities.get(utility)
  reweights = not isinstance(sampler, UniformSampler)

  def replica_step():
    indices = sampler.sample(replica_batch_size)
    batch_images = tf.gather(images, indices)
    batch_labels = tf.gather(labels, indices)
    with tf.GradientTape() as tape:
      logits = model(batch_images, training=True)
      cross_entropy = tf.reduce_mean(
          tf.nn.sparse_softmax_cross_entropy_with_logits(batch_labels, logits))
      # The replicas' gradients are summed.
      loss = tf.add_n([cross_entropy, *model.losses]) / num_replicas
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    accuracy = tf.reduce_mean(
        tf.cast(
            tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                     batch_labels), tf.float32))
    if not reweights:
      return (cross_entropy, accuracy, indices,
              tf.zeros([replica_batch_size], tf.float32))
    if utility_at == "updated":
      logits = model(batch_images, training=False)
    batch_utilities = utilities.from_logits(utility_fn, batch_labels, logits)
    sampler.update(indices, batch_utilities)
    return cross_entropy, accuracy, indices, batch_utilities

  @tf.function
  def train_step():
    with strategy.scope():
      cross_entropy, accuracy, indices, batch_utilities = strategy.run(
          replica_step)
      mean = tf.distribute.ReduceOp.MEAN
      return (strategy.reduce(mean, cross_entropy, axis=None),
              strategy.reduce(mean, accuracy,
                              axis=None), strategy.gather(indices, axis=0),
              strategy.gather(batch_utilities, axis=0))

  return train_step


def make_evaluate(model, batch_size=1000):
  """Returns evaluate(images, labels, weights=None) -> (mean cross-entropy,
  accuracy, misclassified weight).

  Runs the model in inference mode over the split in batches of
  `batch_size`. The last is the sum of `weights` (a [n] float64 array, e.g.
  the sampling probabilities; 1 / n each if None) over the misclassified
  examples.
  """

  @tf.function(reduce_retracing=True)
  def sums(batch_images, batch_labels, batch_weights):
    logits = model(batch_images, training=False)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch_labels, logits)
    correct = tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                       batch_labels)
    return (tf.reduce_sum(tf.cast(cross_entropy, tf.float64)),
            tf.reduce_sum(tf.cast(correct, tf.float64)),
            tf.reduce_sum(
                tf.where(correct, tf.zeros_like(batch_weights), batch_weights)))

  def evaluate(images, labels, weights=None):
    if weights is None:
      weights = np.full(len(labels), 1 / len(labels))
    loss, correct, misclassified = 0.0, 0.0, 0.0
    for start in range(0, len(labels), batch_size):
      batch = slice(start, start + batch_size)
      batch_sums = sums(images[batch], labels[batch], weights[batch])
      loss += float(batch_sums[0])
      correct += float(batch_sums[1])
      misclassified += float(batch_sums[2])
    return loss / len(labels), correct / len(labels), misclassified

  return evaluate


def last_checkpoint_step(output_dir):
  """The step of the run's last checkpoint in `output_dir`, or None."""
  path = tf.train.latest_checkpoint(os.path.join(output_dir, "checkpoints"))
  return None if path is None else int(path.rsplit("-", 1)[1])


# Fields the workers of one multi-worker run may set differently.
_PER_WORKER = {"data_dir", "output_dir", "cluster_timeout"}
# How TensorFlow reports a worker that left the cluster.
_LOST_WORKER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                       tf.errors.CancelledError,
                       tf.errors.DeadlineExceededError)


def worker_state(config):
  """What a worker of a multi-worker run tells the others before it starts:
  [a fingerprint of its settings but _PER_WORKER, the step of its last
  checkpoint if it resumes one, else -1]."""
  settings = {
      name: value
      for name, value in dataclasses.asdict(config).items()
      if name not in _PER_WORKER
  }
  digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
  latest = last_checkpoint_step(config.output_dir) if config.resume else None
  return [
      int.from_bytes(digest.digest()[:8], "little", signed=True),
      -1 if latest is None else latest
  ]


def common_checkpoint_step(states):
  """The step a multi-worker run starts from, given each worker's
  `worker_state` (a row each): that of the latest checkpoint every worker
  has, or None for a new run.

  The workers checkpoint at the same steps, but a worker killed while its
  peers wrote theirs misses the last one (each keeps two): they all go back
  to the latest they share, so their copies of the model and the sampler
  start equal. Raises RunError unless they run the same settings and all or
  none of them has a checkpoint (else the others' runs would start over).
  """
  states = np.asarray(states)
  if (states[:, 0] != states[0, 0]).any():
    raise run_files.RunError(
        "the workers of TF_CONFIG's cluster have different settings; start "
        "them with the same flags (only "
        f"{', '.join('--' + n for n in sorted(_PER_WORKER))} may differ)")
  steps = states[:, 1]
  if steps.min() < 0 <= steps.max():
    raise run_files.RunError(
        "some workers of TF_CONFIG's cluster have a checkpoint to resume "
        "from, and some none; give each worker the --output_dir of its part "
        "of the run")
  return None if steps.min() < 0 else int(steps.min())


def _checkpoint_of_step(directory, step):
  """The path of the checkpoint of `step` in `directory` (None if `step` is
  None); RunError if there is none."""
  if step is None:
    return None
  state = tf.train.get_checkpoint_state(directory)
  for path in state.all_model_checkpoint_paths if state else []:
    if path.endswith(f"-{step}"):
      return path
  raise run_files.RunError(
      f"{directory} has no checkpoint of step {step}, the latest that every "
      "worker of the cluster has; resume each worker from its own "
      "--output_dir")


def _lost_worker(error, when):
  return run_files.RunError(
      f"the cluster lost a worker {when} ({type(error).__name__}); start "
      "every worker again with --resume: they go on from the last checkpoint "
      "they all have")


# Where each metric goes in TensorBoard: (run, tag). The splits are runs, so
# their loss and accuracy overlay; the rest go to train/, grouped by tag.
_SUMMARY_TAGS = {
    "train_loss": ("train", "loss"),
    "train_accuracy": ("train", "accuracy"),
    "test_loss": ("test", "loss"),
    "test_accuracy": ("test", "accuracy"),
    **{
        name: ("train", "sampler/" + name) for name in ("kl", "max_probability", "ess_fraction", "unique_per_batch", "misclassified_mass")
    },
    **{
        name: ("train", "bounds/" + name) for name in ("kl_bound", "kl_bound_general", "corollary1_bound", "zero_one_gap")
    },
    "learning_rate": ("train", "optimizer/learning_rate"),
}


class _RunLog:
  """Keeps the metric records in metrics.jsonl and TensorBoard summaries."""

  def __init__(self, output_dir, keep_until_step):
    self.records = []
    self._path = self._writers = None
    if output_dir:
      # Records past the checkpoint a resumed run restarts from are redone.
      self.records = [
          r for r in run_files.read_metrics(output_dir)
          if r["step"] <= keep_until_step
      ]
      self._path = os.path.join(output_dir, run_files.METRICS_FILE)
      self._save()
      self._writers = {
          run:
              tf.summary.create_file_writer(
                  os.path.join(output_dir, "tensorboard", run))
          for run in ("train", "test")
      }

  def _save(self):
    run_files.write_atomically(
        self._path, "".join(json.dumps(r) + "\n" for r in self.records))

  def write(self, record, histograms):
    """Appends `record`, and draws `histograms` ({tag: values}) in train/."""
    self.records.append(record)
    if not self._path:
      return
    self._save()
    for name, value in record.items():
      if name != "step" and value is not None:
        run, tag = _SUMMARY_TAGS.get(name, ("train", name))
        with self._writers[run].as_default(step=record["step"]):
          tf.summary.scalar(tag, value)
    with self._writers["train"].as_default(step=record["step"]):
      for tag, values in histograms.items():
        tf.summary.histogram(tag, values)
    for writer in self._writers.values():
      writer.flush()


def cross_entropy_lipschitz(images):
  """Lipschitz constant of softmax regression's cross-entropy in its weights.

  The gradient in the weights of example (x, y) is (p - e_y) (x, 1), of norm
  at most sqrt(2) ||(x, 1)||.
  """
  flat = images.reshape(len(images), -1)
  squared_norms = np.einsum("ij,ij->i", flat, flat, dtype=np.float64)
  return math.sqrt(2 * (squared_norms.max() + 1))


def _bound_metrics(tracker, l2, lipschitz=None):
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


def _diverged(when, cause, config):
  return DivergedError(
      f"the run diverged {when} ({cause}); try a learning_rate smaller "
      f"than {config.learning_rate:g}")


def train_eval_indices(num_examples, size, seed=0):
  """The sorted indices of the training examples that evaluations read:
  a fixed random `size` of them (drawn with `seed`), or all if `size` is
  None or not below `num_examples`."""
  if size is None or size >= num_examples:
    return np.arange(num_examples)
  return np.sort(np.random.default_rng(seed).permutation(num_examples)[:size])


def train(config, data=None, progress=False):
  """Runs `config` and returns its metric records (one dict per evaluation).

  Each record holds the step and epoch; loss and accuracy on the training
  set (or its fixed subset of config.train_eval_size examples) and on the
  whole test set; the sampler's view of Q_t: kl = KL(Q_t || uniform),
  max_probability, ess_fraction (the effective sample size 1 / sum_i q_i^2
  as a fraction of n), misclassified_mass (Q_t's mass on the training
  examples the model gets wrong) and, after the first step,
  unique_per_batch (distinct examples per batch since the last record); the
  learning rate of the next step; and the divergence bounds
  (`_bound_metrics`).

  Args:
    config: a train_config.TrainConfig.
    data: a datasets.Dataset; loaded from config.dataset if None (pass one
      to share it between runs).
    progress: show a progress bar with the mean loss and accuracy of the
      drawn batches (adaptively drawn batches under adaptive sampling: not
      the train-set metrics, which the records hold) and the KL.

  Raises:
    run_files.RunError: the run cannot start (output_dir unwritable or
      holding another run, batch_size above the number of examples, workers
      of a multi_worker cluster with other settings), diverged
      (DivergedError; the last checkpoint is kept) or lost a worker of its
      cluster.
  """
  if data is None:
    data = datasets.load(config.dataset, config.data_dir)
  num_examples = len(data.y_train)
  if config.batch_size > num_examples:
    raise run_files.RunError(f"batch_size {config.batch_size} is larger "
                             f"than the {num_examples} training examples")
  steps = config.num_steps(num_examples)
  if config.output_dir:
    run_files.ensure_writable_dir(config.output_dir)
  run_files.check_output_dir(config)
  if config.output_dir:
    run_files.write_atomically(
        os.path.join(config.output_dir, run_files.CONFIG_FILE),
        json.dumps(dataclasses.asdict(config), indent=2))
  if config.deterministic:
    tf.config.experimental.enable_op_determinism()

  strategy = make_strategy(config.strategy, config.cluster_timeout)
  common_step = None
  if config.strategy == "multi_worker":
    try:
      common_step = common_checkpoint_step(
          cluster.gather(strategy, worker_state(config)))
    except _LOST_WORKER_ERRORS as error:
      raise _lost_worker(error, "before training") from None
  with strategy.scope():
    model = models.build(config.model,
                         data.image_shape,
                         data.num_classes,
                         seed=config.seed,
                         l2=config.l2)
    optimizer = make_optimizer(config.optimizer, config.learning_rate,
                               config.lr_decay)
    # Built now, so a checkpoint restores into existing slots.
    optimizer.build(model.trainable_variables)
  sampler = make_sampler(config.sampling, num_examples, config.amplitude,
                         config.decay, config.seed, strategy)
  images, labels = tf.constant(data.x_train), tf.constant(data.y_train)
  train_step = make_train_step(model, optimizer, sampler, images, labels,
                               config.batch_size, config.utility,
                               config.utility_at, strategy)
  evaluate = make_evaluate(model)
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  # Theorems 4 and 5 (and Corollary 1) for the run so far. Uniform sampling
  # is Algorithm 1 with amplitude 0: its bounds are 0, as KL(P || P) is.
  tracker = BoundTracker(
      num_examples,
      config.amplitude if config.sampling == "adaptive" else 0.0,
      config.decay,
      static_shapes=config.jit_compile)

  @tf.function(jit_compile=config.jit_compile)
  def run_steps(count):
    """`count` steps; the sums of their batch losses, accuracies and
    distinct draws."""
    loss_sum = accuracy_sum = tf.zeros([], tf.float32)
    unique_sum = tf.zeros([], tf.int64)
    for _ in tf.range(count):
      batch_loss, batch_accuracy, indices, batch_utilities = train_step()
      unique_sum += tracker.update(indices, batch_utilities)
      step.assign_add(1)
      loss_sum += batch_loss
      accuracy_sum += batch_accuracy
    return loss_sum, accuracy_sum, unique_sum

  manager = None
  restored = False
  if config.output_dir:
    # model.variables includes Keras' dropout seed states. Variables only:
    # restoring reads numbers, never Python objects.
    checkpoint = tf.train.Checkpoint(model=model.variables,
                                     optimizer=optimizer,
                                     sampler=sampler,
                                     bound_tracker=tracker,
                                     step=step)
    manager = tf.train.CheckpointManager(checkpoint,
                                         os.path.join(config.output_dir,
                                                      "checkpoints"),
                                         max_to_keep=2)
    path = manager.latest_checkpoint if config.resume else None
    if config.strategy == "multi_worker":
      path = _checkpoint_of_step(manager.directory, common_step)
    if path:
      try:
        checkpoint.restore(path).assert_consumed()
      except (AssertionError, ValueError, tf.errors.OpError) as error:
        raise run_files.RunError(
            f"cannot resume from {path}: it does not hold this trainer's "
            f"state ({str(error).strip().splitlines()[0][:200]})") from None
      restored = True
  log = _RunLog(config.output_dir,
                keep_until_step=int(step) if restored else -1)
  lipschitz = (cross_entropy_lipschitz(data.x_train)
               if config.model == "logistic" else None)

  evaluated = train_eval_indices(num_examples, config.train_eval_size)
  eval_images, eval_labels = ((data.x_train, data.y_train) if len(evaluated)
                              == num_examples else (data.x_train[evaluated],
                                                    data.y_train[evaluated]))

  def record(unique_per_batch=None):
    probabilities = sampler.probabilities().numpy()
    # Over a subset, the mass on its misclassified examples, scaled up to
    # estimate the whole set's.
    train_loss, train_accuracy, misclassified_mass = evaluate(
        eval_images, eval_labels,
        probabilities[evaluated] * num_examples / len(evaluated))
    test_loss, test_accuracy, _ = evaluate(data.x_test, data.y_test)
    t = int(step)
    if not math.isfinite(train_loss):
      raise _diverged(f"at step {t}", f"training loss {train_loss}", config)
    metrics = {
        "step":
            t,
        "epoch":
            t * config.batch_size / num_examples,
        "train_loss":
            train_loss,
        "train_accuracy":
            train_accuracy,
        "test_loss":
            test_loss,
        "test_accuracy":
            test_accuracy,
        "kl":
            float(sampler.kl_divergence()),
        "max_probability":
            float(probabilities.max()),
        "ess_fraction":
            float(1 / (num_examples * np.sum(np.square(probabilities)))),
        "misclassified_mass":
            misclassified_mass,
        "learning_rate":
            float(optimizer.learning_rate),
    }
    if unique_per_batch is not None:
      metrics["unique_per_batch"] = unique_per_batch
    metrics.update(_bound_metrics(tracker.read(), config.l2, lipschitz))
    if config.model == "logistic":
      metrics["zero_one_gap"] = train_accuracy - test_accuracy
    # log(n q_i): 0 everywhere under uniform sampling.
    log.write(metrics,
              {"sampler/log_n_q": np.log(num_examples * probabilities)})
    if manager:
      manager.save(checkpoint_number=t)

  t = int(step)
  if not restored:
    record()
  bar = (tf.keras.utils.Progbar(steps, stateful_metrics=["kl"])
         if progress else None)
  unique_sum, counted = 0, 0
  while t < steps:
    next_record = (t // config.eval_interval + 1) * config.eval_interval
    count = min(config.steps_per_execution, next_record - t, steps - t)
    try:
      loss_sum, accuracy_sum, chunk_unique = run_steps(
          tf.constant(count, tf.int64))
    except _LOST_WORKER_ERRORS as error:
      if config.strategy != "multi_worker":
        raise
      raise _lost_worker(error, f"after step {t}") from None
    except tf.errors.InvalidArgumentError as error:
      # A model gone to inf or NaN gives the sampler non-finite utilities.
      if "utilities" not in error.message or "not finite" not in error.message:
        raise
      # A call compiled by XLA fails whole, its steps undone.
      first = int(step) + 1
      when = (f"in steps {first} to {t + count}"
              if config.jit_compile else f"at step {first}")
      raise _diverged(when, "non-finite utilities", config) from None
    t += count
    unique_sum += chunk_unique
    counted += count
    if t % config.eval_interval == 0 or t == steps:
      record(float(unique_sum) / counted)
      unique_sum, counted = 0, 0
    if bar:
      bar.update(
          t,
          [(f"{config.sampling} batch loss", float(loss_sum) / count),
           (f"{config.sampling} batch accuracy", float(accuracy_sum) / count),
           ("kl", float(sampler.kl_divergence()))])
  return log.records
