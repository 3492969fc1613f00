"""The four claims judged on synthetic trials (tf_adasamp.experiment.study.claims)."""

import numpy as np
import pytest

from tf_adasamp.experiment.study import claims
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import verdicts


def synthetic(effect, trials=5, noise=0.01, final_error=0.01, seed=0):
  """Curves of `trials` trials over 20 epochs where adaptive sampling is
  better (effect > 0), worse (< 0) or no different (0) than uniform, with
  a trial-to-trial spread shared by a trial's algorithms; uniform runs end
  at training error `final_error`; the KL rises, then decays."""
  rng = np.random.default_rng(seed)
  epochs = np.arange(0, 21, 1.0)
  base = np.exp(-epochs / 4.0)
  shared = rng.normal(0, 0.2, size=(trials, 1))
  curves = {}
  for name in presets.ALGORITHMS:
    adaptive = name in presets.ADAPTIVE
    own = rng.normal(0, noise, size=(trials, 1))
    shift = (effect if adaptive else 0.0) + own
    loss = np.clip(base * (1 + shared) - shift * base, 1e-3, None)
    error = final_error + (1 - final_error) * np.minimum(loss, 2) / 2
    kl = np.tile(epochs * np.exp(-epochs / 2.0), (trials, 1)) * adaptive
    kl = kl * (1 + rng.uniform(0, 0.1, size=kl.shape))
    curves[name] = {
        "step": epochs * 10,
        "epoch": epochs,
        "train_loss": loss,
        "train_accuracy": 1 - error,
        "test_accuracy": 0.9 - loss / 4,
        "kl": kl,
        "ess_fraction": np.exp(-kl),
    }
  return curves


def sweep_of(train_by_amplitude, test_by_amplitude, kl_by_amplitude, trials=5):
  """A sweep whose first-half training accuracy, final test accuracy and
  KL are flat at the given values (plus a little per-trial noise)."""
  rng = np.random.default_rng(3)
  epochs = np.arange(0, 21, 1.0)
  amplitudes = [0.0, 0.5, 1.0, 2.0][:len(train_by_amplitude)]
  curves = []
  for train, test, kl in zip(train_by_amplitude, test_by_amplitude,
                             kl_by_amplitude):
    jitter = rng.normal(0, 0.001, size=(trials, 1))
    curves.append({
        "epoch": epochs,
        "train_accuracy": np.full((trials, len(epochs)), train) + jitter,
        "train_loss": np.full((trials, len(epochs)), 1 - train) - jitter,
        "test_accuracy": np.full((trials, len(epochs)), test) - jitter,
        "kl": np.full((trials, len(epochs)), kl),
        "ess_fraction": np.full((trials, len(epochs)), np.exp(-kl)),
    })
  return {
      "algorithm": "AdaSamp-01-SGD",
      "amplitude": amplitudes,
      "curves": curves
  }


TRENDING = sweep_of([0.5, 0.6, 0.7, 0.8], [0.9, 0.85, 0.8, 0.75],
                    [0.0, 0.1, 0.2, 0.3])


@pytest.mark.parametrize("effect, expected", [(0.3, verdicts.SUPPORTED),
                                              (-0.3, verdicts.CONTRADICTED),
                                              (0.0, verdicts.NOT_SHOWN)])
def test_early_claims_follow_paired_differences(effect, expected):
  judged = claims.assess(synthetic(effect), TRENDING, 1.0, 0.5)
  # The trial-to-trial spread (std 0.2) dwarfs the effect: the comparisons
  # are paired within a trial.
  assert [claim.verdict for claim in judged[:2]] == [expected] * 2
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
  judged = claims.assess(synthetic(0.3, trials=2), TRENDING, 1.0, 0.5)
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
  collapsing = sweep_of([0.5, 0.6, 0.7, 0.8], [0.9, 0.85, 0.8, 0.75],
                        [0.0, 0.1, 0.2, 9.0])
  judged = claims.assess(synthetic(0.3), collapsing, 1.0, 0.5)
  labels = {c.label for c in judged[0].families[0].comparisons}
  # Amplitude 1 is the algorithms' own; 2 collapsed (KL 9: support e^-9 n).
  assert "AdaSamp-01-SGD at amplitude 0.5 − Unif-SGD" in labels
  assert not any("amplitude 1 " in l or "amplitude 2 " in l for l in labels)
  # A sweep that trains slower contradicts the claim.
  slower = sweep_of([0.5, 0.4, 0.7, 0.8], [0.9, 0.85, 0.8, 0.75],
                    [0.0, 0.1, 0.2, 0.3])
  assert claims.assess(synthetic(0.3), slower, 1.0,
                       0.5)[0].verdict == verdicts.CONTRADICTED


