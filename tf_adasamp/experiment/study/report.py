"""The experiment's report: Figure 1's panels, the held-out figure and
summary.md, which opens with the held-out measures (`heldout`), then the
training and fixed targets (`targets`), the departures from the paper and the
verdict rules, then judges each of the paper's four claims (`claims`)."""

import collections
import os

import numpy as np

from tf_adasamp.experiment.study import claims as claims_lib
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import heldout
from tf_adasamp.experiment.study import plots
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import run_files


def _utility_option_lines(entries, sweep):
  """What Algorithm 1's utility at h_t costs against the step's own logits,
  at each swept amplitude that ran both and does not collapse, to Unif's
  final training loss."""
  other = sweep.get("other_utility_at")
  if other is None:
    return []
  by_name = {entry.name: entry for entry in entries}
  cells = []
  for amplitude in sweep["amplitude"][1:]:
    name = f"{sweep['algorithm']}, amplitude {amplitude:g}"
    pair = (by_name[name], by_name[f"{name}, utility at '{other}'"])
    if any(entry.collapsed for entry in pair):
      continue
    # Against the baseline each reaches the target fastest, i.e. the one
    # listed last (Shuffle where it ran).
    baseline = list(pair[0].rows)[-1]
    ratios = [entry.rows[baseline].passes for entry in pair]
    if not all(ratio.reached for ratio in ratios):
      continue
    cells.append(f"amplitude {amplitude:g}: {ratios[0].geometric_mean:.3f} "
                 f"at '{_main_utility_at(sweep)}' against "
                 f"{ratios[1].geometric_mean:.3f} at '{other}'")
  if not cells:
    return []
  return [
      f"**Where the utility is computed** (example passes to Unif's final "
      f"training loss, as a ratio to {baseline}'s): " + "; ".join(cells) +
      ". At 'updated' the utility is Algorithm 1's, of h_t, which takes a "
      "second forward pass over the batch; at 'step' it reuses the step's "
      "own logits (h_{t-1}), at no cost. No cheaper exact utility at h_t "
      "exists: every utility of the updated model needs its logits for the "
      "batch.", ""
  ]


def _main_utility_at(sweep):
  """The utility option of the sweep's main curves."""
  return next(
      u for u in config_lib.UTILITY_AT if u != sweep["other_utility_at"])


def _competitor_lines(entries):
  """Where each method of `presets.COMPETITORS` stands, to Unif's final
  training loss."""
  lines = []
  for entry in entries:
    if entry.name not in presets.COMPETITORS:
      continue
    ratios = " and ".join(f"{text.ratio_text(row.passes)} of {baseline}'s"
                          for baseline, row in entry.rows.items())
    unif = next(iter(entry.rows.values()))
    lines += [
        f"**{entry.name}** reaches Unif's final training loss in {ratios} "
        "example passes; test accuracy at the target minus Unif's: "
        f"{text.interval_text(unif.test_accuracy_at_target)}.", ""
    ]
  return lines


def collapse_test(num_classes):
  """Whether a variant's curves hold a collapsed run (`verdicts.collapsed`),
  as a function of the curves."""

  def collapsed(curve):
    return verdicts.collapsed(np.nan_to_num(curve["kl"]),
                              curve["train_accuracy"][:,
                                                      -1], num_classes).any()

  return collapsed


