"""The paper's bounds (London, NIPS 2017): Props. 1-4, Thms. 1-5, Cor. 1."""

import itertools
import math

import numpy as np
import pytest

from tf_adasamp import bounds

E = math.e
SQRT2 = math.sqrt(2)

# Hand-worked values: (function, keyword arguments, expected value).
HAND_WORKED = [
    # Prop. 1: 2 L^2 eta (ln T + 1) / n.
    # 2 * 1 * 0.5 * (ln 1 + 1) / 100 = 0.01.
    (bounds.uniform_stability_convex, dict(n=100, T=1, lipschitz=1,
                                           eta=0.5), 0.01),
    # 2 * 2^2 * 0.25 * (ln e^2 + 1) / 10 = 2 * 3 / 10; eta = 2 / smoothness
    # is the edge the proposition allows.
    (bounds.uniform_stability_convex,
     dict(n=10, T=E**2, lipschitz=2, eta=0.25, smoothness=8), 0.6),
    # eta = 0: SGD does not move, beta = 0.
    (bounds.uniform_stability_convex, dict(n=10, T=5, lipschitz=2, eta=0), 0.0),
    # Prop. 2: (M + 1/(s eta)) / (n - 1) (2 L^2 eta)^(1/(s eta + 1))
    #          (T B)^(s eta / (s eta + 1)).
    # s eta = 1: (1 + 1) / 10 * 2^(1/2) * 4^(1/2) = 0.4 sqrt(2).
    (bounds.uniform_stability_nonconvex,
     dict(n=11, T=4, lipschitz=1, smoothness=1, eta=1,
          max_loss=1), 0.4 * SQRT2),
    # s eta = 0.5: (1 + 2) / 3 * 1^(2/3) * 8^(1/3) = 2.
    (bounds.uniform_stability_nonconvex,
     dict(n=4, T=8, lipschitz=1, smoothness=1, eta=0.5, max_loss=1), 2.0),
    # The same 8 draws as 4 steps of B = 2: 2.
    (bounds.uniform_stability_nonconvex,
     dict(n=4,
          T=4,
          lipschitz=1,
          smoothness=1,
          eta=0.5,
          max_loss=1,
          batch_size=2), 2.0),
    # L = 0: 0.
    (bounds.uniform_stability_nonconvex,
     dict(n=4, T=8, lipschitz=0, smoothness=1, eta=0.5, max_loss=1), 0.0),
    # Prop. 3: 2 L eta (ln T + 1) sqrt(2 s R0) / n.
    # 2 * 1 * 1 * 1 * sqrt(2 * 2 * 0.25) / 10 = 0.2.
    (bounds.hypothesis_stability_convex,
     dict(n=10, T=1, lipschitz=1, smoothness=2, eta=1, initial_risk=0.25), 0.2),
    # 2 * 0.5 * 2 * (ln e + 1) * sqrt(2 * 1 * 2) / 5 = 2 * 2 * 2 / 5 = 1.6.
    (bounds.hypothesis_stability_convex,
     dict(n=5, T=E, lipschitz=0.5, smoothness=1, eta=2, initial_risk=2), 1.6),
    # A perfect initial model, R0 = 0: 0.
    (bounds.hypothesis_stability_convex,
     dict(n=5, T=9, lipschitz=0.5, smoothness=1, eta=2, initial_risk=0), 0.0),
    # Thm. 1: sqrt((chi2 + 1) / delta (2 M^2 / n + 12 M beta)).
    # sqrt(1 / 0.5 * 2 / 2) = sqrt(2).
    (bounds.chi2_bound, dict(chi2=0, n=2, delta=0.5, max_loss=1,
                             beta=0), SQRT2),
    # (3 + 1) / 0.25 = 16; 2 / 8 + 12 / 48 = 0.5; sqrt(8).
    (bounds.chi2_bound, dict(chi2=3, n=8, delta=0.25, max_loss=1,
                             beta=1 / 48), math.sqrt(8)),
    # M = 0: every loss is 0, so is the bound.
    (bounds.chi2_bound, dict(chi2=3, n=8, delta=0.25, max_loss=0, beta=1), 0.0),
    # Thm. 2: beta + sqrt(2 (KL + ln(2/delta)) ((M + 2 n beta)^2 / n
    #                                           + 4 T B theta^2)),
    # delta = 2/e so that ln(2/delta) = 1.
    # 0 + sqrt(2 * 1 * (1 / 1 + 0)) = sqrt(2).
    (bounds.kl_bound,
     dict(kl=0, n=1, T=1, delta=2 / E, max_loss=1, beta=0, theta=0), SQRT2),
    # (2 + 2 * 4 * 0.25)^2 / 4 = 4; 4 * 4 * 0.5^2 = 4; 0.25 + sqrt(2 * 2 * 8).
    (bounds.kl_bound,
     dict(kl=1, n=4, T=4, delta=2 / E, max_loss=2, beta=0.25,
          theta=0.5), 0.25 + math.sqrt(32)),
    # The same 4 draws as 2 steps of B = 2.
    (bounds.kl_bound,
     dict(kl=1,
          n=4,
          T=2,
          delta=2 / E,
          max_loss=2,
          beta=0.25,
          theta=0.5,
          batch_size=2), 0.25 + math.sqrt(32)),
    # Thm. 3: beta + theta sqrt(2 T B ln(2/delta))
    #         + sqrt(2 (KL + ln(4/delta)) (...)), delta = 4/e^2 so that
    # ln(4/delta) = 2 and ln(2/delta) = 2 - ln 2.
    # 0 + 0 + sqrt(2 * 2 * 1) = 2.
    (bounds.derandomized_kl_bound,
     dict(kl=0, n=1, T=1, delta=4 / E**2, max_loss=1, beta=0, theta=0), 2.0),
    # Variance factor 8 as above: 0.25 + 0.5 sqrt(8 (2 - ln 2))
    # + sqrt(2 * 3 * 8).
    (bounds.derandomized_kl_bound,
     dict(kl=1, n=4, T=4, delta=4 / E**2, max_loss=2, beta=0.25, theta=0.5),
     0.25 + 0.5 * math.sqrt(8 * (2 - math.log(2))) + math.sqrt(48)),
    # Cor. 1: 2 L^2 / (lambda n) + sqrt(2 (KL + ln(2/delta))
    #         ((M + 4 L^2 / lambda)^2 / n + 16 L^4 / (lambda^2 T B))).
    # 2 / 4 + sqrt(2 * 2 * ((0 + 4)^2 / 4 + 16 / 16)) = 0.5 + sqrt(20).
    (bounds.strongly_convex_sgd_bound,
     dict(kl=1,
          n=4,
          T=16,
          delta=2 / E,
          max_loss=0,
          lipschitz=1,
          strong_convexity=1), 0.5 + math.sqrt(20)),
    # The same 16 draws as 8 steps of B = 2.
    (bounds.strongly_convex_sgd_bound,
     dict(kl=1,
          n=4,
          T=8,
          delta=2 / E,
          max_loss=0,
          lipschitz=1,
          strong_convexity=1,
          batch_size=2), 0.5 + math.sqrt(20)),
    # L = 0: 0 + sqrt(2 * 1 * (1 / 2 + 0)) = 1.
    (bounds.strongly_convex_sgd_bound,
     dict(kl=0,
          n=2,
          T=1,
          delta=2 / E,
          max_loss=1,
          lipschitz=0,
          strong_convexity=1), 1.0),
    # Thm. 5: alpha B / (1 - decay) * utilities of steps 1..T-1.
    # 1 / 0.5 * (1 + 2) = 6; the last step's 3 is not used.
    (bounds.adaptive_kl_bound,
     dict(amplitude=1, decay=0.5, sampled_utilities=[1, 2, 3]), 6.0),
    # B = 2: 2 * 2 / 0.25 * (1 + 0 + 0.5 + 0.5) = 32.
    (bounds.adaptive_kl_bound,
     dict(amplitude=2,
          decay=0.75,
          sampled_utilities=[[1, 0], [0.5, 0.5], [9, 9]]), 32.0),
    # T = 1: an empty sum.
    (bounds.adaptive_kl_bound,
     dict(amplitude=2, decay=0.75, sampled_utilities=[5.0]), 0.0),
    # amplitude 0 keeps Q uniform.
    (bounds.adaptive_kl_bound,
     dict(amplitude=0, decay=0.75, sampled_utilities=[5.0, 1.0]), 0.0),
    # Thm. 4: sum over steps t >= 2 and draws of
    # alpha (S_{i_t} - mean_i S_i), S_i <- decay S_i + u after each draw.
    # Step 1: term 0; S = (1, 0). Step 2 (i = 0): 1 - 1/2 = 0.5;
    # S = (0.5 * 1 + 2, 0) = (2.5, 0). Step 3 (i = 1): 0 - 2.5/2 = -1.25.
    # 0.5 - 1.25 = -0.75: the plug-in can be negative.
    (bounds.adaptive_kl_bound_general,
     dict(amplitude=1,
          decay=0.5,
          sampled_indices=[0, 0, 1],
          sampled_utilities=[1, 2, 3],
          num_examples=2), -0.75),
    # Signed utilities. Step 1: S = (0, -2). Step 2 (i = 1): -2 - (-2)/2 = -1;
    # S = (0, 0.5 * -2 + 1) = (0, 0). Step 3: 0 - 0 = 0. Total -1.
    (bounds.adaptive_kl_bound_general,
     dict(amplitude=1,
          decay=0.5,
          sampled_indices=[1, 1, 1],
          sampled_utilities=[-2, 1, 0],
          num_examples=2), -1.0),
    # B = 2, index 0 drawn twice in step 1 is reweighted once: S = (1, 0, 0).
    # Step 2 draws 0 and 1: 2 * ((1 + 0) - 2 * 1/3) = 2/3.
    (bounds.adaptive_kl_bound_general,
     dict(amplitude=2,
          decay=0.5,
          sampled_indices=[[0, 0], [0, 1]],
          sampled_utilities=[[1, 1], [4, 4]],
          num_examples=3), 2 / 3),
]


