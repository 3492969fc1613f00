"""The four claims judged on synthetic trials
(tf_adasamp.experiment.study.claims)."""

import numpy as np
import pytest

from claim_curves import peak_then_decline
from claim_curves import sweep_of
from claim_curves import synthetic
from claim_curves import TRENDING
from claim_curves import trending
from claim_curves import with_kl
from tf_adasamp.experiment.study import claims
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import verdicts


@pytest.mark.parametrize("effect, expected", [
    (0.3, [verdicts.SUPPORTED] * 2),
    (-0.3, [verdicts.MIXED, verdicts.CONTRADICTED]),
    (0.0, [verdicts.NOT_SHOWN] * 2),
])
def test_early_claims_follow_paired_differences(effect, expected):
  judged = claims.assess(synthetic(effect), TRENDING, 1.0, 0.5)
  # The trial-to-trial spread (std 0.2) dwarfs the effect: the comparisons
  # are paired within a trial. Where the algorithms train slower, claim 1 is
  # mixed: the sweep's amplitudes (TRENDING) still train faster.
  assert [claim.verdict for claim in judged[:2]] == expected
  # Judged over the first half at every amplitude, the window where
  # sampling is non-uniform beside it.
  assert [f.name for f in judged[0].families] == [
      "first half, every amplitude", "non-uniform window (for comparison)"
  ]
  assert {c.measure.split(",")[0] for c in judged[0].families[0].comparisons
         } == {"train loss", "train accuracy"}


def test_holm_adjusts_within_a_claim():
  judged = claims.assess(synthetic(0.3), TRENDING, 1.0, 0.5)
  family = judged[0].families[0]
  raw = [c.test.p for c in family.comparisons]
  np.testing.assert_allclose([c.adjusted_p for c in family.comparisons],
                             verdicts.holm(raw))


def test_claims_need_three_trials():
  sweep = trending(2)
  judged = claims.assess(synthetic(0.3, trials=2), sweep, 1.0, 0.5)
  assert {claim.verdict for claim in judged} == {verdicts.NO_VERDICT}


def test_early_claims_are_judged_where_sampling_stays_near_uniform():
  # No KL gate: a small concentration that the paired design resolves is
  # a measured effect, judged; only the window beside it is left out.
  curves = synthetic(0.3)
  for name in presets.ADAPTIVE:
    curves[name]["kl"] = curves[name]["kl"] * 1e-4
  judged = claims.assess(curves, TRENDING, 1.0, 0.5)
  assert judged[0].verdict == verdicts.SUPPORTED
  assert [f.name for f in judged[0].families] == ["first half, every amplitude"]
  assert "no window" in " ".join(judged[0].precondition)


def test_claim_1_is_judged_at_every_swept_amplitude_that_does_not_collapse():
  collapsing = sweep_of([1.0, 1.2, 1.4, 1.6], [0.9, 0.85, 0.8, 0.75],
                        [0.0, 0.1, 0.2, 9.0])
  judged = claims.assess(synthetic(0.3), collapsing, 1.0, 0.5)
  labels = {c.label for c in judged[0].families[0].comparisons}
  # Amplitude 1 is the algorithms' own; 2 collapsed (KL 9: support e^-9 n).
  assert "AdaSamp-01-SGD at amplitude 0.5 − Unif-SGD" in labels
  assert not any(
      "amplitude 1 " in label or "amplitude 2 " in label for label in labels)
  # A swept amplitude that trains slower contradicts the claim where the
  # algorithms bear it out: mixed; with them slower too, contradicted.
  slower = sweep_of([1.0, 0.8, 1.4, 1.6], [0.9, 0.85, 0.8, 0.75],
                    [0.0, 0.1, 0.2, 0.3])
  assert claims.assess(synthetic(0.3), slower, 1.0,
                       0.5)[0].verdict == verdicts.MIXED
  all_slower = sweep_of([1.0, 0.8, 0.7, 0.6], [0.9, 0.85, 0.8, 0.75],
                        [0.0, 0.1, 0.2, 0.3])
  assert claims.assess(synthetic(-0.3), all_slower, 1.0,
                       0.5)[0].verdict == verdicts.CONTRADICTED


