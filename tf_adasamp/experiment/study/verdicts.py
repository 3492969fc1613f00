"""The rules by which the experiment gives a verdict on a claim of the paper.

A comparison is a set of paired per-trial differences (adaptive minus its
uniform counterpart in the same trial, or one trial's rank correlation),
tested against a reference value with a one-sample t-test (`paired_test`;
`rank_test` for rank correlations). Within a claim the comparisons'
p-values are adjusted by Holm's method, and:

  supported / contradicted  a comparison's adjusted p is below ALPHA, with
                            the mean on the paper's / the other side;
  not shown                 its adjusted p is ALPHA or more;
  no verdict                fewer than MIN_TRIALS trials, or every trial
                            equal (an interval of zero width), except a
                            rank correlation equal in every trial, which
                            the exact sign test judges.

A claim is mixed if some of its comparisons are supported and some
contradicted, contradicted if any is (and none supported), supported if all
of them are, without a verdict if any comparison has none, and not shown
otherwise; "not testable here" where its precondition fails on the data.
Rank correlations are judged by the sign test (`rank_test`).
Intervals are the raw (unadjusted) 95% t-intervals; the verdicts read the
adjusted p-values.
"""

import dataclasses
import math

import numpy as np

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
MIN_TRIALS = 3
SUPPORTED, CONTRADICTED, NOT_SHOWN = "supported", "contradicted", "not shown"
MIXED = "mixed"
NO_VERDICT = "no verdict"
NOT_TESTABLE = "not testable here"


@dataclasses.dataclass(frozen=True)
class Test:
  """A one-sample t-test of paired differences against `reference`.

  `low` and `high` bound the mean's 95% interval; `p` is two-sided. Where no
  test is possible, `why_not` says why and low, high and p are NaN."""
  mean: float
  low: float
  high: float
  p: float
  trials: int
  reference: float = 0.0
  why_not: str | None = None


def paired_test(differences, reference=0.0):
  """The t-test of `differences` ([trials]) against `reference`, or why
  there is none: fewer than MIN_TRIALS trials, or all of them equal."""
  from scipy import stats
  values = np.asarray(differences, dtype=float)
  mean = float(values.mean()) if len(values) else math.nan
  nan = math.nan
  if len(values) < MIN_TRIALS:
    return Test(mean, nan, nan, nan, len(values), reference,
                f"{len(values)} trials (a verdict needs {MIN_TRIALS})")
  # Equal up to rounding: the t statistic would be rounding noise.
  if np.ptp(values) <= 1e-12 * max(1.0, abs(mean)):
    return Test(mean, mean, mean, nan, len(values), reference,
                "every trial equal: an interval of zero width")
  result = stats.ttest_1samp(values, reference)
  interval = result.confidence_interval(CONFIDENCE)
  return Test(mean, float(interval.low), float(interval.high),
              float(result.pvalue), len(values), reference)


def rank_test(correlations):
  """The test of per-trial rank correlations against 0: the mean and its
  t-interval (the single value where every trial is equal), and the p of
  the exact two-sided sign test on the trials' signs (zeros dropped);
  no verdict from fewer than MIN_TRIALS trials or where none is signed."""
  # A rank correlation is bounded: a trend that holds in every trial gives
  # -1 (or +1) in each, the strongest evidence a trial can give, which a
  # t-test would weigh less than a spread of -0.9s. The sign test counts
  # the trials on each side alone.
  from scipy import stats
  values = np.asarray(correlations, dtype=float)
  test = paired_test(values)
  signed = int(np.sum(values != 0))
  if test.trials < MIN_TRIALS or not signed:
    return dataclasses.replace(test,
                               why_not=test.why_not or
                               "no trial with a signed correlation")
  p = stats.binomtest(int(np.sum(values > 0)), signed, 0.5).pvalue
  return dataclasses.replace(test, p=float(p), why_not=None)


def holm(p_values):
  """Holm's step-down adjustment of `p_values` (NaN: no test; they count
  in the family's size, which makes the adjustment conservative)."""
  p = np.asarray(p_values, dtype=float)
  adjusted = np.full(len(p), math.nan)
  order = np.argsort(np.where(np.isnan(p), np.inf, p), kind="stable")
  running = 0.0
  for rank, index in enumerate(order):
    if np.isnan(p[index]):
      break
    running = max(running, min(1.0, (len(p) - rank) * p[index]))
    adjusted[index] = running
  return adjusted


def comparison_verdict(test, adjusted_p, expected_sign):
  """The verdict of one comparison (`expected_sign` +1: the paper expects
  the differences above the reference; -1: below)."""
  if test.why_not:
    return NO_VERDICT
  if not adjusted_p < ALPHA:
    return NOT_SHOWN
  side = np.sign(test.mean - test.reference)
  return SUPPORTED if side == expected_sign else CONTRADICTED


def combine(verdicts):
  """A claim's verdict from its comparisons' (the rule above)."""
  verdicts = list(verdicts)
  if not verdicts:
    return NO_VERDICT
  if CONTRADICTED in verdicts and SUPPORTED in verdicts:
    return MIXED
  if CONTRADICTED in verdicts:
    return CONTRADICTED
  if all(v == SUPPORTED for v in verdicts):
    return SUPPORTED
  if NO_VERDICT in verdicts:
    return NO_VERDICT
  return NOT_SHOWN


