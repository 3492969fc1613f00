"""The paper's CNN and the logistic regression train on Fashion-MNIST."""

import dataclasses
import os

import numpy as np
import pytest

from tf_adasamp import datasets as library_datasets
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import models

pytestmark = pytest.mark.skipif(
    not os.path.isdir(library_datasets.FASHION_MNIST_DIR),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{library_datasets.FASHION_MNIST_DIR}")


@pytest.fixture(scope="module")
def small_fashion_mnist():
  """The first 300 training and 100 test images, for quick runs."""
  data = datasets.load("fashion_mnist")
  return dataclasses.replace(data,
                             x_train=data.x_train[:300],
                             y_train=data.y_train[:300],
                             x_test=data.x_test[:100],
                             y_test=data.y_test[:100])


def test_paper_cnn_on_28x28x1_keeps_its_unpadded_convolutions():
  model = models.build("cnn", (28, 28, 1), 10, seed=0)
  # 28 -> 28 -> 26 -> 13 -> 13 -> 11 -> 5: 5 x 5 x 64 into the dense layer.
  convolutions = (9 * 1 * 32 + 32) + (9 * 32 * 32 + 32) + (9 * 32 * 64 + 64) + (
      9 * 64 * 64 + 64)
  dense = (5 * 5 * 64 * 512 + 512) + (512 * 10 + 10)
  assert model.count_params() == convolutions + dense


@pytest.mark.parametrize("model", ["cnn", "logistic"])
def test_both_models_train_adaptively_on_fashion_mnist(small_fashion_mnist,
                                                       model):
  config = config_lib.TrainConfig(dataset="fashion_mnist",
                                  model=model,
                                  steps=4,
                                  eval_interval=2,
                                  batch_size=32,
                                  learning_rate=0.05,
                                  amplitude=0.3)
  records = loop.train(config, data=small_fashion_mnist)
  assert [r["step"] for r in records] == [0, 2, 4]
  assert all(np.isfinite(r["train_loss"]) for r in records)
  assert records[-1]["kl"] > 0
  if model == "logistic":
    assert "corollary1_bound" in records[-1]
