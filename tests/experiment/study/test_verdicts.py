"""The verdict rules (tf_adasamp.experiment.study.verdicts), on synthetic
trials."""

import math

import numpy as np
import pytest
from scipy import stats

from tf_adasamp.experiment.study import verdicts


def test_holm_adjusts_step_down_and_keeps_the_order():
  # Sorted: 0.005 x 4, 0.01 x 3, 0.03 x 2, 0.04 x 1 (raised to the running
  # maximum 0.06).
  np.testing.assert_allclose(verdicts.holm([0.01, 0.04, 0.03, 0.005]),
                             [0.03, 0.06, 0.06, 0.02])
  np.testing.assert_allclose(verdicts.holm([0.5, 0.9]), [1.0, 1.0])


def test_holm_counts_untested_comparisons_in_the_family():
  adjusted = verdicts.holm([0.01, math.nan, 0.02])
  np.testing.assert_allclose(adjusted[[0, 2]], [0.03, 0.04])
  assert math.isnan(adjusted[1])


def test_three_marginal_rows_of_eight_do_not_survive_holm():
  # The review's claim 1: p = 0.049, 0.036, 0.035 among 8 comparisons.
  adjusted = verdicts.holm([0.049, 0.036, 0.035, 0.4, 0.5, 0.6, 0.7, 0.8])
  assert (adjusted[:3] >= verdicts.ALPHA).all()


def test_paired_test_is_scipys_t_test():
  values = np.array([0.1, 0.3, 0.2, 0.4])
  test = verdicts.paired_test(values, reference=0.05)
  expected = stats.ttest_1samp(values, 0.05)
  interval = expected.confidence_interval(0.95)
  np.testing.assert_allclose(
      [test.mean, test.low, test.high, test.p],
      [0.25, interval.low, interval.high, expected.pvalue])
  # By hand: t(0.975, 3) = 3.1824, standard error std / 2.
  half = 3.1824 * values.std(ddof=1) / 2
  np.testing.assert_allclose([test.low, test.high], [0.25 - half, 0.25 + half],
                             rtol=1e-4)
  assert test.why_not is None


@pytest.mark.parametrize("values, reason", [([0.1, 0.2], "2 trials"),
                                            ([-0.5, -0.5, -0.5], "zero width")])
def test_no_verdict_from_few_trials_or_a_zero_width_interval(values, reason):
  test = verdicts.paired_test(values)
  assert reason in test.why_not
  assert math.isnan(test.p)
  assert verdicts.comparison_verdict(test, test.p, -1) == verdicts.NO_VERDICT


def test_comparison_verdict_reads_the_adjusted_p_and_the_side():
  test = verdicts.paired_test([0.2, 0.3, 0.25, 0.22])
  assert test.p < 0.01
  assert verdicts.comparison_verdict(test, 0.01, +1) == verdicts.SUPPORTED
  assert verdicts.comparison_verdict(test, 0.01, -1) == verdicts.CONTRADICTED
  assert verdicts.comparison_verdict(test, 0.2, +1) == verdicts.NOT_SHOWN
  # Against a reference: a ratio of 0.5 is above 0.2.
  ratio = verdicts.paired_test([0.5, 0.6, 0.55], reference=0.2)
  assert verdicts.comparison_verdict(ratio, 0.01, -1) == verdicts.CONTRADICTED


@pytest.mark.parametrize("given, expected", [
    ([verdicts.SUPPORTED] * 3, verdicts.SUPPORTED),
    ([verdicts.SUPPORTED, verdicts.CONTRADICTED], verdicts.MIXED),
    ([verdicts.NOT_SHOWN, verdicts.CONTRADICTED], verdicts.CONTRADICTED),
    ([verdicts.NO_VERDICT, verdicts.CONTRADICTED], verdicts.CONTRADICTED),
    ([verdicts.SUPPORTED, verdicts.NO_VERDICT], verdicts.NO_VERDICT),
    ([verdicts.SUPPORTED, verdicts.NOT_SHOWN], verdicts.NOT_SHOWN),
    ([], verdicts.NO_VERDICT),
])
def test_combine(given, expected):
  assert verdicts.combine(given) == expected


def test_a_sampler_on_one_example_collapses_whatever_its_accuracy():
  # The review's amplitude 10: max KL 10.973 nats of log 60000 = 11.002.
  kl = np.array([[0.0, 5.0, 10.973], [0.0, 0.01, 0.02]])
  np.testing.assert_array_equal(
      verdicts.collapsed(kl, [0.73, 0.85], num_classes=10), [True, False])
  # Chance-level accuracy collapses too.
  np.testing.assert_array_equal(
      verdicts.collapsed(np.zeros((1, 3)), [0.15], num_classes=10), [True])


