"""The paper's four claims, judged on the experiment's curves by the rules
of `verdicts`.

  1. Adaptive sampling reduces the empirical risk faster.
  2. AdaGrad with adaptive sampling gains test accuracy early.
  3. A larger amplitude trains faster but tests worse.
  4. KL(Q_t || P_t) rises early, then decays toward 0 as the empirical risk
     converges.

Windows are in epochs. Claims 1 and 2 are judged over the first half of
training at every amplitude that does not collapse (claim 1 over the sweep's
too), with each adaptive variant's window of non-uniform sampling
(`verdicts.nonuniform_window`) shown beside it; claim 3 on the sweep's
amplitudes that do not collapse, by the measures of TREND_MEASURES; claim 4
as a shape (`verdicts.kl_shape`), per variant, where its uniform
counterpart fits its data.
"""

import dataclasses
from typing import Callable

import numpy as np

from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import verdicts
from tf_adasamp.experiment.study.design import mean_over


@dataclasses.dataclass
class Comparison:
  """One comparison: per-trial values tested against `reference`.

  A comparison that is not `judged` is shown beside its family's, tested
  but neither adjusted nor given a verdict; `ranks` marks per-trial rank
  correlations (`verdicts.rank_test`); `columns` holds per-trial values
  the comparison summarises, shown beside it by column."""
  label: str
  measure: str
  differences: np.ndarray
  expected_sign: int  # the paper's direction: +1 above, -1 below
  reference: float = 0.0
  judged: bool = True
  ranks: bool = False
  columns: dict = dataclasses.field(default_factory=dict)
  test: verdicts.Test | None = None
  adjusted_p: float = float("nan")
  verdict: str = verdicts.NO_VERDICT


@dataclasses.dataclass
class Family:
  """Comparisons adjusted together (Holm), with their combined verdict."""
  name: str
  comparisons: list
  verdict: str = verdicts.NO_VERDICT


def judge(name, comparisons):
  """Tests `comparisons`, adjusts the judged ones' p-values together and
  combines their verdicts; returns the Family."""
  for c in comparisons:
    c.test = (verdicts.rank_test(c.differences)
              if c.ranks else verdicts.paired_test(c.differences, c.reference))
  judged = [c for c in comparisons if c.judged]
  adjusted = verdicts.holm([c.test.p for c in judged])
  for c, p in zip(judged, adjusted):
    c.adjusted_p = float(p)
    c.verdict = verdicts.comparison_verdict(c.test, p, c.expected_sign)
  return Family(name, comparisons, verdicts.combine(c.verdict for c in judged))


@dataclasses.dataclass
class Claim:
  """A claim: the family its verdict rests on, families shown beside it,
  the precondition's figures, and notes."""
  text: str
  families: list
  precondition: list = dataclasses.field(default_factory=list)
  notes: list = dataclasses.field(default_factory=list)
  testable: bool = True

  @property
  def verdict(self):
    if not self.testable:
      return verdicts.NOT_TESTABLE
    return self.families[0].verdict if self.families else verdicts.NO_VERDICT


def _final_error(curve):
  return 1 - float(np.mean(curve["train_accuracy"][:, -1]))


def fit_lines(curves):
  """Whether the model fits its data, from each uniform run's final
  training error."""
  lines = []
  for name in ("Unif-SGD", "Unif-AdaGrad"):
    error = _final_error(curves[name])
    fits = "fits" if error <= verdicts.FIT_ERROR else "does not fit"
    lines.append(f"{name}'s final training error {100 * error:.2f}% "
                 f"({fits} its data: the threshold is "
                 f"{100 * verdicts.FIT_ERROR:g}%).")
  return lines


def _windows(curves):
  """{adaptive variant: (start, end) epochs or None}."""
  return {
      name:
          verdicts.nonuniform_window(curves[name]["epoch"],
                                     curves[name]["kl"].mean(axis=0))
      for name in presets.ADAPTIVE
      if name in curves
  }


def _against_uniform(label, ours, theirs, metric, expected_sign, window):
  """`ours` minus `theirs` (their uniform counterpart's curves) in
  `metric`'s time average over `window`."""
  since, until = window
  difference = (mean_over(ours["epoch"], ours[metric], until, since) -
                mean_over(theirs["epoch"], theirs[metric], until, since))
  return Comparison(
      label, f"{metric.replace('_', ' ')}, epochs "
      f"[{since:g}, {until:g}]", difference, expected_sign)


