"""Tabulates the paper's bounds for given constants (tf_adasamp.bounds).

Prints each stability coefficient and generalization bound of London (NIPS
2017) for the constants given as flags and, with --target, the smallest n
whose --solve_for bound reaches it:

  python -m tf_adasamp.experiment.bounds_table --n=50000 --epochs=10 \\
      --batch_size=100 --strong_convexity=0.1 --target=0.2
"""

import dataclasses
import math
import sys

from absl import flags

from tf_adasamp import bounds
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option

PROGRAM = "tf-adasamp-bounds"
FLAGS = flags.FLAGS
# Rows that need n >= 2 (Prop. 2 has n - 1 in a denominator).
_NEED_TWO = ("prop2", "thm1_nonconvex")


def _rows(f):
  """The table's rows: key -> (paper result, description, function of n).

  `f` holds the constants (an Options); with f None only the keys matter.
  """

  steps = f.steps if f else None

  def prop1(n):
    return bounds.uniform_stability_convex(n, steps(n), f.lipschitz, f.eta,
                                           f.smoothness)

  def prop2(n):
    return bounds.uniform_stability_nonconvex(n, steps(n), f.lipschitz,
                                              f.smoothness, f.eta, f.max_loss,
                                              f.batch_size)

  def prop3(n):
    if f.initial_risk is None:
      raise ValueError("pass --initial_risk, the initial model's risk R(h_0)")
    return bounds.hypothesis_stability_convex(n, steps(n), f.lipschitz,
                                              f.smoothness, f.eta,
                                              f.initial_risk)

  def prop4(n):
    return bounds.stability_strongly_convex(n, steps(n), f.lipschitz,
                                            f.strong_convexity, f.batch_size)

  def thm1(stability):
    return lambda n: bounds.chi2_bound(f.chi2, n, f.delta, f.max_loss,
                                       stability(n))

  def cor1(n):
    return bounds.strongly_convex_sgd_bound(f.kl, n, steps(n), f.delta,
                                            f.max_loss, f.lipschitz,
                                            f.strong_convexity, f.batch_size)

  def thm3(n):
    return bounds.derandomized_kl_bound(f.kl,
                                        n,
                                        steps(n),
                                        f.delta,
                                        f.max_loss,
                                        *prop4(n),
                                        batch_size=f.batch_size)

  return {
      "prop1": ("Prop. 1", "beta, convex SGD", prop1),
      "prop2": ("Prop. 2", "beta, non-convex SGD", prop2),
      "prop3": ("Prop. 3", "beta, convex SGD, from R(h_0)", prop3),
      "prop4_beta":
          ("Prop. 4", "beta, strongly convex SGD", lambda n: prop4(n)[0]),
      "prop4_theta":
          ("Prop. 4", "theta, strongly convex SGD", lambda n: prop4(n)[1]),
      "thm1_convex":
          ("Thm. 1", "gen. error, chi2, Prop. 1's beta", thm1(prop1)),
      "thm1_nonconvex": ("Thm. 1", "gen. error, chi2, Prop. 2's beta",
                         thm1(prop2)),
      "thm1_initial_risk": ("Thm. 1", "gen. error, chi2, Prop. 3's beta",
                            thm1(prop3)),
      "cor1": ("Cor. 1", "gen. error, KL, strongly convex SGD", cor1),
      "thm3": ("Thm. 3", "gen. error, one run, product Q", thm3),
  }


# The constants' ranges, as tf_adasamp.bounds checks them; each finite too.
_CONSTANT_RANGES = {
    "delta": (lambda x: 0 < x < 1, "finite and in (0, 1)"),
    "max_loss": (lambda x: x >= 0, "finite and >= 0"),
    "lipschitz": (lambda x: x >= 0, "finite and >= 0"),
    "smoothness": (lambda x: x >= 0, "finite and >= 0"),
    "eta": (lambda x: x >= 0, "finite and >= 0"),
    "strong_convexity": (lambda x: x > 0, "finite and > 0"),
    "initial_risk": (lambda x: x >= 0, "finite and >= 0"),
    "kl": (lambda x: x >= 0, "finite and >= 0"),
    "chi2": (lambda x: x >= 0, "finite and >= 0"),
    "target": (lambda x: x > 0, "finite and > 0"),
}


