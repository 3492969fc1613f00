"""A run's metric records (tf_adasamp.experiment.training.evaluator)."""

import dataclasses
import os

import numpy as np
import pytest

from run_records import controls_config
from run_records import tiny_config
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import evaluator
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import trainer


@pytest.mark.parametrize("sampling", ["uniform", "adaptive"])
def test_train_records_every_eval_interval(digits, sampling):
  records = loop.train(tiny_config(sampling=sampling), data=digits)
  assert [r["step"] for r in records] == [0, 2, 4]
  metrics = {
      "step", "epoch", "train_loss", "train_accuracy", "test_loss",
      "test_accuracy", "kl", "max_probability", "ess_fraction",
      "misclassified_mass", "learning_rate", "kl_bound", "kl_bound_general",
      "zero_one_gap", *trainer.CLOCKS
  }  # zero_one_gap for logistic
  if sampling == "adaptive":
    metrics.add("heaviest")
  assert set(records[0]) == metrics
  # Corollary 1 needs T >= 1 steps, unique_per_batch a step since the last.
  assert set(records[-1]) == metrics | {"corollary1_bound", "unique_per_batch"}
  for name in ["kl", "kl_bound"]:
    value = records[-1][name]
    assert value > 0 if sampling == "adaptive" else value == 0
  # Q_t is uniform until the first reweighting.
  assert records[0]["ess_fraction"] == pytest.approx(1.0)
  assert records[0]["max_probability"] == pytest.approx(1 / 1500)
  assert records[0]["misclassified_mass"] == pytest.approx(
      1 - records[0]["train_accuracy"])
  assert 1 <= records[-1]["unique_per_batch"] <= 16
  if sampling == "adaptive":
    assert records[-1]["ess_fraction"] < 1


@pytest.mark.parametrize("sampling", ["uniform", "reshuffle", "adaptive"])
def test_adaptive_records_list_the_heaviest_examples(digits, sampling):
  records = loop.train(tiny_config(sampling=sampling, steps=6), data=digits)
  if sampling != "adaptive":
    assert not any("heaviest" in record for record in records)
    return
  # Uniform at step 0: every n q_i is 1, the lower index first.
  assert records[0]["heaviest"] == [[index, 1.0] for index in range(16)]
  for record in records[1:]:
    indices, weights = zip(*record["heaviest"])
    assert len(set(indices)) == 16
    assert all(isinstance(i, int) and 0 <= i < 1500 for i in indices)
    assert list(weights) == sorted(weights, reverse=True)
    assert all(float(f"{w:.4g}") == w for w in weights)
    assert weights[0] == pytest.approx(1500 * record["max_probability"],
                                       rel=1e-3)


def test_a_validation_split_is_never_trained_on_and_is_evaluated(
    digits, tmp_path):
  # The held-out images are NaN: a run that read one in a step or in the
  # training set's evaluation would have a NaN loss.
  numbers = np.arange(digits.num_train, dtype=np.float32)
  numbered = dataclasses.replace(digits, x_train=numbers.reshape(-1, 1, 1, 1))
  held = datasets.with_validation(numbered, 300).x_validation.ravel()
  x_train = digits.x_train.copy()
  x_train[held.astype(int)] = np.nan
  poisoned = dataclasses.replace(digits, x_train=x_train)
  records = loop.train(tiny_config(validation_size=300,
                                   output_dir=str(tmp_path)),
                       data=poisoned)
  for record in records:
    assert np.isfinite(record["train_loss"])
    assert np.isnan(record["validation_loss"])
    assert record["epoch"] == record["step"] * 16 / 1200
  assert list(records[0])[:7] == [
      "step", "epoch", "train_loss", "train_accuracy", "validation_loss",
      "validation_accuracy", "test_loss"
  ]
  # TensorBoard's validation run is the split's, the test set a run of its
  # own.
  assert sorted(os.listdir(tmp_path /
                           "tensorboard")) == ["test", "train", "validation"]
  clean = loop.train(tiny_config(validation_size=300), data=digits)
  assert 0 <= clean[-1]["validation_accuracy"] <= 1
  assert "validation_loss" not in loop.train(tiny_config(), data=digits)[0]


def test_a_noisy_run_records_its_clean_loss_and_the_mass_on_flipped_labels(
    digits):
  records = loop.train(controls_config(label_noise=0.4), data=digits)
  first, last = records[0], records[-1]
  # Uniform at the start: the flipped examples' share is theirs, 0.4.
  assert first["flipped_mass"] == pytest.approx(0.4, abs=1e-6)
  assert last["flipped_mass"] > 0.4
  for record in records:
    assert 0 <= record["clean_train_accuracy"] <= 1
  clean = loop.train(controls_config(), data=digits)
  assert "flipped_mass" not in clean[-1]


def test_the_training_subset_evaluated_is_fixed_and_sorted():
  first = evaluator.train_eval_indices(60000, 10000)
  assert len(first) == len(np.unique(first)) == 10000
  assert np.all(np.diff(first) > 0)
  np.testing.assert_array_equal(first,
                                evaluator.train_eval_indices(60000, 10000))
  np.testing.assert_array_equal(evaluator.train_eval_indices(50, None),
                                np.arange(50))


def test_evaluations_read_only_the_fixed_training_subset(tmp_path):
  from tf_adasamp.experiment.training import config as config_lib
  config = config_lib.TrainConfig(dataset="digits",
                                  model="logistic",
                                  steps=4,
                                  eval_interval=2,
                                  batch_size=16,
                                  train_eval_size=64,
                                  output_dir=str(tmp_path / "run"))
  records = loop.train(config)
  # Accuracies over 64 examples are multiples of 1/64; over all 1,500
  # training digits they would not all be.
  for record in records:
    assert record["train_accuracy"] * 64 == pytest.approx(
        round(record["train_accuracy"] * 64))
  with pytest.raises(ValueError, match="train_eval_size"):
    config_lib.TrainConfig(train_eval_size=0)
