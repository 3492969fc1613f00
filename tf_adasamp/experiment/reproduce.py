"""Reproduces the experiment of London (NIPS 2017), section "Experiments".

Runs the paper's six algorithms, AdaSamp-{01,L1}-{SGD,AdaGrad} and
Unif-{SGD,AdaGrad}, for --trials trials, plus a sweep of the amplitude of one
of them; draws the five panels of Figure 1 and writes summary.md, a table of
final and area-under-curve metrics with their spread over trials and a verdict
on each of the paper's four claims. Offline, on scikit-learn's digits:

  python -m tf_adasamp.reproduce --dataset=digits --trials=5 \\
      --output_dir=runs/digits --report_dir=docs/experiment

and with `--dataset=cifar10` on a machine with CIFAR-10 (or a network).

Trial k runs every algorithm with seed k: the same initial model (and
dropout masks), and the same random numbers behind the draws, so the first
batch is shared too. Runs are resumable: a finished run is skipped and an
interrupted one continues from its last checkpoint.
"""

import dataclasses
import os
import sys
import time

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from tf_adasamp import cli
from tf_adasamp import datasets
from tf_adasamp import models
from tf_adasamp import plots
from tf_adasamp import training
from tf_adasamp.sum_tree import check_positive_int

# name: (sampling, utility, optimizer). The utility of a uniform algorithm is
# never used.
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
  """Hyperparameters of the experiment (per data set: PRESETS)."""
  steps: int
  eval_interval: int
  sgd_learning_rate: float
  sgd_lr_decay: float
  adagrad_learning_rate: float
  amplitude: float
  decay: float
  sweep_amplitudes: tuple
  sweep_algorithm: str = "AdaSamp-01-SGD"
  batch_size: int = 100
  utility_at: str = "updated"


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
  config: training.TrainConfig


