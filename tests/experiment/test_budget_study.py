"""The budget-limited regime's command line, end to end at toy size."""

import os
import subprocess
import sys

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _study(tmp_path, *args):
  return subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.budget_study",
      "--scale=smoke", f"--output_dir={tmp_path / 'runs'}",
      f"--report_dir={tmp_path / 'report'}", "--workers=1", *args
  ],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=600,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_the_study_tunes_trains_times_and_reports_then_resumes_alike(tmp_path):
  result = _study(tmp_path)
  assert result.returncode == 0, result.stderr
  report = tmp_path / "report"
  for name in ("tuning.md", "tuning.json", "summary.md", "wall_time.md",
               "heldout_clean.png", "heldout_noise0.2.png",
               "heldout_seconds.png"):
    assert (report / name).is_file(), name
  summary = (report / "summary.md").read_text()
  assert "### 20% of the training labels flipped" in summary
  assert "## The regime" in summary
  # The study again: every run finished before, the same summary.
  again = _study(tmp_path, "--stage=study")
  assert again.returncode == 0, again.stderr
  assert again.stdout.count("finished before, skipped") == 12
  assert (report / "summary.md").read_text() == summary
