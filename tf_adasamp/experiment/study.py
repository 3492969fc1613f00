"""The paper's experiment (London, NIPS 2017, section "Experiments"): its runs.

The six algorithms, AdaSamp-{01,L1}-{SGD,AdaGrad} and Unif-{SGD,AdaGrad},
for a number of trials, plus a sweep of the amplitude of one of them: `plan`
lists the runs, `run_all` trains them, and `collect` reads their metrics
back as the curves that `report` and `plots` take.

Trial k runs every algorithm with seed k: the same initial model (and
dropout masks), and the same random numbers behind the draws, so the first
batch is shared too. Runs are resumable: a finished run is skipped and an
interrupted one continues from its last checkpoint. `run_all` can split the
runs among worker processes (one TensorFlow thread each), which on a small
CPU uses the cores better than one process does: a run's steps are small
and mostly single-threaded. TensorFlow loads only where runs train (in the
workers, if any): planning, checking and reading runs need none, so the
command lines refuse bad settings at once.
"""

import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import sys
import threading
import time

import numpy as np

from tf_adasamp import _validation
from tf_adasamp.experiment import run_files
from tf_adasamp.experiment import train_config
from tf_adasamp.experiment.flags import option

ALGORITHMS = {
    "AdaSamp-01-SGD": ("adaptive", "zero_one", "sgd"),
    "AdaSamp-L1-SGD": ("adaptive", "l1", "sgd"),
    "Unif-SGD": ("uniform", "zero_one", "sgd"),
    "AdaSamp-01-AdaGrad": ("adaptive", "zero_one", "adagrad"),
    "AdaSamp-L1-AdaGrad": ("adaptive", "l1", "adagrad"),
    "Unif-AdaGrad": ("uniform", "zero_one", "adagrad"),
}
CURVE_METRICS = ("train_loss", "train_accuracy", "test_accuracy", "kl")
# The decay recorded for uniform runs, which do not use it.
UNIFORM_DECAY = 0.5
# Logged by runs of the logistic model only (training_loop).
CERTIFICATE_METRICS = ("zero_one_gap", "corollary1_bound")


def counterpart(algorithm):
  """The uniform algorithm with the same update rule."""
  return "Unif-" + algorithm.rpartition("-")[2]


@dataclasses.dataclass(frozen=True)
class Settings:
  """Hyperparameters of the experiment (per data set: PRESETS); each field
  is also a flag of tf_adasamp.experiment.reproduce."""
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
  sweep_algorithm: str = option(
      "AdaSamp-01-SGD", "Adaptive algorithm whose "
      "amplitude is swept.")
  batch_size: int = option(100, "Examples per step.")
  utility_at: str = option("updated", "updated (h_t, Algorithm 1) or step "
                           "(h_{t-1}, cheaper).",
                           choices=train_config.UTILITY_AT)


# The model each data set runs by default.
DEFAULT_MODELS = {
    "digits": "cnn",
    "fashion_mnist": "logistic",
    "cifar10": "cnn"
}

