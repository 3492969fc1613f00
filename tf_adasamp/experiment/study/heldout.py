"""Held-out measures: what a user trains for, each variant against one
baseline.

A variant's runs are paired, trial for trial, with ONE baseline's: random
reshuffling (Shuffle-SGD, what `tf.data`'s shuffle gives) for the SGD
variants, Unif-AdaGrad for the AdaGrad ones (no reshuffling AdaGrad runs).
Held-out means the test split, read at every evaluation; where the runs
also record a validation split carved from the training images, it picks
the stopping point (`stopped`), and a regime that keeps its test split for
the final report alone reads every other measure on it (`split`
"validation").

  anytime   held-out accuracy and loss against example passes and steps
            (summary.md) or training seconds (wall_time.md, each run
            trained alone), mean and band over trials
            (plots.heldout_figure)
  budget    held-out accuracy and loss at BUDGET_FRACTIONS of the
            baseline's budget (its final example passes), each run read at
            that many of its own passes
  ladder    steps, example passes and seconds to LADDER fractions of the
            baseline's best held-out accuracy in the same trial, and to its
            final held-out accuracy; on curves smoothed by a centred mean
            of SMOOTHING evaluations, so that one lucky evaluation does not
            count as reaching a target
  training  the same to the baseline's training loss at TRAIN_FRACTIONS of
            its steps (the last rung: its final training loss)
  stopped   test accuracy at the evaluation where the smoothed validation
            accuracy peaks (best so far, stopping chosen on validation)

Ratios are `targets.paired_ratio`s (geometric mean over trials, 95%
t-interval of the mean log ratio); differences are `verdicts.paired_test`s.
"""

import dataclasses
import math

import numpy as np

from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import verdicts

SMOOTHING = 3
LADDER = (0.9, 0.95, 0.98, 0.99, 0.995)
BUDGET_FRACTIONS = (0.1, 0.25, 0.5, 1.0)
TRAIN_FRACTIONS = (0.25, 0.5, 0.75, 1.0)


def baseline_of(algorithm, curves):
  """The one baseline `algorithm`'s runs are paired with: the reshuffling
  baseline of its update rule where one ran, else its with-replacement
  uniform counterpart."""
  rule = presets.RUNS[algorithm][2]
  for name, (_, _, other) in presets.BASELINES.items():
    if other == rule and name in curves and name != algorithm:
      return name
  return presets.counterpart(algorithm)


def smoothed(values, window=SMOOTHING):
  """The centred mean of `values` ([..., E]) over `window` (odd)
  evaluations, over fewer at the ends: where a trailing mean would put
  every crossing late, a centred one keeps it in place."""
  values = np.asarray(values, dtype=float)
  half = window // 2
  padded = np.concatenate(
      [np.zeros(values.shape[:-1] + (1,)),
       np.cumsum(values, axis=-1)], axis=-1)
  count = values.shape[-1]
  low = np.maximum(np.arange(count) - half, 0)
  high = np.minimum(np.arange(count) + half + 1, count)
  return (padded[..., high] - padded[..., low]) / (high - low)


def passes(curve):
  """[trials, E] example passes (forward + BACKWARD_COST x backward) at
  each evaluation, from the runs' clocks."""
  return (curve["examples_forwarded"] +
          targets.BACKWARD_COST * curve["examples_backpropagated"])


def _at(clock, values, when):
  """[trials] each trial's `values` at its `clock` reading `when` (per
  trial), linearly interpolated; NaN past the run's end."""
  return np.array([
      np.interp(w, c, v) if w <= c[-1] else math.nan
      for c, v, w in zip(clock, values, when)
  ])


@dataclasses.dataclass(frozen=True)
class Budget:
  """Held-out accuracy and loss, variant minus baseline, at a fraction of
  the baseline's budget."""
  fraction: float
  accuracy: verdicts.Test
  loss: verdicts.Test


