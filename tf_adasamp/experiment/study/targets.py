"""Time to target: how soon a run first reaches a stated target, paired
against a baseline run of the same trial.

The field's measure of a training method (DAWNBench; Selective-Backprop and
InfoBatch report it): the cost to reach a target, here in steps and in
example passes (forward plus backward, the sampler's extra forward pass at
h_t included), each as a ratio to the baseline's. Per trial k the ratio is
cost(adaptive, k) / cost(baseline, k); over trials, its geometric mean with
the 95% t-interval of the mean log ratio (`verdicts.paired_test` on the
logs), from the trials where both runs reach the target. A run that never
reaches it is counted, not imputed.

A run reaches a target at the first evaluation that meets it, interpolated
linearly from the evaluation before (metrics are logged every
eval_interval steps, so a crossing between two is placed, not rounded up).
"""

import dataclasses
import math

import numpy as np

from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import verdicts

# A backward pass costs about two forward passes (it multiplies by the
# weights and by the activations), the field's usual reckoning.
BACKWARD_COST = 2.0


def first_reach(times, values, target, lower_is_better):
  """The first time at which `values` reach `target`, or inf if never.

  Args:
    times: [E] increasing times (steps) of the evaluations.
    values: [E] the metric at those times.
    target: the value to reach.
    lower_is_better: True for a loss (reach: at or below the target), False
      for an accuracy (at or above).

  Returns:
    The time, interpolated linearly between the evaluation before the first
    one that reaches the target and that one; times[0] if the first does;
    math.inf if none does.
  """
  times = np.asarray(times, dtype=float)
  values = np.asarray(values, dtype=float)
  sign = -1.0 if lower_is_better else 1.0
  margin = sign * (values - target)  # >= 0 where the target is reached.
  reached = np.flatnonzero(margin >= 0)
  if not len(reached):
    return math.inf
  i = reached[0]
  if i == 0:
    return float(times[0])
  before, after = margin[i - 1], margin[i]
  fraction = -before / (after - before)
  return float(times[i - 1] + fraction * (times[i] - times[i - 1]))


def value_at(times, values, time):
  """`values` interpolated linearly at `time` (in [times[0], times[-1]])."""
  return float(np.interp(time, times, values))


@dataclasses.dataclass(frozen=True)
class Ratio:
  """The paired ratio of two runs' costs to a target, over trials.

  Attributes:
    test: the t-test of the per-trial log ratios (a `verdicts.Test`).
    reached: trials where both runs reach the target (the test's trials).
    adaptive_never: trials where only the baseline reaches it.
    baseline_never: trials where the baseline does not reach it.
  """
  test: verdicts.Test
  reached: int
  adaptive_never: int
  baseline_never: int

  @property
  def geometric_mean(self):
    return math.exp(self.test.mean)

  @property
  def interval(self):
    return math.exp(self.test.low), math.exp(self.test.high)


def paired_ratio(costs, baseline_costs):
  """The geometric-mean ratio of `costs` to `baseline_costs`, per trial.

  Args:
    costs: [trials] costs to the target (inf: never reached).
    baseline_costs: [trials] the baseline's, trial for trial.

  Returns:
    A Ratio.
  """
  costs = np.asarray(costs, dtype=float)
  baseline_costs = np.asarray(baseline_costs, dtype=float)
  both = np.isfinite(costs) & np.isfinite(baseline_costs)
  return Ratio(test=verdicts.paired_test(
      np.log(costs[both] / baseline_costs[both])),
               reached=int(both.sum()),
               adaptive_never=int(
                   (~np.isfinite(costs) & np.isfinite(baseline_costs)).sum()),
               baseline_never=int((~np.isfinite(baseline_costs)).sum()))


@dataclasses.dataclass(frozen=True)
class Target:
  """A target a run reaches.

  Attributes:
    label: what it is, for the report.
    metric: the curve's metric ("train_loss", "train_accuracy", ...).
    lower_is_better: True for a loss.
    values: [trials] the target per trial (the same value where fixed).
  """
  label: str
  metric: str
  lower_is_better: bool
  values: np.ndarray