def _early_claim(text, curves, names, measures, swept=()):
  """Claims 1 and 2: `measures` ((metric, expected sign)) of `names`, and
  of the `swept` (label, curves, uniform curves), against uniform: judged
  over the first half of training at every amplitude, with each variant's
  window of non-uniform sampling shown beside it where it has one."""
  windows = _windows(curves)
  half = curves[presets.ADAPTIVE[0]]["epoch"][-1] / 2
  precondition = [
      (f"{name}: peak mean KL {np.nanmax(curves[name]['kl'].mean(axis=0)):.4f}"
       " nats; " + (f"non-uniform window epochs [{windows[name][0]:g}, "
                    f"{windows[name][1]:g}]" if windows[name] else
                    f"sampling stayed near uniform (peak below "
                    f"{verdicts.MIN_KL:g} nats): no window")) for name in names
  ]
  pairs = [(f"{name} − {presets.counterpart(name)}", curves[name],
            curves[presets.counterpart(name)]) for name in names] + list(swept)
  claim = Claim(text, [], precondition, fit_lines(curves))
  claim.families.append(
      judge("first half, every amplitude", [
          _against_uniform(label, ours, theirs, metric, sign, (0.0, half))
          for label, ours, theirs in pairs
          for metric, sign in measures
      ]))
  with_window = [name for name in names if windows[name]]
  if with_window:
    claim.families.append(
        judge("non-uniform window (for comparison)", [
            _against_uniform(f"{name} − {presets.counterpart(name)}",
                             curves[name], curves[presets.counterpart(name)],
                             metric, sign, windows[name])
            for name in with_window
            for metric, sign in measures
        ]))
  return claim


def _swept(sweep, amplitude, num_classes):
  """The sweep's amplitudes other than `amplitude` (judged with the
  algorithms) and 0 that do not collapse, as (label, curves, uniform's)."""
  uniform = sweep["curves"][0]
  rows = sweep_table(sweep, num_classes)
  return [(f"{sweep['algorithm']} at amplitude {a:g} − "
           f"{presets.counterpart(sweep['algorithm'])}", curve, uniform)
          for a, curve, row in zip(sweep["amplitude"], sweep["curves"], rows)
          if a and a != amplitude and not row["collapsed"]]


def sweep_table(sweep, num_classes):
  """Per amplitude of the sweep: its collapse figures, as a dict of lists."""
  rows = []
  for amplitude, curve in zip(sweep["amplitude"], sweep["curves"]):
    kl = np.nan_to_num(curve["kl"])
    final_train = curve["train_accuracy"][:, -1]
    collapsed = verdicts.collapsed(kl, final_train, num_classes)
    rows.append({
        "amplitude": amplitude,
        "max_kl": kl.max(axis=1),
        "min_support": verdicts.effective_support(kl).min(),
        "min_ess": float(np.nanmin(curve["ess_fraction"])),
        "final_train": final_train,
        "collapsed": int(collapsed.sum()),
        "trials": len(collapsed),
    })
  return rows


@dataclasses.dataclass(frozen=True)
class Measure:
  """One of claim 3's measures of a run, read from its curves."""
  half: str  # the half of the claim it measures
  label: str
  metric: str  # the curve it reads
  expected_sign: int  # of its rank correlation with the amplitude
  of: Callable  # (curves, uniform's curves) -> [trials] values


# Claim 3's measures, fixed in advance and judged together (Holm): the
# reading of "trains faster" and "tests worse" hangs on the measure, so
# where the measures disagree the claim is mixed, not decided by one.
TREND_MEASURES = (
    Measure(
        "trains faster", "steps to {uniform}'s final train loss", "train_loss",
        -1, lambda c, uniform: targets.steps_to(
            c, targets.final_train_loss(uniform))),
    Measure(
        "trains faster", "train accuracy averaged over the first half",
        "train_accuracy", +1, lambda c, _: mean_over(c["epoch"], c[
            "train_accuracy"], c["epoch"][-1] / 2)),
    Measure("tests worse", "final test accuracy", "test_accuracy", -1,
            lambda c, _: c["test_accuracy"][:, -1]),
    Measure("tests worse", "test accuracy averaged over the run",
            "test_accuracy", -1,
            lambda c, _: mean_over(c["epoch"], c["test_accuracy"])),
    Measure("tests worse", "best test accuracy", "test_accuracy", -1,
            lambda c, _: c["test_accuracy"].max(axis=1)),
    Measure("tests worse", "final test loss", "test_loss", +1,
            lambda c, _: c["test_loss"][:, -1]),
)


def _trend_comparisons(sweep, keep):
  """Per measure of TREND_MEASURES that the runs record: its per-trial
  Spearman correlation with the amplitude over the sweep's amplitudes
  where `keep` is True, with its values per amplitude beside."""
  amplitudes = np.asarray(sweep["amplitude"])[keep]
  curves = [c for c, k in zip(sweep["curves"], keep) if k]
  uniform = presets.counterpart(sweep["algorithm"])
  comparisons = []
  for m in TREND_MEASURES:
    if not all(m.metric in c for c in curves):
      continue
    values = np.array([m.of(c, sweep["curves"][0]) for c in curves])
    comparisons.append(
        Comparison(
            m.half,
            f"ρ(amplitude, {m.label.format(uniform=uniform)})",
            np.array([verdicts.spearman(amplitudes, v) for v in values.T]),
            m.expected_sign,
            ranks=True,
            columns={
                f"amplitude {a:g}": v for a, v in zip(amplitudes, values)
            }))
  return comparisons