def at_budget(curve, baseline, fractions=BUDGET_FRACTIONS, split="test"):
  """[Budget]: at each fraction f of the baseline's final example passes
  in each trial, each run's accuracy and loss on `split` ("test" or
  "validation") at f of that many of its own passes, variant minus
  baseline (trials where the variant's run reaches that many passes)."""
  budget = passes(baseline)[:, -1]
  result = []
  for fraction in fractions:
    tests = []
    for metric in (f"{split}_accuracy", f"{split}_loss"):
      ours = _at(passes(curve), curve[metric], fraction * budget)
      theirs = _at(passes(baseline), baseline[metric], fraction * budget)
      keep = np.isfinite(ours)
      tests.append(verdicts.paired_test((ours - theirs)[keep]))
    result.append(Budget(fraction, *tests))
  return result


@dataclasses.dataclass(frozen=True)
class Rung:
  """A variant's cost to one target against the baseline's.

  Attributes:
    label: the target ("95% of the best", "the final", ...).
    steps, passes, seconds: targets.Ratios of the costs.
  """
  label: str
  steps: targets.Ratio
  passes: targets.Ratio
  seconds: targets.Ratio


def _rung(label, curve, baseline, metric, goals, lower_is_better):
  """The Rung of reaching `goals` ([trials]) on the smoothed `metric`."""
  reach = [
      np.array([
          targets.first_reach(c["step"], values, goal, lower_is_better)
          for values, goal in zip(smoothed(c[metric]), goals)
      ])
      for c in (curve, baseline)
  ]

  def cost(clock):
    return [
        np.array([
            np.interp(step, c["step"], clocked)
            if math.isfinite(step) else math.inf
            for step, clocked in zip(steps, clock(c))
        ])
        for c, steps in zip((curve, baseline), reach)
    ]

  return Rung(label, targets.paired_ratio(*reach),
              targets.paired_ratio(*cost(passes)),
              targets.paired_ratio(*cost(lambda c: c["train_seconds"])))


def ladder(curve, baseline, fractions=LADDER, split="test"):
  """[Rung]: to each fraction of the baseline's best smoothed accuracy on
  `split` ("test" or "validation") in the same trial, then to its final
  smoothed accuracy there."""
  metric = f"{split}_accuracy"
  accuracy = smoothed(baseline[metric])
  rungs = [
      _rung(f"{100 * f:g}% of the best", curve, baseline, metric,
            f * accuracy.max(axis=1), False) for f in fractions
  ]
  return rungs + [
      _rung("the final", curve, baseline, metric, accuracy[:, -1], False)
  ]


def training_ladder(curve, baseline, fractions=TRAIN_FRACTIONS):
  """[Rung]: to the baseline's smoothed training loss at each fraction of
  its steps (1: its final training loss)."""
  loss = smoothed(baseline["train_loss"])
  steps = baseline["step"]
  return [
      _rung(f"at {100 * f:g}% of its steps", curve, baseline, "train_loss",
            np.array([np.interp(f * steps[-1], steps, row)
                      for row in loss]), True)
      for f in fractions
  ]


def stopped(curve, baseline):
  """The t-test of the test accuracy at each run's stopping point (where
  its smoothed validation accuracy first peaks), variant minus baseline;
  None where the runs record no validation split."""
  if "validation_accuracy" not in curve:
    return None

  def at_stop(c):
    stop = np.argmax(smoothed(c["validation_accuracy"]), axis=1)
    return c["test_accuracy"][np.arange(len(stop)), stop]

  return verdicts.paired_test(at_stop(curve) - at_stop(baseline))


# The goal to measure against (issue 50), not to tune to: the setting
# chosen on validation reaches the baseline's final held-out accuracy in at
# most GOAL of its wall time (judged in seconds by wall_time.md, each run
# trained alone; summary.md, whose numbers repeat, states it in example
# passes), with a final test accuracy not lower (its interval reaching 0 or
# above).
GOAL = 0.77


