"""The budget-limited regime's results: its runs trained, and the summary,
wall-time page and figures that report them.

`summary_markdown` answers, per mechanism of `budget.VARIANTS`, whether it
reaches Shuffle-SGD's final validation accuracy sooner (`heldout`, read on
the validation split) with a final test accuracy not lower, in example
passes and steps; `wall_time_markdown` the same in seconds, from the runs of
`budget.plan` trained one at a time. `run_study` and `run_wall_time` train
the runs and write the pages.
"""

import os

import numpy as np

from tf_adasamp.experiment.study import budget
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import run_files


def still_rising(curve, fraction=budget.RISING_FRACTION):
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
  return heldout.rows(curves, [(name, curves[name], budget.VARIANTS[name][0])
                               for name in curves
                               if name != budget.BASELINE],
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
  row = next(row for row in table if row.name == budget.REDUCIBLE)
  return [
      "The reducible-loss utility under "
      f"{100 * budget.NOISE:g}% flipped labels: its "
      f"final test accuracy minus {budget.BASELINE}'s, "
      f"{text.interval_text(row.final_accuracy)}: " +
      ("**no loss shown**." if keeps_accuracy(row) else "**lower**."), ""
  ]


def _answer_table(table, clock):
  """The answer's table of a noise level: each variant's cost in `clock`
  (and steps) to Shuffle-SGD's final validation accuracy, its final test
  accuracy, and the goal."""
  noun = heldout.CLOCKS[clock]
  columns = [f"{noun} to {budget.BASELINE}'s final validation accuracy, ratio"]
  if clock != "steps":
    columns.append("steps, ratio")
  lines = [
      f"| run | {' | '.join(columns)} | final test accuracy − "
      f"{budget.BASELINE}'s "
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
  spec = budget.SCALES[scale]
  epochs = settings.steps * settings.batch_size / num_train
  early = sorted({
      settings.eval_interval >> k
      for k in range(1, settings.early_evaluations + 1)
  } - {0})
  config = next(run.config
                for run in budget.plan(settings, 1, "", scale)
                if run.variant == budget.REDUCIBLE)
  forwarded, backpropagated = budget.irreducible_passes(config, num_train)
  up_front = forwarded + targets.BACKWARD_COST * backpropagated
  passes = settings.steps * settings.batch_size * (1 + targets.BACKWARD_COST)
  return [
      "## The regime",
      "",
      f"- Data: Fashion-MNIST, {num_train:,} training images and a fixed "
      f"validation split of {spec.validation_size:,} others (the trainer's "
      "--validation_size, the same images in every run), which the tuning, "
      "the irreducible model, the held-out targets and the stopping point "
      "read; the test images give the final test accuracy alone. Under "
      f"label noise, {100 * budget.NOISE:g}% of the training labels are "
      "flipped to "
      "another class (the same images in every run) before the split is "
      "held out, so the validation labels are as noisy; the test labels "
      "are clean.",
      "- Model: the 784-512-10 MLP (ReLU), "
      f"{settings.steps} steps of batch {settings.batch_size}: a budget of "
      f"{epochs:g} epochs, {passes:,.0f} example passes (a backward pass "
      f"counted as {targets.BACKWARD_COST:g} forward ones).",
      f"- Evaluation: every {settings.eval_interval} steps and at steps "
      f"{', '.join(map(str, early))}; training loss and accuracy on a fixed "
      f"{spec.train_eval_size:,} of the training images, validation and "
      "test accuracy on the whole splits.",
      "- Step sizes (eta, schedule over the run's T steps): "
      f"{budget.BASELINE} "
      f"{_schedule_text(settings, budget.BASELINE)}; Unif-SGD "
      f"{_schedule_text(settings, 'Unif-SGD')}; IS-SGD "
      f"{_schedule_text(settings, 'IS-SGD')}; Algorithm 1 and its "
      f"mechanisms {_schedule_text(settings, budget.ALGORITHM)}.",
      f"- Algorithm 1: {budget.ALGORITHM}, amplitude "
      f"{settings.amplitude:g}, decay "
      f"{settings.decay:g}, the utility from the step's own logits (utility "
      f"at '{settings.utility_at}'). Its mechanisms, each a run of its own: "
      "unbiased weights (each loss weighed by 1 / (n q_i), beta 1); a "
      f"uniform finish and a uniform start (amplitude 0 over the last or "
      f"first {budget.SCHEDULE_FRACTION:g} of the run); the reducible-loss "
      "utility (`tf_adasamp.utilities.ReducibleLoss`: the cross-entropy "
      "minus the example's irreducible loss, clipped to [0, log 10] and "
      "divided by log 10).",
      f"- The irreducible model: the same MLP (407,050 parameters), "
      f"{config.irreducible_epochs:g} epochs of Adam over the validation "
      "split, then its cross-entropy on each training image, from the "
      "trial's seed: "
      f"{up_front:,.0f} example passes ({up_front / passes:.0%} of the "
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
  for name in (budget.BASELINE, "Unif-SGD"):
    test = still_rising(curves[name])
    lines.append(
        f"{name} gains {text.interval_text(test)} validation accuracy over "
        f"the last {budget.RISING_FRACTION:.0%} of the budget: "
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
      f"t-interval]. Uniform sampling's is {budget.NOISE:g}.",
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
    collected: `budget.collect`'s curves.
    settings: the runs' (tuned) presets.Settings.
    scale: the key of budget.SCALES the runs ran at.
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
      f"# Budget-limited regime: Fashion-MNIST ({budget.MODEL}), "
      f"{epochs:g} epochs, "
      f"{trials} trials",
      "",
      f"Produced by `{command}`; seconds in [wall_time.md](wall_time.md), "
      "each run trained alone.",
      "",
      "**Does adaptive sampling reach random reshuffling's final held-out "
      "accuracy sooner, with a final test accuracy not lower?** Each run "
      f"against {budget.BASELINE}'s in the same trial: the example passes (and "
      f"steps) it takes to reach {budget.BASELINE}'s final validation accuracy "
      f"(both curves smoothed by a centred mean of {heldout.SMOOTHING} "
      "evaluations), as a ratio to "
      f"{budget.BASELINE}'s, geometric mean over trials [95% t-interval]; its "
      f"final test accuracy minus {budget.BASELINE}'s [95% t-interval]. "
      "The goal "
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
        f"Validation accuracy is the held-out measure; {budget.BASELINE} the "
        "baseline of every row.", ""
    ]
    lines += heldout.tables(table, noun="validation")
    lines += [f"![validation curves]({figure_name(noise)})", ""]
  return "\n".join(lines).rstrip("\n") + "\n"


def figure_name(noise):
  """The file of a noise level's held-out figure."""
  return f"heldout_{budget.level_name(noise)}.png"


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
                           f"{budget.REGIME}: {_heading(noise).lower()}",
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
    collected: `budget.collect`'s curves of the one-at-a-time runs.
    trials: their trials.
    command: the command that reproduces it.
    machine: the CPU, in words.

  Returns:
    The markdown.
  """
  lines = [
      f"# Wall time to target: {budget.REGIME}, one run at a time", "",
      f"Produced by `{command}`.", "",
      f"Each run trained alone, with one TensorFlow thread, on {machine}; "
      f"{trials} trials, each training its runs one after another in the "
      "order of the tables, uniform and adaptive alternating. Seconds are "
      "the runs' own clocks (`train_seconds`: the training calls alone, the "
      "sampler's work included, evaluations and checkpoints not) plus, for "
      "the reducible-loss utility, its irreducible model's "
      "(`irreducible_seconds`, spent before its first step), interpolated "
      "where a run's smoothed validation accuracy first reaches "
      f"{budget.BASELINE}'s "
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
  return plots.heldout_figure(
      [(name, {
          **curve, "passes": heldout.passes(curve)
      }) for name, curve in collected[0.0].items()],
      out_dir,
      f"{budget.REGIME}: clean labels, one run at a time",
      clocks=plots.SECONDS,
      name=SECONDS_FIGURE,
      split="validation")


def run_study(options, settings, trials, data, report_dir, command):
  """Trains the study's runs, `options.workers` at a time (`options` the
  command line's: scale, output_dir, workers); writes summary.md and the
  figures to `report_dir`."""
  spec = budget.SCALES[options.scale]
  runs = budget.plan(settings, trials, os.path.join(options.output_dir, "runs"),
                     options.scale)
  pool.run_all(runs, data, workers=options.workers, spawn=spec.spawn)
  num_train = data.num_train - spec.validation_size
  collected = budget.collect(runs, num_train)
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
  spec = budget.SCALES[options.scale]
  runs = budget.plan(settings, trials,
                     os.path.join(options.output_dir, "wall_time"),
                     options.scale)
  pool.run_all(runs, data, workers=1, spawn=spec.spawn)
  collected = budget.collect(runs, data.num_train - spec.validation_size)
  wall_time = os.path.join(report_dir, "wall_time.md")
  run_files.write_atomically(
      wall_time, wall_time_markdown(collected, trials, command,
                                    timing.machine()))
  print(f"wrote {wall_time}")
  print(f"wrote {seconds_figure(collected, report_dir)}")