@pytest.mark.parametrize("function, kwargs, expected", HAND_WORKED)
def test_matches_hand_worked_value(function, kwargs, expected):
  value = function(**kwargs)
  assert isinstance(value, float)
  assert value == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    "kwargs, beta, theta",
    [
        # 2 * 1 / (0.5 * 100) = 0.04; 2 * 1 / (0.5 * 50) = 0.08.
        (dict(n=100, T=50, lipschitz=1, strong_convexity=0.5), 0.04, 0.08),
        # 2 * 4 / 4 = 2: beta = 2 / 8 = 0.25; theta = 2 / (2 steps * 4 draws).
        (dict(n=8, T=2, lipschitz=2, strong_convexity=4,
              batch_size=4), 0.25, 0.25),
    ])
def test_stability_strongly_convex_matches_hand_worked_value(
    kwargs, beta, theta):
  assert bounds.stability_strongly_convex(**kwargs) == pytest.approx(
      (beta, theta), rel=1e-12)


def test_corollary1_is_theorem2_with_proposition4_coefficients():
  constants = dict(n=1000,
                   T=300,
                   lipschitz=0.7,
                   strong_convexity=0.2,
                   batch_size=5)
  beta, theta = bounds.stability_strongly_convex(**constants)
  for kl in (0.0, 0.3, 40.0):
    assert bounds.strongly_convex_sgd_bound(kl=kl,
                                            delta=0.05,
                                            max_loss=2,
                                            **constants) == pytest.approx(
                                                bounds.kl_bound(kl=kl,
                                                                n=1000,
                                                                T=300,
                                                                delta=0.05,
                                                                max_loss=2,
                                                                beta=beta,
                                                                theta=theta,
                                                                batch_size=5),
                                                rel=1e-14)


