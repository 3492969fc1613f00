"""The paper's stability coefficients, generalization and divergence bounds.

London, "A PAC-Bayesian Analysis of Randomized Learning with Application to
SGD", NIPS 2017. Transcribed from the statements in the paper's main text and
checked against the proofs in its appendix:

  Prop. 1-4   stability of SGD:   uniform_stability_convex,
              uniform_stability_nonconvex, hypothesis_stability_convex,
              stability_strongly_convex
  Thm. 1-3    generalization:     chi2_bound, kl_bound, derandomized_kl_bound
  Cor. 1      strongly convex SGD: strongly_convex_sgd_bound
  Thm. 4, 5   KL(Q || P) of Algorithm 1: adaptive_kl_bound_general,
              adaptive_kl_bound, and KLBoundTracker for a live training loop

Pure NumPy: numbers, NumPy arrays and eager TF tensors are accepted (they go
through `np.asarray`) and broadcast; a scalar result is a Python float. Bad
arguments raise ValueError, wrong types TypeError.

Mini-batches. T always counts *steps* (SGD updates, iterations of Algorithm
1), and `batch_size` = B counts independent draws per step, so a run draws the
sequence of T * B indices on which the prior P (uniform on {1..n}^(T B)) and
the posterior Q live. Step sizes eta_t are per step and gradients are averaged
over the batch. Where the count of draws enters a result, the functions take
`batch_size` and use T * B:
  - Props. 1 and 3 sum step sizes over the T steps and do not depend on B: the
    replaced example is drawn B / n times per step in expectation and each
    draw moves the averaged gradient by at most 2 L eta_t / B, the same
    2 L eta_t / n per step as for B = 1.
  - Prop. 2 uses T * B: in Hardt et al.'s proof the replaced example is drawn
    within the first t0 steps with probability <= B t0 / n, and the proof then
    gives the B = 1 bound with t0 B draws out of T B (and n for n - 1).
  - Prop. 4's theta bounds the change from one *draw*; it moves the averaged
    gradient by 2 L eta_k / B, so theta = 2 L^2 / (lambda T B).
  - Thms. 2, 3 and Cor. 1 have one term per coordinate of the hyperparameter,
    i.e. per draw: they use T * B.
  - Thm. 4, one term per draw: sum over steps t >= 2 and draws b of
    alpha * (S_{i_tb, t} - mean_i S_{i, t}), where S_{i, t} is index i's
    decayed cumulative utility before step t. Algorithm 1's mini-batch variant
    reweights each unique index of a batch once, with its first utility.
  - Thm. 5 becomes alpha * B / (1 - decay) * sum over steps t < T of the
    utilities of the batch's draws. In the proof each reweighting is charged
    once per later draw of the same index, and a later step may draw it up to
    B times, so the geometric series gains the factor B; without it the bound
    can fall below the exact KL (tests/test_bounds.py shows such a run).
    Counting a duplicated draw's utility once per draw only loosens it.
With B = 1 every formula is the paper's as printed; the paper states its
results for B = 1 and says only that the mini-batch variant satisfies similar
guarantees, so the B > 1 forms above are our reading of its proofs.

Plug-in estimates. Theorems 4 and 5 bound KL(Q || P) by an *expectation* over
the posterior Q of a function of the run. From one run, adaptive_kl_bound,
adaptive_kl_bound_general and KLBoundTracker return that function's value for
the run, the single-sample (plug-in) estimate of the expectation: unbiased,
but not itself a bound. The Theorem 4 estimate can even be negative on a run;
where a KL is needed (KLBoundTracker.strongly_convex_sgd_bound) it is clipped
at 0, as KL >= 0. The exact KL has a plug-in too: by the chain rule
KL(Q || P) = E_Q[sum_t B KL(Q_t || uniform)], and AdaptiveSampler's
kl_divergence() reads KL(Q_t || uniform) each step.

NumPy only: importing this module loads neither TensorFlow nor the op
library. The command line that tabulates these bounds is
tf_adasamp.experiment.bounds_table.
"""

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from tf_adasamp import _bound_common as common
from tf_adasamp.host_bound_tracker import KLBoundTracker

# The public API, in the paper's order. KLBoundTracker lives beside its
# in-graph sibling (host_bound_tracker.py, bound_tracker.py); this list keeps
# it here too, for `from tf_adasamp.bounds import *` and the API reference.
__all__ = [
    "uniform_stability_convex", "uniform_stability_nonconvex",
    "hypothesis_stability_convex", "stability_strongly_convex", "chi2_bound",
    "kl_bound", "derandomized_kl_bound", "strongly_convex_sgd_bound",
    "adaptive_kl_bound", "adaptive_kl_bound_general", "KLBoundTracker",
    "minimum_examples"
]


