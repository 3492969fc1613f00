"""Epoch time of keras-io's convnet: AdaptiveSamplingModel.fit against fit.

Runs examples/fashion_mnist_convnet_keras.py (Keras's own `fit`) and
examples/fashion_mnist_convnet.py (the same with the wrapper) as users run
them, each in a process of its own, alternated, `--runs` of each, cut to
`--epochs` epochs; an epoch's time is its wall time in `fit`, validation
included, and a run's is the median of its epochs after the first (which
traces). Prints the table and writes results/keras_convnet.json.

    python -m benchmarks.keras_convnet --epochs=3 --runs=3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from unittest import mock

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = {
    "keras.Model.fit":
        os.path.join(ROOT, "examples", "fashion_mnist_convnet_keras.py"),
    "AdaptiveSamplingModel.fit":
        os.path.join(ROOT, "examples", "fashion_mnist_convnet.py"),
}
# The example's own length, which a run replaces.
EPOCHS_LINE = "epochs = 15\n"


def run_example(path, epochs, train_images=None):
  """Runs an example as `python path` does, for `epochs` epochs.

  Args:
    path: the example.
    epochs: its epochs, in place of its own.
    train_images: if given, only the first this many of Fashion-MNIST's
      training images (and 100 test images), for a quick check.

  Returns:
    Each epoch's wall seconds in `fit`.
  """
  import keras

  import tf_adasamp

  with open(path) as f:
    source = f.read()
  if source.count(EPOCHS_LINE) != 1:
    raise ValueError(f"{path} does not set its epochs as {EPOCHS_LINE!r}")
  source = source.replace(EPOCHS_LINE, f"epochs = {epochs}\n")
  seconds = []

  class Timer(keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      self.started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
      seconds.append(time.perf_counter() - self.started)

  fit = keras.Model.fit

  def timed_fit(model, *args, callbacks=None, **kwargs):
    return fit(model, *args, callbacks=[*(callbacks or ()), Timer()], **kwargs)

  load = tf_adasamp.datasets.load_fashion_mnist

  def loaded():
    (x, y), (x_test, y_test) = load()
    return (x[:train_images], y[:train_images]), (x_test[:100], y_test[:100])

  with mock.patch.object(keras.Model, "fit", timed_fit), mock.patch.object(
      tf_adasamp.datasets, "load_fashion_mnist",
      load if train_images is None else loaded):
    exec(compile(source, path, "exec"), {"__name__": "__main__"})
  return seconds


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--epochs", type=int, default=3)
  parser.add_argument("--runs", type=int, default=3)
  parser.add_argument("--output",
                      default=os.path.join(os.path.dirname(__file__), "results",
                                           "keras_convnet.json"))
  parser.add_argument("--child",
                      choices=tuple(EXAMPLES),
                      help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(run_example(EXAMPLES[args.child], args.epochs)))
    return
  from benchmarks.machine import load
  from benchmarks.machine import machine
  runs = {name: [] for name in EXAMPLES}
  loads = [load()]
  for _ in range(args.runs):
    for name in EXAMPLES:
      result = subprocess.run([
          sys.executable, "-m", "benchmarks.keras_convnet", "--child", name,
          f"--epochs={args.epochs}"
      ],
                              cwd=ROOT,
                              capture_output=True,
                              text=True,
                              check=True)
      epochs = json.loads(result.stdout.splitlines()[-1])
      runs[name].append(epochs)
      loads.append(load())
      print(f"{name:28s} epochs (s): " + " ".join(f"{s:.1f}" for s in epochs),
            flush=True)
  per_run = {
      name: [statistics.median(epochs[1:]) for epochs in results]
      for name, results in runs.items()
  }
  medians = {name: statistics.median(per_run[name]) for name in per_run}
  ratio = medians["AdaptiveSamplingModel.fit"] / medians["keras.Model.fit"]
  print(f"\n{'':28s} epoch (s), per run; median")
  for name, values in per_run.items():
    print(f"{name:28s} " + " ".join(f"{v:.2f}" for v in values) +
          f"; {medians[name]:.2f}")
  print(f"ratio {ratio:.3f}x; load average {min(loads)}-{max(loads)}")
  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(
        {
            "epochs": args.epochs,
            "runs": args.runs,
            "machine": machine(),
            "load": loads,
            "epoch_seconds": runs,
            "per_run_median_after_first": per_run,
            "median": medians,
            "ratio": ratio,
        },
        f,
        indent=2)
  print(f"wrote {args.output}")


if __name__ == "__main__":
  main()