def test_bounds_broadcast_over_arrays():
  n = np.array([10, 100, 1000])
  values = bounds.chi2_bound(chi2=[[0.0], [1.0]],
                             n=n,
                             delta=0.1,
                             max_loss=1,
                             beta=0.01)
  assert values.shape == (2, 3)
  assert values[1, 2] == bounds.chi2_bound(chi2=1.0,
                                           n=1000,
                                           delta=0.1,
                                           max_loss=1,
                                           beta=0.01)
  beta, theta = bounds.stability_strongly_convex(n=n,
                                                 T=10,
                                                 lipschitz=1,
                                                 strong_convexity=1)
  np.testing.assert_allclose(beta, 2 / n)
  assert theta == 0.2


# The uniform case, KL = chi2 = 0 (Q = P).


def _strongly_convex_randomized(n):
  return bounds.strongly_convex_sgd_bound(kl=0,
                                          n=n,
                                          T=n,
                                          delta=0.05,
                                          max_loss=1,
                                          lipschitz=1,
                                          strong_convexity=0.1)


def _strongly_convex_derandomized(n):
  beta, theta = bounds.stability_strongly_convex(n=n,
                                                 T=n,
                                                 lipschitz=1,
                                                 strong_convexity=0.1)
  return bounds.derandomized_kl_bound(kl=0,
                                      n=n,
                                      T=n,
                                      delta=0.05,
                                      max_loss=1,
                                      beta=beta,
                                      theta=theta)


