"""An unseeded AdaptiveSampler follows TensorFlow's global seed."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp import AdaptiveSampler


def first_draws(seed=None):
  return AdaptiveSampler(100, 1.0, 0.9, seed=seed).sample(20).numpy()


@pytest.mark.parametrize("set_seed",
                         [tf.random.set_seed, keras.utils.set_random_seed])
def test_unseeded_sampler_follows_the_global_seed(set_seed):
  set_seed(7)
  first, second = first_draws(), first_draws()
  set_seed(7)
  np.testing.assert_array_equal(first_draws(), first)
  np.testing.assert_array_equal(first_draws(), second)
  # Like two layers' initializers: two samplers, two streams.
  assert not np.array_equal(first, second)
  set_seed(8)
  assert not np.array_equal(first_draws(), first)


def test_an_explicit_seed_overrides_the_global_seed():
  tf.random.set_seed(1)
  seeded = first_draws(seed=3)
  tf.random.set_seed(2)
  np.testing.assert_array_equal(first_draws(seed=3), seeded)
