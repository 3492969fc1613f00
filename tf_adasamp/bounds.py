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


def _array(name, value):
  """`value` as a float64 array; TypeError if not numeric, ValueError if NaN."""
  if value is None or isinstance(value, (str, bytes)):
    raise TypeError(f"{name} must be a number or an array of numbers, "
                    f"got {value!r}")
  try:
    array = np.asarray(value, dtype=np.float64)
  except (TypeError, ValueError) as error:
    raise TypeError(f"{name} must be a number or an array of numbers, "
                    f"got {value!r}") from error
  return _check(name, array, np.isfinite(array), "finite")


def _check(name, array, ok, requirement):
  """Raises ValueError naming the first entry of `array` where `ok` fails."""
  if not np.all(ok):
    bad = np.broadcast_to(array, np.shape(ok))[~np.asarray(ok)].flat[0]
    raise ValueError(f"{name} must be {requirement}, got {bad:g}")
  return array


def _at_least(name, value, minimum):
  array = _array(name, value)
  return _check(name, array, array >= minimum, f">= {minimum:g}")


def _positive(name, value):
  array = _array(name, value)
  return _check(name, array, array > 0, "> 0")


def _unit_interval(name, value):
  array = _array(name, value)
  return _check(name, array, (array > 0) & (array < 1), "in (0, 1)")


def _step_size(eta, smoothness):
  """Checks the convex propositions' eta in [0, 2 / smoothness]."""
  ok = eta * smoothness <= 2
  if not np.all(ok):
    bad = np.broadcast_to(eta, np.shape(ok))[~ok].flat[0]
    raise ValueError(f"eta must be <= 2 / smoothness, got eta = {bad:g}")


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
  n = _at_least("n", n, 1)
  T = _at_least("T", T, 1)
  lipschitz = _at_least("lipschitz", lipschitz, 0)
  eta = _at_least("eta", eta, 0)
  if smoothness is not None:
    _step_size(eta, _at_least("smoothness", smoothness, 0))
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
  n = _array("n", n)
  _check("n", n, n > 1, "> 1")
  draws = _at_least("T", T, 1) * _at_least("batch_size", batch_size, 1)
  lipschitz = _at_least("lipschitz", lipschitz, 0)
  eta = _positive("eta", eta)
  s_eta = _positive("smoothness", smoothness) * eta
  max_loss = _at_least("max_loss", max_loss, 0)
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
  n = _at_least("n", n, 1)
  T = _at_least("T", T, 1)
  lipschitz = _at_least("lipschitz", lipschitz, 0)
  smoothness = _at_least("smoothness", smoothness, 0)
  eta = _at_least("eta", eta, 0)
  _step_size(eta, smoothness)
  initial_risk = _at_least("initial_risk", initial_risk, 0)
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
  n = _at_least("n", n, 1)
  draws = _at_least("T", T, 1) * _at_least("batch_size", batch_size, 1)
  lipschitz = _at_least("lipschitz", lipschitz, 0)
  strong_convexity = _positive("strong_convexity", strong_convexity)
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
  chi2 = _at_least("chi2", chi2, 0)
  n = _at_least("n", n, 1)
  delta = _unit_interval("delta", delta)
  max_loss = _at_least("max_loss", max_loss, 0)
  beta = _at_least("beta", beta, 0)
  return _result(
      np.sqrt(
          (chi2 + 1) / delta * (2 * max_loss**2 / n + 12 * max_loss * beta)))


def _kl_terms(kl, n, T, delta, max_loss, beta, theta, batch_size):
  """Checks Thms. 2 and 3's arguments.

  Returns:
    (kl, delta, beta, theta, draws, variance) as arrays, where draws = T B
    and variance = (M + 2 n beta)^2 / n + 4 T B theta^2.
  """
  kl = _at_least("kl", kl, 0)
  n = _at_least("n", n, 1)
  draws = _at_least("T", T, 1) * _at_least("batch_size", batch_size, 1)
  delta = _unit_interval("delta", delta)
  max_loss = _at_least("max_loss", max_loss, 0)
  beta = _at_least("beta", beta, 0)
  theta = _at_least("theta", theta, 0)
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


def _amplitude_decay(amplitude, decay):
  amplitude = float(_at_least("amplitude", amplitude, 0))
  decay = float(_unit_interval("decay", decay))
  return amplitude, decay


def _steps(name, value):
  """A run's per-step record as a [T, B] array (a [T] record has B = 1)."""
  array = np.asarray(value)
  if array.ndim not in (1, 2) or array.shape[0] < 1 or array.size < 1:
    raise ValueError(f"{name} must have shape [T] or [T, B] with T, B >= 1, "
                     f"got shape {array.shape}")
  return array.reshape(array.shape[0], -1)


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
  amplitude, decay = _amplitude_decay(amplitude, decay)
  utilities = _steps("sampled_utilities",
                     _array("sampled_utilities", sampled_utilities))
  _check("sampled_utilities", utilities, utilities >= 0,
         ">= 0 for Theorem 5 (adaptive_kl_bound_general takes signed ones)")
  return _nonnegative_bound(amplitude, decay, utilities.shape[1],
                            utilities[:-1].sum())


