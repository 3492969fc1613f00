"""The trainer's settings: `TrainConfig`, with its choices and checks.

Free of TensorFlow, which takes seconds to load: the trainer checks its
flags, and answers --help, before it loads TensorFlow.
"""

import collections.abc
import dataclasses
import math
import sys

from tf_adasamp import _validation
from tf_adasamp import defaults
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import models


class Registered(collections.abc.Sequence):
  """The names in a registry as they are when read.

  A flag defined, or a config checked, after a registration offers the new
  name.
  """

  def __init__(self, names):
    """Reads the registry through `names`, a function returning its names."""
    self._names = names

  def __getitem__(self, index):
    return tuple(self._names())[index]

  def __len__(self):
    return len(tuple(self._names()))

  def __repr__(self):
    return repr(tuple(self._names()))


# tf_adasamp.utilities' own utilities, named here so that the command lines
# offer them without importing it (and TensorFlow).
BUILT_IN_UTILITIES = ("zero_one", "l1", "cross_entropy", "log_cross_entropy")


def _utility_names():
  # A program that registers a utility has imported tf_adasamp.utilities:
  # then its registry, else its built-ins.
  library = sys.modules.get("tf_adasamp.utilities")
  return tuple(library.UTILITIES) if library else BUILT_IN_UTILITIES


# The utility of RHO-LOSS (tf_adasamp.utilities.ReducibleLoss), which reads
# per-example irreducible losses and so is no registry function.
REDUCIBLE_LOSS = "reducible_loss"
# The names --model and --utility offer: models.register_model's and
# tf_adasamp.utilities.register_utility's registries, and the reducible
# loss.
MODELS = Registered(lambda: models.MODELS)
UTILITIES = Registered(lambda: (*_utility_names(), REDUCIBLE_LOSS))
SAMPLINGS = ("uniform", "reshuffle", "adaptive")
AMPLITUDE_SCHEDULES = ("constant", "warmup", "anneal", "final_uniform",
                       "initial_uniform")
