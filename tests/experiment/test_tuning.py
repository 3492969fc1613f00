"""Tuning by cross-validation: validation splits, both stages, the choice."""

import dataclasses

import numpy as np

from tf_adasamp.experiment import tuning
from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import datasets


def test_tuning_reads_validation_splits_never_the_test_set(tmp_path):
  full = datasets.load("digits")
  # A test split that would give accuracy 0 or garbage if it were read.
  poisoned = dataclasses.replace(full,
                                 x_test=full.x_test[:1] * np.nan,
                                 y_test=full.y_test[:1])
  options = tuning.Options(dataset="digits",
                           model="logistic",
                           seeds="100,101",
                           validation_size=300,
                           sgd_learning_rates="0.1,0.3",
                           sgd_lr_decays="0",
                           adagrad_learning_rates="0.1",
                           amplitudes="1",
                           decays="0.5",
                           adaptive_lr_factors="2",
                           output_dir=str(tmp_path),
                           workers=1)
  settings = dataclasses.replace(presets.preset("digits", "logistic"),
                                 steps=4,
                                 eval_interval=2,
                                 batch_size=16)
  results = tuning.tune(options, poisoned, settings, log=lambda _: None)
  # Two SGD step sizes and one AdaGrad step size, each over both seeds.
  assert len(results["step_sizes"]) == 3
  for row in results["step_sizes"]:
    assert len(row["final"]) == 2
    assert all(np.isfinite(row["final"]))  # validation, not the NaN test
  # One stage-2 setting for each of the four adaptive algorithms.
  assert sorted(r["algorithm"] for r in results["amplitude_decay"]) == sorted(
      tuning.ADAPTIVE)
  best, safe = tuning.chosen(results)
  assert best == (1.0, 0.5)
  # Stage 3: each adaptive algorithm at its rule's step size and twice it.
  assert len(results["adaptive_step_sizes"]) == 2 * len(tuning.ADAPTIVE)
  chosen_sgd = results["chosen_step_sizes"]["sgd"][0]
  assert results["chosen_adaptive_learning_rates"][0] in (chosen_sgd,
                                                          2 * chosen_sgd)
  text = tuning.markdown(results, "cmd")
  for section in ("## Stage 1", "## Stage 2", "## Stage 3", "Best mean"):
    assert section in text
  assert len(safe) <= 1


def test_validation_data_differs_per_seed():
  full = datasets.load("digits")
  first = tuning._validation_data(full, 300, design.Run("a", 0, 100, None))  # pylint: disable=protected-access
  second = tuning._validation_data(full, 300, design.Run("a", 0, 101, None))  # pylint: disable=protected-access
  assert len(first.y_test) == 300
  assert not np.array_equal(first.y_test, second.y_test)
