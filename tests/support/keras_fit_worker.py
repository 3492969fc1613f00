"""`AdaptiveSamplingModel.fit` as Keras users call it, under a strategy.

    python tests/support/keras_fit_worker.py OUT

Runs every scenario of `SCENARIOS` under MirroredStrategy over two logical
CPU devices (which must be configured before TensorFlow starts its runtime,
hence a process of its own, with one strategy: two in a process share
collective keys) and writes OUT/results.json, {scenario: its results}.
tests/keras/test_arguments.py runs the same scenarios in its own process, with
one replica, and checks both.
"""

import json
import math
import os
import sys

import keras
import numpy as np
import tensorflow as tf

import tf_adasamp
from tf_adasamp import distribute
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 120
BATCH_SIZE = 16  # global: a multiple of the replicas
VALIDATION_SPLIT = 0.25
EPOCHS = 2


def toy_data(num_examples=NUM_EXAMPLES, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_examples, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y


def classifier(seed=0):
  keras.utils.set_random_seed(seed)
  return keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation="softmax"),
  ])


class Steps(keras.callbacks.Callback):
  """Counts the training steps of each epoch."""

  def __init__(self):
    super().__init__()
    self.per_epoch = []

  def on_epoch_begin(self, epoch, logs=None):
    self.per_epoch.append(0)

  def on_train_batch_end(self, batch, logs=None):
    self.per_epoch[-1] += 1


def compiled(strategy, stage=None, **kwargs):
  """A wrapper built and compiled in the strategy's scope, as Keras asks."""
  with strategy.scope():
    trainer = AdaptiveSamplingModel(classifier(), stage, **kwargs)
    trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                    loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"])
  return trainer


def results(trainer, history, steps):
  """What a scenario's checks read, as JSON-ready values."""
  sampler = trainer.stage.sampler
  copies = [
      np.asarray(copy) for copy in (
          sampler.strategy.experimental_local_results(sampler.log_weights)
          if sampler.strategy is not None else [sampler.log_weights])
  ]
  return {
      "logs": sorted(history.history),
      "loss": history.history["loss"],
      "num_examples": sampler.num_examples,
      "stage_batch_size": trainer.stage.batch_size,
      "steps_per_epoch": steps.per_epoch,
      "copies": len(copies),
      "copies_identical": all(np.array_equal(c, copies[0]) for c in copies),
      "reweighted": int(np.count_nonzero(copies[0])),
      "val_loss": history.history.get("val_loss"),
  }


def arrays_with_batch_size_and_validation_split(strategy):
  x, y = toy_data()
  trainer = compiled(strategy)
  steps = Steps()
  history = trainer.fit(x,
                        y,
                        batch_size=BATCH_SIZE,
                        epochs=EPOCHS,
                        validation_split=VALIDATION_SPLIT,
                        callbacks=[steps],
                        verbose=0)
  output = results(trainer, history, steps)
  # Keras's held-out part, the end: the last validation is of the last
  # quarter, with the model as it ended.
  held_out = int(math.floor(NUM_EXAMPLES * (1 - VALIDATION_SPLIT)))
  output["evaluated_held_out"] = trainer.evaluate(x[held_out:],
                                                  y[held_out:],
                                                  verbose=0,
                                                  return_dict=True)["loss"]
  return output


def arrays_with_validation_data(strategy):
  x, y = toy_data()
  x_val, y_val = toy_data(40, seed=1)
  trainer = compiled(strategy)
  steps = Steps()
  history = trainer.fit(x,
                        y,
                        batch_size=BATCH_SIZE,
                        epochs=EPOCHS,
                        validation_data=(x_val, y_val),
                        callbacks=[steps],
                        verbose=0)
  return results(trainer, history, steps)


def dataset_of_x_y(strategy):
  x, y = toy_data()
  trainer = compiled(strategy)
  steps = Steps()
  history = trainer.fit(tf.data.Dataset.from_tensor_slices(
      (x, y)).batch(BATCH_SIZE),
                        epochs=EPOCHS,
                        callbacks=[steps],
                        verbose=0)
  return results(trainer, history, steps)


def dataset_of_x_y_sample_weight(strategy):
  x, y = toy_data()
  weights = np.linspace(0.5, 2.0, NUM_EXAMPLES).astype(np.float32)
  trainer = compiled(strategy)
  steps = Steps()
  history = trainer.fit(tf.data.Dataset.from_tensor_slices(
      (x, y, weights)).batch(BATCH_SIZE),
                        epochs=EPOCHS,
                        callbacks=[steps],
                        verbose=0)
  return results(trainer, history, steps)


def stage_dataset(strategy):
  x, y = toy_data()
  replicas = strategy.num_replicas_in_sync
  sampler = distribute.create_sampler(strategy, NUM_EXAMPLES, seed=0)
  stage = tf_adasamp.data.AdaptiveSampling(sampler, BATCH_SIZE // replicas)
  trainer = compiled(strategy, stage)
  steps = Steps()
  history = trainer.fit(strategy.distribute_datasets_from_function(
      lambda context: stage.dataset((x, y), context)),
                        epochs=EPOCHS,
                        callbacks=[steps],
                        verbose=0)
  return results(trainer, history, steps)


def stage_of_a_sampler_without_copies(strategy):
  """What the wrapper says, built in the scope over a plain sampler."""
  stage = tf_adasamp.data.AdaptiveSampling(
      tf_adasamp.AdaptiveSampler(NUM_EXAMPLES), BATCH_SIZE)
  try:
    compiled(strategy, stage)
  except ValueError as error:
    return {"refusal": str(error)}
  return {"refusal": ""}


SCENARIOS = {
    function.__name__: function for function in [
        arrays_with_batch_size_and_validation_split,
        arrays_with_validation_data, dataset_of_x_y,
        dataset_of_x_y_sample_weight, stage_dataset
    ]
}


def main():
  out = sys.argv[1]
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  outputs = {name: scenario(strategy) for name, scenario in SCENARIOS.items()}
  outputs["stage_of_a_sampler_without_copies"] = (
      stage_of_a_sampler_without_copies(strategy))
  with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(outputs, f)


if __name__ == "__main__":
  sys.exit(main())
