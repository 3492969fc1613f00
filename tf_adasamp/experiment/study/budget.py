"""The budget-limited regime: all of Fashion-MNIST for a few epochs, the
field's mechanisms against baselines a skeptic accepts.

The 784-512-10 MLP trains for a fixed budget of steps on Fashion-MNIST's
training images less a fixed validation split (the trainer's
--validation_size: the same images in every run), which the tuning, the
reducible-loss utility's irreducible model, the held-out targets and the
stopping point read; the test images give the final test accuracy alone.
Each trial runs, from the same seed:

  baselines     Shuffle-SGD (random reshuffling) and Unif-SGD (with
                replacement), each with the step-size schedule that its
                tuning chose among 1 / (1 + gamma t), linear and cosine to 0
  IS-SGD        loss-proportional importance sampling (presets.COMPETITORS)
  Algorithm 1   AdaSamp-01-SGD at the tuned amplitude and decay, its utility
                from the step's own logits, alone and with each of the
                field's mechanisms: unbiased weights (beta 1), a uniform
                finish or a uniform start (the last or first
                SCHEDULE_FRACTION of the run uniform), and the reducible-loss
                utility (RHO-LOSS's, its irreducible model the same MLP)

and, with NOISE of the training labels flipped (the validation split's too:
the trainer holds it out after the flips), Shuffle-SGD, Algorithm 1, IS-SGD
and the reducible-loss utility. `plan` lists the runs; `summary_markdown`
answers, per mechanism, whether it reaches Shuffle-SGD's final validation
accuracy sooner (`heldout`, read on the validation split) with a final test
accuracy not lower, in example passes and steps; `wall_time_markdown` the
same in seconds, from the runs of `plan` trained one at a time.
"""

import dataclasses
import math
import os

import numpy as np

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

DATASET, MODEL = "fashion_mnist", "mlp"
REGIME = "fashion_mnist_budget"
BASELINE = "Shuffle-SGD"
ALGORITHM = "AdaSamp-01-SGD"
NOISE = 0.2
LEVELS = (0.0, NOISE)
SCHEDULE_FRACTION = 0.125
# Epochs of the irreducible model over the validation split: as many as the
# runs' budget over theirs. Its cost is charged to the method (`charged`),
# and ten epochs would cost most of the budget again.
IRREDUCIBLE_EPOCHS = 3.0
# The share of the budget over which the baseline's validation accuracy
# must still rise (`still_rising`).
RISING_FRACTION = 0.1
# Name -> (algorithm, TrainConfig fields): the runs of a trial, at the
# tuned amplitude and decay.
VARIANTS = {
    BASELINE: (BASELINE, {}),
    "Unif-SGD": ("Unif-SGD", {}),
    "IS-SGD": ("IS-SGD", {}),
    "Algorithm 1": (ALGORITHM, {}),
    "Algorithm 1, unbiased weights (beta 1)": (ALGORITHM, {
        "beta": 1.0
    }),
    "Algorithm 1, uniform finish (last 1/8)": (ALGORITHM, {
        "amplitude_schedule": "final_uniform",
        "schedule_fraction": SCHEDULE_FRACTION
    }),
    "Algorithm 1, uniform start (first 1/8)": (ALGORITHM, {
        "amplitude_schedule": "initial_uniform",
        "schedule_fraction": SCHEDULE_FRACTION
    }),
    "Algorithm 1, reducible-loss utility": (ALGORITHM, {
        "utility": "reducible_loss",
        "irreducible_epochs": IRREDUCIBLE_EPOCHS
    }),
}
REDUCIBLE = "Algorithm 1, reducible-loss utility"
# The runs under label noise.
NOISY = (BASELINE, "Algorithm 1", "IS-SGD", REDUCIBLE)


