"""The command lines' shared flags (tf_adasamp.experiment.flags)."""

import dataclasses
import importlib
import os
import re
import subprocess
import sys

import pytest

from command_lines import ROOT
from command_lines import run_cli
from tf_adasamp.experiment import budget_study
from tf_adasamp.experiment import reproduce
from tf_adasamp.experiment import wall_time
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import tuning_options
from tf_adasamp.experiment.training import config as config_lib


@pytest.mark.parametrize("module,settings", [
    ("train", [config_lib.TrainConfig]),
    ("reproduce", [reproduce.Options, presets.Settings]),
    ("tuning", [tuning_options.Options]),
    ("wall_time", [wall_time.Options]),
    ("budget_study", [budget_study.Options]),
])
def test_help_lists_every_setting(tmp_path, module, settings):
  result = run_cli(module, ["--help"], tmp_path)
  for field in (f for cls in settings for f in dataclasses.fields(cls)):
    assert re.search(rf"^  --(\[no\])?{field.name}:", result.stdout,
                     re.MULTILINE), field.name


@pytest.mark.parametrize("module", ["train", "bounds_table", "tuning"])
def test_a_flagfile_of_other_lines_is_refused_without_showing_them(
    tmp_path, module):
  program = importlib.import_module(f"tf_adasamp.experiment.{module}").PROGRAM
  secret = tmp_path / "secret"
  secret.write_text("root:$6$hash:19000:0:99999:7:::\ndaemon:*:19000\n")
  result = run_cli(module, [f"--flagfile={secret}"], tmp_path)
  assert result.returncode == 1
  assert result.stderr.splitlines() == [
      f"{program}: --flagfile holds 2 lines that "
      "are not flags (--name=value, one a line); not shown"
  ]
  # Typed on the command line, a stray argument is named.
  result = run_cli(module, ["stray"], tmp_path)
  assert result.stderr.splitlines()[-1].endswith(
      "unexpected arguments ['stray']")


def test_a_flagfile_that_is_a_fifo_is_refused_without_waiting(tmp_path):
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  nested = tmp_path / "flags"
  nested.write_text(f"--flagfile={fifo}\n")
  for flagfile in (fifo, nested):
    result = run_cli("bounds_table", [f"--flagfile={flagfile}"], tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"tf-adasamp-bounds: --flagfile {fifo} is not a regular file"
    ]


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