@pytest.mark.parametrize(
    "bound", [_strongly_convex_randomized, _strongly_convex_derandomized])
def test_uniform_sampling_gives_order_one_over_sqrt_n_for_t_equal_n(bound):
  # Cor. 1: "In the special case of uniform sampling, the KL divergence is
  # zero, yielding a O(n^-1/2) bound" (T = Theta(n)); Thm. 3 likewise.
  assert bound(1e10) / bound(1e8) == pytest.approx(0.1, rel=1e-3)


def test_uniform_chi2_bound_is_the_markov_bound():
  # chi2 = 0: sqrt((1 / delta) (2 M^2 / n + 12 M beta)).
  assert bounds.chi2_bound(chi2=0, n=50, delta=0.2, max_loss=2,
                           beta=0.01) == pytest.approx(math.sqrt(
                               5 * (8 / 50 + 0.24)),
                                                       rel=1e-14)


# Monotonicity.

GENERALIZATION_BOUNDS = {
    "chi2_bound": (bounds.chi2_bound,
                   dict(chi2=1.0, n=100, delta=0.05, max_loss=1,
                        beta=0.01), "chi2"),
    "kl_bound": (bounds.kl_bound,
                 dict(kl=1.0,
                      n=100,
                      T=100,
                      delta=0.05,
                      max_loss=1,
                      beta=0.01,
                      theta=0.01), "kl"),
    "derandomized_kl_bound": (bounds.derandomized_kl_bound,
                              dict(kl=1.0,
                                   n=100,
                                   T=100,
                                   delta=0.05,
                                   max_loss=1,
                                   beta=0.01,
                                   theta=0.01), "kl"),
    "strongly_convex_sgd_bound": (bounds.strongly_convex_sgd_bound,
                                  dict(kl=1.0,
                                       n=100,
                                       T=100,
                                       delta=0.05,
                                       max_loss=1,
                                       lipschitz=1,
                                       strong_convexity=0.5), "kl"),
}


def _values(function, kwargs, name, grid):
  return np.array([function(**dict(kwargs, **{name: x})) for x in grid])


@pytest.mark.parametrize("name", sorted(GENERALIZATION_BOUNDS))
def test_generalization_bound_falls_with_delta_and_rises_with_divergence(name):
  function, kwargs, divergence = GENERALIZATION_BOUNDS[name]
  assert np.all(
      np.diff(_values(function, kwargs, "delta", [0.001, 0.01, 0.1, 0.5, 0.99]))
      < 0)
  assert np.all(
      np.diff(_values(function, kwargs, divergence, [0, 0.1, 1, 10, 1000])) > 0)


N_GRID = [2, 10, 100, 1e4, 1e8]

# Functions whose value falls as n grows, everything else fixed.
FALLING_IN_N = {
    "uniform_stability_convex":
        lambda n: bounds.uniform_stability_convex(
            n=n, T=1000, lipschitz=1, eta=1),
    "uniform_stability_nonconvex":
        lambda n: bounds.uniform_stability_nonconvex(
            n=n, T=1000, lipschitz=1, smoothness=1, eta=0.1, max_loss=1),
    "hypothesis_stability_convex":
        lambda n: bounds.hypothesis_stability_convex(
            n=n, T=1000, lipschitz=1, smoothness=1, eta=1, initial_risk=0.5),
    "stability_strongly_convex":
        lambda n: bounds.stability_strongly_convex(
            n=n, T=1000, lipschitz=1, strong_convexity=0.1)[0],
    "chi2_bound":
        lambda n: bounds.chi2_bound(
            chi2=1, n=n, delta=0.05, max_loss=1, beta=0.01),
    # Thms. 2 and 3 fall with n where beta = O(1/n), as the paper requires;
    # with beta fixed, (M + 2 n beta)^2 / n grows.
    "kl_bound":
        lambda n: bounds.kl_bound(
            kl=1, n=n, T=100, delta=0.05, max_loss=1, beta=1 / n, theta=0.01),
    "derandomized_kl_bound":
        lambda n: bounds.derandomized_kl_bound(
            kl=1, n=n, T=100, delta=0.05, max_loss=1, beta=1 / n, theta=0.01),
    "strongly_convex_sgd_bound":
        lambda n: bounds.strongly_convex_sgd_bound(kl=1,
                                                   n=n,
                                                   T=100,
                                                   delta=0.05,
                                                   max_loss=1,
                                                   lipschitz=1,
                                                   strong_convexity=0.5),
}