def test_kl_claim_needs_a_model_that_fits_its_data():
  fits = claims.assess(synthetic(0.3), TRENDING, 1.0, 0.5)[3]
  # The synthetic KL decays to ~2% of its peak.
  assert fits.verdict == verdicts.SUPPORTED
  stuck = claims.assess(synthetic(0.3, final_error=0.15), TRENDING, 1.0, 0.5)[3]
  assert stuck.verdict == verdicts.NOT_TESTABLE
  assert "(above 3%; at that error" in stuck.precondition[0]


def test_kl_claim_gives_no_verdict_from_identical_trials():
  curves = synthetic(0.3)
  for name in presets.ADAPTIVE:  # peaks at the last evaluation, every trial
    curves[name]["kl"] = np.tile(curves[name]["epoch"] * 0.01, (5, 1))
  claim = claims.assess(curves, TRENDING, 1.0, 0.5)[3]
  assert claim.verdict == verdicts.NO_VERDICT
  assert "zero width" in claim.families[0].comparisons[0].test.why_not


def test_amplitude_claim_on_a_trend():
  claim = claims.assess(synthetic(0.3), TRENDING, 1.0, 0.5)[2]
  # Every trial's rho is +1 and -1: no interval, so no verdict.
  assert claim.verdict == verdicts.NO_VERDICT
  noisy = sweep_of([0.5, 0.62, 0.6, 0.8], [0.9, 0.85, 0.86, 0.75],
                   [0.0, 0.1, 0.2, 0.3])
  for curve in noisy["curves"][1:3]:  # amplitudes 0.5 and 1 trade places
    curve["train_accuracy"][::2] = curve["train_accuracy"][::2][:, ::-1]
  noisy["curves"][1]["train_accuracy"][::2] += 0.05
  assert claims.assess(synthetic(0.3), noisy, 1.0,
                       0.5)[2].verdict in (verdicts.SUPPORTED,
                                           verdicts.NO_VERDICT)


def test_amplitude_claim_leaves_out_collapsed_amplitudes():
  # Amplitude 2 puts the sampler on ~one example (KL near log n): its runs
  # collapse, though their accuracy stays high.
  sweep = sweep_of([0.5, 0.6, 0.7, 0.4], [0.9, 0.88, 0.86, 0.95],
                   [0.0, 0.1, 0.2, 9.0])
  for curve in sweep["curves"]:
    curve["train_accuracy"] += np.random.default_rng(5).normal(
        0, 0.02, size=curve["train_accuracy"].shape)
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  assert "collapsed: 2" in claim.precondition[0]
  assert [f.name for f in claim.families] == [
      "amplitudes that do not collapse", "all amplitudes (for comparison)"
  ]
  assert claim.families[0].comparisons[0].label == "amplitudes 0, 0.5, 1"
  rows = claims.sweep_table(sweep, 10)
  assert [row["collapsed"] for row in rows] == [0, 0, 0, 5]


def test_amplitude_claim_not_testable_with_fewer_than_three_left():
  sweep = sweep_of([0.5, 0.6, 0.7], [0.9, 0.88, 0.86], [0.0, 5.0, 9.0])
  claim = claims.assess(synthetic(0.3), sweep, 1.0, 0.5)[2]
  assert claim.verdict == verdicts.NOT_TESTABLE