def final_train_loss(baseline):
  """The Target of `baseline`'s own final training loss in each trial."""
  return Target("the baseline's final train loss", "train_loss", True,
                baseline["train_loss"][:, -1])


def targets(baseline, train_accuracy, test_accuracy):
  """The three targets of a comparison with `baseline`'s curves.

  Args:
    baseline: the baseline's curves (`design.collect`'s, [trials, E]).
    train_accuracy: the fixed training-accuracy target.
    test_accuracy: the fixed held-out accuracy target.

  Returns:
    [Target]: the baseline's own final training loss in each trial, the
    training accuracy, the held-out accuracy.
  """
  trials = len(baseline["train_loss"])
  return [
      final_train_loss(baseline),
      Target(f"train accuracy {train_accuracy:g}", "train_accuracy", False,
             np.full(trials, train_accuracy)),
      Target(f"test accuracy {test_accuracy:g}", "test_accuracy", False,
             np.full(trials, test_accuracy)),
  ]


@dataclasses.dataclass(frozen=True)
class Row:
  """One run compared with a baseline at one target.

  Attributes:
    steps: the Ratio of steps to the target.
    passes: the Ratio of example passes (forward + BACKWARD_COST x
      backward) to the target.
    seconds: the Ratio of training seconds (the runs' clocks) to the target.
    test_accuracy_at_target: the t-test of the per-trial difference in test
      accuracy where each run reaches the target (trials where both do).
    final_test_accuracy: the t-test of the difference at the end.
    test_loss_at_target, final_test_loss: the same for the test loss.
  """
  steps: Ratio
  passes: Ratio
  seconds: Ratio
  test_accuracy_at_target: verdicts.Test
  final_test_accuracy: verdicts.Test
  test_loss_at_target: verdicts.Test
  final_test_loss: verdicts.Test


def compare(curve, baseline, target):
  """`curve`'s cost to `target` against `baseline`'s, trial for trial.

  Args:
    curve: the compared runs' curves (`design.collect`'s).
    baseline: the baseline's curves, the same trials in the same order.
    target: a Target.

  Returns:
    A Row.
  """
  reach = [steps_to(c, target) for c in (curve, baseline)]
  passes = [[
      step * _passes_per_step(c, trial) if math.isfinite(step) else math.inf
      for trial, step in enumerate(steps)
  ]
            for c, steps in zip((curve, baseline), reach)]
  seconds = [[
      value_at(c["step"], c["train_seconds"][trial], step)
      if math.isfinite(step) else math.inf for trial, step in enumerate(steps)
  ] for c, steps in zip((curve, baseline), reach)]

  def at_target(metric):
    return verdicts.paired_test([
        value_at(curve["step"], curve[metric][k], a) -
        value_at(baseline["step"], baseline[metric][k], b)
        for k, (a, b) in enumerate(zip(*reach))
        if math.isfinite(a) and math.isfinite(b)
    ])

  def at_the_end(metric):
    return verdicts.paired_test(curve[metric][:, -1] - baseline[metric][:, -1])

  return Row(steps=paired_ratio(*reach),
             passes=paired_ratio(*passes),
             seconds=paired_ratio(*seconds),
             test_accuracy_at_target=at_target("test_accuracy"),
             final_test_accuracy=at_the_end("test_accuracy"),
             test_loss_at_target=at_target("test_loss"),
             final_test_loss=at_the_end("test_loss"))


def steps_to(curve, target):
  """[trials] steps at which `curve`'s runs first reach `target`, trial
  for trial (inf: never)."""
  return np.array([
      first_reach(curve["step"], values, goal, target.lower_is_better)
      for values, goal in zip(curve[target.metric], target.values)
  ])