@pytest.mark.parametrize("name", sorted(FALLING_IN_N))
def test_falls_as_n_grows(name):
  values = [FALLING_IN_N[name](n) for n in N_GRID]
  assert np.all(np.diff(values) < 0)


# Preconditions.

GOOD = {
    bounds.uniform_stability_convex:
        dict(n=10, T=10, lipschitz=1, eta=1, smoothness=1),
    bounds.uniform_stability_nonconvex:
        dict(n=10, T=10, lipschitz=1, smoothness=1, eta=1, max_loss=1),
    bounds.hypothesis_stability_convex:
        dict(n=10, T=10, lipschitz=1, smoothness=1, eta=1, initial_risk=1),
    bounds.stability_strongly_convex:
        dict(n=10, T=10, lipschitz=1, strong_convexity=1),
    bounds.chi2_bound:
        dict(chi2=1, n=10, delta=0.1, max_loss=1, beta=0.1),
    bounds.kl_bound:
        dict(kl=1, n=10, T=10, delta=0.1, max_loss=1, beta=0.1, theta=0.1),
    bounds.derandomized_kl_bound:
        dict(kl=1, n=10, T=10, delta=0.1, max_loss=1, beta=0.1, theta=0.1),
    bounds.strongly_convex_sgd_bound:
        dict(kl=1,
             n=10,
             T=10,
             delta=0.1,
             max_loss=1,
             lipschitz=1,
             strong_convexity=1),
    bounds.adaptive_kl_bound:
        dict(amplitude=1, decay=0.5, sampled_utilities=[1.0, 0.5]),
    bounds.adaptive_kl_bound_general:
        dict(amplitude=1,
             decay=0.5,
             sampled_indices=[0, 1],
             sampled_utilities=[1.0, -0.5],
             num_examples=2),
}

