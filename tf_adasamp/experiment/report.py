"""The experiment's report: Figure 1's panels and summary.md with a verdict
on each of the paper's four claims."""

import dataclasses
import os

import numpy as np

from tf_adasamp.experiment import plots
from tf_adasamp.experiment.study import collect
from tf_adasamp.experiment.study import counterpart
from tf_adasamp.experiment.study import mean_over

CONFIDENCE = 0.95
SUPPORTED, CONTRADICTED, NOT_SHOWN = "supported", "contradicted", "not shown"
NO_VERDICT = "no verdict (one trial: an interval needs two)"


def paired_interval(differences, confidence=CONFIDENCE):
  """Mean of per-trial paired `differences` and its t confidence interval.

  Returns (mean, low, high); low and high are NaN for fewer than 2 trials.
  (scipy comes with scikit-learn, which the experiment depends on.)
  """
  from scipy import stats  # pylint: disable=import-outside-toplevel
  differences = np.asarray(differences, dtype=float)
  mean = float(differences.mean())
  if len(differences) < 2:
    return mean, float("nan"), float("nan")
  half = (stats.t.ppf((1 + confidence) / 2,
                      len(differences) - 1) * differences.std(ddof=1) /
          np.sqrt(len(differences)))
  return mean, mean - half, mean + half


def verdict(low, high, expected_sign):
  """SUPPORTED where the interval [low, high] excludes 0 on the side of
  `expected_sign` (+1: positive, -1: negative), CONTRADICTED where it
  excludes 0 on the other side, NOT_SHOWN where it holds 0, and NO_VERDICT
  without an interval (NaN bounds)."""
  if np.isnan(low) or np.isnan(high):
    return NO_VERDICT
  if expected_sign * low > 0 and expected_sign * high > 0:
    return SUPPORTED
  if expected_sign * low < 0 and expected_sign * high < 0:
    return CONTRADICTED
  return NOT_SHOWN


def overall(verdicts):
  """A claim made of several comparisons: SUPPORTED if every one is,
  CONTRADICTED if any is, NO_VERDICT if any has none, else NOT_SHOWN."""
  verdicts = list(verdicts)
  if NO_VERDICT in verdicts:
    return NO_VERDICT
  if CONTRADICTED in verdicts:
    return CONTRADICTED
  if all(v == SUPPORTED for v in verdicts):
    return SUPPORTED
  return NOT_SHOWN


# A run has collapsed when its final training accuracy is below twice
# chance: its sampling distribution has concentrated on a few examples.
COLLAPSE_FACTOR = 2.0
# Claim 4: the KL has decayed when its final value is below this fraction of
# its peak.
KL_DECAYED = 0.2


@dataclasses.dataclass
class Comparison:
  """One paired comparison: per-trial differences, their interval, verdict."""
  label: str
  measure: str
  differences: np.ndarray
  expected_sign: int  # the paper's direction: +1 higher, -1 lower
  threshold: float = 0.0  # the interval is judged against this value

  @property
  def interval(self):
    return paired_interval(self.differences)

  @property
  def verdict(self):
    _, low, high = self.interval
    return verdict(low - self.threshold, high - self.threshold,
                   self.expected_sign)

  @property
  def agreeing_trials(self):
    return int(
        np.sum(self.expected_sign * (self.differences - self.threshold) > 0))


@dataclasses.dataclass
class Claim:
  """One of the paper's claims: its comparisons and an overall verdict."""
  text: str
  comparisons: list
  notes: list = dataclasses.field(default_factory=list)
  verdict_override: str | None = None

  @property
  def verdict(self):
    if self.verdict_override:
      return self.verdict_override
    return overall(c.verdict for c in self.comparisons)


def _ranks(values):
  from scipy import stats  # pylint: disable=import-outside-toplevel
  return stats.rankdata(values)


def spearman(x, y):
  """Spearman's rank correlation (ties share ranks); 0 if y is constant."""
  x_ranks, y_ranks = _ranks(x), _ranks(y)
  if np.ptp(y_ranks) == 0 or np.ptp(x_ranks) == 0:
    return 0.0
  return float(np.corrcoef(x_ranks, y_ranks)[0, 1])


