"""The trainer's command line (tf_adasamp.experiment.train): its flags, exit
status and output, a run in a process of its own. The training units' tests
are in tests/experiment/training/."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from run_records import without_clocks
from tf_adasamp.experiment.training import run_files

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args):
  return subprocess.run(
      [sys.executable, "-m", "tf_adasamp.experiment.train", *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_cli_bad_flag_value_is_one_line_without_traceback(tmp_path):
  result = run_cli("--decay=1.5", f"--output_dir={tmp_path}")
  assert result.returncode != 0
  assert ("tf-adasamp-train: decay must be in (0, 1), got 1.5\n"
          in result.stderr)
  assert "Traceback" not in result.stderr


def test_cli_takes_a_flagfile_and_writes_metrics(tmp_path):
  flagfile = tmp_path / "flags.txt"
  flagfile.write_text("\n".join([
      "--model=logistic", "--steps=4", "--eval_interval=2", "--noprogress",
      "--deterministic", f"--output_dir={tmp_path / 'run'}"
  ]))
  result = run_cli(f"--flagfile={flagfile}")
  assert result.returncode == 0, result.stderr
  with open(tmp_path / "run" / run_files.METRICS_FILE) as f:
    assert [json.loads(line)["step"] for line in f] == [0, 2, 4]


@pytest.mark.gpu
@pytest.mark.skipif(not tf.config.list_physical_devices("GPU"),
                    reason="TensorFlow sees no GPU")
# The cnn compiled by XLA is refused: training/test_config.py's
# test_bad_config_values_raise_value_error.
@pytest.mark.parametrize("model,jit_compile", [("cnn", False),
                                               ("logistic", True)])
def test_deterministic_resumed_run_on_the_gpu_matches_uninterrupted_run(
    tmp_path, model, jit_compile):
  # Op determinism is for the whole process: a process per run.
  common = [
      f"--model={model}", "--steps=6", "--eval_interval=2", "--batch_size=16",
      "--noprogress", "--deterministic", f"--jit_compile={jit_compile}"
  ]
  for name, extra in [("whole", []), ("stopped", ["--steps=4"]),
                      ("stopped", ["--resume"])]:
    result = run_cli(*common, *extra, f"--output_dir={tmp_path / name}")
    assert result.returncode == 0, result.stderr
  whole = run_files.read_metrics(str(tmp_path / "whole"))
  assert [r["step"] for r in whole] == [0, 2, 4, 6]
  assert without_clocks(run_files.read_metrics(str(
      tmp_path / "stopped"))) == without_clocks(whole)