@dataclasses.dataclass(frozen=True)
class Options:
  """The constants of the table."""
  n: int = option(50000, "Number of training examples.")
  T: int | None = option(None, "Number of SGD steps (or set --epochs).")
  epochs: float | None = option(
      None, "Passes over the data; sets T = "
      "ceil(epochs n / B), also while solving for "
      "n.")
  batch_size: int = option(1, "Draws per step, B.")
  delta: float = option(0.05, "Failure probability, in (0, 1).")
  max_loss: float = option(1.0, "M, the loss's upper bound.")
  lipschitz: float = option(1.0, "L, Lipschitz constant of loss and "
                            "objective.")
  smoothness: float = option(1.0, "Smoothness of the objective.")
  eta: float = option(1.0, "Step-size scale, eta_t <= eta / t (Props. 1-3).")
  strong_convexity: float = option(
      0.01, "lambda, e.g. the L2 penalty "
      "(Prop. 4, Cor. 1).")
  initial_risk: float | None = option(
      None, "R(h_0), the initial model's "
      "risk (Prop. 3).")
  kl: float = option(0.0, "KL(Q || P) of the sampling posterior.")
  chi2: float = option(0.0, "chi^2(Q || P) of the sampling posterior.")
  target: float | None = option(
      None, "Also print the smallest n whose "
      "--solve_for bound is <= target.")
  solve_for: str = option("cor1",
                          "Which row --target is for.",
                          choices=sorted(_rows(None)))

  def __post_init__(self):
    if (self.T is None) == (self.epochs is None):
      raise ValueError("set exactly one of --T and --epochs")
    for name in ("n", "batch_size") + (("T",) if self.T is not None else ()):
      if getattr(self, name) < 1:
        raise ValueError(f"--{name} must be >= 1, got {getattr(self, name)}")
    if self.epochs is not None and not 0 < self.epochs < math.inf:
      raise ValueError(f"--epochs must be finite and > 0, got {self.epochs}")
    self._check_constants()

  def _check_constants(self):
    """Each constant in the range every row that uses it needs (a row may
    need more, e.g. Prop. 2's smoothness > 0, and says so in its note)."""
    for name, (ok, requirement) in _CONSTANT_RANGES.items():
      value = getattr(self, name)
      if value is not None and not (math.isfinite(value) and ok(value)):
        raise ValueError(f"--{name} must be {requirement}, got {value}")

  def steps(self, n):
    """T for n examples: --T, or ceil(epochs n / B)."""
    if self.epochs is None:
      return self.T
    return math.ceil(self.epochs * n / self.batch_size)


def main():
  options = flags_lib.parse(PROGRAM, Options)
  rows = _rows(options)
  print(f"London (NIPS 2017) bounds for n = {options.n}, T = "
        f"{options.steps(options.n)} steps x B = {options.batch_size} draws, "
        "delta = "
        f"{options.delta:g}, KL = {options.kl:g}, chi2 = {options.chi2:g}")
  print(f"M = {options.max_loss:g}, L = {options.lipschitz:g}, smoothness = "
        f"{options.smoothness:g}, eta = {options.eta:g}, lambda = "
        f"{options.strong_convexity:g}, R(h_0) = {options.initial_risk}")
  print()
  print(f"{'key':<18} {'result':<8} {'':<40} {'value':>10}")
  notes = []
  for key, (paper, description, value_of_n) in rows.items():
    try:
      value = f"{value_of_n(options.n):.4g}"
    except (TypeError, ValueError) as error:
      value = "n/a"
      notes.append(f"{key}: {error}")
    print(f"{key:<18} {paper:<8} {description:<40} {value:>10}")
  for note in notes:
    print(f"  n/a {note}")
  if options.target is not None:
    paper, _, value_of_n = rows[options.solve_for]
    lower = 2 if options.solve_for in _NEED_TWO else 1
    try:
      n = bounds.minimum_examples(value_of_n, options.target, lower=lower)
    except (TypeError, ValueError) as error:
      sys.exit(f"{PROGRAM}: no n reaches {options.solve_for} <= "
               f"{options.target:g}: {error}")
    print()
    print(f"smallest n with {options.solve_for} ({paper}) <= "
          f"{options.target:g}: {n} (bound there {value_of_n(n):.4g})")


def run():
  """Console-script entry point (tf-adasamp-bounds)."""
  flags_lib.run(PROGRAM,
                define_flags=lambda: flags_lib.define(Options),
                main=main)


if __name__ == "__main__":
  run()
