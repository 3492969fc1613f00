"""The experiment's command line (tf_adasamp.experiment.reproduce): its
refusals before any run, and the summary it writes."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _reproduce(tmp_path, *args):
  return subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.reproduce",
      f"--output_dir={tmp_path}/runs", *args
  ],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


@pytest.mark.parametrize("args, message", [
    (["--workers=0"], "workers must be >= 1, got 0"),
    (["--workers=-3"], "workers must be >= 1, got -3"),
    (["--dataset=digits", "--batch_size=2000"
     ], "--batch_size=2000 is larger than the 1500 training examples"),
])
def test_reproduce_refuses_in_one_line_before_any_run(tmp_path, args, message):
  result = _reproduce(tmp_path, *args)
  assert result.returncode == 1, result.stderr
  assert "Traceback" not in result.stderr
  assert "run again" not in result.stderr
  assert [line for line in result.stderr.splitlines() if message in line]
  # No run started (the report directory is checked up front).
  runs = tmp_path / "runs"
  assert not runs.exists() or set(os.listdir(runs)) <= {"report"}


def test_the_summary_names_the_command_that_reproduces_it(tmp_path):
  tiny = [
      "--dataset=digits", "--model=logistic", "--trials=1", "--steps=4",
      "--eval_interval=2"
  ]
  first = _reproduce(tmp_path, *tiny, "--workers=2")
  assert first.returncode == 0, first.stderr
  # Where the report goes and how the runs are paced change no number, so
  # the summary written again elsewhere is the same, byte for byte.
  again = _reproduce(tmp_path, *tiny, "--workers=1",
                     f"--report_dir={tmp_path}/elsewhere")
  assert again.returncode == 0, again.stderr
  summary = (tmp_path / "runs" / "report" / "summary.md").read_text()
  assert summary == (tmp_path / "elsewhere" / "summary.md").read_text()
  assert ("Produced by `python -m tf_adasamp.experiment.reproduce "
          "--dataset=digits --model=logistic --trials=1 --steps=4 "
          "--eval_interval=2`.") in summary