def _against_uniform(curves, names, metric, expected_sign, measure, half):
  """Paired comparisons of `metric`'s first-half time average, each
  adaptive algorithm minus its uniform counterpart, trial by trial."""
  comparisons = []
  for name in names:
    ours = mean_over(curves[name]["step"], curves[name][metric], half)
    theirs = mean_over(curves[counterpart(name)]["step"],
                       curves[counterpart(name)][metric], half)
    comparisons.append(
        Comparison(f"{name} − {counterpart(name)}", measure, ours - theirs,
                   expected_sign))
  return comparisons


def _amplitude_comparisons(sweep, keep):
  """Per-trial Spearman correlations with the amplitude, over the sweep's
  amplitudes where `keep` is True."""
  amplitudes = np.asarray(sweep["amplitude"])[keep]
  train = np.asarray(sweep["train_accuracy"])[keep]  # [A, trials]
  test = np.asarray(sweep["test_accuracy"])[keep]
  label = ", ".join(f"{a:g}" for a in amplitudes)
  return [
      Comparison(f"amplitudes {label}", "ρ(amplitude, train accuracy 1st "
                 "half)", np.array([spearman(amplitudes, t) for t in train.T]),
                 +1),
      Comparison(f"amplitudes {label}", "ρ(amplitude, final test accuracy)",
                 np.array([spearman(amplitudes, t) for t in test.T]), -1)
  ]


def assess_claims(curves, sweep, steps, num_classes=10):
  """Judges the paper's four claims on paired per-trial differences.

  Each comparison is adaptive minus its uniform counterpart of the same
  trial (same seed, same initial model), with a 95% t-interval over trials:
  SUPPORTED where it excludes 0 in the paper's direction, CONTRADICTED
  where it excludes 0 the other way, NOT_SHOWN otherwise, and NO_VERDICT
  with one trial. Returns a list of Claims.
  """
  half = steps / 2
  adaptive = [name for name in curves if not name.startswith("Unif")]
  claims = []

  claims.append(
      Claim(
          "Adaptive sampling reduces empirical risk faster (increases training "
          "accuracy faster): for every AdaSamp variant, training cross-entropy "
          "averaged over the first half of training is lower, and training "
          "accuracy higher, than its uniform counterpart's.",
          _against_uniform(curves, adaptive, "train_loss", -1,
                           "train cross-entropy, 1st half", half) +
          _against_uniform(curves, adaptive, "train_accuracy", +1,
                           "train accuracy, 1st half", half)))

  claims.append(
      Claim(
          "AdaGrad with adaptive sampling gains test accuracy early: each "
          "AdaSamp-*-AdaGrad's test accuracy averaged over the first half of "
          "training is higher than Unif-AdaGrad's.",
          _against_uniform(curves,
                           [n for n in adaptive if n.endswith("AdaGrad")],
                           "test_accuracy", +1, "test accuracy, 1st half",
                           half)))

  text = (f"A larger amplitude trains faster but tests worse: over the sweep "
          f"of {sweep['algorithm']} (amplitude 0 is "
          f"{counterpart(sweep['algorithm'])}), the rank correlation of the "
          "amplitude with first-half training accuracy is positive and with "
          "final test accuracy negative (per-trial Spearman ρ).")
  amplitudes = np.asarray(sweep["amplitude"])
  if len(amplitudes) < 3:
    claims.append(
        Claim(text, [],
              ["A sweep of fewer than 3 amplitudes "
               "cannot show a trend."], "not assessed"))
  else:
    everything = _amplitude_comparisons(sweep, np.ones(len(amplitudes), bool))
    claim = Claim(text, everything)
    final_train = np.asarray(sweep["train_accuracy_final"]).mean(axis=1)
    collapsed = final_train < COLLAPSE_FACTOR / num_classes
    if not collapsed.any():
      claim.notes.append("No run collapsed (final training accuracy below "
                         f"{COLLAPSE_FACTOR:g} × chance).")
    else:
      names = ", ".join(f"{a:g}" for a in amplitudes[collapsed])
      without = [] if (~collapsed).sum() < 3 else _amplitude_comparisons(
          sweep, ~collapsed)
      claim.comparisons += without
      without_verdict = (overall(c.verdict for c in without) if without else
                         "not assessed (fewer than 3 amplitudes left)")
      driven = ("the same either way" if without_verdict == claim.verdict else
                "so the collapsed runs drive the verdict")
      claim.notes.append(
          f"Amplitude {names} collapsed (mean final training accuracy "
          f"{', '.join(f'{v:.3f}' for v in final_train[collapsed])}, below "
          f"{COLLAPSE_FACTOR:g} × chance): with all amplitudes "
          f"{overall(c.verdict for c in everything)}, without the collapsed "
          f"ones {without_verdict}; {driven}. The verdict above uses all "
          "amplitudes.")
      claim.verdict_override = overall(c.verdict for c in everything)
    claims.append(claim)

  comparisons, late_peaks = [], []
  for name in adaptive:
    kl = curves[name]["kl"]  # [trials, E]
    peak_step = curves[name]["step"][int(np.argmax(kl.mean(axis=0)))]
    if peak_step > half:
      late_peaks.append(f"{name} (peak at step {peak_step})")
    peaks = kl.max(axis=1)
    comparisons.append(
        Comparison(name,
                   f"final KL / peak KL (peak at step {peak_step})",
                   np.divide(kl[:, -1],
                             peaks,
                             out=np.zeros_like(peaks),
                             where=peaks > 0),
                   -1,
                   threshold=KL_DECAYED))
  claim = Claim(
      "The conditional KL(Q_t ‖ P_t) rises early, then decays toward 0: for "
      "every AdaSamp variant the mean KL peaks in the first half of "
      f"training and the final KL is below {KL_DECAYED:g} × the trial's "
      f"peak (interval of the ratio below {KL_DECAYED:g}).", comparisons)
  if late_peaks:
    claim.notes.append("Peaks in the second half: " + ", ".join(late_peaks))
    claim.verdict_override = CONTRADICTED
  claims.append(claim)
  return claims