def time_to_target_lines(curves, sweep, settings, num_classes=10):
  """The summary's opening: each variant's cost to each target, paired
  against the uniform baselines (`targets.table`)."""
  tables = targets.table(curves, sweep, settings, collapse_test(num_classes))
  lines = [
      "## Training loss and fixed targets",
      "",
      "Beside the held-out measures: the cost to first reach a training "
      "target, or the fixed accuracy targets, against both uniform "
      "baselines. Cost to first reach a target, as a ratio to a uniform "
      "baseline's in "
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
  lines += _utility_option_lines(tables[0][1], sweep)
  lines += _competitor_lines(tables[0][1])
  for label, entries in tables:
    lines += [
        f"### To {label}", "",
        "| run | steps, vs Unif | steps, vs Shuffle | example passes, vs Unif "
        "| example passes, vs Shuffle | test accuracy at the target, minus "
        "Unif's | final test accuracy, minus Unif's | test loss at the "
        "target, minus Unif's | final test loss, minus Unif's |",
        "|---|---|---|---|---|---|---|---|---|"
    ]
    # At a held-out target both runs hold the target's accuracy.
    at_target = ((lambda row: "– (the target)") if "test accuracy" in label else
                 (lambda row: text.interval_text(row.test_accuracy_at_target)))
    for entry in entries:
      unif, *shuffle = entry.rows.values()
      shuffled = shuffle[0] if shuffle else None
      name = entry.name + (" (collapsed)" if entry.collapsed else "")
      lines.append(f"| {name} | {text.ratio_text(unif.steps)} | "
                   f"{text.ratio_text(shuffled.steps) if shuffled else '–'} | "
                   f"{text.ratio_text(unif.passes)} | "
                   f"{text.ratio_text(shuffled.passes) if shuffled else '–'} | "
                   f"{at_target(unif)} | "
                   f"{text.interval_text(unif.final_test_accuracy)} | "
                   f"{text.interval_text(unif.test_loss_at_target)} | "
                   f"{text.interval_text(unif.final_test_loss)} |")
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
      "initial model, same random numbers), or one trial's rank correlation "
      "(Spearman's ρ, Kendall's τ). A one-sample t-test gives the mean's "
      f"{100 * v.CONFIDENCE:g}% interval (raw) and a two-sided p.",
      "- Within each claim the p-values are adjusted by Holm's method over "
      "that claim's comparisons. A comparison is *supported* where its "
      f"adjusted p is below {v.ALPHA:g} with the mean on the paper's side, "
      f"*contradicted* where it is below {v.ALPHA:g} on the other side, "
      "*not shown* otherwise.",
      "- Rank correlations (claims 3 and 4) are judged by the exact "
      "two-sided sign test on the trials' signs: a trend held in every one "
      "of 10 trials gives p = 2 × 0.5^10, whatever its size; their interval "
      "is the t-interval of the mean, shown for scale.",
      f"- No verdict from fewer than {v.MIN_TRIALS} trials, from a "
      "difference equal in every trial (an interval of zero width) or from "
      "rank correlations none of which is signed.",
      "- A claim is *mixed* if some of its comparisons are supported and "
      "some contradicted, *contradicted* if any is (and none supported), "
      "*supported* if all are, without a verdict if any has none, else *not "
      "shown*. It is *not testable here* where its precondition fails on "
      "the data (the figure is printed with the claim). Rows marked "
      "*beside* are shown for comparison: tested, but not adjusted and "
      "without a verdict.",
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
      "3 (the amplitude sweep below shows it).",
      "- Claim 4 is judged as a shape, per adaptive variant: in each trial "
      f"the KL peaks in the first {v.EARLY_PEAK:.0%} of training (the share "
      "of trials is shown), then declines: Kendall's τ of the KL with time "
      "over the rest of training below 0. A variant is *supported* where "
      "its τ is significantly below 0, *contradicted* where significantly "
      "above (its KL rises), *not shown* otherwise; the claim combines the "
      "variants by the rule above. It needs a model that fits its data: "
      "the uniform counterpart's mean final training error at most "
      f"{100 * v.FIT_ERROR:g}%. Under the 0-1 utility an example still "
      "misclassified keeps a log weight near amplitude / (1 − decay), so a "
      "model that does not fit keeps the KL at a positive floor.",
      "",
  ]


def _column_text(values):
  """Mean ± std of per-trial values to 4 significant figures; values that
  never reached their target (inf) counted."""
  values = np.asarray(values, dtype=float)
  finite = values[np.isfinite(values)]
  if not len(finite):
    return f"never ({len(values)}/{len(values)})"
  scale = abs(finite.mean())
  digits = max(0, 3 - int(np.floor(np.log10(scale)))) if scale else 4
  never = len(values) - len(finite)
  return text.mean_std(finite, digits) + (f" ({never} never)" if never else "")


