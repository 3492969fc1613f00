"""Trains a classifier with adaptive or uniform sampling SGD.

London, NIPS 2017, Algorithm 1, on CIFAR-10 (the paper's experiment) or, with
no network and no data, on scikit-learn's bundled digits:

  python -m tf_adasamp.train --dataset=digits --sampling=adaptive \\
      --utility=zero_one --optimizer=sgd --steps=2000 --output_dir=runs/a

Writes metrics.jsonl (one JSON record per evaluation), TensorBoard summaries
and checkpoints under --output_dir; --resume continues a stopped run and gives
the same metrics as an uninterrupted one. Flags may come from --flagfile.
"""

import dataclasses
import sys

from absl import flags
from absl import logging

from tf_adasamp import cli
from tf_adasamp import datasets
from tf_adasamp import models
from tf_adasamp import training
from tf_adasamp import utilities

FLAGS = flags.FLAGS


def define_flags():
  """Defines the trainer's flags, one per TrainConfig field, and --progress.

  Called by run(), not at import, so that tf_adasamp.reproduce, whose flags
  share names, can be imported in the same process.
  """
  defaults = training.TrainConfig()
  flags.DEFINE_enum("dataset", defaults.dataset, datasets.DATASETS,
                    "Data set; digits needs no network.")
  flags.DEFINE_string("data_dir", None,
                      "tensorflow_datasets directory holding a prepared "
                      "CIFAR-10 (tfds' default if unset).")
  flags.DEFINE_enum("model", defaults.model, models.MODELS,
                    "cnn: the paper's CNN; logistic: L2-regularised logistic "
                    "regression (strongly convex).")
  flags.DEFINE_float("l2", defaults.l2,
                     "L2 penalty (strong-convexity modulus) of the logistic "
                     "model.")
  flags.DEFINE_enum("optimizer", defaults.optimizer, training.OPTIMIZERS,
                    "Update rule.")
  flags.DEFINE_float("learning_rate", defaults.learning_rate,
                     "Initial step size eta.")
  flags.DEFINE_float("lr_decay", defaults.lr_decay,
                     "gamma of the step size eta / (1 + gamma t); 0 keeps it "
                     "constant.")
  flags.DEFINE_integer("batch_size", defaults.batch_size,
                       "Examples drawn per step.")
  flags.DEFINE_enum("sampling", defaults.sampling, training.SAMPLINGS,
                    "How training examples are drawn.")
  flags.DEFINE_enum("utility", defaults.utility, sorted(utilities.UTILITIES),
                    "Utility that reweights drawn examples (adaptive only).")
  flags.DEFINE_enum("utility_at", defaults.utility_at, training.UTILITY_AT,
                    "updated: utility of the model after the update, h_t, as "
                    "in Algorithm 1 (a second forward pass); step: reuse the "
                    "step's own forward pass (h_{t-1}, dropout on), cheaper.")
  flags.DEFINE_float("amplitude", defaults.amplitude,
                     "Amplitude alpha >= 0 of the weight update.")
  flags.DEFINE_float("decay", defaults.decay,
                     "Decay lambda in (0, 1) of the weight update.")
  flags.DEFINE_integer("steps", defaults.steps, "Training steps.")
  flags.DEFINE_float("epochs", None,
                     "Training length in epochs; overrides --steps if set.")
  flags.DEFINE_integer("eval_interval", defaults.eval_interval,
                       "Steps between evaluations (and checkpoints).")
  flags.DEFINE_integer("seed", defaults.seed,
                       "Seed of the initial model, dropout and sampling.")
  flags.DEFINE_string("output_dir", "runs/train",
                      "Directory for metrics, summaries and checkpoints.")
  flags.DEFINE_bool("resume", False,
                    "Continue the run in --output_dir from its last "
                    "checkpoint.")
  flags.DEFINE_enum("strategy", defaults.strategy, training.STRATEGIES,
                    "tf.distribute strategy: default (one device), mirrored "
                    "(every local GPU, else every logical CPU device) or "
                    "multi_worker (the cluster in TF_CONFIG; give each "
                    "worker its own --output_dir). The batch is split among "
                    "the replicas, which share one sampling distribution.")
  flags.DEFINE_bool("progress", True, "Show a progress bar.")


def main(argv):
  if len(argv) > 1:
    sys.exit(f"tf-adasamp-train: unexpected arguments {argv[1:]}")
  if not FLAGS["verbosity"].present:
    # Keeps TensorFlow's and tfds' INFO lines out of the progress bar.
    logging.set_verbosity(logging.WARNING)
  try:
    config = training.TrainConfig(**{
        field.name: FLAGS[field.name].value
        for field in dataclasses.fields(training.TrainConfig)})
  except (TypeError, ValueError) as error:
    sys.exit(f"tf-adasamp-train: {error}")
  try:
    records = training.train(config, progress=FLAGS.progress)
  except (datasets.DatasetUnavailableError, training.RunExistsError) as error:
    sys.exit(f"tf-adasamp-train: {error}")
  final = records[-1]
  print(f"step {final['step']}: train loss {final['train_loss']:.4f}, "
        f"train accuracy {final['train_accuracy']:.4f}, test accuracy "
        f"{final['test_accuracy']:.4f}; metrics in {config.output_dir}")


def run():
  """Console-script entry point (tf-adasamp-train)."""
  cli.run(define_flags, main)


if __name__ == "__main__":
  run()