BAD = [
    (bounds.uniform_stability_convex, dict(n=0), "n must be >= 1, got 0"),
    (bounds.uniform_stability_convex, dict(T=0.5), "T must be >= 1"),
    (bounds.uniform_stability_convex, dict(lipschitz=-1), "lipschitz must be"),
    (bounds.uniform_stability_convex, dict(eta=-0.1), "eta must be >= 0"),
    (bounds.uniform_stability_convex, dict(eta=1, smoothness=3),
     r"eta must be <= 2 / smoothness, got eta = 1"),
    (bounds.uniform_stability_convex, dict(smoothness=-1), "smoothness must"),
    (bounds.uniform_stability_convex, dict(n=float("nan")), "n must be finite"),
    (bounds.uniform_stability_nonconvex, dict(n=1), "n must be > 1"),
    (bounds.uniform_stability_nonconvex, dict(smoothness=0),
     "smoothness must be > 0"),
    (bounds.uniform_stability_nonconvex, dict(eta=0), "eta must be > 0"),
    (bounds.uniform_stability_nonconvex, dict(max_loss=-1), "max_loss must"),
    (bounds.uniform_stability_nonconvex, dict(batch_size=0),
     "batch_size must be >= 1"),
    (bounds.hypothesis_stability_convex, dict(eta=3),
     "eta must be <= 2 / smoothness"),
    (bounds.hypothesis_stability_convex, dict(initial_risk=-1),
     "initial_risk must be >= 0"),
    (bounds.stability_strongly_convex, dict(strong_convexity=0),
     "strong_convexity must be > 0"),
    (bounds.stability_strongly_convex, dict(T=0), "T must be >= 1"),
    (bounds.chi2_bound, dict(chi2=-0.1), "chi2 must be >= 0"),
    (bounds.chi2_bound, dict(delta=0), r"delta must be in \(0, 1\), got 0"),
    (bounds.chi2_bound, dict(delta=1), r"delta must be in \(0, 1\), got 1"),
    (bounds.chi2_bound, dict(delta=[0.1, 1.5]),
     r"delta must be in \(0, 1\), got 1.5"),
    (bounds.chi2_bound, dict(beta=-1), "beta must be >= 0"),
    (bounds.chi2_bound, dict(n=0.5), "n must be >= 1"),
    (bounds.kl_bound, dict(kl=-1), "kl must be >= 0"),
    (bounds.kl_bound, dict(theta=-1), "theta must be >= 0"),
    (bounds.kl_bound, dict(T=0), "T must be >= 1"),
    (bounds.derandomized_kl_bound, dict(delta=1.0), "delta must be in"),
    (bounds.strongly_convex_sgd_bound, dict(strong_convexity=-1),
     "strong_convexity must be > 0"),
    (bounds.strongly_convex_sgd_bound, dict(delta=0), "delta must be in"),
    (bounds.adaptive_kl_bound, dict(decay=0), r"decay must be in \(0, 1\)"),
    (bounds.adaptive_kl_bound, dict(decay=1), r"decay must be in \(0, 1\)"),
    (bounds.adaptive_kl_bound, dict(amplitude=-1), "amplitude must be >= 0"),
    (bounds.adaptive_kl_bound, dict(sampled_utilities=[1.0, -0.5]),
     "sampled_utilities must be >= 0 for Theorem 5"),
    (bounds.adaptive_kl_bound, dict(sampled_utilities=[]), r"shape \[T\]"),
    (bounds.adaptive_kl_bound, dict(sampled_utilities=np.ones([2, 2, 2])),
     r"shape \[T\] or \[T, B\]"),
    (bounds.adaptive_kl_bound, dict(sampled_utilities=[1.0, float("inf")]),
     "must be finite"),
    (bounds.adaptive_kl_bound_general, dict(decay=1.5), "decay must be in"),
    (bounds.adaptive_kl_bound_general, dict(sampled_indices=[0, 2]),
     r"indices must be in \[0, 2\), got 2"),
    (bounds.adaptive_kl_bound_general, dict(sampled_indices=[0, -1]),
     r"indices must be in \[0, 2\), got -1"),
    (bounds.adaptive_kl_bound_general, dict(sampled_indices=[0, 1, 1]),
     "must have the same shape"),
    (bounds.adaptive_kl_bound_general, dict(num_examples=0),
     "num_examples must be >= 1"),
]


@pytest.mark.parametrize("function, changes, message", BAD)
def test_rejects_bad_argument_with_value_error(function, changes, message):
  with pytest.raises(ValueError, match=message):
    function(**dict(GOOD[function], **changes))


@pytest.mark.parametrize("function", list(GOOD))
def test_accepts_good_arguments(function):
  assert np.all(np.isfinite(function(**GOOD[function])))


@pytest.mark.parametrize("function, changes", [
    (bounds.chi2_bound, dict(n=None)),
    (bounds.kl_bound, dict(delta="0.1")),
    (bounds.uniform_stability_convex, dict(eta=object())),
    (bounds.adaptive_kl_bound, dict(sampled_utilities=["a", "b"])),
    (bounds.adaptive_kl_bound_general, dict(sampled_indices=[0.0, 1.0])),
    (bounds.adaptive_kl_bound_general, dict(num_examples=2.0)),
])
def test_rejects_wrong_type_with_type_error(function, changes):
  with pytest.raises(TypeError):
    function(**dict(GOOD[function], **changes))


# Theorems 4 and 5 against exact KL(Q || P), by enumerating every run.


def enumerate_runs(n, steps, batch, amplitude, decay, utility):
  """Every run of mini-batch Algorithm 1, with its probability under Q.

  Enumerates all n^(steps * batch) index sequences. `utility(i, t, history)`
  is u(z_i, h_t), a function of the index, the step and the batches drawn so
  far, this step's included (h_t depends on them). Each unique index of a
  batch is reweighted once: log w_i <- decay log w_i + amplitude u.

  Returns:
    A list of (probability, indices [steps, batch], utilities [steps, batch]).
  """
  runs = [(1.0, (), (), np.zeros(n))]
  for t in range(steps):
    extended = []
    for probability, history, utilities, log_weights in runs:
      q = np.exp(log_weights - log_weights.max())
      q /= q.sum()
      for draws in itertools.product(range(n), repeat=batch):
        step_utilities = tuple(utility(i, t, history + (draws,)) for i in draws)
        updated = log_weights.copy()
        for i in set(draws):
          updated[i] = (decay * log_weights[i] +
                        amplitude * step_utilities[draws.index(i)])
        extended.append(
            (probability * np.prod(q[list(draws)]), history + (draws,),
             utilities + (step_utilities,), updated))
    runs = extended
  return [(p, np.array(h), np.array(u)) for p, h, u, _ in runs]


