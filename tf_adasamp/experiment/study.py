"""The paper's experiment (London, NIPS 2017, section "Experiments"): its runs.

The six algorithms, AdaSamp-{01,L1}-{SGD,AdaGrad} and Unif-{SGD,AdaGrad},
for a number of trials, plus a sweep of the amplitude of one of them: `plan`
lists the runs, `run_all` trains them, and `collect` reads their metrics
back as the curves that `report` and `plots` take.

Trial k runs every algorithm with seed k: the same initial model (and
dropout masks), and the same random numbers behind the draws, so the first
batch is shared too. Runs are resumable: a finished run is skipped and an
interrupted one continues from its last checkpoint.
"""

import dataclasses
import os
import time

import numpy as np
import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp.experiment import training_loop
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


def counterpart(algorithm):
  """The uniform algorithm with the same update rule."""
  return "Unif-" + algorithm.rpartition("-")[2]


@dataclasses.dataclass(frozen=True)
class Settings:
  """Hyperparameters of the experiment (per data set: PRESETS); each field
  is also a flag of tf_adasamp.experiment.reproduce."""
  steps: int = option(dataclasses.MISSING, "Training steps per run.")
  eval_interval: int = option(dataclasses.MISSING,
                              "Steps between evaluations.")
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
  sweep_algorithm: str = option("AdaSamp-01-SGD", "Adaptive algorithm whose "
                                "amplitude is swept.")
  batch_size: int = option(100, "Examples per step.")
  utility_at: str = option("updated", "updated (h_t, Algorithm 1) or step "
                           "(h_{t-1}, cheaper).",
                           choices=training_loop.UTILITY_AT)


PRESETS = {
    # 500 steps, 33 epochs of the 1500 training digits: every algorithm
    # reaches ~100% training accuracy. See docs/experiment.md for how these
    # were chosen.
    "digits": Settings(
        steps=500, eval_interval=25, sgd_learning_rate=0.3,
        sgd_lr_decay=0.002, adagrad_learning_rate=0.1, amplitude=1.0,
        decay=0.5, sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
    # 40 epochs of CIFAR-10's 50000 training images; not tuned here (no
    # CIFAR-10 on the machine that wrote this). About 15 minutes a run on a
    # 2-core CPU, so 45 runs want a GPU or fewer --trials and --steps.
    "cifar10": Settings(
        steps=20000, eval_interval=500, sgd_learning_rate=0.05,
        sgd_lr_decay=1e-4, adagrad_learning_rate=0.01, amplitude=1.0,
        decay=0.5, sweep_amplitudes=(0.3, 1.0, 3.0, 10.0)),
}


@dataclasses.dataclass(frozen=True)
class Run:
  """One training run of the experiment: an algorithm at an amplitude (0
  for uniform sampling) in a trial."""
  algorithm: str
  amplitude: float
  trial: int
  config: training_loop.TrainConfig


def plan(settings, trials, output_dir, dataset, data_dir=None, model="cnn"):
  """Every run of the experiment, the sweep's included, each listed once."""
  _validation.positive_int(trials, "trials")
  if ALGORITHMS.get(settings.sweep_algorithm, ("",))[0] != "adaptive":
    raise ValueError("sweep_algorithm must be an adaptive algorithm, got "
                     f"{settings.sweep_algorithm!r}")
  runs = {}

  def add(algorithm, amplitude, trial):
    sampling, utility, optimizer = ALGORITHMS[algorithm]
    if sampling == "uniform":
      amplitude = 0.0
    name = algorithm if sampling == "uniform" else (
        f"{algorithm}-a{amplitude:g}")
    run_dir = os.path.join(output_dir, name, f"seed{trial}")
    if run_dir not in runs:
      learning_rate, lr_decay = (
          (settings.sgd_learning_rate, settings.sgd_lr_decay)
          if optimizer == "sgd" else (settings.adagrad_learning_rate, 0.0))
      runs[run_dir] = Run(algorithm, amplitude, trial, training_loop.TrainConfig(
          dataset=dataset, data_dir=data_dir, model=model,
          optimizer=optimizer, learning_rate=learning_rate,
          lr_decay=lr_decay, batch_size=settings.batch_size,
          sampling=sampling, utility=utility,
          utility_at=settings.utility_at,
          amplitude=amplitude, decay=settings.decay,
          steps=settings.steps, eval_interval=settings.eval_interval,
          seed=trial, output_dir=run_dir, resume=True))

  for trial in range(trials):
    for algorithm in ALGORITHMS:
      add(algorithm, settings.amplitude, trial)
    for amplitude in settings.sweep_amplitudes:
      add(settings.sweep_algorithm, amplitude, trial)
  return list(runs.values())


def run_all(runs, data, progress=False):
  """Trains every unfinished run; prints a line per run.

  Raises training_loop.RunExistsError where a run's directory holds a run of
  other settings.
  """
  for number, run in enumerate(runs, 1):
    label = (f"[{number}/{len(runs)}] {run.algorithm} amplitude "
             f"{run.amplitude:g} trial {run.trial}")
    training_loop.check_output_dir(run.config)
    if training_loop.is_complete(run.config.output_dir, run.config.steps):
      print(f"{label}: finished before, skipped", flush=True)
      continue
    start = time.time()
    records = training_loop.train(run.config, data=data, progress=progress)
    # Frees the finished run's model and functions.
    tf.keras.backend.clear_session()
    print(f"{label}: {time.time() - start:.1f} s, final train loss "
          f"{records[-1]['train_loss']:.4f}, test accuracy "
          f"{records[-1]['test_accuracy']:.4f}", flush=True)


def _stack(runs_by_trial, metric):
  return np.array([[r[metric] for r in records] for records in runs_by_trial])


def collect(runs, settings):
  """Reads the runs' metrics: (curves, sweep) as plots.figure1 takes them.

  curves[algorithm] holds "step" [E] and, per metric, [trials, E]; sweep
  holds, per amplitude (0 for the uniform counterpart), [trials] values.
  """
  by_key = {}
  for run in runs:
    by_key.setdefault((run.algorithm, run.amplitude), []).append(
        training_loop.read_metrics(run.config.output_dir))

  def curve(algorithm, amplitude):
    records = by_key[(algorithm, amplitude)]
    result = {"step": np.array([r["step"] for r in records[0]])}
    for metric in CURVE_METRICS:
      result[metric] = _stack(records, metric)
    return result

  curves = {algorithm: curve(algorithm, 0.0 if algorithm.startswith("Unif")
                             else settings.amplitude)
            for algorithm in ALGORITHMS}
  amplitudes = [0.0, *settings.sweep_amplitudes]
  sweep_curves = [
      curve(settings.sweep_algorithm if a else
            counterpart(settings.sweep_algorithm), a) for a in amplitudes]
  half = settings.steps / 2
  sweep = {
      "algorithm": settings.sweep_algorithm,
      "amplitude": amplitudes,
      "train_accuracy": [mean_over(c["step"], c["train_accuracy"], half)
                         for c in sweep_curves],
      "test_accuracy": [c["test_accuracy"][:, -1] for c in sweep_curves],
      "train_loss": [mean_over(c["step"], c["train_loss"], half)
                     for c in sweep_curves],
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