def _family_lines(family, with_verdicts=True):
  """A family's table; without verdicts, its figures alone."""
  columns = list(family.comparisons[0].columns) if family.comparisons else []
  head = ["comparison", "measure", *columns, "mean [95% CI]"]
  head += ["p", "Holm p"] if with_verdicts else []
  head.append("trials in the paper's direction")
  head += ["verdict"] if with_verdicts else []
  lines = [
      f"*{family.name}*" + (f": **{family.verdict}**" if with_verdicts else ""),
      "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)
  ]
  for c in family.comparisons:
    agreeing = int(
        np.sum(c.expected_sign * (np.asarray(c.differences) - c.reference) > 0))
    cells = [
        c.label, c.measure, *(_column_text(c.columns[k]) for k in columns),
        text.interval_text(c.test)
    ]
    if with_verdicts:
      cells += [text.p_text(c.test.p), text.p_text(c.adjusted_p)]
    cells.append(f"{agreeing}/{len(c.differences)}")
    if with_verdicts:
      cells.append(c.verdict if c.judged else "beside, no verdict")
    lines.append("| " + " | ".join(cells) + " |")
  return lines + [""]


def claims_lines(claims, smoke_test=None):
  """The claims section; for a smoke test (`smoke_test` says why it is
  one) the claims' figures without verdicts."""
  lines = ["## The paper's claims", ""]
  if smoke_test:
    lines += [
        f"This regime is a smoke test, not evidence: {smoke_test}. Its "
        "claims are shown with their figures and without verdicts.", ""
    ]
  for number, claim in enumerate(claims, 1):
    verdict = "" if smoke_test else f" {claim.verdict}"
    lines += [f"### {number}.{verdict}", "", claim.text, ""]
    lines += [f"- Precondition: {line}" for line in claim.precondition]
    lines += [f"- {note}" for note in claim.notes]
    lines.append("")
    for family in claim.families:
      lines += _family_lines(family, with_verdicts=not smoke_test)
  return lines


def sweep_lines(sweep, num_classes):
  lines = [
      f"## Amplitude sweep ({sweep['algorithm']}; 0 is "
      f"{presets.counterpart(sweep['algorithm'])})",
      "",
      "The mechanism beside the KL: at the evaluation where a trial's KL "
      "peaks, the share of the draws on the examples the model gets wrong "
      "over their share under uniform sampling (the training error), and "
      "the largest probability of an example relative to uniform's 1/n "
      "over the run (mean over trials).",
      "",
      "| amplitude | | max KL | misclassified draws / uniform's, at the "
      "KL's peak | largest n·q | lowest n·exp(−KL) / n | lowest ESS / n | "
      "final train acc | collapsed runs | final test acc |",
      "|---|---|---|---|---|---|---|---|---|---|",
  ]
  rows = claims_lib.sweep_table(sweep, num_classes)
  # Uniform sampling's largest probability is 1/n.
  uniform_q = sweep["curves"][0]["max_probability"][0, -1]
  for row, curve in zip(rows, sweep["curves"]):
    label = "degenerate (collapsed)" if row["collapsed"] else ""
    peak = np.nanargmax(np.nan_to_num(curve["kl"], nan=-1.0), axis=1)
    trials = np.arange(len(peak))
    error = 1 - curve["train_accuracy"][trials, peak]
    with np.errstate(divide="ignore", invalid="ignore"):
      focus = np.nanmean(curve["misclassified_mass"][trials, peak] / error)
    largest = curve["max_probability"].max(axis=1).mean() / uniform_q
    lines.append(f"| {row['amplitude']:g} | {label} | "
                 f"{text.mean_std(row['max_kl'], 3)} | "
                 f"{focus:.3g} | {largest:.3g} | "
                 f"{row['min_support']:.3g} | {row['min_ess']:.3g} | "
                 f"{text.mean_std(row['final_train'])} | "
                 f"{row['collapsed']}/{row['trials']} | "
                 f"{text.mean_std(curve['test_accuracy'][:, -1])} |")
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
        text.interval_text(
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
        design.mean_over(c["epoch"], c["train_loss"], half),
        design.mean_over(c["epoch"], c["train_accuracy"], half),
        design.mean_over(c["epoch"], c["test_accuracy"], half),
        design.mean_over(c["epoch"], c["test_accuracy"])
    ]
    lines.append(f"| {name} | " + " | ".join(text.mean_std(v) for v in cells) +
                 f" | {text.mean_std(np.nan_to_num(c['kl']).max(axis=1), 3)} |")
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
    lines.append(f"| {name} | {text.mean_std(c['zero_one_gap'][:, -1])} | "
                 f"{np.mean(c['corollary1_bound'][:, -1]):.4g} |")
  return lines + [""]


