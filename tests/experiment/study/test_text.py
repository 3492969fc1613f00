"""How the reports write numbers (tf_adasamp.experiment.study.text): a
p-value to the digits that decide it, intervals, and ratios with the runs
that never reached their target."""

import math

import pytest

from tf_adasamp.experiment.study import targets
from tf_adasamp.experiment.study import text
from tf_adasamp.experiment.study import verdicts


@pytest.mark.parametrize(
    "p, shown",
    [
        (0.0123456, "0.0123"),  # 3 significant digits decide it
        (0.0501, "0.0501"),
        (0.04996, "0.04996"),  # "0.05" would read as not below alpha
        (0.050004, "0.050004"),
        (0.9, "0.9"),
        (math.nan, "–"),
    ])
def test_a_p_value_shows_the_digits_that_put_it_on_its_side_of_alpha(p, shown):
  assert text.p_text(p) == shown
  if not math.isnan(p):
    assert (float(shown) < verdicts.ALPHA) == (p < verdicts.ALPHA)


def test_an_interval_is_signed_or_says_why_there_is_none():
  test = verdicts.paired_test([0.01, 0.03, 0.02, 0.04, 0.05])
  assert text.interval_text(test) == (
      f"+0.0300 [{test.low:+.4f}, {test.high:+.4f}]")
  assert test.low < 0.03 < test.high
  too_few = verdicts.paired_test([-0.5])
  assert text.interval_text(too_few, digits=2) == (f"-0.50 ({too_few.why_not})")


def test_mean_std_is_the_population_spread():
  assert text.mean_std([1.0, 3.0], digits=1) == "2.0 ± 1.0"


def test_a_ratio_counts_the_runs_that_never_reached_the_target():
  inf = math.inf
  # 4 trials both reach, 1 run never does, 2 baseline runs never do.
  ratio = targets.paired_ratio([1.0, 2.0, 1.5, 1.2, inf, 3.0, inf],
                               [2.0, 2.0, 2.0, 2.0, 2.0, inf, inf])
  low, high = ratio.interval
  assert text.ratio_text(ratio) == (
      f"{ratio.geometric_mean:.3f} [{low:.3f}, {high:.3f}] "
      "(1 run never, 2 baseline runs never)")
  never = targets.paired_ratio([inf, inf, 1.0], [1.0, 1.0, inf])
  assert text.ratio_text(never) == "never (2/3 runs)"
  one = targets.paired_ratio([1.0, inf], [2.0, 2.0])
  assert text.ratio_text(one) == (f"0.500 ({one.test.why_not}) (1 run never)")