@dataclasses.dataclass(frozen=True)
class Scale:
  """How big the study is.

  Attributes:
    trials: reporting trials (seeds 0..trials-1).
    wall_time_trials: trials of the one-at-a-time pass (its first ones).
    train_size, test_size: Fashion-MNIST images drawn for a smoke test
      (`datasets.subset`); None: all 60,000 and 10,000.
    validation_size: training images held out as the validation split.
    train_eval_size: the fixed training subset the evaluations read.
    overrides: (Settings field, value) pairs replacing the preset's.
    tuning: (tuning.Options field, value) pairs: the tuning's rule.
    spawn: train the study's runs in worker processes, even one at a time
      (`pool.run_all`'s spawn): a process keeps ~170 MB of each run of all
      of Fashion-MNIST it trained.
  """
  trials: int
  wall_time_trials: int
  train_size: int | None
  test_size: int | None
  validation_size: int
  train_eval_size: int
  overrides: tuple = ()
  tuning: tuple = ()
  spawn: bool = True


# The tuning's rule: SGD's step size under each schedule that suits a fixed
# budget, ranked by the final validation accuracy, then the amplitude of
# Algorithm 1 (utility at 'step'), then its own step size; on two tuning
# seeds, never the reporting ones.
_TUNING = {
    "seeds": "100,101",
    "fixed_validation": True,
    "adaptive": ALGORITHM,
    "score": "final",
    "sgd_learning_rates": "0.1,0.3,1",
    "sgd_lr_decays": "0.001",
    "lr_schedules": "inverse_time,linear,cosine",
    "decays": "0.5",
    "utilities_at": "step",
    "adaptive_lr_factors": "0.5,2",
}
SCALES = {
    "full":
        Scale(trials=10,
              wall_time_trials=5,
              train_size=None,
              test_size=None,
              validation_size=10000,
              train_eval_size=10000,
              tuning=tuple(_TUNING.items())),
    # The same path at toy size, for tests: seconds, not minutes.
    "smoke":
        Scale(trials=1,
              wall_time_trials=1,
              train_size=600,
              test_size=100,
              validation_size=100,
              train_eval_size=100,
              spawn=False,
              overrides=(("steps", 6), ("eval_interval",
                                        2), ("early_evaluations", 1),
                         ("batch_size", 10), ("sweep_amplitudes", (1.0,))),
              tuning=tuple({
                  **_TUNING, "seeds": "100",
                  "sgd_learning_rates": "0.1",
                  "lr_schedules": "linear",
                  "adaptive_lr_factors": "2"
              }.items())),
}


def load_data(scale):
  """Fashion-MNIST, or the fixed subset of it that `scale` names."""
  spec = SCALES[scale]
  data = datasets.load(DATASET)
  if spec.train_size is None:
    return data
  return datasets.subset(data, DATASET, spec.train_size, spec.test_size,
                         datasets.SUBSET_SEED)


def settings_for(scale):
  """The preset of the regime at `scale` (before tuning)."""
  return dataclasses.replace(presets.preset(DATASET, MODEL),
                             **dict(SCALES[scale].overrides))


def tuning_fields(scale, settings):
  """The tuning.Options fields of the regime's tuning at `scale`: its
  rule, on the validation split the runs hold out, over the preset's
  sweep_amplitudes."""
  spec = SCALES[scale]
  return dict(spec.tuning,
              dataset=DATASET,
              model=MODEL,
              validation_size=spec.validation_size,
              train_eval_size=spec.train_eval_size,
              amplitudes=",".join(f"{a:g}" for a in settings.sweep_amplitudes))


@dataclasses.dataclass(frozen=True)
class Run(design.Run):
  """A run of the study: a variant at a noise level in a trial."""
  variant: str = ""
  noise: float = 0.0


def variants_at(noise):
  """The variants that run at label-noise level `noise`."""
  return tuple(VARIANTS) if noise == 0 else NOISY


def level_name(noise):
  """The folder of a noise level's runs."""
  return "clean" if noise == 0 else f"noise{noise:g}"