def variants(curves, sweep, settings):
  """[(name, curves, algorithm)]: the sweep's algorithm at each amplitude
  (under both utility options where it ran both), the other adaptive
  algorithms at the preset's amplitude, the with-replacement uniform
  baselines against reshuffling, and the methods from the field."""
  result = targets.adaptive_variants(curves, sweep, settings)
  uniform = [
      name for name, (sampling, _, _) in presets.ALGORITHMS.items()
      if sampling == "uniform"
  ]
  result += [(name, curves[name], name)
             for name in (*uniform, *presets.COMPETITORS)
             if baseline_of(name, curves) != name]
  return result


@dataclasses.dataclass(frozen=True)
class Row:
  """A variant's held-out measures against its baseline."""
  name: str
  baseline: str
  collapsed: bool
  budget: list
  ladder: list
  training: list
  stopped: verdicts.Test | None
  final_accuracy: verdicts.Test
  final_loss: verdicts.Test


def rows(curves, compared, collapsed=lambda curve: False, split="test"):
  """[Row] of each (name, curves, algorithm) of `compared` against its
  baseline's curves in `curves`: the budget and the ladder on `split`
  ("test", or "validation" where the test split is for the final
  accuracy and loss alone)."""
  result = []
  for name, curve, algorithm in compared:
    baseline = baseline_of(algorithm, curves)
    theirs = curves[baseline]
    result.append(
        Row(name=name,
            baseline=baseline,
            collapsed=collapsed(curve),
            budget=at_budget(curve, theirs, split=split),
            ladder=ladder(curve, theirs, split=split),
            training=training_ladder(curve, theirs),
            stopped=stopped(curve, theirs),
            final_accuracy=verdicts.paired_test(curve["test_accuracy"][:, -1] -
                                                theirs["test_accuracy"][:, -1]),
            final_loss=verdicts.paired_test(curve["test_loss"][:, -1] -
                                            theirs["test_loss"][:, -1])))
  return result


def chosen_name(sweep, settings):
  """The row name of the setting the preset recommends (chosen on
  validation splits by `tuning`): the sweep's algorithm at the preset's
  amplitude and utility option."""
  return f"{sweep['algorithm']}, amplitude {settings.amplitude:g}"


# What each clock of a Rung is called in a sentence.
CLOCKS = {
    "passes": "example passes",
    "seconds": "training seconds",
    "steps": "steps"
}


def shortfalls(row, clock="passes"):
  """Why `row` misses the GOAL in `clock` (a Rung's field), as phrases;
  none where it meets it: the baseline's final held-out accuracy reached
  in every trial, in at most GOAL of the baseline's cost (the geometric
  mean over the trials), and a final test accuracy whose interval reaches 0
  or above."""
  final = getattr(row.ladder[-1], clock)
  short = []
  if final.adaptive_never:
    short.append(f"it never reaches it in {final.adaptive_never} of "
                 f"{final.reached + final.adaptive_never} trials")
  elif not (final.reached and final.geometric_mean <= GOAL):
    short.append(f"it needs more than {GOAL:g}x the {CLOCKS[clock]}")
  if row.final_accuracy.high < 0:
    short.append("its final test accuracy is lower")
  return short


TUNED = "the setting chosen on validation splits before these runs"
UNTUNED = "the preset's setting (not tuned on validation splits)"