def rise_to_the_end(epochs):
  return 0.01 * epochs


def flat(epochs):
  return np.full(len(epochs), 0.1)


def test_kl_claim_supports_an_early_peak_then_a_decline():
  curves = with_kl(synthetic(0.3, trials=10), peak_then_decline)
  claim = claims.assess(curves, TRENDING, 1.0, 0.5)[3]
  assert claim.verdict == verdicts.SUPPORTED
  comparisons = claim.families[0].comparisons
  assert [c.verdict for c in comparisons] == [verdicts.SUPPORTED] * 4
  assert comparisons[0].measure == "Kendall τ(epoch, KL), epochs [10, 20]"
  # Not every trial at -1: the t-test judges it.
  assert comparisons[0].test.low < comparisons[0].test.high
  assert "peaks in the first 50% of training in 10/10 trials" in (
      claim.precondition[0])


def test_kl_claim_is_contradicted_by_a_kl_that_rises_to_the_end():
  curves = with_kl(synthetic(0.3, trials=10), rise_to_the_end)
  claim = claims.assess(curves, TRENDING, 1.0, 0.5)[3]
  assert claim.verdict == verdicts.CONTRADICTED
  assert "in 0/10 trials" in claim.precondition[0]


def test_kl_claim_is_not_shown_on_flat_noise():
  curves = with_kl(synthetic(0.3, trials=10), flat, noise=0.01)
  claim = claims.assess(curves, TRENDING, 1.0, 0.5)[3]
  assert claim.verdict == verdicts.NOT_SHOWN
  assert {c.verdict for c in claim.families[0].comparisons
         } == {verdicts.NOT_SHOWN}


@pytest.mark.parametrize(
    "last, expected, claim_verdict",
    [(flat, verdicts.NOT_SHOWN, verdicts.NOT_SHOWN),
     (rise_to_the_end, verdicts.CONTRADICTED, verdicts.MIXED)])
def test_kl_claim_judges_each_variant_alone(last, expected, claim_verdict):
  # Three variants decline; the fourth's flat KL leaves the claim not
  # shown, and a KL that rises contradicts it there: the claim is mixed.
  curves = with_kl(synthetic(0.3, trials=10), peak_then_decline)
  curves = with_kl(curves, last, noise=0.01, names=presets.ADAPTIVE[-1:])
  claim = claims.assess(curves, TRENDING, 1.0, 0.5)[3]
  assert [c.verdict for c in claim.families[0].comparisons
         ] == [verdicts.SUPPORTED] * 3 + [expected]
  assert claim.verdict == claim_verdict


def test_kl_claim_needs_a_model_that_fits_its_data():
  fits = claims.assess(synthetic(0.3, trials=10), TRENDING, 1.0, 0.5)[3]
  # The synthetic KL peaks at epoch 2 and falls at every evaluation after.
  assert fits.verdict == verdicts.SUPPORTED
  stuck = claims.assess(synthetic(0.3, final_error=0.15), TRENDING, 1.0, 0.5)[3]
  assert stuck.verdict == verdicts.NOT_TESTABLE
  assert "(above 3%; at that error" in stuck.precondition[0]


def test_kl_claim_judges_a_decline_in_every_trial_by_the_sign_test():
  # tau = -1 in every trial: no t-interval; the sign test's p, 2 x 0.5^5 =
  # 0.0625 from 5 trials, is not enough, 2 x 0.5^10 is.
  few = claims.assess(synthetic(0.3, trials=5), TRENDING, 1.0, 0.5)[3]
  assert few.verdict == verdicts.NOT_SHOWN
  test = few.families[0].comparisons[0].test
  assert (test.mean, test.p) == (-1.0, pytest.approx(0.0625))
  many = claims.assess(synthetic(0.3, trials=10), TRENDING, 1.0, 0.5)[3]
  assert many.verdict == verdicts.SUPPORTED