def plan(settings, trials, output_dir, scale="full"):
  """Every run of the study, trial by trial (the order in which the
  one-at-a-time pass trains them).

  Args:
    settings: the runs' presets.Settings (tuned).
    trials: trials per variant and noise level (seeds 0..trials-1).
    output_dir: the runs' directory.
    scale: a key of SCALES.

  Returns:
    [Run].
  """
  spec = SCALES[scale]
  runs = []
  for trial in range(trials):
    for noise in LEVELS:
      for name in variants_at(noise):
        algorithm, fields = VARIANTS[name]
        folder = name.replace(", ", "-").replace(" ", "_").replace("/", "of")
        config = design.run_config(settings,
                                   algorithm,
                                   settings.amplitude,
                                   trial,
                                   os.path.join(output_dir, level_name(noise),
                                                folder, f"seed{trial}"),
                                   dataset=DATASET,
                                   model=MODEL,
                                   validation_size=spec.validation_size,
                                   train_eval_size=spec.train_eval_size,
                                   label_noise=noise,
                                   **fields)
        runs.append(Run(algorithm, config.amplitude, trial, config, name,
                        noise))
  return runs


def irreducible_passes(config, num_train):
  """(forwarded, backpropagated) examples of a reducible-loss run's
  irreducible model: its irreducible_epochs over the validation split in
  batches (`irreducible.fit`), then one forward pass over the `num_train`
  training examples for their irreducible losses."""
  batch = min(config.batch_size, config.validation_size)
  trained = math.ceil(
      config.irreducible_epochs * config.validation_size / batch) * batch
  return trained + num_train, trained


def charged(curve, config, num_train):
  """`curve` of runs of `config` with the irreducible model's cost (where
  its utility is reducible_loss) charged before their first step: its
  example passes added to the clocks' examples, its irreducible_seconds
  to train_seconds. Other curves are returned as they are."""
  if config.utility != "reducible_loss":
    return curve
  forwarded, backpropagated = irreducible_passes(config, num_train)
  return {
      **curve,
      "examples_forwarded": curve["examples_forwarded"] + forwarded,
      "examples_backpropagated":
          (curve["examples_backpropagated"] + backpropagated),
      "train_seconds": curve["train_seconds"] + curve["irreducible_seconds"],
  }


def collect(runs, num_train):
  """The runs' curves, {noise: {variant: curves}}, as `design.curves_of`
  gives them, the reducible-loss runs' irreducible model `charged`;
  `num_train`: the training examples beside the validation split."""
  by_key = {}
  for run in runs:
    by_key.setdefault((run.noise, run.variant), []).append(run)
  metrics = design.CURVE_METRICS + ("flipped_mass", "irreducible_seconds")
  return {
      noise: {
          name:
              charged(design.curves_of(by_key[(noise, name)], metrics),
                      by_key[(noise, name)][0].config, num_train)
          for name in variants_at(noise)
      } for noise in LEVELS
  }


def still_rising(curve, fraction=RISING_FRACTION):
  """The t-test of the validation accuracy that the runs of `curve` gain
  over the last `fraction` of their steps: per trial, the accuracy at the
  end minus that at (1 - fraction) of the steps (interpolated between
  evaluations)."""
  steps = curve["step"]
  accuracy = curve["validation_accuracy"]
  before = np.array(
      [np.interp((1 - fraction) * steps[-1], steps, row) for row in accuracy])
  return verdicts.paired_test(accuracy[:, -1] - before)


def rising(test):
  """Whether `still_rising`'s test shows a gain: its interval above 0."""
  return test.why_not is None and test.low > 0


def rows(curves):
  """[heldout.Row] of every variant of a noise level's `curves` but the
  baseline, against Shuffle-SGD, the budget and the ladder on the
  validation split."""
  return heldout.rows(curves, [(name, curves[name], VARIANTS[name][0])
                               for name in curves
                               if name != BASELINE],
                      split="validation")


