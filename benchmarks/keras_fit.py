"""Epoch time with validation: AdaptiveSamplingModel.fit against plain fit.

Fashion-MNIST (Debian's files, no download), an MLP (784-128-10), SGD, batch
100, validation on the 10,000 test images each epoch. Both models train from
the same initial weights, their epochs interleaved so that both see the same
machine load; the first epoch (tracing) is left out.

    python -m benchmarks.keras_fit --epochs=4
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras

from benchmarks.machine import load
from benchmarks.machine import machine
import tf_adasamp
from tf_adasamp.experiment.training import datasets


class Timer(keras.callbacks.Callback):
  """Each epoch's wall time, and the part of it spent in validation."""

  def __init__(self):
    super().__init__()
    self.epochs, self.validation = [], []

  def on_epoch_begin(self, epoch, logs=None):
    self.started = time.perf_counter()

  def on_test_begin(self, logs=None):
    self.test_started = time.perf_counter()

  def on_test_end(self, logs=None):
    self.validation.append(time.perf_counter() - self.test_started)

  def on_epoch_end(self, epoch, logs=None):
    self.epochs.append(time.perf_counter() - self.started)


def mlp(seed):
  keras.utils.set_random_seed(seed)
  return keras.Sequential([
      keras.Input((784,)),
      keras.layers.Dense(128, activation="relu"),
      keras.layers.Dense(10, activation="softmax")
  ])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--epochs", type=int, default=4)
  parser.add_argument("--batch_size", type=int, default=100)
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "keras_fit.json"))
  args = parser.parse_args()
  load_before = load()
  data = datasets.load_fashion_mnist()
  x, x_val = (
      images.reshape(len(images), -1) for images in (data.x_train, data.x_test))
  y, y_val = data.y_train, data.y_test

  sampler = tf_adasamp.AdaptiveSampler(len(x), 0.1, 0.5, seed=0)
  stage = tf_adasamp.data.AdaptiveSampling(sampler, args.batch_size)
  models = {
      "AdaptiveSamplingModel.fit":
          tf_adasamp.keras.AdaptiveSamplingModel(mlp(0), stage, "l1"),
      "keras.Model.fit":
          mlp(0),
  }
  timers = {name: Timer() for name in models}
  for model in models.values():
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
  for epoch in range(args.epochs):
    for name, model in models.items():
      batch = {} if name.startswith("Adaptive") else {
          "batch_size": args.batch_size
      }
      model.fit(x,
                y,
                initial_epoch=epoch,
                epochs=epoch + 1,
                validation_data=(x_val, y_val),
                callbacks=[timers[name]],
                verbose=0,
                **batch)
  results = {
      name: {
          "epoch_s": statistics.median(timer.epochs[1:]),
          "validation_s": statistics.median(timer.validation[1:]),
      } for name, timer in timers.items()
  }
  print(f"{'':28s} {'epoch (s)':>10s} {'validation (s)':>15s}  "
        f"(median of epochs 2-{args.epochs})")
  for name, result in results.items():
    print(f"{name:28s} {result['epoch_s']:10.2f} "
          f"{result['validation_s']:15.2f}")
  ratio = (results["AdaptiveSamplingModel.fit"]["epoch_s"] /
           results["keras.Model.fit"]["epoch_s"])
  loads = [load_before, load()]
  print(f"ratio {ratio:.2f}x; load average {loads[0]} before, {loads[1]} "
        "after")
  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "machine": machine(),
            "load": loads,
            "results": results,
            "ratio": ratio,
        },
        f,
        indent=2)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
