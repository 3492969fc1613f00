"""Fixtures of the experiment's tests."""

import pytest

from tf_adasamp.experiment.training import datasets


@pytest.fixture(scope="module")
def digits():
  """scikit-learn's digits, the data of the trainer's small runs."""
  return datasets.load("digits")
