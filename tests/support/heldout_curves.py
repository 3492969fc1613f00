"""Synthetic trials for the held-out measures, whose answers are known
(tests/experiment/study/test_heldout.py, test_report.py, test_timing.py)."""

import dataclasses

import numpy as np

from tf_adasamp.experiment.study import presets

STEPS = np.arange(0, 1001, 50)

BATCH = 10


def curve(speed, trials=6, forward_passes=1, seed=0, plateau=0.9):
  """Runs whose held-out accuracy climbs to `plateau` `speed` times as fast
  as speed 1's (a few percent apart per trial), training loss alike."""
  rng = np.random.default_rng(seed)
  rates = speed * (1 + 0.03 * rng.standard_normal(trials))
  progress = 1 - np.exp(-np.outer(rates, STEPS) / 200)
  ones = np.ones(trials)
  return {
      "step": STEPS,
      "epoch": STEPS * BATCH / 1000,
      "train_loss": 2 * (1 - progress) + 0.01,
      "train_accuracy": progress,
      "test_accuracy": 0.1 + (plateau - 0.1) * progress,
      "test_loss": 2.2 * (1 - progress) + 0.3,
      "kl": np.zeros_like(progress),
      "ess_fraction": np.ones_like(progress),
      "max_probability": np.full_like(progress, 1 / 5000),
      "misclassified_mass": 1 - progress,
      "examples_forwarded": np.outer(ones, STEPS * BATCH * forward_passes),
      "examples_backpropagated": np.outer(ones, STEPS * BATCH),
      # A second forward pass makes a step half as dear again.
      "train_seconds": np.outer(ones, STEPS * 0.002 * (1 + forward_passes / 2)),
  }


SETTINGS = dataclasses.replace(presets.preset("fashion_mnist_5k", "mlp"),
                               amplitude=1.0,
                               sweep_amplitudes=(1.0,),
                               sweep_both_utilities=False)


def study(speed, final_gap=0.0):
  curves = {name: curve(1.0, seed=i) for i, name in enumerate(presets.RUNS)}
  adaptive = curve(speed, seed=20)
  adaptive["test_accuracy"] = adaptive["test_accuracy"] + final_gap
  sweep = {
      "algorithm": "AdaSamp-01-SGD",
      "amplitude": [0.0, 1.0],
      "curves": [curves["Unif-SGD"], adaptive],
  }
  curves["AdaSamp-01-SGD"] = adaptive
  return curves, sweep