def test_kl_floor_of_a_model_that_does_not_fit():
  # 15% error, amplitude 0.3, decay 0.5: the review's ~0.030 nats.
  assert verdicts.kl_floor(0.15, 0.3, 0.5) == pytest.approx(0.0297, abs=1e-4)
  assert verdicts.kl_floor(0.0, 0.3, 0.5) == 0.0
  # It is the KL of the distribution it describes.
  n, error = 1000, 0.1
  weights = np.where(np.arange(n) < error * n, np.exp(0.3 / 0.5), 1.0)
  q = weights / weights.sum()
  assert verdicts.kl_floor(error, 0.3,
                           0.5) == pytest.approx(np.sum(q * np.log(n * q)))


def test_nonuniform_window_opens_where_the_kl_has_risen():
  epochs = np.arange(0, 21, 2.0)
  kl = np.minimum(epochs / 8, 1.0) * 0.05  # reaches half its peak at epoch 4
  assert verdicts.nonuniform_window(epochs, kl) == (4.0, 10.0)
  # A late rise: the window runs to the end.
  late = np.where(epochs >= 12, 0.05, 0.0)
  assert verdicts.nonuniform_window(epochs, late) == (12.0, 20.0)
  # Sampling that never leaves uniform has no window.
  assert verdicts.nonuniform_window(epochs, np.full(11, 0.001)) is None


def test_spearman_is_scipys_and_zero_for_constant_input():
  x, y = [0, 1, 2, 3], [0.5, 0.4, 0.45, 0.1]
  assert verdicts.spearman(x,
                           y) == pytest.approx(stats.spearmanr(x, y).statistic)
  assert verdicts.spearman(x, [0.3] * 4) == 0.0


def test_rank_test_judges_a_trend_held_in_every_trial_by_the_sign_test():
  # -1 in every trial: the t-test has no spread; the sign test's p is
  # 2 x 0.5^trials.
  test = verdicts.rank_test([-1.0] * 10)
  assert test.why_not is None
  assert (test.mean, test.low, test.high) == (-1.0, -1.0, -1.0)
  assert test.p == pytest.approx(2 / 1024)
  assert verdicts.comparison_verdict(test, test.p, -1) == verdicts.SUPPORTED
  assert verdicts.rank_test([1.0] * 5).p == pytest.approx(0.0625)
  # A spread of strong trends weighs as much as -1 in each: the sign test
  # counts trials (a t-test gave the spread the smaller p); the interval
  # is the t-test's.
  spread = [-0.9, -1.0, -0.8, -0.95, -0.85, -0.9, -1.0, -0.93, -0.88, -0.97]
  assert verdicts.rank_test(spread).p == test.p
  t = verdicts.paired_test(spread)
  assert (verdicts.rank_test(spread).low,
          verdicts.rank_test(spread).high) == (t.low, t.high)
  # 8 of 10 trials negative: the two-sided binomial p, 0.109.
  mostly = [-0.5] * 8 + [0.4, 0.2]
  assert verdicts.rank_test(mostly).p == pytest.approx(0.109375)
  # No verdict where nothing is ordered or too few trials.
  assert verdicts.rank_test([0.0] * 5).why_not
  assert verdicts.rank_test([-1.0, -1.0]).why_not


def test_kendall_is_scipys_and_ranks_never_last():
  x, y = [0, 1, 2, 3], [0.5, 0.4, 0.45, 0.1]
  assert verdicts.kendall(x,
                          y) == pytest.approx(stats.kendalltau(x, y).statistic)
  assert verdicts.kendall(x, [0.3] * 4) == 0.0
  # A target never reached (inf) ranks after every finite time.
  assert verdicts.spearman(x, [10, 20, 30, math.inf]) == pytest.approx(1.0)
  assert verdicts.spearman(x, [math.inf] * 4) == 0.0


def test_kl_shape_reads_an_early_peak_and_the_decline_after_half_way():
  epochs = np.arange(0, 11, 1.0)
  kl = np.array([
      epochs * np.exp(-epochs / 2),  # peaks at epoch 2, then falls
      epochs,  # rises to the end
      np.where(epochs == 8, 1.0, 0.5),  # peaks late, flat otherwise
  ])
  early, tau = verdicts.kl_shape(epochs, kl)
  np.testing.assert_array_equal(early, [True, False, False])
  # Over epochs 5-10.
  np.testing.assert_allclose(tau[:2], [-1.0, 1.0])
  after = epochs >= 5
  assert tau[2] == pytest.approx(
      stats.kendalltau(epochs[after], kl[2, after]).statistic)
