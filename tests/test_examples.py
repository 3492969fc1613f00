"""examples/: keras-io's convnet, moved onto AdaptiveSamplingModel by one
line, runs as written."""

import ast
import difflib
import os

import pytest

from benchmarks import keras_convnet
from tf_adasamp import datasets

fashion_mnist_installed = pytest.mark.skipif(
    not os.path.isdir(datasets.FASHION_MNIST_DIR),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{datasets.FASHION_MNIST_DIR}")


def code_lines(path):
  """The program's statements, as lines, without its docstring."""
  with open(path) as f:
    module = ast.parse(f.read())
  del module.body[0]  # the docstring
  return ast.unparse(module).splitlines()


def test_the_adaptive_convnet_is_keras_ios_with_one_line_more():
  keras_fit = code_lines(keras_convnet.EXAMPLES["keras.Model.fit"])
  adaptive = code_lines(keras_convnet.EXAMPLES["AdaptiveSamplingModel.fit"])
  changes = [
      line for line in difflib.unified_diff(keras_fit, adaptive, lineterm="")
      if line[:1] in "+-" and line[:3] not in ("+++", "---")
  ]
  assert changes == ["+model = tf_adasamp.keras.AdaptiveSamplingModel(model)"]
  assert ("model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, "
          "validation_split=0.1)") in adaptive


@fashion_mnist_installed
@pytest.mark.parametrize("name", sorted(keras_convnet.EXAMPLES))
def test_the_convnet_examples_run(name):
  # On 640 training images, for one epoch: the program as written, its
  # data and length cut.
  seconds = keras_convnet.run_example(keras_convnet.EXAMPLES[name],
                                      epochs=1,
                                      train_images=640)
  assert len(seconds) == 1
