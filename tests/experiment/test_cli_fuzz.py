"""Each command line, given bad flag values, exits 1 with a one-line error.

Never a Python traceback: the table covers values caught by the options'
own checks, by absl's flag parsing, and at run time (an unwritable
directory, a diverging run).
"""

import dataclasses
import importlib
import os
import re
import subprocess
import sys

import pytest

from tf_adasamp.experiment import reproduce
from tf_adasamp.experiment import presets
from tf_adasamp.experiment import train_config
from tf_adasamp.experiment import tuning

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


@pytest.mark.parametrize(
    "args,message",
    [
        (["--output_dir={tmp}/file"], "is a file, not a directory"),
        (["--output_dir={tmp}/file/run"], "Not a directory"),
        ([f"--output_dir={UNWRITABLE}"], "cannot write to output_dir"),
        (["--epochs=inf"], "epochs must be finite and > 0, got inf"),
        (["--epochs=nan"], "epochs must be finite and > 0, got nan"),
        (["--seed=-1"], "seed must be in [0, 2**32), got -1"),
        (["--seed=4294967296"], "seed must be in [0, 2**32)"),
        (["--l2=inf"], "l2 must be finite and > 0, got inf"),
        (["--learning_rate=inf"], "learning_rate must be finite and > 0"),
        (["--batch_size=99999999999"], "is larger than the 1500 training"),
        (["--steps=0"], "steps must be"),
        (["--amplitude=nan"], "amplitude must be"),
        (["--steps_per_execution=0"], "steps_per_execution must be"),
        (["--batch_size=abc"], "Flags parsing error"),
        # Runs, and diverges: NaN outputs give the sampler NaN utilities.
        ([
            "--learning_rate=1e30", "--utility=l1", "--steps=4",
            "--eval_interval=2"
        ], "the run diverged at step 2"),
    ])
def test_train_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("train", ["--output_dir={tmp}/run", "--noprogress", *args],
                   tmp_path)
  assert_fails_in_one_line(result, message)


@pytest.mark.parametrize("args,message", [
    (["--output_dir={tmp}/file"], "output_dir {tmp}/file is a file"),
    ([f"--report_dir={UNWRITABLE}"], "cannot write to report_dir"),
    (["--steps=1"], "fewer than 2 evaluations"),
    (["--trials=0"], "trials must be >= 1"),
    (["--sweep_amplitudes=1,x"], "--sweep_amplitudes takes numbers"),
])
def test_reproduce_rejects_bad_flags_in_one_line(tmp_path, args, message):
  result = run_cli("reproduce", ["--output_dir={tmp}/runs", *args], tmp_path)
  assert_fails_in_one_line(result, message.format(tmp=tmp_path))
  # Failed up front: no run started.
  assert not (tmp_path / "runs").exists() or not os.listdir(tmp_path / "runs")


@pytest.mark.parametrize("args,message", [
    (["--epochs=inf"], "--epochs must be finite and > 0, got inf"),
    (["--epochs=nan"], "--epochs must be finite and > 0, got nan"),
    (["--epochs=10", "--batch_size=0"], "--batch_size must be >= 1, got 0"),
    (["--T=0"], "--T must be >= 1"),
    (["--n=0", "--T=5"], "--n must be >= 1"),
    ([], "set exactly one of --T and --epochs"),
])
def test_bounds_table_rejects_bad_flags_in_one_line(tmp_path, args, message):
  assert_fails_in_one_line(run_cli("bounds_table", args, tmp_path), message)


# Run with a command line's module name, then its arguments: whether
# TensorFlow had loaded when the program exited.
_LOADED_TENSORFLOW = """
import importlib
import sys
program = importlib.import_module("tf_adasamp.experiment." + sys.argv.pop(1))
sys.argv[0] = program.PROGRAM
try:
  program.run()
finally:
  print("tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("module,args", [
    ("train", ["--help"]),
    ("train", ["--seed=-1"]),
    ("train", ["--model=x"]),
    ("train", [f"--output_dir={UNWRITABLE}"]),
    ("reproduce", ["--help"]),
    ("reproduce", ["--trials=0"]),
    ("tuning", ["--help"]),
    ("tuning", ["--workers=x"]),
    ("demo", ["--help"]),
])
def test_command_lines_answer_help_and_bad_flags_before_tensorflow_loads(
    module, args):
  result = subprocess.run(
      [sys.executable, "-c", _LOADED_TENSORFLOW, module, *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=300)
  assert result.returncode == 1, result.stderr
  assert result.stdout.splitlines()[-1] == "False", result.stderr
  if args == ["--help"]:  # as a console script: what the program does
    doc = importlib.import_module(f"tf_adasamp.experiment.{module}").__doc__
    assert result.stdout.startswith(doc), result.stdout


@pytest.mark.parametrize("module,settings", [
    ("train", [train_config.TrainConfig]),
    ("reproduce", [reproduce.Options, presets.Settings]),
    ("tuning", [tuning.Options]),
])
def test_help_lists_every_setting(tmp_path, module, settings):
  result = run_cli(module, ["--help"], tmp_path)
  for field in (f for cls in settings for f in dataclasses.fields(cls)):
    assert re.search(rf"^  --(\[no\])?{field.name}:", result.stdout,
                     re.MULTILINE), field.name


def test_train_help_into_a_closed_pipe_ends_quietly():
  # As `tf-adasamp-train --help | head -1` does; stdout buffered, as it is
  # into a pipe unless PYTHONUNBUFFERED is set.
  environment = dict(os.environ)
  environment.pop("PYTHONUNBUFFERED", None)
  read, write = os.pipe()
  os.close(read)
  try:
    result = subprocess.run(
        [sys.executable, "-m", "tf_adasamp.experiment.train", "--help"],
        cwd=ROOT,
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        env=environment)
  finally:
    os.close(write)
  assert result.returncode == 1
  assert not result.stderr, result.stderr
