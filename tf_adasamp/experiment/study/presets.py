"""The experiment's settings: the six algorithms, each data set's preset
hyperparameters, and how the runs depart from the paper's experiment.

Free of TensorFlow, like everything the command lines read before they
train.
"""

import dataclasses

from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.training import config as config_lib

ALGORITHMS = {
    "AdaSamp-01-SGD": ("adaptive", "zero_one", "sgd"),
    "AdaSamp-L1-SGD": ("adaptive", "l1", "sgd"),
    "Unif-SGD": ("uniform", "zero_one", "sgd"),
    "AdaSamp-01-AdaGrad": ("adaptive", "zero_one", "adagrad"),
    "AdaSamp-L1-AdaGrad": ("adaptive", "l1", "adagrad"),
    "Unif-AdaGrad": ("uniform", "zero_one", "adagrad"),
}
ADAPTIVE = tuple(name for name, (sampling, _, _) in ALGORITHMS.items()
                 if sampling == "adaptive")
# Baselines users run instead, beside the paper's with-replacement Unif: an
# epoch's permutation (what tf.data's shuffle gives). Compared in time to
# target, not in the paper's claims.
BASELINES = {
    "Shuffle-SGD": ("reshuffle", "zero_one", "sgd"),
}
# Methods from the field, timed to target against the same uniform baselines
# as the adaptive algorithms, on this library's sampler: IS-SGD is
# loss-proportional importance sampling (Katharopoulos & Fleuret, ICML 2018).
# Each draws in proportion to the cross-entropy at the example's last visit
# (the step's own, no extra pass), smoothed as their
# AdaptiveAdditiveSmoothingSampler with its 0.5 (a third of the draws
# uniform), and weighs each loss by 1 / (n q_i) so that the gradient stays
# unbiased.
COMPETITORS = {
    "IS-SGD": ("adaptive", "log_cross_entropy", "sgd"),
}
COMPETITOR_SAMPLERS = {
    "IS-SGD":
        dict(amplitude=1.0,
             decay=0.001,
             epsilon=1 / 3,
             beta=1.0,
             utility_at="step"),
}
RUNS = {**ALGORITHMS, **BASELINES, **COMPETITORS}
# The methods users would run instead of Algorithm 1, each tuned for its own
# step size as the uniform ones are (Settings.baseline_learning_rates).
ALTERNATIVES = (*BASELINES, *COMPETITORS)
# The decay recorded for uniform runs, which do not use it.
UNIFORM_DECAY = 0.5


def counterpart(algorithm):
  """The uniform algorithm with the same update rule."""
  return "Unif-" + algorithm.rpartition("-")[2]


