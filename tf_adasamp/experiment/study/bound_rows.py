"""The bounds table's rows: each of the paper's stability coefficients and
generalization bounds (`tf_adasamp.bounds`) as a function of n, for the
constants of the command line (tf_adasamp.experiment.bounds_table).
"""

import math

from tf_adasamp import bounds

# Rows that need n >= 2 (Prop. 2 has n - 1 in a denominator).
NEED_TWO = ("prop2", "thm1_nonconvex")


def rows(f):
  """The table's rows: key -> (paper result, description, function of n).

  `f` holds the constants (the command line's Options: their names, and
  `steps(n)`); with f None only the keys matter.
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
CONSTANT_RANGES = {
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


def check_constants(constants):
  """Checks each constant is in the range every row that uses it needs (a
  row may need more, e.g. Prop. 2's smoothness > 0, and says so in its
  note).

  Args:
    constants: an object with an attribute per name of CONSTANT_RANGES,
      each a float or None (not given).

  Raises:
    ValueError: naming the flag of a constant out of its range.
  """
  for name, (ok, requirement) in CONSTANT_RANGES.items():
    value = getattr(constants, name)
    if value is not None and not (math.isfinite(value) and ok(value)):
      raise ValueError(f"--{name} must be {requirement}, got {value}")
