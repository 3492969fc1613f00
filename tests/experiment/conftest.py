"""Fixtures of the experiment's tests."""

import itertools

import pytest

from carried_runs import config
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop


@pytest.fixture(scope="module")
def digits():
  """scikit-learn's digits, the data of the trainer's small runs."""
  return datasets.load("digits")


@pytest.fixture(scope="module")
def study(digits, tmp_path_factory):
  """The carry's study: a runs directory of a finished run and of a run cut
  after step 4 (its checkpoints at steps 2 and 4), and the cut run's records
  had it gone on."""
  root = tmp_path_factory.mktemp("study")
  runs = root / "runs"
  loop.train(config(runs / "A" / "seed0"), data=digits)
  calls = itertools.count()
  with pytest.raises(KeyboardInterrupt):
    loop.train(config(runs / "B" / "seed1", seed=1),
               data=digits,
               stop_requested=lambda: next(calls) == 2)
  whole = loop.train(config(root / "whole", seed=1), data=digits)
  (runs / "tuning.json").write_text("{}")
  return runs, whole