@dataclasses.dataclass(frozen=True)
class Settings:
  """Hyperparameters of the experiment (per data set: PRESETS); each field
  is also a flag of tf_adasamp.experiment.reproduce.

  The step sizes and their schedules are per algorithm where the tuning
  chose them so; an empty per-algorithm tuple means the update rules'."""
  steps: int = option(dataclasses.MISSING, "Training steps per run.")
  eval_interval: int = option(dataclasses.MISSING, "Steps between evaluations.")
  sgd_learning_rate: float = option(dataclasses.MISSING,
                                    "SGD's eta in eta / (1 + gamma t).")
  sgd_lr_decay: float = option(dataclasses.MISSING,
                               "SGD's gamma in eta / (1 + gamma t).")
  adagrad_learning_rate: float = option(dataclasses.MISSING,
                                        "AdaGrad's step size.")
  amplitude: float = option(dataclasses.MISSING,
                            "Amplitude of the adaptive algorithms.")
  decay: float = option(dataclasses.MISSING,
                        "Decay of the adaptive algorithms.")
  sweep_amplitudes: tuple = option(dataclasses.MISSING,
                                   "Comma-separated amplitudes of the sweep.")
  adaptive_learning_rates: tuple = option(
      (), "Comma-separated step sizes of the four adaptive algorithms, in "
      "the order AdaSamp-01-SGD, AdaSamp-L1-SGD, AdaSamp-01-AdaGrad, "
      "AdaSamp-L1-AdaGrad; empty: their uniform counterparts'.")
  baseline_learning_rates: tuple = option(
      (), "Comma-separated etas of the baselines and the methods from the "
      f"field, in the order {', '.join(ALTERNATIVES)}; empty: their update "
      "rules'.")
  baseline_lr_decays: tuple = option(
      (), "Comma-separated gammas of the baselines and the methods from "
      f"the field (0 for AdaGrad ones), in the order "
      f"{', '.join(ALTERNATIVES)}; empty: their update rules'.")
  sgd_lr_schedule: str = option(
      "inverse_time", "SGD's step-size schedule (TrainConfig.lr_schedule): "
      "inverse_time, eta / (1 + gamma t); linear or cosine to 0 at the run's "
      "end.",
      choices=config_lib.LR_SCHEDULES)
  adagrad_lr_schedule: str = option(
      "inverse_time", "AdaGrad's step-size schedule (TrainConfig.lr_schedule; "
      "inverse_time with gamma 0 is a constant step size).",
      choices=config_lib.LR_SCHEDULES)
  adaptive_lr_schedules: tuple[str, ...] = option(
      (), "Comma-separated step-size schedules of the four adaptive "
      "algorithms, in the order of adaptive_learning_rates; empty: their "
      "update rules'.")
  baseline_lr_schedules: tuple[str, ...] = option(
      (), "Comma-separated step-size schedules of the baselines and the "
      f"methods from the field, in the order {', '.join(ALTERNATIVES)}; "
      "empty: their update rules'.")
  sweep_algorithm: str = option(
      "AdaSamp-01-SGD", "Adaptive algorithm whose "
      "amplitude is swept.")
  batch_size: int = option(100, "Examples per step.")
  early_evaluations: int = option(
      0, "Evaluations before the first eval_interval, at its half, quarter, "
      "... (TrainConfig.early_evaluations).")
  sweep_both_utilities: bool = option(
      False, "Sweep the amplitude with the utility at h_{t-1} (utility_at "
      "'step', no second forward pass) as well as at utility_at, for time "
      "to target.")
  train_accuracy_target: float = option(
      0.97, "Training accuracy whose time to target is reported (ours).")
  test_accuracy_target: float = option(
      0.84, "Test accuracy whose time to target is reported (ours).")
  utility_at: str = option("updated", "updated (h_t, Algorithm 1) or step "
                           "(h_{t-1}, cheaper).",
                           choices=config_lib.UTILITY_AT)

  def learning_rate(self, algorithm):
    """(eta, gamma) of `algorithm`: its own tuned step size where the
    preset has one, else its update rule's."""
    rule = RUNS[algorithm][2]
    if rule == "sgd":
      eta, gamma = self.sgd_learning_rate, self.sgd_lr_decay
    else:
      eta, gamma = self.adagrad_learning_rate, 0.0
    if algorithm in ADAPTIVE:
      eta = self._own("adaptive_learning_rates", ADAPTIVE, algorithm, eta)
    elif algorithm in ALTERNATIVES:
      eta = self._own("baseline_learning_rates", ALTERNATIVES, algorithm, eta)
      gamma = self._own("baseline_lr_decays", ALTERNATIVES, algorithm, gamma)
    return eta, gamma

  def lr_schedule(self, algorithm):
    """The step-size schedule of `algorithm` (one of
    config_lib.LR_SCHEDULES): its own where the preset has one, else its
    update rule's."""
    rule = RUNS[algorithm][2]
    schedule = self.sgd_lr_schedule if rule == "sgd" else (
        self.adagrad_lr_schedule)
    for field, names in (("adaptive_lr_schedules", ADAPTIVE),
                         ("baseline_lr_schedules", ALTERNATIVES)):
      if algorithm in names:
        schedule = self._own(field, names, algorithm, schedule, str)
    if schedule not in config_lib.LR_SCHEDULES:
      raise ValueError(f"{algorithm}'s lr_schedule must be one of "
                       f"{config_lib.LR_SCHEDULES}, got {schedule!r}")
    return schedule

  def _own(self, field, names, algorithm, default, kind=float):
    """`algorithm`'s entry of the per-algorithm tuple `field` (one value
    per name of `names`) as a `kind`, or `default` where the tuple is
    empty."""
    values = getattr(self, field)
    if not values:
      return default
    if len(values) != len(names):
      raise ValueError(f"{field} needs {len(names)} values (one per "
                       f"algorithm of {', '.join(names)}), got {values}")
    return kind(values[names.index(algorithm)])