def step_size_text(settings, algorithm):
  """`algorithm`'s step size as the summary states it: "0.3 / (1 + 0.001
  t)", "0.1" (constant), "0.3, linear to 0" or "0.3, cosine to 0"."""
  eta, gamma = settings.learning_rate(algorithm)
  schedule = settings.lr_schedule(algorithm)
  if schedule != "inverse_time":
    return f"{eta:g}, {schedule} to 0"
  return f"{eta:g}" + (f" / (1 + {gamma:g} t)" if gamma else "")


def summary_markdown(curves,
                     sweep,
                     settings,
                     trials,
                     title,
                     command,
                     departures=(),
                     num_classes=10,
                     dataset=None,
                     replication=None):
  """The experiment's summary as markdown; a `dataset` of
  presets.SMOKE_TESTS gets its claims without verdicts; `replication`,
  (data set, {algorithm: curves}) of the headline comparison there, gets a
  section."""
  claims = claims_lib.assess(curves, sweep, settings.amplitude, settings.decay,
                             num_classes)
  lines = [
      f"# {title}",
      "",
      f"Produced by `{command}`.",
      "",
      *heldout.lines(
          curves, sweep, settings, trials, collapse_test(num_classes),
          heldout.TUNED if any(
              line.startswith("Tuning: Cross-validated")
              for line in departures) else heldout.UNTUNED),
      *(heldout.replication_lines(curves, sweep, settings, replication[1],
                                  replication[0]) if replication else []),
      *time_to_target_lines(curves, sweep, settings, num_classes),
      "## Departures from the paper",
      "",
      *[f"- {line}" for line in departures],
      "",
      f"Settings: {settings.steps} steps of batch {settings.batch_size}, "
      f"evaluation every {settings.eval_interval} steps; step sizes " +
      ", ".join(
          f"{name} {step_size_text(settings, name)}" for name in presets.RUNS) +
      f"; amplitude {settings.amplitude:g}, decay {settings.decay:g}, "
      f"utility at '{settings.utility_at}'. Trial k runs every algorithm "
      "with seed k.",
      "",
      *rules_lines(),
      *claims_lines(claims, presets.SMOKE_TESTS.get(dataset)),
      *sweep_lines(sweep, num_classes),
      *_end_lines(curves),
      *_algorithm_lines(curves, trials),
      *_certificate_lines(curves),
  ]
  return "\n".join(lines).rstrip("\n") + "\n"


def check_settings(settings):
  """Refuses settings whose runs `report` cannot summarize: it averages each
  half of training over its evaluations, so each half needs 2."""
  if settings.eval_interval > settings.steps / 2:
    raise ValueError(
        f"--steps={settings.steps} with --eval_interval="
        f"{settings.eval_interval} gives fewer than 2 evaluations in each "
        "half of training, too few for the report; use an eval_interval "
        "of at most steps / 2")


def report(runs,
           settings,
           trials,
           title,
           report_dir,
           command,
           departures=(),
           dataset=None,
           replication=None):
  """Draws Figure 1, the held-out figure and heaviest.png (where the runs
  list their heaviest examples) and writes summary.md to `report_dir`;
  returns their paths. `replication`: (data set, runs) of
  `design.replication_plan`, or None."""
  curves, sweep = design.collect(runs, settings)
  paths = plots.figure1(curves, sweep, report_dir, title=title)
  paths.append(
      plots.heldout_figure(heldout.figure_lines(curves, sweep, settings),
                           report_dir, title))
  heaviest_lines = heaviest_figure(runs, settings, sweep, report_dir)
  if heaviest_lines:
    paths.append(os.path.join(report_dir, HEAVIEST_FIGURE))
  paths.append(os.path.join(report_dir, "summary.md"))
  with open(paths[-1], "w") as f:
    f.write(
        summary_markdown(
            curves,
            sweep,
            settings,
            trials,
            title,
            command,
            departures,
            dataset=dataset,
            replication=replication and
            (replication[0], design.curves_by_algorithm(replication[1]))))
    if heaviest_lines:
      f.write("\n" + "\n".join(heaviest_lines) + "\n")
  return paths