def mean_std(values, digits=4):
  values = np.asarray(values)
  return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def _interval_text(comparison):
  mean, low, high = comparison.interval
  digits = 4 if max(abs(mean), abs(low) if np.isfinite(low) else 0) < 10 else 1
  if not np.isfinite(low):
    return f"{mean:+.{digits}f} (one trial)"
  return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _certificate_lines(curves):
  """Corollary 1 beside the measured gap, for runs that log both."""
  rows = [(name, c) for name, c in curves.items() if "corollary1_bound" in c]
  if not rows:
    return []
  lines = [
      "",
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
      "not a certificate for this model. Its other assumptions, and which "
      "hold here, are in docs/experiment.md.",
      "",
      "| algorithm | final measured gap | Corollary 1 (δ = 0.05) |",
      "|---|---|---|",
  ]
  for name, c in rows:
    lines.append(f"| {name} | {mean_std(c['zero_one_gap'][:, -1])} | "
                 f"{np.mean(c['corollary1_bound'][:, -1]):.4g} |")
  return lines


def summary_markdown(curves,
                     sweep,
                     settings,
                     trials,
                     dataset,
                     model,
                     command,
                     departures=()):
  """The experiment's summary as markdown: departures from the paper,
  settings, tables, claims with their intervals."""
  steps = settings.steps
  half = steps / 2
  lines = [
      f"# Adaptive vs uniform sampling on {dataset} ({model}), "
      f"{trials} trials",
      "",
      f"Produced by `{command}`.",
      "",
      "## Departures from the paper",
      "",
      *[f"- {line}" for line in departures],
      "",
      f"Settings: {steps} steps of batch {settings.batch_size}, evaluation "
      f"every {settings.eval_interval} steps; SGD step size "
      f"{settings.sgd_learning_rate:g} / (1 + {settings.sgd_lr_decay:g} t), "
      f"AdaGrad step size {settings.adagrad_learning_rate:g}; amplitude "
      f"{settings.amplitude:g}, decay {settings.decay:g}, utility at "
      f"'{settings.utility_at}'. Trial k runs every algorithm with seed k "
      "(same initial model).",
      "",
      "## The paper's claims",
      "",
      "Each claim is judged on paired per-trial differences: adaptive minus "
      "its uniform counterpart in the same trial (same seed, same initial "
      "model), with a 95% t-interval over the trials. *supported*: the "
      "interval excludes 0 in the paper's direction; *contradicted*: it "
      "excludes 0 the other way; *not shown*: it contains 0. '1st half' is "
      f"the average over steps [0, {half:g}] (area under the curve divided "
      "by its length).",
      "",
  ]
  claims = assess_claims(curves, sweep, steps)
  if trials < 2:
    lines += [
        "With one trial no verdict is possible: an interval needs at "
        "least two. The differences below are single values.", ""
    ]
  lines += [
      "| claim | comparison | measure | mean difference [95% CI] | "
      "trials in the paper's direction | verdict |", "|---|---|---|---|---|---|"
  ]
  for number, claim in enumerate(claims, 1):
    for c in claim.comparisons:
      lines.append(f"| {number} | {c.label} | {c.measure} | "
                   f"{_interval_text(c)} | {c.agreeing_trials}/"
                   f"{len(c.differences)} | {c.verdict} |")
  lines.append("")
  for number, claim in enumerate(claims, 1):
    lines.append(f"{number}. {claim.text} **{claim.verdict}.**")
    lines += [f"   - {note}" for note in claim.notes]
  adaptive = [name for name in curves if not name.startswith("Unif")]
  lines += [
      "",
      "## At the end of training (paired, no claim)",
      "",
      "The paper makes no claim about the end of training; the same paired "
      "differences there, adaptive minus uniform, 95% t-interval:",
      "",
      "| comparison | final train cross-entropy | final train accuracy | "
      "final test accuracy |",
      "|---|---|---|---|",
  ]
  for name in adaptive:
    cells = [
        _interval_text(
            Comparison(
                "", metric, curves[name][metric][:, -1] -
                curves[counterpart(name)][metric][:, -1], +1))
        for metric in ("train_loss", "train_accuracy", "test_accuracy")
    ]
    lines.append(f"| {name} − {counterpart(name)} | " + " | ".join(cells) +
                 " |")
  lines += [
      "",
      f"## Algorithms (mean ± std over {trials} trials)",
      "",
      "'1st half', '2nd half' and 'AUC' are time averages over steps "
      f"[0, {half:g}], [{half:g}, {steps}] and [0, {steps}].",
      "",
      "| algorithm | final train loss | final train acc | final test acc | "
      "train loss, 1st half | train acc, 1st half | train loss, 2nd half | "
      "test acc, 1st half | test acc, AUC |",
      "|---|---|---|---|---|---|---|---|---|",
  ]
  for name, c in curves.items():
    cells = [
        c["train_loss"][:, -1], c["train_accuracy"][:, -1],
        c["test_accuracy"][:, -1],
        mean_over(c["step"], c["train_loss"], half),
        mean_over(c["step"], c["train_accuracy"], half),
        mean_over(c["step"], c["train_loss"], since=half),
        mean_over(c["step"], c["test_accuracy"], half),
        mean_over(c["step"], c["test_accuracy"])
    ]
    lines.append(f"| {name} | " + " | ".join(mean_std(v) for v in cells) + " |")
  lines += [
      "",
      f"## Amplitude sweep ({sweep['algorithm']}; 0 is "
      f"{counterpart(sweep['algorithm'])})",
      "",
      "| amplitude | train acc, 1st half | train loss, 1st half | "
      "final train acc | final test acc | max KL |",
      "|---|---|---|---|---|---|",
  ]
  for i, amplitude in enumerate(sweep["amplitude"]):
    lines.append(f"| {amplitude:g} | {mean_std(sweep['train_accuracy'][i])}"
                 f" | {mean_std(sweep['train_loss'][i])} | "
                 f"{mean_std(sweep['train_accuracy_final'][i])} | "
                 f"{mean_std(sweep['test_accuracy'][i])} | "
                 f"{mean_std(sweep['kl_max'][i], 3)} |")
  lines += _certificate_lines(curves)
  return "\n".join(lines) + "\n"


def report(runs,
           settings,
           trials,
           dataset,
           model,
           report_dir,
           command,
           departures=()):
  """Draws Figure 1 and writes summary.md to `report_dir`; returns paths."""
  curves, sweep = collect(runs, settings)
  title = (f"{dataset}, {model}: adaptive (AdaSamp) against uniform (Unif) "
           f"sampling, mean ± std over {trials} trials")
  paths = plots.figure1(curves, sweep, report_dir, title=title)
  paths.append(os.path.join(report_dir, "summary.md"))
  with open(paths[-1], "w") as f:
    f.write(
        summary_markdown(curves, sweep, settings, trials, dataset, model,
                         command, departures))
  return paths
