"""Theorems 4 and 5's running sums on the host, in NumPy: `KLBoundTracker`.

A training loop on the host updates it each step and reads the bounds for
the run so far. Its in-graph sibling, `tf_adasamp.bound_tracker.BoundTracker`,
keeps the same sums in tf.Variables, updated inside a step, and hands them to
a `KLBoundTracker` to read the bounds. The user's name for this one is
`tf_adasamp.bounds.KLBoundTracker`, beside the bounds themselves (whose
module docstring says what the values are: plug-in estimates).

NumPy only: importing this module loads neither TensorFlow nor the op
library.
"""

import numpy as np
from numpy.typing import ArrayLike

from tf_adasamp import _bound_common as common


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

  Values are plug-in estimates (`tf_adasamp.bounds`' module docstring).
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
    self._amplitude, self._decay = common.amplitude_decay(amplitude, decay)
    self._num_examples = int(num_examples)
    self._sums = np.zeros(num_examples)  # S_i.
    self._total = 0.0  # sum_i S_i.
    self._general = 0.0  # Theorem 4's sum over the steps so far.
    self._utilities_before_last = 0.0  # Theorem 5's sum over steps < T.
    self._last_utilities = 0.0
    self._signed = False  # Whether a negative utility was seen.
    self._steps = 0
    self._batch_size: int | None = None  # set by the first step

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
    utilities = common.finite_array("utilities", utilities).reshape(-1)
    if indices.shape != utilities.shape or indices.size < 1:
      raise ValueError(f"indices ({indices.size}) and utilities "
                       f"({utilities.size}) must be the same, >= 1, size")
    if self._batch_size not in (None, indices.size):
      raise ValueError(f"every step must draw {self._batch_size} indices, "
                       f"got {indices.size}")
    common.check("indices", indices,
                 (indices >= 0) & (indices < self._num_examples),
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
  def from_state(cls, num_examples: int, amplitude: float, decay: float,
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
    sums = common.finite_array("sums", state["sums"])
    if sums.shape != (tracker._num_examples,):
      raise ValueError(f"sums must have shape ({tracker._num_examples},), "
                       f"got {sums.shape}")
    steps, batch_size = int(state["steps"]), state["batch_size"]
    if steps < 0 or (batch_size is None) != (steps == 0):
      raise ValueError(f"steps {steps} and batch_size {batch_size!r} do not "
                       "agree (batch_size is None before the first step)")
    tracker._sums = sums.copy()
    for name in ("total", "general", "utilities_before_last", "last_utilities"):
      setattr(tracker, "_" + name, float(common.finite_array(name,
                                                             state[name])))
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
    return common.nonnegative_bound(self._amplitude, self._decay,
                                    self._batch_size or 1,
                                    self._utilities_before_last)

  def strongly_convex_sgd_bound(
      self, delta: ArrayLike, max_loss: ArrayLike, lipschitz: ArrayLike,
      strong_convexity: ArrayLike) -> float | np.ndarray:
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
    # Here, not at the top: bounds imports this module for KLBoundTracker.
    from tf_adasamp import bounds
    if self._steps < 1 or self._batch_size is None:
      raise ValueError("no steps recorded yet (T must be >= 1)")
    return bounds.strongly_convex_sgd_bound(kl=max(0.0, self._general),
                                            n=self._num_examples,
                                            T=self._steps,
                                            delta=delta,
                                            max_loss=max_loss,
                                            lipschitz=lipschitz,
                                            strong_convexity=strong_convexity,
                                            batch_size=self._batch_size)
