"""The trainer's small runs, comparing runs' metric records, which are exact
but for their clocks, and a run directory's files before and after a run
that must be refused."""

import dataclasses
import os

import pytest

from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import trainer


def tiny_config(**overrides):
  """A TrainConfig of a few steps of the logistic model on small batches."""
  settings = dict(model="logistic",
                  steps=4,
                  eval_interval=2,
                  batch_size=16,
                  learning_rate=0.1)
  settings.update(overrides)
  return config_lib.TrainConfig(**settings)


def controls_config(**overrides):
  """A small run of Algorithm 1 (no importance weights) at amplitude 1,
  long enough to resume twice: the runs of the sampler controls' tests."""
  return tiny_config(**{
      **dict(steps=6, sampling="adaptive", amplitude=1.0, beta=0.0),
      **overrides
  })


def without_clocks(records):
  """`records` less the wall and CPU seconds, which no two runs share."""
  seconds = {"train_seconds", "train_cpu_seconds", loop.IRREDUCIBLE_SECONDS}
  assert seconds - {loop.IRREDUCIBLE_SECONDS} <= set(trainer.CLOCKS)
  return [{
      k: v for k, v in record.items() if k not in seconds
  } for record in records]


def stopped_and_resumed(config, data):
  """The run of `config` stopped as Ctrl-C stops it after its second call
  (step 4), then resumed with the same settings: its records."""
  calls = iter(range(3))
  try:
    loop.train(config, data=data, stop_requested=lambda: next(calls) == 2)
  except KeyboardInterrupt:
    pass
  else:
    raise AssertionError("the run was not stopped")
  return loop.train(dataclasses.replace(config, resume=True), data=data)


def snapshot(directory):
  """Every file under `directory`, by path, with its bytes (a FIFO with its
  mode)."""
  files = {}
  for folder, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(folder, name)
      if not os.path.isfile(path):  # a FIFO: opening it would wait
        files[os.path.relpath(path, directory)] = os.stat(path).st_mode
        continue
      with open(path, "rb") as f:
        files[os.path.relpath(path, directory)] = f.read()
  return files


def refused(config, digits, message):
  """Trains `config`: refused with a one-line RunError holding `message`,
  the run directory as it was."""
  before = snapshot(config.output_dir)
  with pytest.raises(run_files.RunError) as raised:
    loop.train(config, data=digits)
  assert message in str(raised.value)
  assert "\n" not in str(raised.value)
  assert snapshot(config.output_dir) == before
  return str(raised.value)
