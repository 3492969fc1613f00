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

`train(config)` runs the loop: metrics of the whole train and test sets every
`eval_interval` steps, as JSON lines and TensorBoard summaries, checkpoints of
everything that shapes the run (model, dropout and sampler random state,
optimizer, step, bound tracker), and `resume=True` to continue a run exactly
where it stopped. After each step the loop hands the batch's indices and
utilities to a host-side `bounds.KLBoundTracker` for the divergence bounds.
"""

import dataclasses
import json
import math
import os
import pickle

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from tf_adasamp import _validation
from tf_adasamp import bounds
from tf_adasamp import distribute
from tf_adasamp import utilities
from tf_adasamp.experiment import datasets
from tf_adasamp.experiment import models
from tf_adasamp.experiment.flags import option
from tf_adasamp.sampler import make_generator

SAMPLINGS = ("uniform", "adaptive")
STRATEGIES = ("default", "mirrored", "multi_worker")
OPTIMIZERS = ("sgd", "adagrad")
UTILITY_AT = ("updated", "step")
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


class RunExistsError(ValueError):
  """A new run was asked to write where another run already is."""


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

  def kl_divergence(self):
    return tf.zeros([], tf.float64)


def make_strategy(name):
  """The tf.distribute strategy called `name` (one of STRATEGIES).

  default: this process's default devices, no replication; mirrored: a
  replica per local GPU (per logical CPU device if none); multi_worker: the
  cluster of TF_CONFIG, a replica per GPU of every worker.
  """
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    devices = (tf.config.list_logical_devices("GPU") or
               tf.config.list_logical_devices("CPU"))
    return tf.distribute.MirroredStrategy([d.name for d in devices])
  if name == "multi_worker":
    return tf.distribute.MultiWorkerMirroredStrategy()
  raise ValueError(f"unknown strategy {name!r}; choose one of {STRATEGIES}")


def make_sampler(sampling, num_examples, amplitude, decay, seed,
                 strategy=None):
  """A UniformSampler or AdaptiveSampler over `num_examples` examples.

  Under `strategy`, with a copy per replica: each replica draws its share of
  the batch from one distribution (tf_adasamp.distribute).
  """
  strategy = strategy or tf.distribute.get_strategy()
  if sampling == "uniform":
    with strategy.scope():
      return UniformSampler(num_examples, seed=seed)
  if sampling == "adaptive":
    return distribute.create_sampler(strategy, num_examples, amplitude, decay,
                                     seed=seed)
  raise ValueError(f"unknown sampling {sampling!r}; choose one of "
                   f"{SAMPLINGS}")


def make_optimizer(name, learning_rate, lr_decay):
  """SGD or AdaGrad with step size learning_rate / (1 + lr_decay * t).

  The paper's SGD schedule eta / (1 + gamma t), with t the number of updates
  made before this one; lr_decay = 0 keeps the step size constant.
  """
  schedule = tf.keras.optimizers.schedules.InverseTimeDecay(
      learning_rate, decay_steps=1, decay_rate=lr_decay)
  if name == "sgd":
    return tf.keras.optimizers.SGD(schedule)
  if name == "adagrad":
    return tf.keras.optimizers.Adagrad(schedule)
  raise ValueError(f"unknown optimizer {name!r}; choose one of {OPTIMIZERS}")


def make_train_step(model, optimizer, sampler, images, labels, batch_size,
                    utility="zero_one", utility_at="updated", strategy=None):
  """One training step as a `tf.function` of no arguments.

  Under `strategy` (model, optimizer and sampler made in its scope), each of
  its R replicas draws batch_size / R examples, and the gradients and the
  sampler's update cover the whole batch.

  Returns the batch's mean cross-entropy and accuracy, its indices ([B]
  int64) and the utilities the sampler was updated with ([B]; zeros for a
  UniformSampler).
  """
  if utility_at not in UTILITY_AT:
    raise ValueError(f"unknown utility_at {utility_at!r}; choose one of "
                     f"{UTILITY_AT}")
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
          tf.nn.sparse_softmax_cross_entropy_with_logits(batch_labels,
                                                         logits))
      # The replicas' gradients are summed.
      loss = tf.add_n([cross_entropy, *model.losses]) / num_replicas
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    accuracy = tf.reduce_mean(tf.cast(
        tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                 batch_labels), tf.float32))
    if not reweights:
      return (cross_entropy, accuracy, indices,
              tf.zeros([replica_batch_size], tf.float32))
    if utility_at == "updated":
      logits = model(batch_images, training=False)
    batch_utilities = utility_fn(batch_labels, tf.nn.softmax(logits))
    sampler.update(indices, batch_utilities)
    return cross_entropy, accuracy, indices, batch_utilities

  @tf.function
  def train_step():
    with strategy.scope():
      cross_entropy, accuracy, indices, batch_utilities = strategy.run(
          replica_step)
      mean = tf.distribute.ReduceOp.MEAN
      return (strategy.reduce(mean, cross_entropy, axis=None),
              strategy.reduce(mean, accuracy, axis=None),
              strategy.gather(indices, axis=0),
              strategy.gather(batch_utilities, axis=0))

  return train_step


def make_evaluate(model, batch_size=1000):
  """Returns evaluate(images, labels) -> (mean cross-entropy, accuracy).

  Runs the model in inference mode over the split in batches of
  `batch_size`.
  """

  @tf.function(reduce_retracing=True)
  def sums(batch_images, batch_labels):
    logits = model(batch_images, training=False)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch_labels, logits)
    correct = tf.equal(tf.argmax(logits, -1, output_type=batch_labels.dtype),
                       batch_labels)
    return (tf.reduce_sum(tf.cast(cross_entropy, tf.float64)),
            tf.reduce_sum(tf.cast(correct, tf.float64)))

  def evaluate(images, labels):
    loss, correct = 0.0, 0.0
    for start in range(0, len(labels), batch_size):
      batch_loss, batch_correct = sums(images[start:start + batch_size],
                                       labels[start:start + batch_size])
      loss += float(batch_loss)
      correct += float(batch_correct)
    return loss / len(labels), correct / len(labels)

  return evaluate


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Everything that defines a training run.

  The defaults are AdaSamp-01-SGD of the digits experiment
  (tf_adasamp.experiment.reproduce); each field is also a flag of
  tf_adasamp.experiment.train.
  """
  dataset: str = option("digits", "Data set; digits needs no network.",
                        choices=datasets.DATASETS)
  data_dir: str | None = option(
      None, "tensorflow_datasets directory holding a prepared CIFAR-10 "
      "(tfds' default if unset).")
  model: str = option("cnn", "cnn: the paper's CNN; logistic: "
                      "L2-regularised logistic regression (strongly "
                      "convex).", choices=models.MODELS)
  l2: float = option(1e-3, "L2 penalty (strong-convexity modulus) of the "
                     "logistic model.")
  optimizer: str = option("sgd", "Update rule.", choices=OPTIMIZERS)
  learning_rate: float = option(0.3, "Initial step size eta.")
  lr_decay: float = option(0.002, "gamma of the step size eta / (1 + gamma "
                           "t); 0 keeps it constant.")
  batch_size: int = option(100, "Examples drawn per step.")
  sampling: str = option("adaptive", "How training examples are drawn.",
                         choices=SAMPLINGS)
  utility: str = option("zero_one", "Utility that reweights drawn examples "
                        "(adaptive only).",
                        choices=sorted(utilities.UTILITIES))
  utility_at: str = option(
      "updated", "updated: utility of the model after the update, h_t, as "
      "in Algorithm 1 (a second forward pass); step: reuse the step's own "
      "forward pass (h_{t-1}, dropout on), cheaper.", choices=UTILITY_AT)
  amplitude: float = option(1.0, "Amplitude alpha >= 0 of the weight "
                            "update.")
  decay: float = option(0.5, "Decay lambda in (0, 1) of the weight update.")
  steps: int | None = option(500, "Training steps.")
  epochs: float | None = option(None, "Training length in epochs; overrides "
                                "--steps if set.")
  eval_interval: int = option(25, "Steps between evaluations (and "
                              "checkpoints).")
  seed: int = option(0, "Seed of the initial model, dropout and sampling.")
  output_dir: str | None = option(
      None, "Directory for metrics, summaries and checkpoints (the "
      "trainer's default: runs/train).")
  resume: bool = option(False, "Continue the run in --output_dir from its "
                        "last checkpoint.")
  strategy: str = option(
      "default", "tf.distribute strategy: default (one device), mirrored "
      "(every local GPU, else every logical CPU device) or multi_worker (the "
      "cluster in TF_CONFIG; give each worker its own --output_dir). The "
      "batch is split among the replicas, which share one sampling "
      "distribution.", choices=STRATEGIES)

  def __post_init__(self):
    for name, allowed in [("dataset", datasets.DATASETS),
                          ("model", models.MODELS),
                          ("optimizer", OPTIMIZERS),
                          ("sampling", SAMPLINGS),
                          ("utility", tuple(utilities.UTILITIES)),
                          ("utility_at", UTILITY_AT),
                          ("strategy", STRATEGIES)]:
      if getattr(self, name) not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got "
                         f"{getattr(self, name)!r}")
    _validation.amplitude(self.amplitude)
    _validation.decay(self.decay)
    _validation.positive_int(self.batch_size, "batch_size")
    _validation.positive_int(self.eval_interval, "eval_interval")
    if self.epochs is None:
      _validation.positive_int(self.steps, "steps")
    elif not self.epochs > 0:
      raise ValueError(f"epochs must be > 0, got {self.epochs}")
    if not self.learning_rate > 0:
      raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
    if not self.l2 > 0:
      raise ValueError(f"l2 must be > 0, got {self.l2}")
    if not self.lr_decay >= 0:
      raise ValueError(f"lr_decay must be >= 0, got {self.lr_decay}")
    if self.resume and not self.output_dir:
      raise ValueError("resume needs an output_dir to resume from")

  def num_steps(self, num_examples):
    if self.epochs is None:
      return self.steps
    return math.ceil(self.epochs * num_examples / self.batch_size)


