"""The experiment's report: Figure 1's panels and summary.md, which opens
with time to target (`targets`), then the departures from the paper and the
verdict rules, then judges each of the paper's four claims (`claims`)."""

import os

import numpy as np

from tf_adasamp.experiment.study import claims as claims_lib
from tf_adasamp.experiment.study import plots
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.study.design import collect
from tf_adasamp.experiment.study.design import mean_over


def mean_std(values, digits=4):
  values = np.asarray(values)
  return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def interval_text(test, digits=4):
  """Mean [low, high] of a verdicts.Test, or the mean and why no interval."""
  if np.isnan(test.low):
    return f"{test.mean:+.{digits}f} ({test.why_not})"
  return f"{test.mean:+.{digits}f} [{test.low:+.{digits}f}, {test.high:+.{digits}f}]"


def _p_text(p):
  return "–" if np.isnan(p) else f"{p:.3g}"


def ratio_text(ratio):
  """A targets.Ratio as 'mean [low, high]', with the runs that never
  reached the target."""
  trials = ratio.reached + ratio.adaptive_never + ratio.baseline_never
  if not ratio.reached:
    return f"never ({ratio.adaptive_never}/{trials} runs)"
  if ratio.test.why_not:
    text = f"{ratio.geometric_mean:.3f} ({ratio.test.why_not})"
  else:
    low, high = ratio.interval
    text = f"{ratio.geometric_mean:.3f} [{low:.3f}, {high:.3f}]"
  never = [
      f"{count} {who}{'s' if count > 1 else ''} never"
      for count, who in ((ratio.adaptive_never, "run"), (ratio.baseline_never,
                                                         "baseline run"))
      if count
  ]
  return text + (f" ({', '.join(never)})" if never else "")


def _headline(tables):
  """The adaptive variant that reaches Unif's final training loss in the
  fewest example passes against the faster of its uniform baselines."""
  best = None
  for entry in tables[0][1]:
    if entry.collapsed or entry.name in (*presets.BASELINES,
                                         *presets.COMPETITORS):
      continue
    ratios = {
        name: row.passes
        for name, row in entry.rows.items()
        if row.passes.reached
    }
    if len(ratios) < len(entry.rows):
      continue
    # Against the faster baseline the ratio is the larger.
    baseline = max(ratios, key=lambda name: ratios[name].geometric_mean)
    if best is None or (ratios[baseline].geometric_mean
                        < best[0].rows[best[1]].passes.geometric_mean):
      best = (entry, baseline)
  return best


def _competitor_lines(entries):
  """Where each method of `presets.COMPETITORS` stands, to Unif's final
  training loss."""
  lines = []
  for entry in entries:
    if entry.name not in presets.COMPETITORS:
      continue
    ratios = " and ".join(f"{ratio_text(row.passes)} of {baseline}'s"
                          for baseline, row in entry.rows.items())
    unif = next(iter(entry.rows.values()))
    lines += [
        f"**{entry.name}** reaches Unif's final training loss in {ratios} "
        "example passes; test accuracy at the target minus Unif's: "
        f"{interval_text(unif.test_accuracy_at_target)}.", ""
    ]
  return lines


def _target_tables(curves, sweep, settings, num_classes):

  def collapsed(curve):
    return verdicts.collapsed(np.nan_to_num(curve["kl"]),
                              curve["train_accuracy"][:,
                                                      -1], num_classes).any()

  return targets.table(curves, sweep, settings, collapsed)


def wall_time_markdown(curves, sweep, settings, title, num_classes=10):
  """wall_time.md: training seconds to each target, from the runs' clocks.

  Beside summary.md, not in it: seconds are measured, so no two runs of the
  experiment give the same file, while summary.md is the same byte for
  byte.
  """
  lines = [
      f"# Training seconds to target: {title}", "",
      "From each run's own clock (`train_seconds` in its metric records: "
      "the training calls alone, the sampler's work included, evaluations "
      "and checkpoints not), interpolated at the step where it first "
      "reaches the target, as a ratio to the baseline's in the same trial: "
      "geometric mean [95% t-interval]. Each run trains with one "
      "TensorFlow thread; the experiment trains its runs in a pool of "
      "worker processes side by side, so a slow spell of the machine falls "
      "on adaptive and uniform runs alike but adds noise. Measured, so "
      "this file differs from run to run; summary.md has the steps and "
      "example passes, which do not.", ""
  ]
  for label, entries in _target_tables(curves, sweep, settings, num_classes):
    lines += [
        f"## To {label}", "",
        "| run | seconds, vs Unif | seconds, vs Shuffle |", "|---|---|---|"
    ]
    for entry in entries:
      unif, *shuffle = entry.rows.values()
      name = entry.name + (" (collapsed)" if entry.collapsed else "")
      lines.append(f"| {name} | {ratio_text(unif.seconds)} | "
                   f"{ratio_text(shuffle[0].seconds) if shuffle else '–'} |")
    lines.append("")
  return "\n".join(lines).rstrip("\n") + "\n"