def verdict(row, clock):
  """"met" or "not met (why)": `row` against heldout.GOAL in `clock`."""
  short = heldout.shortfalls(row, clock)
  return "met" if not short else f"not met ({' and '.join(short)})"


def keeps_accuracy(row):
  """Whether `row` is not shown to lose accuracy to its baseline: its final
  test accuracy minus the baseline's has an interval reaching 0 or above,
  or none (the goal's second part, as heldout.shortfalls reads it)."""
  return not row.final_accuracy.high < 0


def _noise_answer(table):
  """The sentence on the reducible-loss utility under label noise."""
  row = next(row for row in table if row.name == REDUCIBLE)
  return [
      f"The reducible-loss utility under {100 * NOISE:g}% flipped labels: its "
      f"final test accuracy minus {BASELINE}'s, "
      f"{text.interval_text(row.final_accuracy)}: " +
      ("**no loss shown**." if keeps_accuracy(row) else "**lower**."), ""
  ]


def _answer_table(table, clock):
  """The answer's table of a noise level: each variant's cost in `clock`
  (and steps) to Shuffle-SGD's final validation accuracy, its final test
  accuracy, and the goal."""
  noun = heldout.CLOCKS[clock]
  columns = [f"{noun} to {BASELINE}'s final validation accuracy, ratio"]
  if clock != "steps":
    columns.append("steps, ratio")
  lines = [
      f"| run | {' | '.join(columns)} | final test accuracy − {BASELINE}'s "
      f"| goal, in {noun} |", "|---|" + "---|" * (len(columns) + 2)
  ]
  for row in table:
    final = row.ladder[-1]
    cells = [text.ratio_text(getattr(final, clock))]
    if clock != "steps":
      cells.append(text.ratio_text(final.steps))
    lines.append(f"| {row.name} | {' | '.join(cells)} | "
                 f"{text.interval_text(row.final_accuracy)} | "
                 f"{verdict(row, clock)} |")
  return lines + [""]


def _heading(noise):
  return ("Clean labels"
          if noise == 0 else f"{100 * noise:g}% of the training labels flipped")


def _schedule_text(settings, algorithm):
  eta, gamma = settings.learning_rate(algorithm)
  schedule = settings.lr_schedule(algorithm)
  return {
      "inverse_time": f"{eta:g} / (1 + {gamma:g} t)",
      "linear": f"{eta:g} (1 - t / T), linear to 0",
      "cosine": f"{eta:g} (1 + cos(pi t / T)) / 2, cosine to 0",
  }[schedule]