def test_amplitude_claim_judges_every_measure_fixed_in_advance():
  claim = claims.assess(synthetic(0.3), trending(10), 1.0, 0.5)[2]
  assert claim.verdict == verdicts.SUPPORTED
  [family] = claim.families
  assert [c.measure for c in family.comparisons] == [
      "ρ(amplitude, steps to Unif-SGD's final train loss)",
      "ρ(amplitude, train accuracy averaged over the first half)",
      "ρ(amplitude, final test accuracy)",
      "ρ(amplitude, test accuracy averaged over the run)",
      "ρ(amplitude, best test accuracy)",
      "ρ(amplitude, final test loss)",
  ]
  # Holm over all six: each measure has its verdict.
  assert all(c.judged for c in family.comparisons)
  np.testing.assert_allclose([c.adjusted_p for c in family.comparisons],
                             verdicts.holm(
                                 [c.test.p for c in family.comparisons]))
  steps = family.comparisons[0]
  assert list(steps.columns) == [
      "amplitude 0", "amplitude 0.5", "amplitude 1", "amplitude 2"
  ]
  # The uniform run reaches its own final loss at its last evaluation; the
  # amplitude 2 runs, 1.6 times as fast, at 1 / 1.6 of it.
  np.testing.assert_allclose(steps.columns["amplitude 0"], 200)
  np.testing.assert_allclose(steps.columns["amplitude 2"], 200 / 1.6, rtol=0.02)


@pytest.mark.parametrize("speeds, expected, claim_verdict", [
    ([1.0, 1.2, 1.4, 1.6], verdicts.SUPPORTED, verdicts.SUPPORTED),
    ([1.0, 1.0, 1.0, 1.0], verdicts.NOT_SHOWN, verdicts.NOT_SHOWN),
    ([1.6, 1.4, 1.2, 1.0], verdicts.CONTRADICTED, verdicts.MIXED),
])
def test_amplitude_claim_trains_faster_only_where_the_target_comes_sooner(
    speeds, expected, claim_verdict):
  sweep = sweep_of(speeds, [0.9, 0.85, 0.8, 0.75], [0.0, 0.1, 0.2, 0.3],
                   trials=10,
                   jitter=0.01)
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  steps, _, test, *_ = claim.families[0].comparisons
  assert (steps.verdict, test.verdict) == (expected, verdicts.SUPPORTED)
  # Slower but testing worse: the measures disagree, the claim is mixed.
  assert claim.verdict == claim_verdict


def test_amplitude_claim_is_not_judged_from_few_trials_at_the_bound():
  # Every trial's rho is -1 and -1: 5 trials give the sign test's 0.0625.
  claim = claims.assess(synthetic(0.3), TRENDING, 1.0, 0.5)[2]
  assert claim.verdict == verdicts.NOT_SHOWN
  assert claim.families[0].comparisons[0].test.mean == -1.0


def test_amplitude_claim_shows_no_test_loss_where_runs_lack_it():
  sweep = sweep_of([1.0, 1.2, 1.4], [0.9, 0.85, 0.8], [0.0, 0.1, 0.2])
  for curve in sweep["curves"]:
    del curve["test_loss"]
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  assert "ρ(amplitude, final test loss)" not in {
      c.measure for c in claim.families[0].comparisons
  }


def test_amplitude_claim_leaves_out_collapsed_amplitudes():
  # Amplitude 2 puts the sampler on ~one example (KL near log n): its runs
  # collapse, though they train fastest.
  sweep = sweep_of([1.0, 1.2, 1.4, 3.0], [0.9, 0.88, 0.86, 0.95],
                   [0.0, 0.1, 0.2, 9.0])
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  assert "collapsed: 2" in claim.precondition[0]
  assert [f.name for f in claim.families] == ["amplitudes that do not collapse"]
  assert list(claim.families[0].comparisons[0].columns) == [
      "amplitude 0", "amplitude 0.5", "amplitude 1"
  ]
  rows = claims.sweep_table(sweep, 10)
  assert [row["collapsed"] for row in rows] == [0, 0, 0, 5]


def test_amplitude_claim_not_testable_with_fewer_than_three_left():
  sweep = sweep_of([1.0, 1.2, 1.4], [0.9, 0.88, 0.86], [0.0, 5.0, 9.0])
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  assert claim.verdict == verdicts.NOT_TESTABLE
