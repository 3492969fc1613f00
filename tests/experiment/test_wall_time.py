"""The wall-time command line (tf_adasamp.experiment.wall_time)."""

import os

import pytest

from command_lines import assert_fails_in_one_line
from command_lines import run_cli
from command_lines import UNWRITABLE


@pytest.mark.parametrize("args,message", [
    (["--trials=0"], "trials must be >= 1"),
    (["--amplitudes=1,x"], "--amplitudes takes numbers"),
    (["--amplitudes=-1"], "amplitude must be"),
    ([f"--report={UNWRITABLE}/wall_time.md"], "cannot write to"),
])
def test_wall_time_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("wall_time", ["--output_dir={tmp}/runs", *args], tmp_path)
  assert_fails_in_one_line(result, message)
  assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")