def time_to_target_lines(curves, sweep, settings, num_classes=10):
  """The summary's opening: each variant's cost to each target, paired
  against the uniform baselines (`targets.table`)."""

  def collapsed(curve):
    return verdicts.collapsed(np.nan_to_num(curve["kl"]),
                              curve["train_accuracy"][:,
                                                      -1], num_classes).any()

  tables = targets.table(curves, sweep, settings, collapsed)
  goal_ratio, goal_accuracy = 0.7, 0.003
  lines = [
      "## Time to target",
      "",
      "Cost to first reach a target, as a ratio to a uniform baseline's in "
      "the same trial: geometric mean over trials [95% t-interval of the "
      "mean log ratio]. Baselines: Unif (with replacement, the paper's) and "
      "Shuffle (a fresh permutation each epoch, what `tf.data`'s shuffle "
      "gives). IS-SGD is loss-proportional importance sampling "
      "(Katharopoulos & Fleuret, ICML 2018) on this library's sampler: "
      "draws in proportion to each example's cross-entropy at its last "
      "visit, a third of them uniform (their additive smoothing), each loss "
      "weighed by 1 / (n q_i) (unbiased). *Steps* counts training steps; "
      "*example passes* counts "
      "forward passes as 1 and backward passes as "
      f"{targets.BACKWARD_COST:g} per example, so it charges Algorithm 1's "
      "second forward pass at h_t (utility at 'updated'). Crossings are "
      "interpolated linearly between evaluations; runs that never reach a "
      "target are counted, not imputed. The training targets' accuracies "
      "are ours, not the paper's.",
      "",
  ]
  best = _headline(tables)
  if best is None:
    lines += [
        "**Headline**: no adaptive setting reached Unif's final training "
        "loss in every trial.", ""
    ]
  else:
    entry, baseline = best
    row = entry.rows[baseline]
    fast = row.passes.geometric_mean <= goal_ratio
    accurate = row.test_accuracy_at_target.mean >= -goal_accuracy
    short = [] if accurate else [
        f"its test accuracy at the target is "
        f"{-100 * row.test_accuracy_at_target.mean:.2f} points below"
    ]
    if not fast:
      short.insert(0, f"it needs more than {goal_ratio:g}x")
    lines += [
        f"**Headline**: the fastest adaptive setting, {entry.name}, reaches "
        f"Unif's final training loss in {ratio_text(row.passes)} of the "
        f"example passes of {baseline}, the faster uniform baseline for it "
        f"({ratio_text(row.steps)} of its steps); test accuracy where each "
        f"reaches it, adaptive minus uniform: "
        f"{interval_text(row.test_accuracy_at_target)}, and at the end of "
        f"training {interval_text(row.final_test_accuracy)}. Our goal, at most "
        f"{goal_ratio:g}x with test accuracy within "
        f"{100 * goal_accuracy:g} points: **{'not met' if short else 'met'}**" +
        (f" ({' and '.join(short)})." if short else "."), ""
    ]
  lines += _competitor_lines(tables[0][1])
  for label, entries in tables:
    lines += [
        f"### To {label}", "",
        "| run | steps, vs Unif | steps, vs Shuffle | example passes, vs Unif "
        "| example passes, vs Shuffle | test accuracy at the target, minus "
        "Unif's | final test accuracy, minus Unif's |",
        "|---|---|---|---|---|---|---|"
    ]
    # At a held-out target both runs hold the target's accuracy.
    at_target = ((lambda row: "– (the target)") if "test accuracy" in label else
                 (lambda row: interval_text(row.test_accuracy_at_target)))
    for entry in entries:
      unif, *shuffle = entry.rows.values()
      shuffled = shuffle[0] if shuffle else None
      name = entry.name + (" (collapsed)" if entry.collapsed else "")
      lines.append(f"| {name} | {ratio_text(unif.steps)} | "
                   f"{ratio_text(shuffled.steps) if shuffled else '–'} | "
                   f"{ratio_text(unif.passes)} | "
                   f"{ratio_text(shuffled.passes) if shuffled else '–'} | "
                   f"{at_target(unif)} | "
                   f"{interval_text(unif.final_test_accuracy)} |")
    lines.append("")
  return lines