def _passes_per_step(curve, trial):
  """Forward plus BACKWARD_COST x backward example passes a step made, from
  the run's clocks at its last record."""
  forwarded = curve["examples_forwarded"][trial, -1]
  backpropagated = curve["examples_backpropagated"][trial, -1]
  return (forwarded + BACKWARD_COST * backpropagated) / curve["step"][-1]


@dataclasses.dataclass(frozen=True)
class Entry:
  """A run variant's time to one target against each baseline.

  Attributes:
    name: the variant ("AdaSamp-01-SGD, amplitude 1", "Shuffle-SGD", ...).
    collapsed: whether any of its runs collapsed (`verdicts.collapsed`).
    rows: {baseline name: Row} for the baselines it is compared with.
  """
  name: str
  collapsed: bool
  rows: dict


def table(curves, sweep, settings, collapsed=lambda curve: False):
  """Every variant's time to each target against the uniform baselines.

  The variants: the sweep's algorithm at each amplitude (under both utility
  options where the sweep ran both), the other adaptive algorithms at the
  preset amplitude, the baselines of `presets.BASELINES` and the methods
  of `presets.COMPETITORS`. Each is
  compared with its update rule's with-replacement Unif and, where one
  runs, its reshuffling baseline. The first target is the with-replacement
  Unif's final training loss in each trial, so every row of a table chases
  the same value.

  Args:
    curves: `design.collect`'s curves.
    sweep: `design.collect`'s sweep.
    settings: the presets.Settings of the runs (their fixed targets).
    collapsed: whether a variant's curves hold a collapsed run.

  Returns:
    [(Target label, [Entry])], one per target.
  """
  variants = adaptive_variants(curves, sweep, settings)
  variants += [(name, curves[name], name)
               for name in (*presets.BASELINES, *presets.COMPETITORS)]
  return entries(variants, curves, settings, collapsed)


def adaptive_variants(curves, sweep, settings):
  """[(name, curves, algorithm)] of the adaptive runs: the sweep's
  algorithm at each amplitude (under both utility options where the sweep
  ran both), then the other adaptive algorithms at the preset's
  amplitude."""
  algorithm = sweep["algorithm"]
  variants = [(f"{algorithm}, amplitude {a:g}", c, algorithm)
              for a, c in zip(sweep["amplitude"], sweep["curves"])
              if a]
  other = sweep.get("other_utility_at")
  variants += [
      (f"{algorithm}, amplitude {a:g}, utility at '{other}'", c, algorithm)
      for a, c in zip(sweep["amplitude"][1:], sweep.get("other_curves", []))
  ]
  variants += [(f"{name}, amplitude {settings.amplitude:g}", curves[name], name)
               for name in presets.ADAPTIVE
               if name != algorithm]
  return variants


def entries(variants, curves, settings, collapsed=lambda curve: False):
  """`table`'s rows for the given variants.

  Args:
    variants: [(name, curves, algorithm)] of the compared runs.
    curves: {algorithm: curves} holding the uniform baselines.
    settings: the presets.Settings of the runs.
    collapsed: whether a variant's curves hold a collapsed run.

  Returns:
    [(Target label, [Entry])], one per target.
  """
  result = []
  for index in range(3):
    entries = []
    for name, curve, of in variants:
      baselines = _baselines_of(of, curves)
      target = targets(curves[baselines[0]], settings.train_accuracy_target,
                       settings.test_accuracy_target)[index]
      entries.append(
          Entry(
              name, collapsed(curve), {
                  baseline: compare(curve, curves[baseline], target)
                  for baseline in baselines
                  if baseline != of
              }))
    result.append((target.label.replace("the baseline's", "Unif's"), entries))
  return result


def _baselines_of(algorithm, curves):
  """The with-replacement Unif of `algorithm`'s update rule, then the
  reshuffling baselines with that rule that ran."""
  rule = presets.RUNS[algorithm][2]
  return [presets.counterpart(algorithm)] + [
      name for name, (_, _, other) in presets.BASELINES.items()
      if other == rule and name in curves
  ]