def amplitude_claim(curves, sweep, num_classes):
  """Claim 3, on the amplitudes that do not collapse."""
  uniform = presets.counterpart(sweep["algorithm"])
  judged = " and ".join(
      f"{'positive' if m.expected_sign > 0 else 'negative'} with the "
      f"{m.label.format(uniform=uniform)}" for m in TREND_MEASURES)
  text = (f"A larger amplitude trains faster but tests worse: over the sweep "
          f"of {sweep['algorithm']} (amplitude 0 is {uniform}), at the "
          "amplitudes that do not collapse, the per-trial Spearman ρ of the "
          f"amplitude is {judged}; the target is {uniform}'s final training "
          "loss in the same trial. The measures were fixed in advance and "
          "are judged together: where some follow the paper and some go "
          "against it, the claim is mixed.")
  rows = sweep_table(sweep, num_classes)
  keep = np.array([row["collapsed"] == 0 for row in rows])
  dropped = [f"{row['amplitude']:g}" for row in rows if row["collapsed"]]
  precondition = [
      f"{keep.sum()} of {len(keep)} amplitudes do not collapse" +
      (f" (collapsed: {', '.join(dropped)})" if dropped else "") +
      "; a trend needs 3."
  ]
  claim = Claim(text, [], precondition, fit_lines(curves), keep.sum() >= 3)
  if keep.sum() >= 3:
    claim.families.append(
        judge("amplitudes that do not collapse",
              _trend_comparisons(sweep, keep)))
  return claim


def kl_claim(curves, amplitude, decay):
  """Claim 4, per adaptive variant whose uniform counterpart fits its
  data: the shape of its KL curves (`verdicts.kl_shape`)."""
  early_part = f"the first {verdicts.EARLY_PEAK:.0%} of training"
  text = ("The conditional KL(Q_t ‖ P_t) rises early, then decays toward 0 "
          "as the empirical risk converges: for each AdaSamp variant, the "
          f"KL peaks in {early_part} and then declines, "
          "its per-trial Kendall τ with time over the rest of training "
          "below 0.")
  precondition, comparisons = [], []
  for name in presets.ADAPTIVE:
    error = _final_error(curves[presets.counterpart(name)])
    fits = error <= verdicts.FIT_ERROR
    epochs = curves[name]["epoch"]
    kl = np.nan_to_num(curves[name]["kl"])
    early, tau = verdicts.kl_shape(epochs, kl)
    peaks = kl.max(axis=1)
    final = np.divide(kl[:, -1],
                      peaks,
                      out=np.zeros_like(peaks),
                      where=peaks > 0)
    precondition.append(
        f"{name}: the KL peaks in {early_part} in {early.sum()}/"
        f"{len(early)} trials (the mean curve peaks at epoch "
        f"{epochs[int(np.argmax(kl.mean(axis=0)))]:g}) and ends at "
        f"{final.mean():.3f} × the trial's peak; "
        f"{presets.counterpart(name)}'s final training error "
        f"{100 * error:.2f}% ({'at most' if fits else 'above'} "
        f"{100 * verdicts.FIT_ERROR:g}%; at that error the 0-1 utility's KL "
        f"settles near {verdicts.kl_floor(error, amplitude, decay):.4f} nats"
        ")" + ("" if fits else ": not testable"))
    if fits:
      since = verdicts.EARLY_PEAK * epochs[-1]
      comparisons.append(
          Comparison(name, f"Kendall τ(epoch, KL), epochs [{since:g}, "
                     f"{epochs[-1]:g}]",
                     tau,
                     -1,
                     ranks=True))
  claim = Claim(text, [], precondition, testable=bool(comparisons))
  if comparisons:
    claim.families.append(judge("variants whose model fits", comparisons))
  return claim


def assess(curves, sweep, amplitude, decay, num_classes=10):
  """The four claims, judged; a list of Claims."""
  adaptive = [name for name in presets.ADAPTIVE if name in curves]
  return [
      _early_claim(
          "Adaptive sampling reduces empirical risk faster: for every AdaSamp "
          "variant and amplitude, training cross-entropy averaged over the "
          "first half of training is lower, and training accuracy higher, "
          "than its uniform counterpart's.", curves, adaptive,
          [("train_loss", -1), ("train_accuracy", +1)],
          _swept(sweep, amplitude, num_classes)),
      _early_claim(
          "AdaGrad with adaptive sampling gains test accuracy early: each "
          "AdaSamp-*-AdaGrad's test accuracy averaged over the first half of "
          "training is higher than Unif-AdaGrad's.", curves,
          [n for n in adaptive if n.endswith("AdaGrad")],
          [("test_accuracy", +1)]),
      amplitude_claim(curves, sweep, num_classes),
      kl_claim(curves, amplitude, decay),
  ]