def _regime_lines(settings, scale, num_train, trials, tuning_seeds):
  spec = SCALES[scale]
  epochs = settings.steps * settings.batch_size / num_train
  early = sorted({
      settings.eval_interval >> k
      for k in range(1, settings.early_evaluations + 1)
  } - {0})
  config = next(run.config
                for run in plan(settings, 1, "", scale)
                if run.variant == REDUCIBLE)
  forwarded, backpropagated = irreducible_passes(config, num_train)
  up_front = forwarded + targets.BACKWARD_COST * backpropagated
  budget = settings.steps * settings.batch_size * (1 + targets.BACKWARD_COST)
  return [
      "## The regime",
      "",
      f"- Data: Fashion-MNIST, {num_train:,} training images and a fixed "
      f"validation split of {spec.validation_size:,} others (the trainer's "
      "--validation_size, the same images in every run), which the tuning, "
      "the irreducible model, the held-out targets and the stopping point "
      "read; the test images give the final test accuracy alone. Under "
      f"label noise, {100 * NOISE:g}% of the training labels are flipped to "
      "another class (the same images in every run) before the split is "
      "held out, so the validation labels are as noisy; the test labels "
      "are clean.",
      "- Model: the 784-512-10 MLP (ReLU), "
      f"{settings.steps} steps of batch {settings.batch_size}: a budget of "
      f"{epochs:g} epochs, {budget:,.0f} example passes (a backward pass "
      f"counted as {targets.BACKWARD_COST:g} forward ones).",
      f"- Evaluation: every {settings.eval_interval} steps and at steps "
      f"{', '.join(map(str, early))}; training loss and accuracy on a fixed "
      f"{spec.train_eval_size:,} of the training images, validation and "
      "test accuracy on the whole splits.",
      f"- Step sizes (eta, schedule over the run's T steps): {BASELINE} "
      f"{_schedule_text(settings, BASELINE)}; Unif-SGD "
      f"{_schedule_text(settings, 'Unif-SGD')}; IS-SGD "
      f"{_schedule_text(settings, 'IS-SGD')}; Algorithm 1 and its "
      f"mechanisms {_schedule_text(settings, ALGORITHM)}.",
      f"- Algorithm 1: {ALGORITHM}, amplitude {settings.amplitude:g}, decay "
      f"{settings.decay:g}, the utility from the step's own logits (utility "
      f"at '{settings.utility_at}'). Its mechanisms, each a run of its own: "
      "unbiased weights (each loss weighed by 1 / (n q_i), beta 1); a "
      f"uniform finish and a uniform start (amplitude 0 over the last or "
      f"first {SCHEDULE_FRACTION:g} of the run); the reducible-loss "
      "utility (`tf_adasamp.utilities.ReducibleLoss`: the cross-entropy "
      "minus the example's irreducible loss, clipped to [0, log 10] and "
      "divided by log 10).",
      f"- The irreducible model: the same MLP (407,050 parameters), "
      f"{config.irreducible_epochs:g} epochs of Adam over the validation "
      "split, then its cross-entropy on each training image, from the "
      "trial's seed: "
      f"{up_front:,.0f} example passes ({up_front / budget:.0%} of the "
      "budget), charged to that method before its first step, in example "
      "passes here and in seconds (irreducible_seconds) in wall_time.md.",
      "- Tuning: on the validation split alone, with tuning seeds "
      f"{', '.join(map(str, tuning_seeds))} (the reporting trials are seeds "
      f"0-{trials - 1}), by a rule fixed before the runs "
      "([tuning.md](tuning.md)): each uniform baseline's and IS-SGD's step "
      "size and schedule by its final validation accuracy, then the "
      "amplitude of Algorithm 1 by the one-standard-error rule "
      "(`tuning.chosen`), then its own step size; the mechanisms and the "
      "noisy runs take those settings.",
      "",
  ]


def _rising_lines(curves):
  lines = []
  for name in (BASELINE, "Unif-SGD"):
    test = still_rising(curves[name])
    lines.append(
        f"{name} gains {text.interval_text(test)} validation accuracy over "
        f"the last {RISING_FRACTION:.0%} of the budget: "
        f"{'still rising' if rising(test) else 'not shown to rise'}.")
  return [
      "**Is the budget the limit?** The regime is meant to stop uniform "
      "sampling while its validation accuracy still rises (ours, fixed "
      "before the runs: the gain's 95% interval above 0). " + " ".join(lines),
      "",
  ]


def _flipped_lines(curves):
  lines = [
      "Q_t's mass on the flipped training labels, averaged over the run "
      "(the share of the draws) and at its end; mean over trials [95% "
      f"t-interval]. Uniform sampling's is {NOISE:g}.",
      "",
      "| run | share of the draws | at the end |",
      "|---|---|---|",
  ]
  for name, curve in curves.items():
    share = design.mean_over(curve["step"], curve["flipped_mass"])
    end = curve["flipped_mass"][:, -1]
    lines.append(
        f"| {name} | {text.interval_text(verdicts.paired_test(share))} "
        f"| {text.interval_text(verdicts.paired_test(end))} |")
  return lines + [""]