def read_metrics(output_dir):
  """The metric records a run wrote to `output_dir`, oldest first."""
  path = os.path.join(output_dir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def is_complete(output_dir, steps):
  """Whether the run in `output_dir` has recorded its metrics at `steps`."""
  records = read_metrics(output_dir)
  return bool(records) and records[-1]["step"] >= steps


# Fields a resumed run may change: where it reads and writes, how long it is.
_RESUMABLE_CHANGES = {"data_dir", "output_dir", "resume", "steps", "epochs"}


def check_output_dir(config):
  """Raises RunExistsError unless `config` may write to its output_dir.

  A new run needs a directory without a run; a resumed one, a run of the
  same configuration (config.json, written by `train`), up to the fields a
  resumption may change.
  """
  if not config.output_dir:
    return
  has_run = (os.path.exists(os.path.join(config.output_dir, "checkpoints"))
             or read_metrics(config.output_dir))
  if has_run and not config.resume:
    raise RunExistsError(f"{config.output_dir} already holds a run; resume "
                         "it or choose another output_dir")
  path = os.path.join(config.output_dir, CONFIG_FILE)
  if config.resume and os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    ours = dataclasses.asdict(config)
    changed = sorted(name for name in ours.keys() - _RESUMABLE_CHANGES
                     if saved.get(name) != ours[name])
    if changed:
      raise RunExistsError(
          f"{config.output_dir} holds a run with other settings ("
          + ", ".join(f"{name}: {saved.get(name)!r} there, {ours[name]!r} "
                      "here" for name in changed)
          + "); choose another output_dir")


class _RunLog:
  """Appends metric records as JSON lines and TensorBoard scalars."""

  def __init__(self, output_dir, keep_until_step):
    self.records = []
    self._path = self._writer = None
    if output_dir:
      # Records past the checkpoint a resumed run restarts from are redone.
      self.records = [r for r in read_metrics(output_dir)
                      if r["step"] <= keep_until_step]
      self._path = os.path.join(output_dir, METRICS_FILE)
      with open(self._path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in self.records)
      self._writer = tf.summary.create_file_writer(
          os.path.join(output_dir, "tensorboard"))

  def write(self, record):
    self.records.append(record)
    if self._path:
      with open(self._path, "a") as f:
        f.write(json.dumps(record) + "\n")
      with self._writer.as_default(step=record["step"]):
        for name, value in record.items():
          if name != "step":
            # tf.summary.scalar's format, without needing tensorboard.
            tf.summary.write(name, tf.constant(value, tf.float32),
                             metadata=_SCALAR_METADATA)
      self._writer.flush()


class _TrackerState(tf.train.experimental.PythonState):
  """Checkpoints a bounds.KLBoundTracker (host-side NumPy) with the run."""

  def __init__(self, tracker):
    self.tracker = tracker

  def serialize(self):
    return pickle.dumps(self.tracker)

  def deserialize(self, string_value):
    self.tracker = pickle.loads(string_value)


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
  metrics = {"kl_bound": tracker.kl_bound,
             "kl_bound_general": tracker.kl_bound_general}
  if lipschitz is not None:
    metrics["corollary1_bound"] = tracker.strongly_convex_sgd_bound(
        delta=0.05, max_loss=1.0, lipschitz=lipschitz, strong_convexity=l2)
  return metrics


def train(config, data=None, progress=False):
  """Runs `config` and returns its metric records (one dict per evaluation).

  Args:
    config: a TrainConfig.
    data: a datasets.Dataset; loaded from config.dataset if None (pass one
      to share it between runs).
    progress: show a progress bar with the batch loss, accuracy and KL.
  """
  if data is None:
    data = datasets.load(config.dataset, config.data_dir)
  num_examples = len(data.y_train)
  steps = config.num_steps(num_examples)
  check_output_dir(config)
  checkpoint_dir = None
  if config.output_dir:
    checkpoint_dir = os.path.join(config.output_dir, "checkpoints")
    os.makedirs(config.output_dir, exist_ok=True)
    with open(os.path.join(config.output_dir, CONFIG_FILE), "w") as f:
      json.dump(dataclasses.asdict(config), f, indent=2)

  strategy = make_strategy(config.strategy)
  with strategy.scope():
    model = models.build(config.model, data.image_shape, data.num_classes,
                         seed=config.seed, l2=config.l2)
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
  tracker = _TrackerState(bounds.KLBoundTracker(
      num_examples,
      config.amplitude if config.sampling == "adaptive" else 0.0,
      config.decay))

  @tf.function
  def counted_train_step():
    outputs = train_step()
    step.assign_add(1)
    return outputs

  manager = None
  restored = False
  if checkpoint_dir:
    # model.variables includes Keras' dropout seed states.
    checkpoint = tf.train.Checkpoint(
        model=model.variables, optimizer=optimizer, sampler=sampler,
        bound_tracker=tracker, step=step)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir,
                                         max_to_keep=2)
    if config.resume and manager.latest_checkpoint:
      checkpoint.restore(manager.latest_checkpoint).assert_consumed()
      restored = True
  log = _RunLog(config.output_dir,
                keep_until_step=int(step) if restored else -1)
  lipschitz = (cross_entropy_lipschitz(data.x_train)
               if config.model == "logistic" else None)

  def record():
    train_loss, train_accuracy = evaluate(data.x_train, data.y_train)
    test_loss, test_accuracy = evaluate(data.x_test, data.y_test)
    t = int(step)
    metrics = {
        "step": t,
        "epoch": t * config.batch_size / num_examples,
        "train_loss": train_loss,
        "train_accuracy": train_accuracy,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "kl": float(sampler.kl_divergence()),
    }
    metrics.update(_bound_metrics(tracker.tracker, config.l2, lipschitz))
    if config.model == "logistic":
      metrics["zero_one_gap"] = train_accuracy - test_accuracy
    log.write(metrics)
    if manager:
      manager.save(checkpoint_number=t)

  if not restored:
    record()
  bar = (tf.keras.utils.Progbar(steps, stateful_metrics=["kl"]) if progress
         else None)
  while int(step) < steps:
    batch_loss, batch_accuracy, indices, batch_utilities = (
        counted_train_step())
    tracker.tracker.update(indices.numpy(), batch_utilities.numpy())
    t = int(step)
    if t % config.eval_interval == 0 or t == steps:
      record()
    if bar and (t % 10 == 0 or t == steps):
      bar.update(t, [("loss", float(batch_loss)),
                     ("accuracy", float(batch_accuracy)),
                     ("kl", float(sampler.kl_divergence()))])
  return log.records