def exact_kl(runs, n):
  """KL(Q || P) = E_Q ln(Q / P), P uniform on {0..n-1}^(steps * batch)."""
  return sum(p * math.log(p * n**h.size) for p, h, _ in runs)


def theorem4_expectation(n, steps, batch, amplitude, decay, utility):
  """Theorem 4's right-hand side, transcribed from the paper's statement.

  sum_{t=2}^T E_{(i_1..i_t) ~ Q} alpha/n sum_i [sum_{j=1}^{N_{i_t,t}}
  u(z_{i_t}, h_{tau_{i_t,j}}) decay^(N_{i_t,t} - j) - (the same for i)],
  each expectation over the prefixes of length t; with B > 1, one such term
  per draw of step t, N counting earlier steps that drew the index.
  """

  def cumulative(i, t, indices, utilities):
    taus = [s for s in range(t) if i in indices[s]]  # tau_{i,1..N}.
    return sum(utilities[tau][list(indices[tau]).index(i)] *
               decay**(len(taus) - j) for j, tau in enumerate(taus, 1))

  total = 0.0
  for t in range(1, steps):  # The paper's t = 2..T, 0-based.
    for p, indices, utilities in enumerate_runs(n, t + 1, batch, amplitude,
                                                decay, utility):
      for i_t in indices[t]:
        total += p * amplitude / n * sum(
            cumulative(i_t, t, indices, utilities) -
            cumulative(i, t, indices, utilities) for i in range(n))
  return total


def signed_utility(i, t, history):
  earlier = sum(i in draws for draws in history[:-1])
  return math.sin(1.3 * i + 0.7 * t + 0.4 * earlier) * 1.5


def nonnegative_utility(i, t, history):
  earlier = sum(i in draws for draws in history[:-1])
  return 1.0 if (i + t + earlier) % 2 else 0.25 * i


SHAPES = [(3, 4, 1), (3, 2, 2), (2, 3, 2)]  # (n, steps T, batch B).
SETTINGS = [(0.0, 0.5), (0.5, 0.3), (1.0, 0.9), (3.0, 0.1), (5.0, 0.5)]


@pytest.mark.parametrize("n, steps, batch", SHAPES)
@pytest.mark.parametrize("amplitude, decay", SETTINGS)
@pytest.mark.parametrize("utility", [signed_utility, nonnegative_utility])
def test_theorem4_bound_is_never_below_exact_kl(n, steps, batch, amplitude,
                                                decay, utility):
  runs = enumerate_runs(n, steps, batch, amplitude, decay, utility)
  assert sum(p for p, _, _ in runs) == pytest.approx(1, abs=1e-12)
  plug_in_average = sum(
      p * bounds.adaptive_kl_bound_general(amplitude=amplitude,
                                           decay=decay,
                                           sampled_indices=h,
                                           sampled_utilities=u,
                                           num_examples=n) for p, h, u in runs)
  # The plug-in, averaged over Q, is the theorem's expectation ...
  assert plug_in_average == pytest.approx(theorem4_expectation(
      n, steps, batch, amplitude, decay, utility),
                                          rel=1e-10,
                                          abs=1e-12)
  # ... which bounds the exact KL.
  kl = exact_kl(runs, n)
  assert kl >= -1e-12
  assert plug_in_average >= kl - 1e-12
  if amplitude == 0:
    assert kl == pytest.approx(0, abs=1e-12) and plug_in_average == 0