def summary_markdown(collected, settings, scale, num_train, trials,
                     tuning_seeds, command):
  """The regime's summary.md: deterministic (example passes and steps, no
  seconds).

  Args:
    collected: `collect`'s curves.
    settings: the runs' (tuned) presets.Settings.
    scale: the key of SCALES the runs ran at.
    num_train: the training examples beside the validation split.
    trials: the reporting trials.
    tuning_seeds: the tuning's seeds.
    command: the command that reproduces it.

  Returns:
    The markdown.
  """
  clean = collected[0.0]
  epochs = settings.steps * settings.batch_size / num_train
  lines = [
      f"# Budget-limited regime: Fashion-MNIST ({MODEL}), {epochs:g} epochs, "
      f"{trials} trials",
      "",
      f"Produced by `{command}`; seconds in [wall_time.md](wall_time.md), "
      "each run trained alone.",
      "",
      "**Does adaptive sampling reach random reshuffling's final held-out "
      "accuracy sooner, with a final test accuracy not lower?** Each run "
      f"against {BASELINE}'s in the same trial: the example passes (and "
      f"steps) it takes to reach {BASELINE}'s final validation accuracy "
      f"(both curves smoothed by a centred mean of {heldout.SMOOTHING} "
      "evaluations), as a ratio to "
      f"{BASELINE}'s, geometric mean over trials [95% t-interval]; its "
      f"final test accuracy minus {BASELINE}'s [95% t-interval]. The goal "
      f"(ours, fixed before the runs): at most {heldout.GOAL:g}x with a "
      "final test accuracy not lower; wall_time.md judges it in seconds, "
      "this summary in example passes, which repeat exactly.",
      "",
  ]
  tables = {noise: rows(curves) for noise, curves in collected.items()}
  for noise, table in tables.items():
    lines += [f"### {_heading(noise)}", "", *_answer_table(table, "passes")]
    if noise:
      lines += _noise_answer(table) + _flipped_lines(collected[noise])
  lines += _rising_lines(clean)
  lines += _regime_lines(settings, scale, num_train, trials, tuning_seeds)
  for noise, table in tables.items():
    lines += [
        f"## {_heading(noise)}: every measure", "",
        f"Validation accuracy is the held-out measure; {BASELINE} the "
        "baseline of every row.", ""
    ]
    lines += heldout.tables(table, noun="validation")
    lines += [f"![validation curves]({figure_name(noise)})", ""]
  return "\n".join(lines).rstrip("\n") + "\n"


def figure_name(noise):
  """The file of a noise level's held-out figure."""
  return f"heldout_{level_name(noise)}.png"


def figures(collected, out_dir):
  """Draws each noise level's validation curves against example passes
  and steps (`figure_name`) to `out_dir`; returns their paths."""
  from tf_adasamp.experiment.study import plots
  return [
      plots.heldout_figure([(name, {
          **curve, "passes": heldout.passes(curve)
      })
                            for name, curve in curves.items()],
                           out_dir,
                           f"{REGIME}: {_heading(noise).lower()}",
                           name=figure_name(noise),
                           split="validation")
      for noise, curves in collected.items()
  ]


def _milliseconds_per_step(curve):
  """Median over trials of the training milliseconds per step, the
  irreducible model left out."""
  seconds = curve["train_seconds"][:, -1]
  if "irreducible_seconds" in curve:
    seconds = seconds - curve["irreducible_seconds"][:, -1]
  return float(np.median(seconds) / curve["step"][-1] * 1000)


