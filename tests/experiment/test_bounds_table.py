"""The bounds table's command line: it prints each row and the smallest n
that reaches a target, refuses constants outside every bound's range in one
line, and names the flag a row without a value needs."""

import math
import os
import re
import subprocess
import sys

import pytest

from tf_adasamp import bounds

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bounds_table(*args):
  return subprocess.run(
      [sys.executable, "-m", "tf_adasamp.experiment.bounds_table", *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300,
      check=False)


@pytest.mark.parametrize("flag, value, requirement", [
    ("delta", "0", "in (0, 1)"),
    ("delta", "1", "in (0, 1)"),
    ("lipschitz", "-1", ">= 0"),
    ("kl", "-1", ">= 0"),
    ("chi2", "nan", ">= 0"),
    ("max_loss", "inf", ">= 0"),
    ("smoothness", "-0.5", ">= 0"),
    ("eta", "-1", ">= 0"),
    ("strong_convexity", "0", "> 0"),
    ("initial_risk", "-0.1", ">= 0"),
    ("target", "0", "> 0"),
])
def test_a_constant_out_of_range_fails_in_one_line_naming_the_flag(
    flag, value, requirement):
  result = bounds_table("--epochs=1", f"--{flag}={value}")
  assert result.returncode == 1, result.stdout + result.stderr
  assert "Traceback" not in result.stderr, result.stderr
  assert not result.stdout, "no table is printed"
  assert f"--{flag} must be finite and {requirement}, got" in result.stderr


def test_rows_without_an_initial_risk_name_the_flag_to_pass():
  result = bounds_table("--epochs=1")
  assert result.returncode == 0, result.stderr
  notes = [line for line in result.stdout.splitlines() if "n/a" in line]
  for row in ("prop3", "thm1_initial_risk"):
    assert any(f"n/a {row}: pass --initial_risk" in note for note in notes)


def test_command_line_prints_table_and_smallest_n():
  result = subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.bounds_table", "--n=50000",
      "--epochs=10", "--batch_size=100", "--strong_convexity=0.1",
      "--initial_risk=0.7", "--target=0.2"
  ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          check=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  for key in ("prop1", "prop2", "prop3", "prop4_theta", "thm1_nonconvex",
              "cor1", "thm3"):
    assert re.search(rf"^{key} .* \d", result.stdout, re.MULTILINE), key
  n = int(re.search(r"smallest n with cor1 .*: (\d+)", result.stdout)[1])

  def cor1(n):
    return bounds.strongly_convex_sgd_bound(kl=0,
                                            n=n,
                                            T=math.ceil(10 * n / 100),
                                            delta=0.05,
                                            max_loss=1,
                                            lipschitz=1,
                                            strong_convexity=0.1,
                                            batch_size=100)

  assert cor1(n) <= 0.2 < cor1(n - 1)
