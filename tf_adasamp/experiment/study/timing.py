"""Wall time to target, measured one run at a time.

The experiment trains its runs in a pool of workers side by side, so their
clocks share the machine. This pass trains the runs a user would choose
between one at a time, each with one TensorFlow thread, in the experiment's
own configurations: per trial, the swept algorithm's uniform counterpart,
the other uniform baselines and the methods from the field with its update
rule, then the swept algorithm at each timed amplitude under both utility
options. Uniform and adaptive runs alternate trial by trial, so a slow
spell of the machine falls on both. `markdown` gives each one's training
seconds (`train_seconds`, the runs' own clocks) to each target, paired per
trial as `targets` pairs steps.
"""

import dataclasses
import os
import platform

import numpy as np

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import plots
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text


def machine():
  """The CPU the runs train on, as /proc/cpuinfo names it, and its logical
  cores."""
  try:
    with open("/proc/cpuinfo") as f:
      names = [
          line.split(":", 1)[1].strip()
          for line in f
          if line.startswith("model name")
      ]
  except OSError:
    names = []
  cpu = names[0] if names else platform.processor() or "an unnamed CPU"
  return f"{cpu} ({os.cpu_count()} logical cores)"


def plan(settings, amplitudes, trials, output_dir, dataset, model):
  """The timed runs in the order they train: trial by trial, in the
  experiment's order (`design.plan`)."""
  settings = dataclasses.replace(settings,
                                 sweep_amplitudes=tuple(amplitudes),
                                 sweep_both_utilities=True)
  algorithm = settings.sweep_algorithm
  rule = presets.RUNS[algorithm][2]
  others = {presets.counterpart(algorithm)} | {
      name for name in (*presets.BASELINES, *presets.COMPETITORS)
      if presets.RUNS[name][2] == rule
  }
  runs = design.plan(settings, trials, output_dir, dataset, model=model)
  return [
      run for run in runs if run.algorithm in others or
      (run.algorithm == algorithm and run.amplitude in amplitudes)
  ]


def variants(runs, settings):
  """(curves of the runs that are not swept, [(name, curves, algorithm)]
  of every timed run), named as `targets.table` names them."""
  curves, timed = {}, []
  for key, group in design.by_setting(runs).items():
    algorithm, amplitude, utility_at = key
    curve = design.curves_of(group)
    if algorithm not in presets.ADAPTIVE:
      curves[algorithm] = curve
      name = algorithm
    else:
      name = f"{algorithm}, amplitude {amplitude:g}"
      if utility_at != settings.utility_at:
        name += f", utility at '{utility_at}'"
    order = (algorithm not in presets.ADAPTIVE, utility_at
             != settings.utility_at, amplitude)
    timed.append((order, (name, curve, algorithm)))
  uniform = presets.counterpart(settings.sweep_algorithm)
  return curves, [v for _, v in sorted(timed) if v[0] != uniform]


def _milliseconds_per_step(curve):
  """Median over trials of a run's training milliseconds per step."""
  return float(
      np.median(curve["train_seconds"][:, -1]) / curve["step"][-1] * 1000)


def _answer_lines(curves, timed, settings, trials):
  """The held-out answer of the setting chosen on validation
  (`heldout.answer_lines`), in these runs' seconds."""
  name = f"{settings.sweep_algorithm}, amplitude {settings.amplitude:g}"
  chosen = [entry for entry in timed if entry[0] == name]
  if not chosen:
    return [f"The setting chosen on validation, {name}, was not timed.", ""]
  return heldout.answer_lines(heldout.rows(curves, chosen)[0],
                              trials,
                              clock="seconds")


def markdown(runs, settings, title, command, machine, num_classes=10):
  """wall_time.md: each timed run's training seconds to each target."""
  return markdown_of(*variants(runs, settings), settings, title, command,
                     machine, num_classes)


def markdown_of(curves,
                timed,
                settings,
                title,
                command,
                machine,
                num_classes=10):
  """`markdown` of `variants`' curves."""
  tables = targets.entries(timed, curves, settings,
                           report.collapse_test(num_classes))
  uniform = presets.counterpart(settings.sweep_algorithm)
  per_step = {uniform: _milliseconds_per_step(curves[uniform])}
  per_step.update({name: _milliseconds_per_step(c) for name, c, _ in timed})
  trials = len(curves[uniform]["train_loss"])
  lines = [
      f"# Wall time to target: {title}", "", f"Produced by `{command}`.", "",
      f"Each run trained alone, with one TensorFlow thread, on {machine}; "
      f"{trials} trials, each training its runs one after another in the "
      "order of the table, so that uniform and adaptive runs alternate. "
      "Seconds are the runs' own clocks (`train_seconds`: the training "
      "calls alone, the sampler's work included, evaluations and "
      "checkpoints not), interpolated at the step where a run first "
      "reaches the target, as a ratio to the baseline's in the same trial: "
      "geometric mean [95% t-interval]. Measured, so a rerun on new runs "
      "differs; the runs are the experiment's own configurations, whose "
      "steps and example passes summary.md gives over 10 trials.", "",
      *_answer_lines(curves, timed, settings, trials),
      "## Training milliseconds per step", "",
      "Median over trials of each run's training seconds over its steps.", "",
      "| run | ms per step | vs Unif |", "|---|---|---|"
  ]
  for name, value in per_step.items():
    lines.append(f"| {name} | {value:.3f} | {value / per_step[uniform]:.2f}x |")
  lines.append("")
  for label, entries in tables:
    lines += [
        f"## To {label}", "",
        "| run | seconds, vs Unif | seconds, vs Shuffle | steps, vs Shuffle |",
        "|---|---|---|---|"
    ]
    for entry in entries:
      unif, *shuffle = entry.rows.values()
      name = entry.name + (" (collapsed)" if entry.collapsed else "")
      lines.append(
          f"| {name} | {text.ratio_text(unif.seconds)} | "
          f"{text.ratio_text(shuffle[0].seconds) if shuffle else '–'} | "
          f"{text.ratio_text(shuffle[0].steps) if shuffle else '–'} |")
    lines.append("")
  return "\n".join(lines).rstrip("\n") + "\n"


HELDOUT_FIGURE = "heldout_seconds.png"


def heldout_figure(runs, settings, out_dir, title):
  """Draws HELDOUT_FIGURE to `out_dir`: the held-out curves, against
  training seconds, of the setting chosen on validation, the uniform
  baselines and the methods from the field; returns its path."""
  curves, timed = variants(runs, settings)
  chosen = heldout.chosen_name({"algorithm": settings.sweep_algorithm},
                               settings)
  lines = [(name, curve) for name, curve, _ in timed if name == chosen]
  lines += [(name, curve) for name, curve in curves.items()]
  return plots.heldout_figure([(name, {
      **curve, "passes": heldout.passes(curve)
  }) for name, curve in lines],
                              out_dir,
                              title,
                              clocks=plots.SECONDS,
                              name=HELDOUT_FIGURE)
