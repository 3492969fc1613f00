"""The experiment's models (tf_adasamp.experiment.training.models)."""

import numpy as np
import tensorflow as tf

from tf_adasamp.experiment.training import models


def test_mlp_is_784_512_10_and_fixed_by_its_seed():
  model = models.build("mlp", (28, 28, 1), 10, seed=3)
  assert model.count_params() == 784 * 512 + 512 + 512 * 10 + 10
  images = np.random.default_rng(0).random((4, 28, 28, 1), dtype=np.float32)
  assert model(images).shape == (4, 10)
  again = models.build("mlp", (28, 28, 1), 10, seed=3)
  np.testing.assert_array_equal(model(images), again(images))
  # Unregularised: nothing is added to the loss.
  assert not model.losses


def test_paper_cnn_has_keras_cifar10_cnn_size_and_pads_small_inputs():
  cifar = models.build("cnn", (32, 32, 3), 10, seed=0)
  assert cifar.count_params() == 1250858  # Keras' cifar10_cnn example
  digits_cnn = models.build("cnn", (8, 8, 1), 10, seed=0)
  assert digits_cnn(tf.zeros([2, 8, 8, 1])).shape == (2, 10)


def test_same_seed_builds_the_same_initial_model():
  first = models.build("cnn", (8, 8, 1), 10, seed=7)
  second = models.build("cnn", (8, 8, 1), 10, seed=7)
  for a, b in zip(first.trainable_variables, second.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_logistic_penalty_is_half_l2_times_squared_norm():
  model = models.build("logistic", (8, 8, 1), 10, seed=0, l2=0.3)
  model.layers[-1].bias.assign(tf.fill([10], 0.5))
  squared_norm = sum(
      float(tf.reduce_sum(v**2)) for v in model.trainable_variables)
  np.testing.assert_allclose(float(tf.add_n(model.losses)),
                             0.3 / 2 * squared_norm,
                             rtol=1e-5)
