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

from tf_adasamp import bounds
from tf_adasamp.experiment import flags as flags_lib
from tf_adasamp.experiment.flags import option
from tf_adasamp.experiment.study import bound_rows

PROGRAM = "tf-adasamp-bounds"


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
                          choices=sorted(bound_rows.rows(None)))

  def __post_init__(self):
    if (self.T is None) == (self.epochs is None):
      raise ValueError("set exactly one of --T and --epochs")
    for name in ("n", "batch_size") + (("T",) if self.T is not None else ()):
      if getattr(self, name) < 1:
        raise ValueError(f"--{name} must be >= 1, got {getattr(self, name)}")
    if self.epochs is not None and not 0 < self.epochs < math.inf:
      raise ValueError(f"--epochs must be finite and > 0, got {self.epochs}")
    bound_rows.check_constants(self)

  def steps(self, n):
    """T for n examples: --T, or ceil(epochs n / B)."""
    if self.epochs is None:
      return self.T
    return math.ceil(self.epochs * n / self.batch_size)


def main():
  options = flags_lib.parse(PROGRAM, Options)
  rows = bound_rows.rows(options)
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
    lower = 2 if options.solve_for in bound_rows.NEED_TWO else 1
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
