"""Toy data, classifiers and trainers shared by the tests of the Keras
wrapper (tests/keras/): its model, its arguments and its train step."""

import keras
import numpy as np

import keras_fit_worker as worker
import tf_adasamp
from tf_adasamp import data
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 120
BATCH_SIZE = 16
AMPLITUDE, DECAY = 1.5, 0.8


def toy_data(seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y


def classifier(from_logits=False, seed=0):
  keras.utils.set_random_seed(seed)
  return keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation=None if from_logits else "softmax"),
  ])


def make_trainer(max_lag=1, seed=0, net=None, **kwargs):
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES,
                                       AMPLITUDE,
                                       DECAY,
                                       seed=seed)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=max_lag)
  return AdaptiveSamplingModel(net or classifier(), stage, **kwargs)


def frozen_fit(trainer, *args, **kwargs):
  trainer.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss=kwargs.pop("loss", "sparse_categorical_crossentropy"))
  return trainer.fit(*args, verbose=0, **kwargs)


def three_lines(**fit_arguments):
  x, y = worker.toy_data()
  trainer = AdaptiveSamplingModel(worker.classifier())
  trainer.compile(optimizer="sgd",
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
  steps = worker.Steps()
  history = trainer.fit(x, y, callbacks=[steps], verbose=0, **fit_arguments)
  return trainer, history, steps