def _result(array):
  return float(array) if np.ndim(array) == 0 else array


# Stability of SGD (paper section "Stability of Stochastic Gradient Descent").


def uniform_stability_convex(
    n: ArrayLike,
    T: ArrayLike,
    lipschitz: ArrayLike,
    eta: ArrayLike,
    smoothness: ArrayLike | None = None) -> float | np.ndarray:
  """Data stability of convex SGD with eta_t <= eta / t (Proposition 1).

    beta = 2 L^2 eta (ln T + 1) / n

  Both uniform and pointwise hypothesis stability, for an L-Lipschitz loss and
  a convex, L-Lipschitz and smooth objective.

  Args:
    n: number of training examples, >= 1.
    T: number of SGD steps, >= 1 (does not depend on the batch size).
    lipschitz: L >= 0.
    eta: step-size scale >= 0, the steps being eta_t <= eta / t.
    smoothness: the objective's smoothness constant, >= 0; when given, the
      proposition's eta <= 2 / smoothness is checked.

  Returns:
    beta, the data stability coefficient.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  n = common.at_least("n", n, 1)
  T = common.at_least("T", T, 1)
  lipschitz = common.at_least("lipschitz", lipschitz, 0)
  eta = common.at_least("eta", eta, 0)
  if smoothness is not None:
    common.step_size(eta, common.at_least("smoothness", smoothness, 0))
  return _result(2 * lipschitz**2 * eta * (np.log(T) + 1) / n)


def uniform_stability_nonconvex(n: ArrayLike,
                                T: ArrayLike,
                                lipschitz: ArrayLike,
                                smoothness: ArrayLike,
                                eta: ArrayLike,
                                max_loss: ArrayLike,
                                batch_size: int = 1) -> float | np.ndarray:
  """Data stability of non-convex SGD with eta_t <= eta / t (Proposition 2).

    beta = (M + 1 / (s eta)) / (n - 1) * (2 L^2 eta)^(1 / (s eta + 1))
           * (T B)^(s eta / (s eta + 1)),      s = smoothness

  For an M-bounded, L-Lipschitz loss and an L-Lipschitz, s-smooth objective
  (from Hardt et al., ICML 2016, Thm. 3.8). Mini-batches enter through the
  T * B draws (module docstring).

  Args:
    n: number of training examples, > 1.
    T: number of SGD steps, >= 1.
    lipschitz: L >= 0.
    smoothness: s > 0.
    eta: step-size scale > 0, the steps being eta_t <= eta / t.
    max_loss: M >= 0, the loss's upper bound.
    batch_size: draws per step B >= 1.

  Returns:
    beta, the data stability coefficient.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  n = common.finite_array("n", n)
  common.check("n", n, n > 1, "> 1")
  draws = common.at_least("T", T, 1) * common.at_least("batch_size", batch_size,
                                                       1)
  lipschitz = common.at_least("lipschitz", lipschitz, 0)
  eta = common.positive("eta", eta)
  s_eta = common.positive("smoothness", smoothness) * eta
  max_loss = common.at_least("max_loss", max_loss, 0)
  return _result((max_loss + 1 / s_eta) / (n - 1) *
                 (2 * lipschitz**2 * eta)**(1 / (s_eta + 1)) *
                 draws**(s_eta / (s_eta + 1)))


