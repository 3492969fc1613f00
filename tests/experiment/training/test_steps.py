"""One step of Algorithm 1 (tf_adasamp.experiment.training.steps)."""

import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp import utilities
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import steps
from tf_adasamp.sampler import AdaptiveSampler


@pytest.mark.parametrize("utility_at", ["updated", "step"])
def test_utilities_come_from_h_t_or_h_t_minus_1(digits, utility_at):
  # Logistic regression has no dropout, so training and inference passes
  # agree and the two options differ only in the model they use.
  model = models.build("logistic", (8, 8, 1), 10, seed=0)
  optimizer = components.make_optimizer("sgd", 1.0, 0.0)
  sampler = AdaptiveSampler(len(digits.y_train),
                            amplitude=1.0,
                            decay=0.5,
                            seed=0)
  images, labels = tf.constant(digits.x_train), tf.constant(digits.y_train)
  before = tf.keras.models.clone_model(model)
  before.set_weights(model.get_weights())
  step = steps.make_train_step(model,
                               optimizer,
                               sampler,
                               images,
                               labels,
                               batch_size=32,
                               utility="l1",
                               utility_at=utility_at)
  _, _, _, batch_utilities = step()
  # L1 utilities are > 0, so the drawn examples are those with weight != 1;
  # from uniform, one update sets log w_i = amplitude * u_i.
  drawn = np.flatnonzero(sampler.log_weights.numpy())
  source = model if utility_at == "updated" else before
  expected = utilities.l1(
      labels.numpy()[drawn],
      tf.nn.softmax(source(images.numpy()[drawn], training=False)))
  np.testing.assert_allclose(sampler.log_weights.numpy()[drawn],
                             expected,
                             rtol=1e-5)
  assert batch_utilities.shape == (32,)
