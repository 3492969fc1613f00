"""Fixtures of the trainer's unit tests."""

import dataclasses

import pytest

from run_records import tiny_config
from tf_adasamp.experiment.training import loop


@pytest.fixture
def run(digits, tmp_path):
  """The config of a finished 4-step run in tmp_path/run (records 0, 2, 4;
  checkpoints 2 and 4), to resume to step 6."""
  config = tiny_config(output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  return dataclasses.replace(config, resume=True, steps=6)