def answer_lines(row,
                 trials,
                 label="Held-out answer",
                 where=None,
                 clock="passes",
                 chosen_by=TUNED):
  """The summary's opening paragraph: the preset's setting's held-out
  answer against its baseline, in `clock` (a Rung's field), then its
  training-loss answer beside it; `where` says which trials (default:
  trials 0 to `trials` - 1), `chosen_by` how the setting was chosen (TUNED
  or UNTUNED)."""
  where = where or (f"trials 0-{trials - 1}, seeds the tuning never saw"
                    if chosen_by == TUNED else f"trials 0-{trials - 1}")
  noun = CLOCKS[clock]
  final = getattr(row.ladder[-1], clock)
  quarter = next(b for b in row.budget if b.fraction == 0.25)
  short = shortfalls(row, clock)
  return [
      f"**{label}** for {chosen_by}, {row.name} ({where}): to "
      f"{row.baseline}'s final "
      f"held-out accuracy it takes {text.ratio_text(final)} of "
      f"{row.baseline}'s {noun} ({text.ratio_text(row.ladder[-1].steps)} of "
      f"its steps); its final test accuracy minus {row.baseline}'s: "
      f"{text.interval_text(row.final_accuracy)}, and at a quarter of "
      f"{row.baseline}'s budget {text.interval_text(quarter.accuracy)}. The "
      f"goal, at most {GOAL:g}x the {noun} with a final test accuracy not "
      f"lower: **{'not met' if short else 'met'}**" +
      (f" ({' and '.join(short)})." if short else "."),
      "",
      f"**Training loss**, beside it: to {row.baseline}'s final training "
      f"loss, {text.ratio_text(getattr(row.training[-1], clock))} of its "
      f"{noun}; to its training loss half-way through, "
      f"{text.ratio_text(getattr(row.training[1], clock))}.",
      "",
  ]


def _table(title, columns, body):
  return [
      f"### {title}", "", "| run | baseline | " + " | ".join(columns) + " |",
      "|---|---|" + "---|" * len(columns), *body, ""
  ]


def lines(curves,
          sweep,
          settings,
          trials,
          collapsed=lambda curve: False,
          chosen_by=TUNED):
  """The summary's held-out section: the answer for the preset's setting
  (chosen as `chosen_by` says), then each variant's measures against its
  baseline."""
  table = rows(curves, variants(curves, sweep, settings), collapsed)
  by_name = {row.name: row for row in table}
  chosen = by_name.get(chosen_name(sweep, settings))
  result = [
      "## Held-out accuracy",
      "",
      "What a user trains for: accuracy and loss on the test split, which "
      "no run trains on or is tuned on. Each variant's runs are paired, "
      "trial for trial, with one baseline's: random reshuffling "
      "(Shuffle-SGD) for SGD, with-replacement Unif-AdaGrad for AdaGrad. "
      "Costs are in example passes, which count a backward pass as "
      f"{targets.BACKWARD_COST:g} forward ones and so charge Algorithm 1's "
      "second forward pass at h_t, and in steps: both repeat exactly from "
      "run to run, where seconds do not (wall_time.md gives seconds, each "
      "run trained alone). Ratios: geometric mean over trials [95% "
      "t-interval of the mean log ratio]; differences: variant minus "
      "baseline [95% t-interval]. Targets are read off curves smoothed by a "
      f"centred mean of {SMOOTHING} evaluations (fewer at the ends), so that "
      "one lucky evaluation does not reach a target.",
      "",
  ]
  if chosen is not None:
    result += answer_lines(chosen, trials, chosen_by=chosen_by)
  return result + tables(table)


