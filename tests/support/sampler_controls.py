"""The sampler with every control, and its data, shared by the tests of the
controls (tests/test_sampler.py) and of the units that carry them: the
stage, the Keras wrapper, the diagnostics."""

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import schedules
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 40

HARD = np.arange(NUM_EXAMPLES) % 7 == 0


def utility_of(indices, step=0):
  """Signed, index- and time-dependent utilities."""
  return np.where(HARD[np.asarray(indices)], 1.0, -0.25) * (1 + 0.01 * step)


def controlled_sampler(seed, dtype=tf.float64):
  return AdaptiveSampler(NUM_EXAMPLES,
                         schedules.PiecewiseLinear([0, 6, 12, 12],
                                                   [0.0, 2.0, 2.0, 0.0]),
                         decay=0.7,
                         seed=seed,
                         stratified=True,
                         epsilon=0.25,
                         beta=schedules.anneal(1.0, 10),
                         dtype=dtype)


def controlled_steps(sampler, steps, jit_compile=False):
  """`steps` training steps of draws with weights and updates; returns the
  draws and weights of each."""

  @tf.function(jit_compile=jit_compile)
  def step():
    indices, weights = sampler.sample_with_weights(8)
    sampler.update(indices, tf.cast(indices % 3, sampler.dtype) - 0.5)
    return indices, weights

  return [[t.numpy() for t in step()] for _ in range(steps)]


def keras_trainer(sampler, debias=False, seed=0):
  keras.utils.set_random_seed(seed)
  net = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation="softmax")
  ])
  trainer = AdaptiveSamplingModel(net,
                                  data.AdaptiveSampling(sampler, 16, max_lag=0),
                                  utility="zero_one",
                                  debias=debias)
  trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss="sparse_categorical_crossentropy")
  return trainer


def toy_data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y
