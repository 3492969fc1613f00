"""Synthetic trials for the time-to-target tables, whose answers are known
(tests/experiment/study/test_targets.py, test_report.py, test_timing.py)."""

import dataclasses

import numpy as np

from tf_adasamp.experiment.study import presets

STEPS = np.arange(0, 1001, 100)

BATCH = 10


def curve(speed, trials=5, forward_passes=1, seed=0):
  """Curves whose train loss exp(-speed * step / 1000) falls `speed` times
  as fast as speed 1's, give or take a few percent per trial."""
  rng = np.random.default_rng(seed)
  rates = speed * (1 + 0.03 * rng.standard_normal(trials))
  loss = np.exp(-np.outer(rates, STEPS) / 1000)
  accuracy = 1 - loss / 2
  return {
      "step":
          STEPS,
      "epoch":
          STEPS * BATCH / 1000,
      "train_loss":
          loss,
      "train_accuracy":
          accuracy,
      "test_accuracy":
          accuracy - 0.1,
      "test_loss":
          loss + 0.2,
      "kl":
          np.zeros_like(loss),
      "ess_fraction":
          np.ones_like(loss),
      "examples_forwarded":
          np.outer(np.ones(trials), STEPS * BATCH * forward_passes),
      "examples_backpropagated":
          np.outer(np.ones(trials), STEPS * BATCH),
      # A second forward pass makes a step half as dear again.
      "train_seconds":
          np.outer(np.ones(trials), STEPS * 0.002 * (1 + forward_passes / 2)),
  }


SETTINGS = dataclasses.replace(presets.preset("fashion_mnist_5k", "mlp"),
                               amplitude=0.1,
                               sweep_amplitudes=(0.1, 1.0),
                               train_accuracy_target=0.8,
                               test_accuracy_target=0.7)


def study(speeds):
  """curves and sweep, with each run's speed from `speeds` (1 if absent)."""
  curves = {
      name: curve(speeds.get(name, 1.0), seed=i)
      for i, name in enumerate(presets.RUNS)
  }
  sweep = {
      "algorithm":
          "AdaSamp-01-SGD",
      "amplitude": [0.0, 0.1, 1.0],
      "curves": [
          curves["Unif-SGD"],
          curve(speeds.get(0.1, 1.0), seed=10),
          curve(speeds.get(1.0, 1.0), forward_passes=2, seed=11)
      ],
  }
  return curves, sweep