def _nonnegative_bound(amplitude, decay, batch_size, utility_sum):
  """Theorem 5: alpha B / (1 - decay) times the utilities of steps < T."""
  return amplitude * batch_size / (1 - decay) * float(utility_sum)


def adaptive_kl_bound_general(amplitude: ArrayLike, decay: ArrayLike,
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
  indices = _steps("sampled_indices", sampled_indices)
  utilities = _steps("sampled_utilities", sampled_utilities)
  if indices.shape != utilities.shape:
    raise ValueError(f"sampled_indices {indices.shape} and sampled_utilities "
                     f"{utilities.shape} must have the same shape")
  tracker = KLBoundTracker(num_examples, amplitude, decay)
  for step_indices, step_utilities in zip(indices, utilities):
    tracker.update(step_indices, step_utilities)
  return tracker.kl_bound_general


class KLBoundTracker:
  """Theorems 4 and 5 for a running Algorithm 1, updated at O(B) per step.

  Keeps each index's decayed cumulative utility S_i, their total, and the sums
  the two theorems need; read the bounds for the run so far at any step.

    tracker = KLBoundTracker(num_examples=n, amplitude=1.0, decay=0.9)
    for each step:
      indices = sampler.sample(B); ...; utilities = ...
      sampler.update(indices, utilities)
      tracker.update(indices, utilities)      # numpy or eager TF tensors
      if step % k == 0:
        log(tracker.kl_bound_general, tracker.kl_bound,
            tracker.strongly_convex_sgd_bound(delta=0.05, max_loss=1.0,
                                              lipschitz=L, strong_convexity=l2))

  Values are plug-in estimates (module docstring).
  """

  def __init__(self, num_examples: int, amplitude: float, decay: float):
    """Starts a run of Algorithm 1: all weights 1, all S_i 0.

    Args:
      num_examples: n, an integer >= 1.
      amplitude: alpha >= 0.
      decay: in (0, 1).

    Raises:
      TypeError: if `num_examples` is not an int, or `amplitude` or `decay`
        not a number.
      ValueError: if an argument is outside its range above.
    """
    if isinstance(num_examples, bool) or not isinstance(num_examples,
                                                        (int, np.integer)):
      raise TypeError(f"num_examples must be an int, got {num_examples!r}")
    if num_examples < 1:
      raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    self._amplitude, self._decay = _amplitude_decay(amplitude, decay)
    self._num_examples = int(num_examples)
    self._sums = np.zeros(num_examples)  # S_i.
    self._total = 0.0  # sum_i S_i.
    self._general = 0.0  # Theorem 4's sum over the steps so far.
    self._utilities_before_last = 0.0  # Theorem 5's sum over steps < T.
    self._last_utilities = 0.0
    self._signed = False  # Whether a negative utility was seen.
    self._steps = 0
    self._batch_size = None

  def update(self, indices: ArrayLike, utilities: ArrayLike) -> None:
    """Records one step: its draws and their utilities, O(B).

    Args:
      indices: the step's B drawn indices (shape [B], or a scalar for B = 1),
        integers in [0, n). B must be the same every step.
      utilities: the same shape, finite; a repeated index is reweighted once,
        with its first utility, as Algorithm 1's mini-batch variant does.

    Raises:
      TypeError: if `indices` are not integers or `utilities` not numbers.
      ValueError: if `indices` and `utilities` differ in size or are empty, B
        differs from an earlier step's, an index is out of range or a utility
        is not finite.
    """
    indices = np.asarray(indices)
    if not np.issubdtype(indices.dtype, np.integer):
      raise TypeError(f"indices must be integers, got dtype {indices.dtype}")
    indices = indices.reshape(-1)
    utilities = _array("utilities", utilities).reshape(-1)
    if indices.shape != utilities.shape or indices.size < 1:
      raise ValueError(f"indices ({indices.size}) and utilities "
                       f"({utilities.size}) must be the same, >= 1, size")
    if self._batch_size not in (None, indices.size):
      raise ValueError(f"every step must draw {self._batch_size} indices, "
                       f"got {indices.size}")
    _check("indices", indices, (indices >= 0) & (indices < self._num_examples),
           f"in [0, {self._num_examples})")
    # Theorem 4's term for this step, from the sums before its reweighting.
    self._general += self._amplitude * float(self._sums[indices].sum() -
                                             indices.size * self._total /
                                             self._num_examples)
    unique, first = np.unique(indices, return_index=True)
    updated = self._decay * self._sums[unique] + utilities[first]
    self._total += float((updated - self._sums[unique]).sum())
    self._sums[unique] = updated
    self._utilities_before_last += self._last_utilities
    self._last_utilities = float(utilities.sum())
    self._signed = self._signed or bool(np.any(utilities < 0))
    self._batch_size = indices.size
    self._steps += 1

  def state(self) -> dict:
    """The running sums, by name: what `from_state` takes back.

    For keeping them elsewhere, e.g. in tf.Variables updated inside a
    training step (tf_adasamp.bound_tracker.BoundTracker).

    Returns:
      A dict of NumPy arrays, floats, ints, a bool and None, copies of the
      tracker's own.
    """
    return {
        "sums": self._sums.copy(),
        "total": self._total,
        "general": self._general,
        "utilities_before_last": self._utilities_before_last,
        "last_utilities": self._last_utilities,
        "signed": self._signed,
        "steps": self._steps,
        "batch_size": self._batch_size
    }

  @classmethod
  def from_state(cls, num_examples: int, amplitude: ArrayLike, decay: ArrayLike,
                 state: dict) -> "KLBoundTracker":
    """Rebuilds a tracker from the sums that `state()` returned.

    Args:
      num_examples: n, an integer >= 1, as the tracker was made with.
      amplitude: alpha >= 0, as the tracker was made with.
      decay: in (0, 1), as the tracker was made with.
      state: a dict as `state()` returns it.

    Returns:
      A `KLBoundTracker` holding `state` for a run of Algorithm 1 over
      `num_examples` with `amplitude` and `decay`.

    Raises:
      TypeError: as `KLBoundTracker()` does, or if a sum in `state` is not
        numeric.
      ValueError: as `KLBoundTracker()` does, or if `state`'s sums do not
        have n entries, are not finite, or its steps and batch size disagree.
    """
    tracker = cls(num_examples, amplitude, decay)
    sums = _array("sums", state["sums"])
    if sums.shape != (tracker._num_examples,):
      raise ValueError(f"sums must have shape ({tracker._num_examples},), "
                       f"got {sums.shape}")
    steps, batch_size = int(state["steps"]), state["batch_size"]
    if steps < 0 or (batch_size is None) != (steps == 0):
      raise ValueError(f"steps {steps} and batch_size {batch_size!r} do not "
                       "agree (batch_size is None before the first step)")
    tracker._sums = sums.copy()
    for name in ("total", "general", "utilities_before_last", "last_utilities"):
      setattr(tracker, "_" + name, float(_array(name, state[name])))
    tracker._signed = bool(state["signed"])
    tracker._steps = steps
    tracker._batch_size = None if batch_size is None else int(batch_size)
    return tracker

  @property
  def steps(self) -> int:
    """T, the number of steps recorded."""
    return self._steps

  @property
  def batch_size(self) -> int | None:
    """B, the draws per step (None before the first update)."""
    return self._batch_size

  @property
  def kl_bound_general(self) -> float:
    """Theorem 4's bound on KL(Q || P) so far (plug-in; may be < 0)."""
    return self._general

  @property
  def kl_bound(self) -> float | None:
    """Theorem 5's bound on KL(Q || P) so far (plug-in).

    None once a negative utility was recorded: Theorem 5 needs nonnegative
    ones (kl_bound_general does not).
    """
    if self._signed:
      return None
    return _nonnegative_bound(self._amplitude, self._decay, self._batch_size or
                              1, self._utilities_before_last)

  def strongly_convex_sgd_bound(self, delta: ArrayLike, max_loss: ArrayLike,
                                lipschitz: ArrayLike,
                                strong_convexity: ArrayLike) -> float:
    """Corollary 1's generalization bound for the run so far.

    strongly_convex_sgd_bound with n = num_examples, T = steps, B = batch_size
    and KL = max(0, kl_bound_general), the plug-in Theorem 4 estimate (never
    above Theorem 5's for nonnegative utilities), clipped as KL >= 0.

    Args:
      delta: failure probability in (0, 1).
      max_loss: M >= 0, the loss's upper bound.
      lipschitz: L >= 0.
      strong_convexity: lambda > 0.

    Returns:
      The bound on the generalization error, to set beside the measured
      test-minus-train gap.

    Raises:
      TypeError: if an argument is not a number or an array of numbers.
      ValueError: if no step was recorded yet, or an argument is NaN or outside
        its range above.
    """
    if self._steps < 1:
      raise ValueError("no steps recorded yet (T must be >= 1)")
    return strongly_convex_sgd_bound(kl=max(0.0, self._general),
                                     n=self._num_examples,
                                     T=self._steps,
                                     delta=delta,
                                     max_loss=max_loss,
                                     lipschitz=lipschitz,
                                     strong_convexity=strong_convexity,
                                     batch_size=self._batch_size)


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
  target = float(_positive("target", target))
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
