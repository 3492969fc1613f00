"""The experiment's models (tf_adasamp.experiment.training.models)."""

import numpy as np

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