def hypothesis_stability_convex(n: ArrayLike, T: ArrayLike,
                                lipschitz: ArrayLike, smoothness: ArrayLike,
                                eta: ArrayLike,
                                initial_risk: ArrayLike) -> float | np.ndarray:
  """Pointwise hypothesis stability of convex SGD from h_0 (Proposition 3).

    beta = 2 L eta (ln T + 1) sqrt(2 s R(h_0)) / n,      s = smoothness

  For an L-Lipschitz loss and a convex, L-Lipschitz, s-smooth objective, with
  steps eta_t <= eta / t (from Kuzborskij and Lampert, 2017, Thm. 3).

  Args:
    n: number of training examples, >= 1.
    T: number of SGD steps, >= 1 (does not depend on the batch size).
    lipschitz: L >= 0.
    smoothness: s >= 0.
    eta: step-size scale in [0, 2 / s].
    initial_risk: R(h_0) >= 0, the expected loss of the initial hypothesis.

  Returns:
    beta, the pointwise hypothesis stability coefficient.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  n = common.at_least("n", n, 1)
  T = common.at_least("T", T, 1)
  lipschitz = common.at_least("lipschitz", lipschitz, 0)
  smoothness = common.at_least("smoothness", smoothness, 0)
  eta = common.at_least("eta", eta, 0)
  common.step_size(eta, smoothness)
  initial_risk = common.at_least("initial_risk", initial_risk, 0)
  return _result(2 * lipschitz * eta * (np.log(T) + 1) *
                 np.sqrt(2 * smoothness * initial_risk) / n)


def stability_strongly_convex(
    n: ArrayLike,
    T: ArrayLike,
    lipschitz: ArrayLike,
    strong_convexity: ArrayLike,
    batch_size: int = 1) -> tuple[float | np.ndarray, float | np.ndarray]:
  """Data and hyperparameter stability of strongly convex SGD (Proposition 4).

    beta = 2 L^2 / (lambda n),      theta = 2 L^2 / (lambda T B)

  For an L-Lipschitz loss and a lambda-strongly convex, L-Lipschitz, smooth
  objective, with steps eta_t = 1 / (lambda t + smoothness). theta bounds the
  change from one draw, of which there are T * B (module docstring).

  Args:
    n: number of training examples, >= 1.
    T: number of SGD steps, >= 1.
    lipschitz: L >= 0.
    strong_convexity: lambda > 0.
    batch_size: draws per step B >= 1.

  Returns:
    (beta, theta): the data stability coefficient and the hyperparameter
    stability coefficient per draw.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  n = common.at_least("n", n, 1)
  draws = common.at_least("T", T, 1) * common.at_least("batch_size", batch_size,
                                                       1)
  lipschitz = common.at_least("lipschitz", lipschitz, 0)
  strong_convexity = common.positive("strong_convexity", strong_convexity)
  scale = 2 * lipschitz**2 / strong_convexity
  return _result(scale / n), _result(scale / draws)


# Generalization bounds (paper section "Generalization Bounds").


def chi2_bound(chi2: ArrayLike, n: ArrayLike, delta: ArrayLike,
               max_loss: ArrayLike, beta: ArrayLike) -> float | np.ndarray:
  """Generalization error bound from pointwise hypothesis stability (Thm. 1).

    G(S, Q) <= sqrt((chi2 + 1) / delta * (2 M^2 / n + 12 M beta))

  Holds with probability >= 1 - delta over the data, for every posterior Q.

  Args:
    chi2: chi-square divergence chi^2(Q || P) >= 0 of the posterior from the
      prior (0 when Q = P).
    n: number of training examples, >= 1.
    delta: failure probability in (0, 1).
    max_loss: M >= 0, the loss's upper bound.
    beta: pointwise hypothesis stability >= 0 under the prior (Props. 1-3).

  Returns:
    The bound on the generalization error G(S, Q) = R(S, Q) - empirical risk.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  chi2 = common.at_least("chi2", chi2, 0)
  n = common.at_least("n", n, 1)
  delta = common.unit_interval("delta", delta)
  max_loss = common.at_least("max_loss", max_loss, 0)
  beta = common.at_least("beta", beta, 0)
  return _result(
      np.sqrt(
          (chi2 + 1) / delta * (2 * max_loss**2 / n + 12 * max_loss * beta)))


def _kl_terms(kl, n, T, delta, max_loss, beta, theta,
              batch_size) -> tuple[np.ndarray, ...]:
  """Checks Thms. 2 and 3's arguments.

  Returns:
    (kl, delta, beta, theta, draws, variance) as arrays, where draws = T B
    and variance = (M + 2 n beta)^2 / n + 4 T B theta^2.
  """
  kl = common.at_least("kl", kl, 0)
  n = common.at_least("n", n, 1)
  draws = common.at_least("T", T, 1) * common.at_least("batch_size", batch_size,
                                                       1)
  delta = common.unit_interval("delta", delta)
  max_loss = common.at_least("max_loss", max_loss, 0)
  beta = common.at_least("beta", beta, 0)
  theta = common.at_least("theta", theta, 0)
  variance = (max_loss + 2 * n * beta)**2 / n + 4 * draws * theta**2
  return kl, delta, beta, theta, draws, variance


def kl_bound(kl: ArrayLike,
             n: ArrayLike,
             T: ArrayLike,
             delta: ArrayLike,
             max_loss: ArrayLike,
             beta: ArrayLike,
             theta: ArrayLike,
             batch_size: int = 1) -> float | np.ndarray:
  """Generalization error bound from (beta, theta)-uniform stability (Thm. 2).

    G(S, Q) <= beta + sqrt(2 (KL + ln(2 / delta))
                           ((M + 2 n beta)^2 / n + 4 T B theta^2))

  Holds with probability >= 1 - delta over the data, for every posterior Q,
  when the algorithm is (beta, theta)-uniformly stable under a product prior.

  Args:
    kl: KL(Q || P) >= 0 (0 when Q = P).
    n: number of training examples, >= 1.
    T: number of steps, >= 1.
    delta: failure probability in (0, 1).
    max_loss: M >= 0, the loss's upper bound.
    beta: uniform data stability >= 0.
    theta: uniform hyperparameter stability >= 0, per draw.
    batch_size: draws per step B >= 1; the theorem's T is the T * B draws.

  Returns:
    The bound on the generalization error G(S, Q).

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  kl, delta, beta, _, _, variance = _kl_terms(kl, n, T, delta, max_loss, beta,
                                              theta, batch_size)
  return _result(beta + np.sqrt(2 * (kl + np.log(2 / delta)) * variance))