# What the sampler looks at: the training images that an adaptive run's
# records list as its heaviest (`evaluator.heaviest_pairs`).
HEAVIEST_FIGURE = "heaviest.png"
HEAVIEST_TRIAL = 0


def heaviest_figure(runs, settings, sweep, report_dir):
  """Draws HEAVIEST_FIGURE: the heaviest training images of the sweep's
  algorithm in trial HEAVIEST_TRIAL, at each swept amplitude that does not
  collapse, at the evaluation where its KL peaks and at the last.

  Returns:
    The summary's section about it, as lines; none (and no figure) where
    those runs' records do not list their heaviest examples (runs from
    before the trainer recorded them).
  """
  found = {}
  for run in runs:
    if (run.algorithm == settings.sweep_algorithm and
        run.trial == HEAVIEST_TRIAL and
        run.config.utility_at == settings.utility_at and
        run.amplitude in settings.sweep_amplitudes):
      records = run_files.read_metrics(run.config.output_dir)
      if records and all("heaviest" in record for record in records):
        found[run.amplitude] = (run.config, records)
  if not found:
    return []
  # Loads TensorFlow, which the report needs only here.
  from tf_adasamp.experiment.training import loop
  data = loop.training_data(next(iter(found.values()))[0])
  names = getattr(data, "class_names", None)
  amplitudes = [
      row["amplitude"]
      for row in claims_lib.sweep_table(sweep, data.num_classes)
      if row["amplitude"] in found and not row["collapsed"]
  ]
  if not amplitudes:
    return []
  rows, labels_shown, tied, heaviest = [], [], [], None
  for amplitude in amplitudes:
    records = found[amplitude][1]
    peak = records[int(np.argmax([record["kl"] for record in records]))]
    for when, record in (("the KL's peak", peak), ("the end", records[-1])):
      indices, weights = zip(*record["heaviest"])
      images, labels = _training_examples_at(data, indices)
      labels = [names[label] if names else str(label) for label in labels]
      labels_shown += labels
      rows.append((
          f"amplitude {amplitude:g}, at {when} (step "
          f"{record['step']}, KL {record['kl']:.3g} nats)", images,
          [f"{label}\n{weight:.3g}×" for label, weight in zip(labels, weights)
          ]))
      if heaviest is None or weights[0] > heaviest[0]:
        heaviest = (weights[0], amplitude, when)
      if len(set(weights)) == 1:
        tied.append(amplitude)
  count = len(rows[0][1])
  plots.heaviest_grid(
      rows,
      os.path.join(report_dir, HEAVIEST_FIGURE),
      title=f"{settings.sweep_algorithm}, trial {HEAVIEST_TRIAL}: the {count} "
      "training images it draws most; under each, its label and n·q, its "
      "probability relative to uniform's 1/n")
  common = ", ".join(
      f"{label} ({number})"
      for label, number in collections.Counter(labels_shown).most_common(3))
  tied = sorted(set(tied))
  tie = (f" At amplitude{'s' if len(tied) > 1 else ''} "
         f"{', '.join(f'{a:g}' for a in tied)} a row's {count} weights tie, "
         f"so it shows {count} of a larger set weighted alike." if tied else "")
  return [
      "## What the sampler looks at",
      "",
      f"[{HEAVIEST_FIGURE}]({HEAVIEST_FIGURE}) shows the {count} training "
      f"images {settings.sweep_algorithm} draws most in trial "
      f"{HEAVIEST_TRIAL}, at the evaluation where its KL peaks and at the "
      f"last, at amplitudes {', '.join(f'{a:g}' for a in amplitudes)} (the "
      "swept ones that do not collapse), each with its label and n·q, its "
      "probability relative to uniform's. The classes seen most among its "
      f"{len(labels_shown)} tiles: {common}; the largest n·q is "
      f"{heaviest[0]:.3g} (amplitude {heaviest[1]:g}, at {heaviest[2]})." + tie,
  ]


def _training_examples_at(data, indices):
  """The training (images, labels) at `indices`, in their order (given
  all n indices, `training_examples` returns the n in the data's order)."""
  order = np.argsort(indices)
  images, labels = data.training_examples(np.asarray(indices)[order])
  back = np.argsort(order)
  return images[back], labels[back]
