"""The experiment's command lines run as a user runs them, and the check that
one failed in one line (tests/experiment/test_cli_fuzz.py, test_flags.py,
test_wall_time.py)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A directory even root cannot create.
UNWRITABLE = "/sys/tf_adasamp_fuzz"


def run_cli(module, args, tmp_path):
  (tmp_path / "file").write_text("")
  args = [arg.format(tmp=tmp_path) for arg in args]
  return subprocess.run(
      [sys.executable, "-m", f"tf_adasamp.experiment.{module}", *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def assert_fails_in_one_line(result, message):
  assert result.returncode == 1, result.stderr
  assert "Traceback" not in result.stderr, result.stderr
  lines = [line for line in result.stderr.splitlines() if message in line]
  assert lines, result.stderr
