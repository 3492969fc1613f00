"""Synthetic curves of the budget-limited regime's runs, whose answers are
known (tests/experiment/study/test_budget*.py)."""

import dataclasses

import numpy as np

from tf_adasamp.experiment.study import budget

STEPS = np.arange(0, 1501, 100)
BATCH = 100
NUM_TRAIN = 50000
TUNED = dataclasses.replace(budget.settings_for("full"),
                            sgd_learning_rate=0.3,
                            sgd_lr_schedule="cosine",
                            baseline_learning_rates=(1.0, 0.1),
                            baseline_lr_decays=(0.0, 0.001),
                            baseline_lr_schedules=("linear", "inverse_time"),
                            adaptive_learning_rates=(0.15, 0.3, 0.1, 0.1),
                            amplitude=1.0)


def curve(speed=1.0, trials=6, seed=0, seconds=0.002):
  """Runs whose validation and test accuracy climb to 0.85 `speed` times
  as fast as speed 1's (a few percent apart per trial), `seconds` a
  step."""
  rng = np.random.default_rng(seed)
  rates = speed * (1 + 0.03 * rng.standard_normal(trials))
  progress = 1 - np.exp(-np.outer(rates, STEPS) / 500)
  ones = np.ones(trials)
  accuracy = 0.1 + 0.75 * progress
  return {
      "step": STEPS,
      "epoch": STEPS * BATCH / NUM_TRAIN,
      "train_loss": 2 * (1 - progress) + 0.01,
      "validation_accuracy": accuracy,
      "validation_loss": 2.2 * (1 - progress) + 0.3,
      "test_accuracy": accuracy.copy(),
      "test_loss": 2.2 * (1 - progress) + 0.3,
      "examples_forwarded": np.outer(ones, STEPS * BATCH),
      "examples_backpropagated": np.outer(ones, STEPS * BATCH),
      "train_seconds": np.outer(ones, STEPS * seconds),
      "flipped_mass": np.full((trials, len(STEPS)), 0.2),
  }