def derandomized_kl_bound(kl: ArrayLike,
                          n: ArrayLike,
                          T: ArrayLike,
                          delta: ArrayLike,
                          max_loss: ArrayLike,
                          beta: ArrayLike,
                          theta: ArrayLike,
                          batch_size: int = 1) -> float | np.ndarray:
  """Bound for one run drawn from a product posterior (Theorem 3).

    G(S, h) <= beta + theta sqrt(2 T B ln(2 / delta))
               + sqrt(2 (KL + ln(4 / delta))
                      ((M + 2 n beta)^2 / n + 4 T B theta^2))

  Holds with probability >= 1 - delta over the data *and* the hyperparameters
  h ~ Q, for posteriors Q that are product measures (e.g. uniform sampling,
  KL = 0, or any fixed per-step distribution). Algorithm 1's adaptive posterior
  is not a product measure; Theorem 2 (kl_bound) covers it.

  Args:
    kl: KL(Q || P) >= 0.
    n: number of training examples, >= 1.
    T: number of steps, >= 1.
    delta: failure probability in (0, 1).
    max_loss: M >= 0, the loss's upper bound.
    beta: uniform data stability >= 0.
    theta: uniform hyperparameter stability >= 0, per draw.
    batch_size: draws per step B >= 1; the theorem's T is the T * B draws.

  Returns:
    The bound on the generalization error G(S, h) of the run.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  kl, delta, beta, theta, draws, variance = _kl_terms(kl, n, T, delta, max_loss,
                                                      beta, theta, batch_size)
  return _result(beta + theta * np.sqrt(2 * draws * np.log(2 / delta)) +
                 np.sqrt(2 * (kl + np.log(4 / delta)) * variance))


def strongly_convex_sgd_bound(kl: ArrayLike,
                              n: ArrayLike,
                              T: ArrayLike,
                              delta: ArrayLike,
                              max_loss: ArrayLike,
                              lipschitz: ArrayLike,
                              strong_convexity: ArrayLike,
                              batch_size: int = 1) -> float | np.ndarray:
  """Generalization bound of strongly convex SGD, any posterior (Cor. 1).

    G(S, Q) <= 2 L^2 / (lambda n)
               + sqrt(2 (KL + ln(2 / delta))
                      ((M + 4 L^2 / lambda)^2 / n
                       + 16 L^4 / (lambda^2 T B)))

  Theorem 2 with Proposition 4's coefficients: an M-bounded, L-Lipschitz loss;
  a lambda-strongly convex, L-Lipschitz, smooth objective; steps
  eta_t = 1 / (lambda t + smoothness); a uniform prior. Holds with probability
  >= 1 - delta over the data, for every sampling posterior Q.

  Args:
    kl: KL(Q || P) >= 0 (0 for uniform sampling; for Algorithm 1, bounded by
      Theorems 4 and 5).
    n: number of training examples, >= 1.
    T: number of steps, >= 1.
    delta: failure probability in (0, 1).
    max_loss: M >= 0, the loss's upper bound.
    lipschitz: L >= 0.
    strong_convexity: lambda > 0.
    batch_size: draws per step B >= 1.

  Returns:
    The bound on the generalization error G(S, Q).

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  beta, theta = stability_strongly_convex(n, T, lipschitz, strong_convexity,
                                          batch_size)
  return kl_bound(kl, n, T, delta, max_loss, beta, theta, batch_size)