def rules_lines():
  """The verdict rules, with the thresholds the code uses."""
  v = verdicts
  return [
      "## Verdict rules",
      "",
      f"- Each comparison is a set of paired per-trial values: adaptive "
      "minus its uniform counterpart in the same trial (same seed, same "
      "initial model, same random numbers), or one trial's Spearman ρ. A "
      "one-sample t-test gives the mean's "
      f"{100 * v.CONFIDENCE:g}% interval (raw) and a two-sided p.",
      "- Within each claim the p-values are adjusted by Holm's method over "
      "that claim's comparisons. A comparison is *supported* where its "
      f"adjusted p is below {v.ALPHA:g} with the mean on the paper's side, "
      f"*contradicted* where it is below {v.ALPHA:g} on the other side, "
      "*not shown* otherwise.",
      f"- No verdict from fewer than {v.MIN_TRIALS} trials or from an "
      "interval of zero width (every trial equal).",
      "- A claim is *contradicted* if any of its comparisons is, *supported* "
      "if all are, without a verdict if any has none, else *not shown*. It "
      "is *not testable here* where its precondition fails on the data "
      "(the figure is printed with the claim).",
      "- Windows are in epochs. Claims 1 and 2 are judged over the first "
      "half of training at every amplitude that does not collapse (claim 1 "
      "also over the sweep's amplitudes), Holm's correction across all of "
      "them; no KL gate. Beside it, where the adaptive variant's peak mean "
      f"KL reaches {v.MIN_KL:g} nats (ours), its window of non-uniform "
      f"sampling: from the first evaluation where the mean KL reaches "
      f"{v.KL_RISEN:g} × its peak to half-way through training.",
      f"- A run collapses when its effective support n·exp(−KL(Q_t ‖ P_t)) "
      f"falls below {v.COLLAPSE_SUPPORT:g} × n at any evaluation, or its "
      f"final training accuracy below {v.COLLAPSE_ACCURACY:g} × chance; an "
      "amplitude with a collapsed run is degenerate and left out of claim "
      "3's verdict (all amplitudes shown beside).",
      f"- Claim 4 needs a model that fits its data: the uniform "
      f"counterpart's mean final training error at most "
      f"{100 * v.FIT_ERROR:g}%. Under the 0-1 utility an example still "
      "misclassified keeps a log weight near amplitude / (1 − decay), so a "
      "model that does not fit keeps the KL at a positive floor.",
      "",
  ]


def _family_lines(family):
  lines = [
      f"*{family.name}*: **{family.verdict}**", "",
      "| comparison | measure | mean [95% CI] | p | Holm p | trials in the "
      "paper's direction | verdict |", "|---|---|---|---|---|---|---|"
  ]
  for c in family.comparisons:
    agreeing = int(
        np.sum(c.expected_sign * (np.asarray(c.differences) - c.reference) > 0))
    lines.append(f"| {c.label} | {c.measure} | {interval_text(c.test)} | "
                 f"{_p_text(c.test.p)} | {_p_text(c.adjusted_p)} | "
                 f"{agreeing}/{len(c.differences)} | {c.verdict} |")
  return lines + [""]


def claims_lines(claims):
  lines = ["## The paper's claims", ""]
  for number, claim in enumerate(claims, 1):
    lines += [f"### {number}. {claim.verdict}", "", claim.text, ""]
    lines += [f"- Precondition: {line}" for line in claim.precondition]
    lines += [f"- {note}" for note in claim.notes]
    lines.append("")
    for family in claim.families:
      lines += _family_lines(family)
  return lines


def sweep_lines(sweep, num_classes):
  lines = [
      f"## Amplitude sweep ({sweep['algorithm']}; 0 is "
      f"{presets.counterpart(sweep['algorithm'])})",
      "",
      "| amplitude | | max KL | lowest n·exp(−KL) / n | lowest ESS / n | "
      "final train acc | collapsed runs | final test acc |",
      "|---|---|---|---|---|---|---|---|",
  ]
  rows = claims_lib.sweep_table(sweep, num_classes)
  for row, curve in zip(rows, sweep["curves"]):
    label = "degenerate (collapsed)" if row["collapsed"] else ""
    lines.append(
        f"| {row['amplitude']:g} | {label} | {mean_std(row['max_kl'], 3)} | "
        f"{row['min_support']:.3g} | {row['min_ess']:.3g} | "
        f"{mean_std(row['final_train'])} | "
        f"{row['collapsed']}/{row['trials']} | "
        f"{mean_std(curve['test_accuracy'][:, -1])} |")
  return lines + [""]


def _end_lines(curves):
  lines = [
      "## At the end of training (paired, no claim)",
      "",
      "Adaptive minus uniform at the last evaluation, mean [95% CI]:",
      "",
      "| comparison | final train cross-entropy | final train accuracy | "
      "final test accuracy |",
      "|---|---|---|---|",
  ]
  for name in presets.ADAPTIVE:
    cells = [
        interval_text(
            verdicts.paired_test(curves[name][metric][:, -1] -
                                 curves[presets.counterpart(name)][metric][:,
                                                                           -1]))
        for metric in ("train_loss", "train_accuracy", "test_accuracy")
    ]
    lines.append(f"| {name} − {presets.counterpart(name)} | " +
                 " | ".join(cells) + " |")
  return lines + [""]