# The amplitude schedules that read --schedule_fraction.
FRACTION_SCHEDULES = ("warmup", "final_uniform", "initial_uniform")
STRATEGIES = ("default", "mirrored", "multi_worker")
OPTIMIZERS = ("sgd", "adagrad")
LR_SCHEDULES = ("inverse_time", "linear", "cosine")
UTILITY_AT = ("updated", "step")
# Step counts past 2**53 lose integer precision as floats (the epoch).
MAX_STEPS = 2**53
FLOAT32_MAX = 3.4028234663852886e38


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Everything that defines a training run.

  The defaults are adaptive sampling with the zero-one utility and SGD,
  the main job's model on digits, and the library's amplitude, decay,
  utility option and beta (`tf_adasamp.defaults` says why); each field is
  also a flag of tf_adasamp.experiment.train.
  """
  dataset: str = option(
      "digits", "Data set: digits (scikit-learn's) and fashion_mnist "
      "(Debian's dataset-fashion-mnist) need no network; cifar10 comes "
      "through tensorflow_datasets.",
      choices=datasets.DATASETS)
  data_dir: str | None = option(
      None, "tensorflow_datasets directory holding a prepared CIFAR-10 "
      "(tfds' default if unset).")
  data_path: str | None = option(
      None, "ArrayRecord file of training images, in the record format of "
      "docs/data.md, read by index as steps draw them; replaces --dataset "
      "and needs --test_data_path and --num_classes.")
  test_data_path: str | None = option(
      None, "ArrayRecord file of test images (the format of --data_path), "
      "read into memory for the evaluations.")
  num_classes: int | None = option(
      None, "Classes of --data_path's labels, which lie in [0, "
      "num_classes).")
  model: str = option("mlp", "mlp: one hidden layer of 512 ReLUs (the "
                      "experiment's main job); cnn: the paper's CNN; "
                      "logistic: L2-regularised logistic regression "
                      "(strongly convex).",
                      choices=MODELS)
  l2: float = option(
      1e-3, "L2 penalty (strong-convexity modulus) of the "
      "logistic model.")
  optimizer: str = option("sgd", "Update rule.", choices=OPTIMIZERS)
  learning_rate: float = option(0.3, "Initial step size eta.")
  lr_decay: float = option(
      0.002, "gamma of the step size eta / (1 + gamma "
      "t); 0 keeps it constant. Read by lr_schedule inverse_time only.")
  lr_schedule: str = option(
      "inverse_time", "The step size over the run's T steps, for sgd and "
      "adagrad alike: inverse_time, eta / (1 + gamma t), the paper's; "
      "linear, eta (1 - t / T); cosine, eta (1 + cos(pi t / T)) / 2. linear "
      "and cosine reach 0 at the run's end, so a resumed run keeps its "
      "length.",
      choices=LR_SCHEDULES)
  batch_size: int = option(100, "Examples drawn per step.")
  sampling: str = option(
      "adaptive", "How training examples are drawn: uniform, with "
      "replacement (the paper's Unif); reshuffle, a fresh "
      "permutation each epoch (tf.data's shuffle); adaptive, "
      "Algorithm 1.",
      choices=SAMPLINGS)
  utility: str = option(
      "zero_one", "Utility that reweights drawn examples (adaptive only); "
      "reducible_loss: RHO-LOSS's, the cross-entropy minus the example's "
      "irreducible loss (that of a model trained on the validation split "
      "alone: needs validation_size), clipped to [0, reducible_loss_bound] "
      "and divided by it (tf_adasamp.utilities.ReducibleLoss).",
      choices=UTILITIES)
  irreducible_model: str | None = option(
      None, "The model whose cross-entropy on each training example, once "
      "trained on the validation split alone before the run, is its "
      "irreducible loss (utility reducible_loss): one of --model's choices; "
      "unset: --model itself, of the same size.",
      choices=MODELS)
  irreducible_epochs: float = option(
      10.0, "Epochs over the validation split that the irreducible model "
      "trains for (utility reducible_loss): Adam at Keras's default step "
      "size 0.001, batches of batch_size, a fresh permutation each epoch, "
      "from --seed.")
  reducible_loss_bound: float | None = option(
      None, "U of utility reducible_loss, min(max(loss - irreducible loss, "
      "0), U) / U: the reducible cross-entropy worth the utility 1; unset: "
      "log(classes), a uniform prediction's cross-entropy.")
  utility_at: str = option(
      defaults.UTILITY_AT,
      "step: reuse the step's own forward pass (h_{t-1}, dropout on), no "
      "extra cost; updated: utility of the model after the update, h_t, as "
      "in Algorithm 1 (a second forward pass).",
      choices=UTILITY_AT)
  amplitude: float = option(defaults.AMPLITUDE,
                            "Amplitude alpha >= 0 of the weight update.")
  decay: float = option(defaults.DECAY,
                        "Decay lambda in (0, 1) of the weight update.")
  epsilon: float = option(
      0.0, "Uniform floor in [0, 1]: draws from (1 - epsilon) Q_t + epsilon "
      "U (adaptive only; 0 is Algorithm 1).")
  amplitude_schedule: str = option(
      "constant", "The amplitude over the run: constant; warmup from 0 over "
      "the first schedule_fraction; anneal to 0 at the end; final_uniform, 0 "
      "for the last schedule_fraction; initial_uniform, 0 for the first "
      "schedule_fraction (adaptive only).",
      choices=AMPLITUDE_SCHEDULES)
  schedule_fraction: float = option(
      0.125, "The fraction of the run that warmup ramps over, or that "
      "final_uniform or initial_uniform samples uniformly.")
  beta: float = option(
      defaults.BETA, "Importance-weight exponent in [0, 1]: each example's "
      "loss weighed by (1 / (n q_i)) ** beta; 1 gives an unbiased gradient, "
      "0 weighs none (Algorithm 1). Uniform sampling's weights are all 1.")
  label_noise: float = option(
      0.0, "Fraction in [0, 1) of the training labels replaced by another "
      "class drawn at random, the same examples in every run "
      "(datasets.with_label_noise); the test labels stay clean.")
  validation_size: int = option(
      0, "Training examples held out as a validation split: a fixed random "
      "subset (the same for every run of a data set; after label_noise, "
      "whose flips it shares), never trained on, evaluated at each "
      "evaluation (validation_loss, validation_accuracy beside train_* and "
      "test_*); the data of the reducible_loss utility's irreducible model. "
      "0 holds none out.")
  steps: int | None = option(500, "Training steps.")
  epochs: float | None = option(
      None, "Training length in epochs; overrides "
      "--steps if set.")
  eval_interval: int = option(25, "Steps between evaluations (and "
                              "checkpoints).")
  early_evaluations: int = option(
      0, "Evaluations before the first eval_interval, at its half, quarter, "
      "eighth, ...: this many, where a learning curve moves fastest.")
  train_eval_size: int | None = option(
      None, "Training examples that the evaluations read (a fixed random "
      "subset, the same for every run of a data set; the sampler's mass on "
      "the misclassified ones is scaled up from it); all of them if unset.")
  steps_per_execution: int = option(
      25, "Steps per call of the compiled training loop (as in Keras): the "
      "host waits for the device once per call; a call never runs past an "
      "evaluation. Does not change the results.")
  jit_compile: bool = option(
      False, "Compile the training loop whole with XLA, the sampler's ops "
      "included: fewer, fused kernels and no per-op dispatch. Needs "
      "--strategy=default. On a GPU the CNN's steps are 5-10x as fast; on a "
      "CPU the logistic model's are faster, but XLA's CPU convolutions make "
      "the CNN's about 20x slower.")
  seed: int = option(
      0, "Seed of the initial model, dropout and sampling; "
      "in [0, 2**32).")
  deterministic: bool = option(
      False, "Make TensorFlow's ops deterministic "
      "(tf.config.experimental.enable_op_determinism, for the whole "
      "process), so a GPU run and its resumption repeat exactly; slower. Not "
      "for the cnn with --jit_compile.")
  output_dir: str | None = option(
      None, "Directory for metrics, summaries and checkpoints (the "
      "trainer's default: runs/train).")
  resume: bool = option(
      False, "Continue the run in --output_dir from its "
      "last checkpoint.")
  strategy: str = option(
      "default", "tf.distribute strategy: default (one device), mirrored "
      "(every local GPU, else every logical CPU device) or multi_worker (the "
      "cluster in TF_CONFIG; give each worker its own --output_dir). The "
      "batch is split among the replicas, which share one sampling "
      "distribution.",
      choices=STRATEGIES)
  cluster_timeout: float = option(
      300, "Seconds a multi_worker run waits for every worker of TF_CONFIG "
      "to start before it gives up.")

  def __post_init__(self):
    self._check_choices()
    self._check_numbers()
    self._check_controls()
    self._check_combinations()

  def _check_choices(self):
    if self.irreducible_model not in (None, *MODELS):
      raise ValueError(f"irreducible_model must be one of {MODELS}, got "
                       f"{self.irreducible_model!r}")
    for name, allowed in [("dataset", datasets.DATASETS), ("model", MODELS),
                          ("optimizer", OPTIMIZERS),
                          ("lr_schedule", LR_SCHEDULES),
                          ("sampling", SAMPLINGS), ("utility", UTILITIES),
                          ("utility_at", UTILITY_AT),
                          ("amplitude_schedule", AMPLITUDE_SCHEDULES),
                          ("strategy", STRATEGIES)]:
      if getattr(self, name) not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got "
                         f"{getattr(self, name)!r}")

  def _check_numbers(self):
    _validation.log_weight_bound(_validation.amplitude(self.amplitude),
                                 _validation.decay(self.decay))
    _validation.positive_int(self.batch_size, "batch_size")
    for name in ("eval_interval", "steps_per_execution") + (
        ("steps",) if self.epochs is None else ()):
      if _validation.positive_int(getattr(self, name), name) > MAX_STEPS:
        raise ValueError(f"{name} must be at most 2**53, got "
                         f"{getattr(self, name)}")
    # eval_interval is below 2**53: halving it more often reaches 0.
    early = self.early_evaluations
    if (isinstance(early, bool) or not isinstance(early, int) or
        not 0 <= early <= 53):
      raise ValueError("early_evaluations must be an int in [0, 53], got "
                       f"{early!r}")
    if self.train_eval_size is not None:
      _validation.positive_int(self.train_eval_size, "train_eval_size")
    if self.epochs is not None and not 0 < self.epochs < math.inf:
      raise ValueError(f"epochs must be finite and > 0, got {self.epochs}")
    if not 0 < self.learning_rate < math.inf:
      raise ValueError("learning_rate must be finite and > 0, got "
                       f"{self.learning_rate}")
    # The optimizers compute in float32.
    if self.learning_rate > FLOAT32_MAX:
      raise ValueError(f"learning_rate must be at most {FLOAT32_MAX:.4g} "
                       f"(float32's largest), got {self.learning_rate:g}")
    if not 0 < self.l2 < math.inf:
      raise ValueError(f"l2 must be finite and > 0, got {self.l2}")
    if not 0 <= self.lr_decay < math.inf:
      raise ValueError(f"lr_decay must be finite and >= 0, got "
                       f"{self.lr_decay}")
    # NumPy's and Keras' seeds (models.build) are 32-bit.
    if not 0 <= self.seed < 2**32:
      raise ValueError(f"seed must be in [0, 2**32), got {self.seed}")
    if not 0 < self.cluster_timeout < math.inf:
      raise ValueError("cluster_timeout must be finite and > 0, got "
                       f"{self.cluster_timeout}")

  def _check_controls(self):
    for name in ("epsilon", "schedule_fraction", "beta"):
      value = getattr(self, name)
      if not 0 <= value <= 1:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    # Only these schedules read it: any other value would be ignored
    # without a word.
    if (self.schedule_fraction != TrainConfig.schedule_fraction and
        self.amplitude_schedule not in FRACTION_SCHEDULES):
      raise ValueError(
          "schedule_fraction is for amplitude_schedule "
          f"{' or '.join(map(repr, FRACTION_SCHEDULES))}; "
          f"{self.amplitude_schedule!r} ignores it, got schedule_fraction "
          f"{self.schedule_fraction}")
    if not 0 <= self.label_noise < 1:
      raise ValueError(f"label_noise must be in [0, 1), got "
                       f"{self.label_noise}")
    # Not beta: uniform sampling's importance weights are all 1, whatever
    # their exponent.
    controls = {
        "epsilon": self.epsilon != 0,
        "amplitude_schedule": self.amplitude_schedule != "constant",
    }
    used = [name for name, on in controls.items() if on]
    if used and self.sampling != "adaptive":
      raise ValueError(f"{' and '.join(used)} "
                       f"{'need' if len(used) > 1 else 'needs'} sampling "
                       "'adaptive', got "
                       f"{self.sampling!r}")
    if self.label_noise and self.data_path is not None:
      raise ValueError("label_noise flips in-memory labels; it cannot apply "
                       "to data_path")
    size = self.validation_size
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
      raise ValueError(f"validation_size must be an int >= 0, got {size!r}")
    if size and self.data_path is not None:
      raise ValueError("validation_size holds out in-memory images; it "
                       "cannot apply to data_path")
    self._check_reducible_loss()

  def _check_reducible_loss(self):
    if not 0 < self.irreducible_epochs < math.inf:
      raise ValueError("irreducible_epochs must be finite and > 0, got "
                       f"{self.irreducible_epochs}")
    bound = self.reducible_loss_bound
    if bound is not None and not 0 < bound < math.inf:
      raise ValueError("reducible_loss_bound must be finite and > 0, got "
                       f"{bound}")
    if self.utility != REDUCIBLE_LOSS:
      used = [
          name for name in ("irreducible_model", "reducible_loss_bound")
          if getattr(self, name) is not None
      ]
      if used:
        raise ValueError(f"{' and '.join(used)} "
                         f"{'need' if len(used) > 1 else 'needs'} utility "
                         f"{REDUCIBLE_LOSS!r}, got {self.utility!r}")
    elif self.sampling == "adaptive" and not self.validation_size:
      raise ValueError(f"utility {REDUCIBLE_LOSS!r} needs a validation_size "
                       "> 0: its irreducible model trains on the validation "
                       "split")

  def _check_combinations(self):
    if self.sampling == "reshuffle" and self.strategy != "default":
      raise ValueError("sampling 'reshuffle' needs strategy 'default' (one "
                       f"permutation, one replica), got {self.strategy!r}")
    if self.jit_compile and self.strategy != "default":
      raise ValueError("jit_compile needs strategy 'default', got "
                       f"{self.strategy!r}")
    if self.jit_compile and self.deterministic and self.model == "cnn":
      raise ValueError("jit_compile and deterministic cannot train the cnn: "
                       "XLA has no deterministic gradient of its max "
                       "pooling; drop one of the two")
    if self.resume and not self.output_dir:
      raise ValueError("resume needs an output_dir to resume from")
    self._check_data_files()

  def _check_data_files(self):
    on_disk = {
        name: getattr(self, name)
        for name in ("data_path", "test_data_path", "num_classes")
    }
    if all(value is None for value in on_disk.values()):
      return
    missing = [name for name, value in on_disk.items() if value is None]
    if missing:
      raise ValueError("data_path, test_data_path and num_classes go "
                       f"together; missing {', '.join(missing)}")
    for name in ("data_path", "test_data_path"):
      if not on_disk[name]:
        raise ValueError(f"{name} is empty; name an ArrayRecord file")
    if _validation.positive_int(self.num_classes, "num_classes") < 2:
      raise ValueError(f"num_classes must be at least 2, got "
                       f"{self.num_classes}")
    if self.jit_compile:
      raise ValueError("jit_compile cannot read data_path: XLA does not "
                       "compile the read of the drawn records (a Python "
                       "call); drop one of the two")

  def schedules_over_length(self):
    """The settings whose schedule reads the run's length, as strings such
    as "lr_schedule 'cosine'": a run of another length would follow another
    schedule."""
    over_length = []
    if self.lr_schedule != "inverse_time":
      over_length.append(f"lr_schedule {self.lr_schedule!r}")
    if self.amplitude_schedule != "constant":
      over_length.append(f"amplitude_schedule {self.amplitude_schedule!r}")
    return over_length

  def num_steps(self, num_examples):
    if self.epochs is None:
      return self.steps
    steps = math.ceil(self.epochs * num_examples / self.batch_size)
    if steps > MAX_STEPS:
      raise ValueError(f"epochs {self.epochs:g} make more steps than the "
                       "2**53 at most")
    return steps