def tables(table, noun="held-out"):
  """The tables of the measures of `table` ([Row]), each variant against
  its baseline: accuracy and loss at fractions of the budget, example
  passes and steps to each rung of the ladder, stopping on validation
  (where the runs record a validation split) and the training-loss
  ladder; `noun` names the split that the budget and the ladder read
  ("held-out" for the test split)."""
  result = []
  marked = [(row, row.name + (" (collapsed)" if row.collapsed else ""))
            for row in table]
  result += _table(
      f"{noun.capitalize()} accuracy at a fraction of the baseline's budget "
      "(its final example passes), variant minus baseline",
      [f"{100 * b.fraction:g}%" for b in table[0].budget], [
          f"| {name} | {row.baseline} | " +
          " | ".join(text.interval_text(b.accuracy)
                     for b in row.budget) + " |"
          for row, name in marked
      ])
  result += _table(
      f"{noun.capitalize()} loss at a fraction of the baseline's budget, "
      "variant minus baseline",
      [f"{100 * b.fraction:g}%" for b in table[0].budget], [
          f"| {name} | {row.baseline} | " +
          " | ".join(text.interval_text(b.loss)
                     for b in row.budget) + " |"
          for row, name in marked
      ])
  for clock, unit in (("passes", "example passes"), ("steps", "steps")):
    result += _table(
        f"{unit.capitalize()} to a {noun} accuracy target (a fraction of "
        "the baseline's best in the same trial, or its final), as a ratio "
        "to the baseline's", [rung.label for rung in table[0].ladder], [
            f"| {name} | {row.baseline} | " + " | ".join(
                text.ratio_text(getattr(rung, clock))
                for rung in row.ladder) + " |"
            for row, name in marked
        ])
  if table[0].stopped is not None:
    result += _table(
        "Stopping on validation: test accuracy where the validation "
        "accuracy peaks, variant minus baseline", ["difference"], [
            f"| {name} | {row.baseline} | {text.interval_text(row.stopped)} |"
            for row, name in marked
        ])
  result += _table(
      "Example passes to the baseline's training loss at a fraction of its "
      "steps, as a ratio to the baseline's",
      [rung.label for rung in table[0].training], [
          f"| {name} | {row.baseline} | " +
          " | ".join(text.ratio_text(rung.passes)
                     for rung in row.training) + " |"
          for row, name in marked
      ])
  return result


def figure_lines(curves, sweep, settings):
  """[(label, curves with "passes")] of the held-out figure: the chosen
  setting (and under the other utility option where the sweep ran it), its
  baseline, its with-replacement uniform counterpart and the methods from
  the field."""
  algorithm = sweep["algorithm"]
  amplitude = settings.amplitude
  chosen = dict(zip(sweep["amplitude"], sweep["curves"])).get(amplitude)
  result = []
  if chosen is not None:
    result.append((chosen_name(sweep, settings), chosen))
    other = dict(zip(sweep["amplitude"][1:], sweep.get("other_curves", [])))
    if amplitude in other:
      result.append((f"{chosen_name(sweep, settings)}, utility at "
                     f"'{sweep['other_utility_at']}'", other[amplitude]))
  baseline = baseline_of(algorithm, curves)
  result += [(name, curves[name]) for name in dict.fromkeys(
      [baseline, presets.counterpart(algorithm), *presets.COMPETITORS])]
  return [(label, {**c, "passes": passes(c)}) for label, c in result]


def pooled(*curves):
  """The trials of every one of `curves` (alike but for their trials) as
  one set of curves."""
  return {
      key: (curves[0][key] if key in ("step", "epoch") else np.concatenate(
          [c[key] for c in curves])) for key in curves[0]
  }


def replication_lines(curves, sweep, settings, replica_curves, replica):
  """The summary's replication section: the chosen setting's held-out
  answer on the `replica` data set's runs (`replica_curves`: {algorithm:
  curves} of the headline comparison, `design.curves_by_algorithm`), then
  over both data sets' trials together."""
  algorithm = sweep["algorithm"]
  name = chosen_name(sweep, settings)
  baseline = baseline_of(algorithm, curves)
  ours = dict(zip(sweep["amplitude"], sweep["curves"]))[settings.amplitude]
  trials = len(replica_curves[algorithm]["test_accuracy"])
  on_replica = rows(replica_curves,
                    [(name, replica_curves[algorithm], algorithm)])[0]
  both = rows({baseline: pooled(curves[baseline], replica_curves[baseline])},
              [(name, pooled(ours, replica_curves[algorithm]), algorithm)])[0]
  return [
      "## Replication on a second subset",
      "",
      f"The same comparison on {replica}: other training, test and "
      "validation images, none shared with these runs', the same settings "
      "and seeds; then both data sets' trials together, whose intervals "
      "cover the draw of the data as well as training's randomness.",
      "",
      *answer_lines(on_replica, trials, "On the second subset"),
      *answer_lines(both,
                    2 * trials,
                    "Both subsets",
                    where=f"{2 * trials} trials, {trials} on each subset"),
  ]