def _algorithm_lines(curves, trials):
  epochs = next(iter(curves.values()))["epoch"][-1]
  half = epochs / 2
  lines = [
      f"## Algorithms (mean ± std over {trials} trials)",
      "",
      f"'1st half' and 'AUC' are time averages over epochs [0, {half:g}] and "
      f"[0, {epochs:g}].",
      "",
      "| algorithm | final train loss | final train acc | final test acc | "
      "train loss, 1st half | train acc, 1st half | test acc, 1st half | "
      "test acc, AUC | max KL |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, c in curves.items():
    cells = [
        c["train_loss"][:, -1], c["train_accuracy"][:, -1],
        c["test_accuracy"][:, -1],
        mean_over(c["epoch"], c["train_loss"], half),
        mean_over(c["epoch"], c["train_accuracy"], half),
        mean_over(c["epoch"], c["test_accuracy"], half),
        mean_over(c["epoch"], c["test_accuracy"])
    ]
    lines.append(f"| {name} | " + " | ".join(mean_std(v) for v in cells) +
                 f" | {mean_std(np.nan_to_num(c['kl']).max(axis=1), 3)} |")
  return lines + [""]


def _certificate_lines(curves):
  """Corollary 1 beside the measured gap, for runs that log both."""
  rows = [(name, c) for name, c in curves.items() if "corollary1_bound" in c]
  if not rows:
    return []
  lines = [
      "## Corollary 1 beside the measured generalization gap",
      "",
      "For the L2-regularised logistic regression (strongly convex) every "
      "run logs the measured zero-one gap (training minus test accuracy) "
      "and the paper's Corollary 1 evaluated on the run. Corollary 1 bounds "
      "the gap *averaged over the posterior Q* (the distribution of the "
      "algorithm's random draws), with probability 1 - δ over the training "
      "set; here its KL(Q ‖ P) term is fed Theorem 4's estimate from this "
      "single run, which is neither the expectation over Q nor a bound on "
      "it (for uniform sampling KL = 0). So the value is the bound's scale, "
      "not a certificate for this model.",
      "",
      "| algorithm | final measured gap | Corollary 1 (δ = 0.05) |",
      "|---|---|---|",
  ]
  for name, c in rows:
    lines.append(f"| {name} | {mean_std(c['zero_one_gap'][:, -1])} | "
                 f"{np.mean(c['corollary1_bound'][:, -1]):.4g} |")
  return lines + [""]


def summary_markdown(curves,
                     sweep,
                     settings,
                     trials,
                     title,
                     command,
                     departures=(),
                     num_classes=10):
  """The experiment's summary as markdown."""
  claims = claims_lib.assess(curves, sweep, settings.amplitude, settings.decay,
                             num_classes)
  lines = [
      f"# {title}",
      "",
      f"Produced by `{command}`.",
      "",
      *time_to_target_lines(curves, sweep, settings, num_classes),
      "## Departures from the paper",
      "",
      *[f"- {line}" for line in departures],
      "",
      f"Settings: {settings.steps} steps of batch {settings.batch_size}, "
      f"evaluation every {settings.eval_interval} steps; step sizes " +
      ", ".join(f"{name} {settings.learning_rate(name)[0]:g}" +
                (f" / (1 + {settings.learning_rate(name)[1]:g} t)" if settings.
                 learning_rate(name)[1] else "")
                for name in presets.ALGORITHMS) +
      f"; amplitude {settings.amplitude:g}, decay {settings.decay:g}, "
      f"utility at '{settings.utility_at}'. Trial k runs every algorithm "
      "with seed k.",
      "",
      *rules_lines(),
      *claims_lines(claims),
      *sweep_lines(sweep, num_classes),
      *_end_lines(curves),
      *_algorithm_lines(curves, trials),
      *_certificate_lines(curves),
  ]
  return "\n".join(lines).rstrip("\n") + "\n"


def report(runs, settings, trials, title, report_dir, command, departures=()):
  """Draws Figure 1 and writes summary.md and wall_time.md to `report_dir`;
  returns their paths."""
  curves, sweep = collect(runs, settings)
  paths = plots.figure1(curves, sweep, report_dir, title=title)
  paths.append(os.path.join(report_dir, "summary.md"))
  with open(paths[-1], "w") as f:
    f.write(
        summary_markdown(curves, sweep, settings, trials, title, command,
                         departures))
  paths.append(os.path.join(report_dir, "wall_time.md"))
  with open(paths[-1], "w") as f:
    f.write(wall_time_markdown(curves, sweep, settings, title))
  return paths