# Divergence of Algorithm 1 from the uniform prior (paper section
# "Divergence Analysis").


def adaptive_kl_bound(amplitude: ArrayLike, decay: ArrayLike,
                      sampled_utilities: ArrayLike) -> float:
  """Theorem 5's bound on KL(Q || P) of Algorithm 1, from one run.

    KL(Q || P) <= alpha B / (1 - decay) * E_Q[sum_{t=1}^{T-1} sum_b u_tb]

  for nonnegative utilities. Returns the plug-in value
  alpha B / (1 - decay) * sum of the first T - 1 steps' utilities (module
  docstring: mini-batches, plug-in estimates).

  Args:
    amplitude: alpha >= 0.
    decay: in (0, 1).
    sampled_utilities: shape [T] (B = 1) or [T, B], the utility of each draw
      of each step, u(z_{i_t}, h_t); finite and >= 0. The last step's are not
      used (the theorem's sum runs to T - 1).

  Returns:
    The plug-in estimate of Theorem 5's bound.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above.
  """
  amplitude, decay = common.amplitude_decay(amplitude, decay)
  utilities = common.steps(
      "sampled_utilities",
      common.finite_array("sampled_utilities", sampled_utilities))
  common.check(
      "sampled_utilities", utilities, utilities >= 0,
      ">= 0 for Theorem 5 (adaptive_kl_bound_general takes signed ones)")
  return common.nonnegative_bound(amplitude, decay, utilities.shape[1],
                                  utilities[:-1].sum())


def adaptive_kl_bound_general(amplitude: float, decay: float,
                              sampled_indices: ArrayLike,
                              sampled_utilities: ArrayLike,
                              num_examples: int) -> float:
  """Theorem 4's bound on KL(Q || P) of Algorithm 1, from one run.

    KL(Q || P) <= E_Q[sum_{t=2}^T sum_b alpha (S_{i_tb,t} - mean_i S_{i,t})]

  where S_{i,t} is the decayed cumulative utility of index i before step t:
  the sum over its earlier reweightings j = 1..N of u_j decay^(N - j). Any
  finite utilities. Returns the plug-in value of the expectand for the run
  (module docstring: mini-batches, plug-in estimates); it can be negative.

  Args:
    amplitude: alpha >= 0.
    decay: in (0, 1).
    sampled_indices: shape [T] or [T, B], the drawn indices in [0, n).
    sampled_utilities: the same shape, each draw's utility u(z_{i_t}, h_t).
      A batch's repeated index is reweighted once, with its first utility.
    num_examples: n >= 1.

  Returns:
    The plug-in estimate of Theorem 4's bound.

  Raises:
    TypeError: if an argument is not a number or an array of numbers.
    ValueError: if an argument is NaN or outside its range above, or
      `sampled_indices` and `sampled_utilities` differ in shape.
  """
  indices = common.steps("sampled_indices", sampled_indices)
  utilities = common.steps("sampled_utilities", sampled_utilities)
  if indices.shape != utilities.shape:
    raise ValueError(f"sampled_indices {indices.shape} and sampled_utilities "
                     f"{utilities.shape} must have the same shape")
  tracker = KLBoundTracker(num_examples, amplitude, decay)
  for step_indices, step_utilities in zip(indices, utilities):
    tracker.update(step_indices, step_utilities)
  return tracker.kl_bound_general


def minimum_examples(bound: Callable[[int], float],
                     target: ArrayLike,
                     lower: int = 1,
                     upper: int = 10**15) -> int:
  """The smallest integer n in [lower, upper] with bound(n) <= target.

  Bisection; assumes bound is nonincreasing in n.

  Args:
    bound: a function of n returning a float.
    target: the value to reach, > 0.
    lower: smallest n to consider, >= 1.
    upper: largest n to consider.

  Returns:
    The smallest such n, an int.

  Raises:
    TypeError: if `target` is not a number.
    ValueError: if `target` is not > 0, or even bound(upper) > target.
  """
  target = float(common.positive("target", target))
  if bound(lower) <= target:
    return lower
  if bound(upper) > target:
    raise ValueError(f"the bound is {bound(upper):.4g} > {target:g} even at "
                     f"n = {upper:.3g}: its terms that do not shrink with n "
                     "(e.g. those in T) are above the target")
  while upper - lower > 1:  # bound(lower) > target >= bound(upper).
    middle = (lower + upper) // 2
    if bound(middle) <= target:
      upper = middle
    else:
      lower = middle
  return upper