# The model each data set runs by default.
DEFAULT_MODELS = {
    "digits": "cnn",
    "fashion_mnist": "logistic",
    "fashion_mnist_5k": "mlp",
    "fashion_mnist_5k_b": "mlp",
    "cifar10": "cnn"
}
# A regime's replication: its headline comparison again, with its settings,
# on a second data set that shares no image with the first
# (datasets.SUBSET_PARTS).
REPLICATIONS = {"fashion_mnist_5k": "fashion_mnist_5k_b"}

PRESETS = {
    # 500 steps, 33 epochs of the 1500 training digits.
    ("digits", "cnn"):
        Settings(steps=500,
                 eval_interval=25,
                 sgd_learning_rate=0.3,
                 sgd_lr_decay=0.002,
                 adagrad_learning_rate=0.1,
                 amplitude=1.0,
                 decay=0.5,
                 train_accuracy_target=0.99,
                 test_accuracy_target=0.97,
                 sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
    # The second regime, convex: 2000 steps, 3.3 epochs of the 60000
    # training images. From `python -m tf_adasamp.experiment.tuning`
    # (docs/experiment/tuning/fashion_mnist.md).
    ("fashion_mnist", "logistic"):
        Settings(steps=2000,
                 eval_interval=100,
                 sgd_learning_rate=1.0,
                 sgd_lr_decay=0.01,
                 adagrad_learning_rate=0.1,
                 amplitude=0.1,
                 decay=0.5,
                 train_accuracy_target=0.84,
                 test_accuracy_target=0.825,
                 sweep_amplitudes=(0.1, 0.3, 1.0, 3.0, 10.0)),
    # The main job: 3000 steps, 60 epochs of the 5000 training images, long
    # enough for uniform sampling to fit them; three evaluations in the first
    # 100 steps, where held-out accuracy climbs. Every step size
    # (Shuffle-SGD's and IS-SGD's too), the amplitude, decay and utility
    # option from `python -m tf_adasamp.experiment.tuning` on 5 seeds
    # (docs/experiment/tuning/fashion_mnist_5k.md), judged on held-out
    # accuracy over uniform's budget of example passes: amplitude 0.1 with
    # the step's own logits is the best, and uniform sampling is within one
    # standard error of it, so the tuning recommends uniform sampling; every
    # setting at 'updated' is worse than uniform for all four algorithms.
    ("fashion_mnist_5k", "mlp"):
        Settings(steps=3000,
                 eval_interval=100,
                 early_evaluations=3,
                 sgd_learning_rate=0.3,
                 sgd_lr_decay=0.001,
                 adagrad_learning_rate=0.1,
                 amplitude=0.1,
                 decay=0.5,
                 utility_at="step",
                 train_accuracy_target=0.97,
                 test_accuracy_target=0.84,
                 sweep_both_utilities=True,
                 sweep_amplitudes=(0.1, 0.3, 1.0, 3.0, 10.0),
                 adaptive_learning_rates=(0.3, 0.3, 0.1, 0.1),
                 baseline_learning_rates=(0.3, 0.3),
                 baseline_lr_decays=(0.001, 0.001)),
    # The budget-limited regime (study.budget): the MLP on the 50,000
    # training images left beside the fixed validation split, 1500 steps,
    # 3 epochs, where uniform sampling's validation accuracy still rises;
    # evaluated every 100 steps and at 50, 25 and 12. The step sizes,
    # schedules, amplitude and decay are starting points that the regime's
    # own tuning (`budget_study --stage=tuning`, on the fixed validation
    # split) replaces; it tries sweep_amplitudes. Every adaptive run takes
    # its utility from the step's own logits (utility at 'step').
    ("fashion_mnist", "mlp"):
        Settings(steps=1500,
                 eval_interval=100,
                 early_evaluations=3,
                 sgd_learning_rate=0.3,
                 sgd_lr_decay=0.001,
                 adagrad_learning_rate=0.1,
                 amplitude=0.3,
                 decay=0.5,
                 utility_at="step",
                 train_accuracy_target=0.9,
                 test_accuracy_target=0.85,
                 sweep_amplitudes=(0.1, 0.3, 1.0, 3.0)),
    # The paper's CNN on all 60000 training images: 12000 steps, 20 epochs,
    # an evaluation each epoch and four in the first (held-out accuracy
    # climbs most of the way there); on a GPU
    # (tf_adasamp.experiment.cnn_study). Step sizes, amplitude and decay are
    # starting points that the device script's tuning replaces.
    ("fashion_mnist", "cnn"):
        Settings(steps=12000,
                 eval_interval=600,
                 early_evaluations=4,
                 sgd_learning_rate=0.1,
                 sgd_lr_decay=1e-4,
                 adagrad_learning_rate=0.01,
                 amplitude=0.3,
                 decay=0.5,
                 train_accuracy_target=0.97,
                 test_accuracy_target=0.9,
                 sweep_amplitudes=(0.1, 0.3, 1.0, 3.0)),
    # 40 epochs of CIFAR-10's 50000 training images; not tuned here (no
    # CIFAR-10 on the machine that wrote this).
    ("cifar10", "cnn"):
        Settings(steps=20000,
                 eval_interval=500,
                 sgd_learning_rate=0.05,
                 sgd_lr_decay=1e-4,
                 adagrad_learning_rate=0.01,
                 amplitude=1.0,
                 decay=0.5,
                 train_accuracy_target=0.9,
                 test_accuracy_target=0.75,
                 sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
}


def preset(dataset, model):
  """The settings for `model` on `dataset`; a data set without a preset for
  the model gets its default model's, which then has not been tuned for
  it."""
  if dataset not in DEFAULT_MODELS:
    raise ValueError(f"unknown dataset {dataset!r}; choose one of "
                     f"{tuple(DEFAULT_MODELS)}")
  # A replication runs its original's settings.
  dataset = next((original for original, replica in REPLICATIONS.items()
                  if replica == dataset), dataset)
  return PRESETS.get((dataset, model),
                     PRESETS[(dataset, DEFAULT_MODELS[dataset])])


_CROSS_VALIDATED = (
    "Cross-validated as the paper says, on random subsets of the training "
    "data: `python -m tf_adasamp.experiment.tuning` (each tuning seed, "
    "disjoint from the reported trials' seeds, holds out its own random "
    "part of the training images as validation; the test set is never "
    "read), its command and tables in docs/experiment/tuning/.")
# How each preset's hyperparameters were chosen.
TUNING = {
    ("digits", "cnn"):
        ("Step sizes by hand; amplitude and decay from a grid on five tuning "
         "seeds, by first-half training cross-entropy on the training set "
         "itself (no validation split)."),
    ("fashion_mnist", "logistic"):
        _CROSS_VALIDATED + " Step sizes with uniform sampling, shared by "
        "the adaptive variants; one amplitude and decay for all four.",
    ("fashion_mnist_5k", "mlp"):
        _CROSS_VALIDATED + " Step sizes with uniform sampling (each "
        "baseline's its own), then amplitude, decay and utility option, "
        "judged on held-out accuracy over uniform's budget of example passes "
        "(the smallest amplitude within one standard error of the best; "
        "uniform sampling, within one standard error of the best, is the "
        "tuning's recommendation), then each adaptive variant's own step "
        "size at that setting. The runs here use seeds the tuning never "
        "saw.",
    ("fashion_mnist", "cnn"):
        ("Cross-validated on the GPU by benchmarks/gpu_cnn_study.sh, on "
         "validation splits of the training images: `python -m "
         "tf_adasamp.experiment.tuning` with its stages 1-3 on a small grid "
         "(its report, tuning.md, beside this summary); the test set is "
         "never read."),
}
_DATA = {
    "digits": ("scikit-learn's digits (1,500 training and 297 test 8x8 "
               "grayscale images, 10 classes) instead of CIFAR-10"),
    "fashion_mnist": ("Fashion-MNIST (60,000 training and 10,000 test 28x28 "
                      "grayscale images, 10 classes) instead of CIFAR-10 "
                      "(50,000 / 10,000 32x32 colour images): this machine "
                      "is offline and has no CIFAR-10"),
    "fashion_mnist_5k": ("a fixed random 5,000 of Fashion-MNIST's training "
                         "images and 5,000 of its test images (28x28 "
                         "grayscale, 10 classes) instead of CIFAR-10: small "
                         "enough for a model to fit them, and for every "
                         "evaluation to read both whole, on a 2-core CPU; "
                         "5,000 other training images are its validation "
                         "split, which picks the stopping point"),
    "fashion_mnist_5k_b": ("the replication of fashion_mnist_5k: 5,000 "
                           "other training images, the other 5,000 test "
                           "images and 5,000 more for validation"),
}
_MODELS = {
    "logistic": ("An L2-regularised multinomial logistic regression (penalty "
                 "0.001, strongly convex) instead of the paper's CNN: the "
                 "convex regime of Corollary 1, which cannot fit its data"),
    "mlp": ("A 784-512-10 multilayer perceptron (ReLU, unregularised) "
            "instead of the paper's CNN, which is too slow for a CPU "
            "(docs/experiment.md gives its cost); like the paper's CNN it "
            "fits its training data"),
}

# Data sets whose study is a smoke test, not evidence, with the reason: its
# summary shows the claims' figures without verdicts.
SMOKE_TESTS = {
    "digits": ("1,500 training images, which the CNN fits almost exactly "
               "(so claim 4's decline is the trivial one of a training "
               "error going to 0), and a plateau of the training loss at "
               "log 10 whose escape time varies from run to run and "
               "dominates every early window"),
}


def departures(dataset, model, settings, trials, num_train):
  """What these runs do differently from the paper's experiment, as
  sentences for the summary."""
  lines = []
  if dataset in _DATA:
    lines.append(f"Data: {_DATA[dataset]}.")
  if model in _MODELS:
    lines.append(f"Model: {_MODELS[model]}.")
  elif dataset == "digits":
    lines.append("Model: the paper's CNN, with all four convolutions padded "
                 "(8x8 inputs would shrink to nothing otherwise).")
  if trials != 10:
    lines.append(f"Trials: {trials} (the paper: 10).")
  lines.append(
      f"Length: {settings.steps} steps of batch {settings.batch_size} "
      f"({settings.steps * settings.batch_size / num_train:.1f} epochs); "
      "the paper does not say how long it trained.")
  lines.append("Tuning: " + TUNING.get(
      (dataset, model), "none: this preset has not been tuned on this data "
      "set.") + " The paper tuned all hyperparameters by cross-validation "
               "on random subsets of the training data and gives no details.")
  lines.append(
      "Step-size index: SGD's step size eta / (1 + gamma t) counts t from 0 "
      "(the first update uses eta); in the paper's Algorithm 1 t starts at "
      "1. AdaGrad is Keras' Adagrad (initial accumulator 0.1), which the "
      "paper does not specify.")
  lines.append(
      f"Amplitude sweep: {settings.sweep_algorithm} only, at amplitudes "
      f"{', '.join(f'{a:g}' for a in settings.sweep_amplitudes)} (the "
      "paper does not say which algorithm or which amplitudes).")
  lines.append(
      "Evaluation: training metrics are computed on the whole training set "
      f"every {settings.eval_interval} steps, in inference mode.")
  lines.append(
      "Verdicts: the paper reads its claims off mean curves; here each is "
      "judged on paired per-trial differences with the rules below.")
  return lines