# Collapse: the sampler has concentrated on a few examples when its
# effective support n exp(-KL(Q_t || P_t)) falls below this fraction of n
# at any evaluation (or the model's final training accuracy falls below
# COLLAPSE_ACCURACY x chance).
COLLAPSE_SUPPORT = 0.1
COLLAPSE_ACCURACY = 2.0


def effective_support(kl):
  """n exp(-KL) as a fraction of n: the share of the examples a
  distribution as spread as Q_t, but uniform on its support, would draw
  from."""
  return np.exp(-np.asarray(kl, dtype=float))


def collapsed(kl, final_train_accuracy, num_classes):
  """[trials] bool: which runs collapsed, from their KL curves ([trials,
  E]) and final training accuracies ([trials])."""
  support = effective_support(np.nan_to_num(kl)).min(axis=-1)
  return (support < COLLAPSE_SUPPORT) | (np.asarray(final_train_accuracy)
                                         < COLLAPSE_ACCURACY / num_classes)


# A model fits its data when its uniform run's final training error is at
# most FIT_ERROR: the paper's CNN fits CIFAR-10's training set; under the
# 0-1 utility each example still misclassified keeps a log weight near
# amplitude / (1 - decay), so the KL of a model that does not fit settles
# at a positive floor (`kl_floor`) instead of decaying toward 0.
FIT_ERROR = 0.03


def kl_floor(error, amplitude, decay):
  """KL(Q || P) in nats when a fraction `error` of the examples has log
  weight amplitude / (1 - decay) and the rest 0: where the 0-1 utility's
  distribution settles for a model stuck at training error `error`."""
  weight = math.exp(amplitude / (1 - decay))
  total = error * weight + (1 - error)
  return (error * weight * math.log(weight) / total) - math.log(total)


# Claims 1 and 2 are about sampling that differs from uniform: the window
# opens where the adaptive variant's mean KL first reaches KL_RISEN of its
# peak, and the claims are testable only where that peak is at least
# MIN_KL nats (an effective support of at most exp(-MIN_KL) = 99% of n).
KL_RISEN = 0.5
MIN_KL = 0.01


def nonuniform_window(epochs, mean_kl):
  """(start, end) in epochs of claims 1 and 2's window for one adaptive
  variant, or None where its sampling never leaves uniform (peak below
  MIN_KL): from the first evaluation whose mean KL reaches KL_RISEN of the
  peak to half-way through training, or to the end where that leaves
  fewer than 2 evaluations."""
  epochs = np.asarray(epochs, dtype=float)
  mean_kl = np.nan_to_num(np.asarray(mean_kl, dtype=float))
  peak = mean_kl.max()
  if peak < MIN_KL:
    return None
  start = epochs[int(np.argmax(mean_kl >= KL_RISEN * peak))]
  end = epochs[-1] / 2
  if np.sum((epochs >= start) & (epochs <= end)) < 2:
    end = epochs[-1]
  if np.sum((epochs >= start) & (epochs <= end)) < 2:
    return None
  return float(start), float(end)


def _rank_correlation(statistic, x, y):
  """`statistic` (scipy's spearmanr or kendalltau) of x and y, 0 where
  either side is constant (no order to correlate); inf ranks last."""
  from scipy import stats
  if np.ptp(stats.rankdata(x)) == 0 or np.ptp(stats.rankdata(y)) == 0:
    return 0.0
  return float(statistic(x, y).statistic)


def spearman(x, y):
  """Spearman's rank correlation (scipy's), 0 where either side is
  constant."""
  from scipy import stats
  return _rank_correlation(stats.spearmanr, x, y)


def kendall(x, y):
  """Kendall's tau-b (scipy's), 0 where either side is constant."""
  from scipy import stats
  return _rank_correlation(stats.kendalltau, x, y)


# Claim 4's shape, per trial: the KL rises early, its largest value at an
# evaluation in the first EARLY_PEAK of training, then declines: Kendall's
# tau of the KL with time over the rest of training is below 0. The decline
# is read over that fixed window, not from each trial's own peak: a window
# that opens at a maximum leans tau toward a decline even on flat noise.
EARLY_PEAK = 0.5


def kl_shape(epochs, kl):
  """Claim 4's shape of each trial's KL curve.

  Args:
    epochs: [E] the evaluations' epochs.
    kl: [trials, E] KL(Q_t || P_t) at those evaluations (NaN read as 0).

  Returns:
    (early, tau): [trials] bool, whether the trial's KL peaks in the first
    EARLY_PEAK of training; [trials] Kendall's tau of the KL with the epoch
    over the evaluations from there to the end.
  """
  epochs = np.asarray(epochs, dtype=float)
  kl = np.nan_to_num(np.asarray(kl, dtype=float))
  split = EARLY_PEAK * epochs[-1]
  early = epochs[np.argmax(kl, axis=1)] <= split
  after = epochs >= split
  return early, np.array([kendall(epochs[after], k[after]) for k in kl])