@pytest.mark.parametrize("n, steps, batch", SHAPES)
@pytest.mark.parametrize("amplitude, decay", SETTINGS)
def test_theorem5_bound_is_never_below_exact_kl(n, steps, batch, amplitude,
                                                decay):
  runs = enumerate_runs(n, steps, batch, amplitude, decay, nonnegative_utility)
  plug_in_average = sum(p * bounds.adaptive_kl_bound(
      amplitude=amplitude, decay=decay, sampled_utilities=u)
                        for p, _, u in runs)
  # The theorem: alpha B / (1 - decay) sum_{t=1}^{T-1} E_Q[u_t], each
  # expectation over the prefixes of length t.
  expectation = amplitude * batch / (1 - decay) * sum(
      p * u[t].sum() for t in range(steps - 1) for p, _, u in enumerate_runs(
          n, t + 1, batch, amplitude, decay, nonnegative_utility))
  assert plug_in_average == pytest.approx(expectation, rel=1e-10, abs=1e-12)
  assert plug_in_average >= exact_kl(runs, n) - 1e-12
  # For nonnegative utilities Theorem 4 is the tighter, on every run.
  for _, h, u in runs:
    assert bounds.adaptive_kl_bound_general(
        amplitude=amplitude,
        decay=decay,
        sampled_indices=h,
        sampled_utilities=u,
        num_examples=n) <= bounds.adaptive_kl_bound(
            amplitude=amplitude, decay=decay, sampled_utilities=u) + 1e-12


def test_theorem5_for_mini_batches_needs_the_batch_factor():
  # n = 2, T = 2 steps of B = 7 draws. Step 1's utility is 1 only for index
  # 0, and only when the batch drew it exactly once (probability 7 / 2^7);
  # then step 2 samples 0 with probability e^3 / (e^3 + 1) and its B draws
  # pay B KL(Q_2 || uniform) = 7 * 0.502 = 3.52, more than the
  # alpha / (1 - decay) = 3.03 that the single reweighting is charged
  # without the factor B.
  n, steps, batch, amplitude, decay = 2, 2, 7, 3.0, 0.01

  def utility(i, t, history):
    return float(t == 0 and i == 0 and history[-1].count(0) == 1)

  runs = enumerate_runs(n, steps, batch, amplitude, decay, utility)
  kl = exact_kl(runs, n)
  q = math.exp(3) / (math.exp(3) + 1)
  assert kl == pytest.approx(7 / 2**7 * 7 * (q * math.log(2 * q) +
                                             (1 - q) * math.log(2 * (1 - q))),
                             rel=1e-9)
  ours = sum(p * bounds.adaptive_kl_bound(
      amplitude=amplitude, decay=decay, sampled_utilities=u)
             for p, _, u in runs)
  assert ours / batch < kl <= ours


# KLBoundTracker and the bounds, given TensorFlow's tensors.


def test_tracker_and_bounds_accept_tensorflow_tensors():
  tf = pytest.importorskip("tensorflow")
  tracker = bounds.KLBoundTracker(num_examples=3, amplitude=2, decay=0.5)
  tracker.update(tf.constant([0, 0], tf.int64), tf.constant([1.0, 1.0]))
  tracker.update(tf.constant([0, 1], tf.int32),
                 tf.constant([4.0, 4.0], tf.float64))
  assert tracker.kl_bound_general == pytest.approx(2 / 3)  # HAND_WORKED.
  assert bounds.kl_bound(kl=tf.constant(1.0),
                         n=tf.constant(4),
                         T=4,
                         delta=2 / E,
                         max_loss=2,
                         beta=0.25,
                         theta=0.5) == pytest.approx(0.25 + math.sqrt(32))
  assert bounds.adaptive_kl_bound(amplitude=1,
                                  decay=0.5,
                                  sampled_utilities=tf.constant(
                                      [1.0, 2.0, 3.0])) == pytest.approx(6)


# Solving for n, and the command line.


@pytest.mark.parametrize(
    "target, expected",
    [
        (0.01, 100),  # 1 / 100 = 0.01 exactly.
        (0.0099, 102),  # 1 / 101 = 0.009901 > 0.0099 >= 1 / 102 = 0.009804.
        (2.0, 1),  # Already below at the lower end.
    ])
def test_minimum_examples_finds_smallest_n(target, expected):
  assert bounds.minimum_examples(lambda n: 1 / n, target) == expected


def test_minimum_examples_reports_unreachable_target():
  with pytest.raises(ValueError, match="even at n"):
    bounds.minimum_examples(lambda n: 0.5 + 1 / n, 0.4)