PRESETS = {
    # 500 steps, 33 epochs of the 1500 training digits: every algorithm
    # reaches ~100% training accuracy. See docs/experiment.md for how these
    # were chosen.
    ("digits", "cnn"):
        Settings(steps=500,
                 eval_interval=25,
                 sgd_learning_rate=0.3,
                 sgd_lr_decay=0.002,
                 adagrad_learning_rate=0.1,
                 amplitude=1.0,
                 decay=0.5,
                 sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
    # The main job: 2000 steps, 4 epochs of the 50000 training images the
    # tuning keeps (3.3 of the full 60000). Step sizes, amplitude and decay
    # from `python -m tf_adasamp.experiment.tuning` on validation splits
    # (docs/experiment/tuning/fashion_mnist.md).
    ("fashion_mnist", "logistic"):
        Settings(steps=2000,
                 eval_interval=100,
                 sgd_learning_rate=1.0,
                 sgd_lr_decay=0.01,
                 adagrad_learning_rate=0.1,
                 amplitude=0.3,
                 decay=0.5,
                 sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
    # 40 epochs of CIFAR-10's 50000 training images; not tuned here (no
    # CIFAR-10 on the machine that wrote this). About 15 minutes a run on a
    # 2-core CPU, so 45 runs want a GPU or fewer --trials and --steps.
    ("cifar10", "cnn"):
        Settings(steps=20000,
                 eval_interval=500,
                 sgd_learning_rate=0.05,
                 sgd_lr_decay=1e-4,
                 adagrad_learning_rate=0.01,
                 amplitude=1.0,
                 decay=0.5,
                 sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
}


def preset(dataset, model):
  """The settings for `model` on `dataset`; a data set without a preset for
  the model gets its default model's, which then has not been tuned for
  it."""
  if dataset not in DEFAULT_MODELS:
    raise ValueError(f"unknown dataset {dataset!r}; choose one of "
                     f"{tuple(DEFAULT_MODELS)}")
  return PRESETS.get((dataset, model),
                     PRESETS[(dataset, DEFAULT_MODELS[dataset])])


# How each preset's hyperparameters were chosen (for the summary's list of
# departures from the paper).
TUNING = {
    ("digits", "cnn"):
        ("Step sizes by hand; amplitude and decay from a grid on five tuning "
         "seeds (100-104), disjoint from the reported trials, by first-half "
         "training cross-entropy on the training set itself (no validation "
         "split: this predates the cross-validated tuning, "
         "docs/experiment.md)."),
    ("fashion_mnist", "logistic"):
        ("Cross-validated as the paper says, on random subsets of the "
         "training data: `python -m tf_adasamp.experiment.tuning` (tuning "
         "seeds 100-104 for the step sizes, 100-102 for amplitude and decay, "
         "each holding out its own 10,000 of the 60,000 training images as "
         "validation; the test set is never read). Step "
         "sizes were tuned with uniform sampling only and shared by the "
         "adaptive variants; amplitude and decay were tuned on a 2 x 2 grid, "
         "one pair for all four adaptive variants, by the time-averaged "
         "validation accuracy (docs/experiment/tuning/fashion_mnist.md)."),
}
_DATA = {
    "digits": ("scikit-learn's digits (1,500 training and 297 test 8x8 "
               "grayscale images, 10 classes) instead of CIFAR-10: quick "
               "runs on a machine without CIFAR-10"),
    "fashion_mnist": ("Fashion-MNIST (60,000 training and 10,000 test 28x28 "
                      "grayscale images, 10 classes) instead of CIFAR-10 "
                      "(50,000 / 10,000 32x32 colour images): this machine "
                      "is offline and has no CIFAR-10"),
}
_MODELS = {
    "logistic": ("An L2-regularised multinomial logistic regression (penalty "
                 "0.001, strongly convex) instead of the paper's CNN: on this "
                 "shared 2-core CPU (one TensorFlow thread, load average 9) "
                 "a CNN step took 1.1 s and an evaluation of 10,000 images "
                 "26 s, against 5.4 ms and 0.07 s for the logistic model, "
                 "so one epoch per run, with 7 evaluations of the 70,000 "
                 "images, would take the 90 runs about a day on two workers "
                 "(docs/experiment.md)"),
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
      "judged on paired per-trial differences with a 95% t-interval "
      "(below).")
  return lines


@dataclasses.dataclass(frozen=True)
class Run:
  """One training run of the experiment: an algorithm at an amplitude (0
  for uniform sampling) in a trial."""
  algorithm: str
  amplitude: float
  trial: int
  config: train_config.TrainConfig


def plan(settings, trials, output_dir, dataset, data_dir=None, model="cnn"):
  """Every run of the experiment, the sweep's included, each listed once."""
  _validation.positive_int(trials, "trials")
  if ALGORITHMS.get(settings.sweep_algorithm, ("",))[0] != "adaptive":
    raise ValueError("sweep_algorithm must be an adaptive algorithm, got "
                     f"{settings.sweep_algorithm!r}")
  runs = {}

  def add(algorithm, amplitude, trial):
    sampling, utility, optimizer = ALGORITHMS[algorithm]
    decay = settings.decay
    if sampling == "uniform":
      # Uniform runs ignore amplitude and decay; fixed values keep them
      # valid (and resumable) whatever the adaptive settings.
      amplitude, decay = 0.0, UNIFORM_DECAY
    name = algorithm if sampling == "uniform" else (
        f"{algorithm}-a{amplitude:g}")
    run_dir = os.path.join(output_dir, name, f"seed{trial}")
    if run_dir not in runs:
      learning_rate, lr_decay = ((settings.sgd_learning_rate,
                                  settings.sgd_lr_decay) if optimizer == "sgd"
                                 else (settings.adagrad_learning_rate, 0.0))
      runs[run_dir] = Run(
          algorithm, amplitude, trial,
          train_config.TrainConfig(dataset=dataset,
                                   data_dir=data_dir,
                                   model=model,
                                   optimizer=optimizer,
                                   learning_rate=learning_rate,
                                   lr_decay=lr_decay,
                                   batch_size=settings.batch_size,
                                   sampling=sampling,
                                   utility=utility,
                                   utility_at=settings.utility_at,
                                   amplitude=amplitude,
                                   decay=decay,
                                   steps=settings.steps,
                                   eval_interval=settings.eval_interval,
                                   seed=trial,
                                   output_dir=run_dir,
                                   resume=True))

  for trial in range(trials):
    for algorithm in ALGORITHMS:
      add(algorithm, settings.amplitude, trial)
    for amplitude in settings.sweep_amplitudes:
      add(settings.sweep_algorithm, amplitude, trial)
  return list(runs.values())


# What a command line tells a user who interrupts its `run_all`.
INTERRUPTED = ("the finished runs are kept, and the same command goes on "
               "with the others from their last checkpoints")


def run_all(runs, data, progress=False, workers=1):
  """Trains every unfinished run; prints a line per run.

  Args:
    runs: Runs, as `plan` lists them.
    data: the datasets.Dataset every run trains on, or a function of a Run
      returning its Dataset (picklable where workers > 1).
    progress: show a progress bar per run (workers == 1 only).
    workers: processes to split the runs among, each with one TensorFlow
      thread; 1 trains them in this process.

  Raises run_files.RunExistsError where a run's directory holds a run of
  other settings (before any run starts).
  """
  _validation.positive_int(workers, "workers")
  for run in runs:
    run_files.check_output_dir(run.config)
  labelled = [(f"[{number}/{len(runs)}] {run.algorithm} amplitude "
               f"{run.amplitude:g} trial {run.trial}", run)
              for number, run in enumerate(runs, 1)]
  if workers == 1:
    _train_runs(labelled, data, progress)
    return
  context = multiprocessing.get_context("spawn")
  processes = [
      context.Process(target=_worker, args=(labelled[first::workers], data))
      for first in range(workers)
  ]
  for process in processes:
    process.start()
  try:
    for process in processes:
      process.join()
  except KeyboardInterrupt:
    # Ctrl-C reaches the workers too, and each stops at once (_worker); a
    # signal to this process alone does not, so they are ended here. A run
    # may be killed at any point: it goes on from its last checkpoint.
    for process in processes:
      process.terminate()
      process.join()
    raise
  failed = [p.exitcode for p in processes if p.exitcode]
  if failed:
    raise RuntimeError(f"{len(failed)} of {workers} workers failed (exit "
                       f"codes {failed}); run again to resume")


def _worker(labelled, data):
  """A worker process's share of run_all: one TensorFlow thread."""
  threading.Thread(target=_exit_with_the_runner, daemon=True).start()
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    _train_runs(labelled, data, progress=False)
  except KeyboardInterrupt:
    # Quietly: the parent, interrupted too, says what happened.
    sys.exit(130)


def _exit_with_the_runner():
  """Ends this worker when the runner ends, however it ends, even by
  `kill -9` (docs/guarantees.md). Like terminate(), it may stop a run
  anywhere: the run goes on from its last checkpoint."""
  multiprocessing.connection.wait([multiprocessing.parent_process().sentinel])
  os._exit(1)


def _train_runs(labelled, data, progress):
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from tf_adasamp.experiment import training_loop
  for label, run in labelled:
    if run_files.is_complete(run.config.output_dir, run.config.steps):
      print(f"{label}: finished before, skipped", flush=True)
      continue
    start = time.time()
    records = training_loop.train(run.config,
                                  data=data(run) if callable(data) else data,
                                  progress=progress)
    # Frees the finished run's model and functions.
    tf.keras.backend.clear_session()
    print(
        f"{label}: {time.time() - start:.1f} s, final train loss "
        f"{records[-1]['train_loss']:.4f}, test accuracy "
        f"{records[-1]['test_accuracy']:.4f}",
        flush=True)


def _stack(runs_by_trial, metric):
  """[trials, E] values of `metric`; NaN where a record lacks it (the
  bounds are not logged at step 0)."""
  return np.array(
      [[r.get(metric, np.nan) for r in records] for records in runs_by_trial])


def collect(runs, settings):
  """Reads the runs' metrics: (curves, sweep) as plots.figure1 takes them.

  curves[algorithm] holds "step" [E] and, per metric, [trials, E]; sweep
  holds, per amplitude (0 for the uniform counterpart), [trials] values.
  """
  by_key = {}
  for run in runs:
    by_key.setdefault((run.algorithm, run.amplitude),
                      []).append(run_files.read_metrics(run.config.output_dir))

  def curve(algorithm, amplitude):
    records = by_key[(algorithm, amplitude)]
    result = {"step": np.array([r["step"] for r in records[0]])}
    for metric in CURVE_METRICS + CERTIFICATE_METRICS:
      if metric in records[0][-1]:
        result[metric] = _stack(records, metric)
    return result

  curves = {
      algorithm:
          curve(algorithm,
                0.0 if algorithm.startswith("Unif") else settings.amplitude)
      for algorithm in ALGORITHMS
  }
  amplitudes = [0.0, *settings.sweep_amplitudes]
  sweep_curves = [
      curve(
          settings.sweep_algorithm
          if a else counterpart(settings.sweep_algorithm), a)
      for a in amplitudes
  ]
  half = settings.steps / 2
  sweep = {
      "algorithm": settings.sweep_algorithm,
      "amplitude": amplitudes,
      "train_accuracy": [
          mean_over(c["step"], c["train_accuracy"], half) for c in sweep_curves
      ],
      "test_accuracy": [c["test_accuracy"][:, -1] for c in sweep_curves],
      "train_accuracy_final": [
          c["train_accuracy"][:, -1] for c in sweep_curves
      ],
      "train_loss": [
          mean_over(c["step"], c["train_loss"], half) for c in sweep_curves
      ],
      "kl_max": [c["kl"].max(axis=1) for c in sweep_curves],
  }
  return curves, sweep


def mean_over(steps, values, until=None, since=0):
  """Time average of `values` ([..., E] at `steps`) over [since, until] (to
  the last step if None), by the trapezoid rule: the area under the curve
  divided by its length."""
  steps = np.asarray(steps, dtype=float)
  until = steps[-1] if until is None else until
  keep = (steps >= since) & (steps <= until)
  return (np.trapezoid(np.asarray(values)[..., keep], steps[keep], axis=-1) /
          (steps[keep][-1] - steps[keep][0]))
