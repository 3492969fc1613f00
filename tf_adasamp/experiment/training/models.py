"""Models for the trainer; each maps images to class logits.

  cnn       the paper's network (London, NIPS 2017, "Experiments"; Keras'
            cifar10_cnn): conv32-conv32-maxpool-dropout(.25),
            conv64-conv64-maxpool-dropout(.25), dense512-dropout(.5), dense.
  logistic  multinomial logistic regression with an L2 penalty on all its
            weights, so its objective is strongly convex (for the paper's
            Corollary 1).
  mlp       one hidden layer of 512 ReLUs (784-512-10 on Fashion-MNIST):
            the closest model to the paper's CNN that fits its training
            data on a CPU in the experiment's time.
"""

import tensorflow as tf

from tf_adasamp.experiment.training import config as config_lib

# Inputs at least this wide fit cifar10_cnn's unpadded second convolutions.
_MIN_SIZE_FOR_VALID = 10


def build(name, input_shape, num_classes, seed, l2=1e-3):
  """Builds model `name` (one of config_lib.MODELS), its initial weights
  fixed by `seed`.

  The same seed gives the same initial model and the same dropout masks, so
  every algorithm of a trial starts from one hypothesis h_0.
  """
  tf.keras.utils.set_random_seed(seed)
  if name == "cnn":
    return paper_cnn(input_shape, num_classes)
  if name == "logistic":
    return logistic_regression(input_shape, num_classes, l2)
  if name == "mlp":
    return mlp(input_shape, num_classes)
  raise ValueError(f"unknown model {name!r}; choose one of {config_lib.MODELS}")


def paper_cnn(input_shape, num_classes):
  """The paper's CNN.

  As in cifar10_cnn, each block's first convolution pads ('same') and its
  second does not; inputs narrower than 10 pixels (8x8 digits) would shrink
  to nothing that way, so there both convolutions pad.
  """
  second_padding = ("valid"
                    if min(input_shape[:2]) >= _MIN_SIZE_FOR_VALID else "same")
  layers = tf.keras.layers

  def block(filters, dropout):
    return [
        layers.Conv2D(filters, 3, padding="same", activation="relu"),
        layers.Conv2D(filters, 3, padding=second_padding, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(dropout),
    ]

  return tf.keras.Sequential([
      tf.keras.Input(input_shape), *block(32, 0.25), *block(64, 0.25),
      layers.Flatten(),
      layers.Dense(512, activation="relu"),
      layers.Dropout(0.5),
      layers.Dense(num_classes)
  ],
                             name="paper_cnn")


def logistic_regression(input_shape, num_classes, l2):
  """Softmax regression whose loss gains (l2 / 2) * ||weights||^2.

  With the mean cross-entropy (convex) the objective is l2-strongly convex.
  """
  if not l2 > 0:
    raise ValueError(f"l2 must be > 0 for a strongly convex objective, got "
                     f"{l2}")
  penalty = tf.keras.regularizers.L2(l2 / 2)
  return tf.keras.Sequential([
      tf.keras.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(
          num_classes, kernel_regularizer=penalty, bias_regularizer=penalty)
  ],
                             name="logistic_regression")


def mlp(input_shape, num_classes, hidden_units=512):
  """A multilayer perceptron with one hidden layer of ReLUs, unregularised,
  so that it can fit its training data (the setting of the paper's claim
  4: the empirical risk converges)."""
  return tf.keras.Sequential([
      tf.keras.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(hidden_units, activation="relu"),
      tf.keras.layers.Dense(num_classes)
  ],
                             name="mlp")