def wall_time_markdown(collected, trials, command, machine):
  """wall_time.md: each run's training seconds to Shuffle-SGD's final
  validation accuracy, from runs trained one at a time; the goal judged
  in seconds.

  Args:
    collected: `collect`'s curves of the one-at-a-time runs.
    trials: their trials.
    command: the command that reproduces it.
    machine: the CPU, in words.

  Returns:
    The markdown.
  """
  lines = [
      f"# Wall time to target: {REGIME}, one run at a time", "",
      f"Produced by `{command}`.", "",
      f"Each run trained alone, with one TensorFlow thread, on {machine}; "
      f"{trials} trials, each training its runs one after another in the "
      "order of the tables, uniform and adaptive alternating. Seconds are "
      "the runs' own clocks (`train_seconds`: the training calls alone, the "
      "sampler's work included, evaluations and checkpoints not) plus, for "
      "the reducible-loss utility, its irreducible model's "
      "(`irreducible_seconds`, spent before its first step), interpolated "
      f"where a run's smoothed validation accuracy first reaches {BASELINE}'s "
      "final, as a ratio to its in the same trial: geometric mean [95% "
      "t-interval]. Measured, so a rerun differs; the runs are the study's "
      "own configurations (summary.md gives their example passes and "
      f"steps over all its trials). The goal: at most {heldout.GOAL:g}x the "
      "seconds with a final test accuracy not lower.", ""
  ]
  for noise, curves in collected.items():
    table = rows(curves)
    lines += [f"## {_heading(noise)}", "", *_answer_table(table, "seconds")]
    lines += [
        "| run | training ms per step | irreducible model, seconds |",
        "|---|---|---|"
    ]
    for name, curve in curves.items():
      up_front = (f"{np.median(curve['irreducible_seconds'][:, -1]):.1f}"
                  if "irreducible_seconds" in curve else "–")
      lines.append(f"| {name} | {_milliseconds_per_step(curve):.3f} | "
                   f"{up_front} |")
    lines.append("")
  return "\n".join(lines).rstrip("\n") + "\n"


SECONDS_FIGURE = "heldout_seconds.png"


def seconds_figure(collected, out_dir):
  """Draws the clean runs' validation curves against training seconds
  (SECONDS_FIGURE) to `out_dir`; returns its path."""
  from tf_adasamp.experiment.study import plots
  return plots.heldout_figure([(name, {
      **curve, "passes": heldout.passes(curve)
  }) for name, curve in collected[0.0].items()],
                              out_dir,
                              f"{REGIME}: clean labels, one run at a time",
                              clocks=plots.SECONDS,
                              name=SECONDS_FIGURE,
                              split="validation")


def run_study(options, settings, trials, data, report_dir, command):
  """Trains the study's runs, `options.workers` at a time (`options` the
  command line's: scale, output_dir, workers); writes summary.md and the
  figures to `report_dir`."""
  spec = SCALES[options.scale]
  runs = plan(settings, trials, os.path.join(options.output_dir, "runs"),
              options.scale)
  pool.run_all(runs, data, workers=options.workers, spawn=spec.spawn)
  num_train = data.num_train - spec.validation_size
  collected = collect(runs, num_train)
  seeds = [
      int(seed) for seed in tuning_options.floats(dict(spec.tuning)["seeds"])
  ]
  summary = os.path.join(report_dir, "summary.md")
  run_files.write_atomically(
      summary,
      summary_markdown(collected, settings, options.scale, num_train, trials,
                       seeds, command))
  print(f"wrote {summary}")
  for path in figures(collected, report_dir):
    print(f"wrote {path}")


def run_wall_time(options, settings, trials, data, report_dir, command):
  """Trains the first `trials` trials' runs again, one at a time; writes
  wall_time.md and its figure."""
  from tf_adasamp.experiment.study import timing  # loads matplotlib
  spec = SCALES[options.scale]
  runs = plan(settings, trials, os.path.join(options.output_dir, "wall_time"),
              options.scale)
  pool.run_all(runs, data, workers=1, spawn=spec.spawn)
  collected = collect(runs, data.num_train - spec.validation_size)
  wall_time = os.path.join(report_dir, "wall_time.md")
  run_files.write_atomically(
      wall_time, wall_time_markdown(collected, trials, command,
                                    timing.machine()))
  print(f"wrote {wall_time}")
  print(f"wrote {seconds_figure(collected, report_dir)}")
