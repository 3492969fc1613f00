"""The bounds table's rows (study.bound_rows): each row the tf_adasamp.bounds
function its paper result names, at the constants given, and the checks of
those constants."""

import dataclasses
import re

import pytest

from tf_adasamp import bounds
from tf_adasamp.experiment.study import bound_rows


@dataclasses.dataclass(frozen=True)
class Constants:
  """The constants the rows read, as the command line's Options holds them."""
  T: int = 1000
  batch_size: int = 10
  delta: float = 0.05
  max_loss: float = 1.0
  lipschitz: float = 2.0
  smoothness: float = 3.0
  eta: float = 0.5
  strong_convexity: float = 0.1
  initial_risk: float | None = 0.7
  kl: float = 0.25
  chi2: float = 0.5
  target: float | None = None

  def steps(self, n):
    del n  # a fixed T, whatever n
    return self.T


def test_each_row_is_its_papers_bound_at_the_constants():
  c, n = Constants(), 5000
  prop1 = bounds.uniform_stability_convex(n, c.T, c.lipschitz, c.eta,
                                          c.smoothness)
  prop2 = bounds.uniform_stability_nonconvex(n, c.T, c.lipschitz, c.smoothness,
                                             c.eta, c.max_loss, c.batch_size)
  prop3 = bounds.hypothesis_stability_convex(n, c.T, c.lipschitz, c.smoothness,
                                             c.eta, c.initial_risk)
  prop4 = bounds.stability_strongly_convex(n, c.T, c.lipschitz,
                                           c.strong_convexity, c.batch_size)
  expected = {
      "prop1":
          prop1,
      "prop2":
          prop2,
      "prop3":
          prop3,
      "prop4_beta":
          prop4[0],
      "prop4_theta":
          prop4[1],
      "thm1_convex":
          bounds.chi2_bound(c.chi2, n, c.delta, c.max_loss, prop1),
      "thm1_nonconvex":
          bounds.chi2_bound(c.chi2, n, c.delta, c.max_loss, prop2),
      "thm1_initial_risk":
          bounds.chi2_bound(c.chi2, n, c.delta, c.max_loss, prop3),
      "cor1":
          bounds.strongly_convex_sgd_bound(c.kl, n, c.T, c.delta, c.max_loss,
                                           c.lipschitz, c.strong_convexity,
                                           c.batch_size),
      "thm3":
          bounds.derandomized_kl_bound(c.kl,
                                       n,
                                       c.T,
                                       c.delta,
                                       c.max_loss,
                                       *prop4,
                                       batch_size=c.batch_size),
  }
  rows = bound_rows.rows(c)
  assert set(rows) == set(expected) == set(bound_rows.rows(None))
  for key, (_, _, value_of_n) in rows.items():
    assert value_of_n(n) == expected[key], key
  # The constants matter: another chi2 changes Theorem 1's rows alone.
  other = bound_rows.rows(dataclasses.replace(c, chi2=4.0))
  for key, (_, _, value_of_n) in other.items():
    assert (value_of_n(n) != expected[key]) == key.startswith("thm1"), key


def test_the_rows_that_need_two_examples_are_those_refused_at_one():
  refused = set()
  for key, (_, _, value_of_n) in bound_rows.rows(Constants()).items():
    try:
      value_of_n(1)
    except ValueError:
      refused.add(key)
  assert refused == set(bound_rows.NEED_TWO)


def test_a_row_without_an_initial_risk_names_the_flag_to_pass():
  rows = bound_rows.rows(Constants(initial_risk=None))
  for key in ("prop3", "thm1_initial_risk"):
    with pytest.raises(ValueError, match="pass --initial_risk"):
      rows[key][2](5000)
  assert rows["prop1"][2](5000) > 0  # the others need none


@pytest.mark.parametrize("name, value, requirement", [
    ("delta", 1.0, "finite and in (0, 1)"),
    ("lipschitz", -1.0, "finite and >= 0"),
    ("kl", float("nan"), "finite and >= 0"),
    ("strong_convexity", 0.0, "finite and > 0"),
    ("target", float("inf"), "finite and > 0"),
])
def test_check_constants_names_the_flag_out_of_range(name, value, requirement):
  bound_rows.check_constants(Constants())  # in range
  message = f"--{name} must be {requirement}, got {value}"
  with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
    bound_rows.check_constants(dataclasses.replace(Constants(),
                                                   **{name: value}))
  # An optional constant not given is not checked.
  bound_rows.check_constants(
      dataclasses.replace(Constants(), initial_risk=None, target=None))