def plan(settings, trials, output_dir, dataset, data_dir=None, model="cnn"):
  """Every run of the experiment, the sweep's included, each listed once."""
  check_positive_int(trials, "trials")
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
      runs[run_dir] = Run(algorithm, amplitude, trial, training.TrainConfig(
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

  Raises training.RunExistsError where a run's directory holds a run of
  other settings.
  """
  for number, run in enumerate(runs, 1):
    label = (f"[{number}/{len(runs)}] {run.algorithm} amplitude "
             f"{run.amplitude:g} trial {run.trial}")
    training.check_output_dir(run.config)
    if training.is_complete(run.config.output_dir, run.config.steps):
      print(f"{label}: finished before, skipped", flush=True)
      continue
    start = time.time()
    records = training.train(run.config, data=data, progress=progress)
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
        training.read_metrics(run.config.output_dir))

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


def _spearman(x, y):
  """Spearman's rank correlation of two 1-D sequences without ties."""
  x_ranks, y_ranks = (np.argsort(np.argsort(v)) for v in (x, y))
  return float(np.corrcoef(x_ranks, y_ranks)[0, 1])


def _against_uniform(names, values, lower_is_better):
  """Compares each algorithm's per-trial `values` with its uniform
  counterpart's; returns (all better on average, evidence lines)."""
  sign, word = (1, "lower") if lower_is_better else (-1, "higher")
  supported, evidence = True, []
  for name in names:
    ours, theirs = values[name], values[counterpart(name)]
    supported &= bool(sign * ours.mean() < sign * theirs.mean())
    evidence.append(f"{name} {ours.mean():.4f} vs {counterpart(name)} "
                    f"{theirs.mean():.4f} ({word} in "
                    f"{(sign * ours < sign * theirs).sum()}/{len(ours)} "
                    "trials)")
  return supported, evidence


def assess_claims(curves, sweep, steps):
  """Says, for each of the paper's four claims, whether these runs support it.

  Returns a list of (claim, supported, evidence) triples; supported is None
  where the runs cannot tell (a sweep of fewer than 3 amplitudes).
  """
  half = steps / 2
  adaptive = [name for name in curves if not name.startswith("Unif")]
  claims = []

  train_loss = {name: mean_over(c["step"], c["train_loss"], half)
                for name, c in curves.items()}
  claims.append(("Adaptive sampling reduces empirical risk faster: every "
                 "AdaSamp variant's training cross-entropy, averaged over the "
                 "first half of training, is below its uniform "
                 "counterpart's.",
                 *_against_uniform(adaptive, train_loss,
                                   lower_is_better=True)))

  test_accuracy = {name: mean_over(c["step"], c["test_accuracy"], half)
                   for name, c in curves.items()}
  claims.append(("AdaGrad with adaptive sampling gains test accuracy early: "
                 "each AdaSamp-*-AdaGrad's test accuracy, averaged over the "
                 "first half of training, is above Unif-AdaGrad's.",
                 *_against_uniform(
                     [name for name in adaptive if name.endswith("AdaGrad")],
                     test_accuracy, lower_is_better=False)))

  train_speed = [np.mean(v) for v in sweep["train_accuracy"]]
  test_final = [np.mean(v) for v in sweep["test_accuracy"]]
  rho_train = _spearman(sweep["amplitude"], train_speed)
  rho_test = _spearman(sweep["amplitude"], test_final)
  supported = None
  if len(sweep["amplitude"]) >= 3:
    supported = rho_train > 0 and rho_test < 0
  claims.append((
      "A larger amplitude trains faster but tests worse: over the sweep of "
      f"{sweep['algorithm']}, first-half train accuracy rises with the "
      "amplitude and final test accuracy falls (Spearman rank correlation "
      "> 0 and < 0).", supported,
      [f"amplitudes {sweep['amplitude']}: train accuracy (1st half) "
       f"{np.round(train_speed, 4).tolist()}, rho {rho_train:+.2f}; final "
       f"test accuracy {np.round(test_final, 4).tolist()}, rho "
       f"{rho_test:+.2f}"]))

  evidence, supported = [], True
  for name in adaptive:
    kl = curves[name]["kl"].mean(axis=0)
    peak = int(np.argmax(kl))
    rises_early = curves[name]["step"][peak] <= half
    decays = kl[-1] < 0.2 * kl[peak]
    supported &= bool(rises_early and decays)
    evidence.append(f"{name}: peak {kl[peak]:.3f} at step "
                    f"{curves[name]['step'][peak]}, final {kl[-1]:.4f}")
  claims.append(("The conditional KL(Q_t || P_t) rises early, then decays "
                 "toward 0: for every AdaSamp variant the mean KL peaks in "
                 "the first half of training and ends below 20% of its "
                 "peak.", supported, evidence))
  return claims


def _mean_std(values, digits=4):
  values = np.asarray(values)
  return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def summary_markdown(curves, sweep, settings, trials, dataset, model,
                     command):
  """The experiment's summary as markdown: settings, tables, claims."""
  steps = settings.steps
  half = steps / 2
  lines = [
      f"# Adaptive vs uniform sampling on {dataset} ({model}), "
      f"{trials} trials",
      "",
      f"Produced by `{command}`.",
      "",
      f"Settings: {steps} steps of batch {settings.batch_size}, evaluation "
      f"every {settings.eval_interval} steps; SGD step size "
      f"{settings.sgd_learning_rate:g} / (1 + {settings.sgd_lr_decay:g} t), "
      f"AdaGrad step size {settings.adagrad_learning_rate:g}; amplitude "
      f"{settings.amplitude:g}, decay {settings.decay:g}, utility at "
      f"'{settings.utility_at}'. Trial k runs every algorithm with seed k "
      "(same initial model).",
      "",
      f"## Algorithms (mean ± std over {trials} trials)",
      "",
      "'1st half', '2nd half' and 'AUC' are time averages (area under the "
      f"curve divided by its length) over steps [0, {half:g}], "
      f"[{half:g}, {steps}] and [0, {steps}].",
      "",
      "| algorithm | final train loss | final train acc | final test acc | "
      "train loss, 1st half | train loss, 2nd half | train loss, AUC | "
      "test acc, 1st half | test acc, AUC |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, c in curves.items():
    cells = [c["train_loss"][:, -1], c["train_accuracy"][:, -1],
             c["test_accuracy"][:, -1],
             mean_over(c["step"], c["train_loss"], half),
             mean_over(c["step"], c["train_loss"], since=half),
             mean_over(c["step"], c["train_loss"]),
             mean_over(c["step"], c["test_accuracy"], half),
             mean_over(c["step"], c["test_accuracy"])]
    lines.append(f"| {name} | " + " | ".join(_mean_std(v) for v in cells) +
                 " |")
  lines += [
      "",
      f"## Amplitude sweep ({sweep['algorithm']}; 0 is "
      f"{counterpart(sweep['algorithm'])})",
      "",
      "| amplitude | train acc, 1st half | train loss, 1st half | "
      "final test acc | max KL |",
      "|---|---|---|---|---|",
  ]
  for i, amplitude in enumerate(sweep["amplitude"]):
    lines.append(f"| {amplitude:g} | {_mean_std(sweep['train_accuracy'][i])}"
                 f" | {_mean_std(sweep['train_loss'][i])} | "
                 f"{_mean_std(sweep['test_accuracy'][i])} | "
                 f"{_mean_std(sweep['kl_max'][i], 3)} |")
  lines += ["", "## The paper's claims", ""]
  for number, (claim, supported, evidence) in enumerate(
      assess_claims(curves, sweep, steps), 1):
    verdict = {True: "supported", False: "NOT supported",
               None: "not assessed"}[supported]
    lines.append(f"{number}. {claim} **{verdict}.**")
    lines += [f"   - {line}" for line in evidence]
  return "\n".join(lines) + "\n"


def report(runs, settings, trials, dataset, model, report_dir, command):
  """Draws Figure 1 and writes summary.md to `report_dir`; returns paths."""
  curves, sweep = collect(runs, settings)
  title = f"{dataset}, {model}, mean ± std over {trials} trials"
  paths = plots.figure1(curves, sweep, report_dir, title=title)
  paths.append(os.path.join(report_dir, "summary.md"))
  with open(paths[-1], "w") as f:
    f.write(summary_markdown(curves, sweep, settings, trials, dataset, model,
                             command))
  return paths


FLAGS = flags.FLAGS
_SETTINGS_HELP = {
    "steps": "Training steps per run.",
    "eval_interval": "Steps between evaluations.",
    "sgd_learning_rate": "SGD's eta in eta / (1 + gamma t).",
    "sgd_lr_decay": "SGD's gamma in eta / (1 + gamma t).",
    "adagrad_learning_rate": "AdaGrad's step size.",
    "amplitude": "Amplitude of the adaptive algorithms.",
    "decay": "Decay of the adaptive algorithms.",
    "sweep_amplitudes": "Comma-separated amplitudes of the sweep.",
    "sweep_algorithm": "Adaptive algorithm whose amplitude is swept.",
    "batch_size": "Examples per step.",
    "utility_at": "updated (h_t, Algorithm 1) or step (h_{t-1}, cheaper).",
}


def define_flags():
  """Defines the experiment's flags; unset ones take the data set's preset.

  Called by run(), not at import (see tf_adasamp.train.define_flags).
  """
  flags.DEFINE_enum("dataset", "digits", datasets.DATASETS,
                    "Data set; digits needs no network.")
  flags.DEFINE_string("data_dir", None,
                      "tensorflow_datasets directory holding a prepared "
                      "CIFAR-10.")
  flags.DEFINE_enum("model", "cnn", models.MODELS, "Model to train.")
  flags.DEFINE_integer("trials", 5, "Trials (seeds 0..trials-1).")
  flags.DEFINE_string("output_dir", None,
                      "Directory of the runs (default runs/<dataset>).")
  flags.DEFINE_string("report_dir", None,
                      "Directory for the figures and summary.md (default "
                      "<output_dir>/report).")
  for field in dataclasses.fields(Settings):
    define = {int: flags.DEFINE_integer, float: flags.DEFINE_float,
              str: flags.DEFINE_string}.get(field.type, flags.DEFINE_list)
    define(field.name, None,
           f"{_SETTINGS_HELP[field.name]} (default: the data set's preset).")
  flags.DEFINE_bool("progress", False, "Show a progress bar per run.")


def settings_from_flags():
  """The data set's preset, with each flag that was set overriding it."""
  overrides = {}
  for field in dataclasses.fields(Settings):
    value = FLAGS[field.name].value
    if value is not None:
      if field.type is tuple:
        value = tuple(float(v) for v in value)
      overrides[field.name] = value
  return dataclasses.replace(PRESETS[FLAGS.dataset], **overrides)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"tf-adasamp-reproduce: unexpected arguments {argv[1:]}")
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  output_dir = FLAGS.output_dir or os.path.join("runs", FLAGS.dataset)
  report_dir = FLAGS.report_dir or os.path.join(output_dir, "report")
  try:
    settings = settings_from_flags()
    runs = plan(settings, FLAGS.trials, output_dir, FLAGS.dataset,
                FLAGS.data_dir, FLAGS.model)
    data = datasets.load(FLAGS.dataset, FLAGS.data_dir)
  except (TypeError, ValueError, datasets.DatasetUnavailableError) as error:
    sys.exit(f"tf-adasamp-reproduce: {error}")
  try:
    run_all(runs, data, progress=FLAGS.progress)
  except training.RunExistsError as error:
    sys.exit(f"tf-adasamp-reproduce: {error}")
  command = " ".join(["python -m tf_adasamp.reproduce", *sys.argv[1:]])
  for path in report(runs, settings, FLAGS.trials, FLAGS.dataset,
                     FLAGS.model, report_dir, command):
    print(f"wrote {path}")


def run():
  """Console-script entry point (tf-adasamp-reproduce)."""
  cli.run(define_flags, main)


if __name__ == "__main__":
  run()
