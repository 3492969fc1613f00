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

`MODELS` is the registry that the trainer's --model (config.MODELS), the
study's presets and the tests read; `register_model` adds a model to it.
TensorFlow is imported inside the builders, so that the command lines can
offer the registry's names, and answer --help, before TensorFlow loads.
"""

from tf_adasamp import _validation

# Inputs at least this wide fit cifar10_cnn's unpadded second convolutions.
_MIN_SIZE_FOR_VALID = 10

# Name -> builder(input_shape, num_classes, l2) of a Keras model from images
# to class logits; l2 is the run's --l2, which a model without an L2
# penalty ignores.
MODELS = {}


def register_model(name, builder=None):
  """Adds a model to the trainer's choices (--model, `TrainConfig.model`).

  Register at a module's top level, not under `if __name__ == "__main__"`:
  the study's pool runs trials in spawned processes, which import the
  program's main module again but do not run its main block.

  Args:
    name: the model's name, a str not registered yet: letters, digits,
      '_' and '-', not first (a command-line choice).
    builder: a function (input_shape, num_classes, l2) -> a Keras model
      from images [B, *input_shape] to class logits [B, num_classes]; `l2`
      is the run's --l2. Without it, `register_model(name)` is a decorator.

  Returns:
    `builder`, or without it a decorator that registers and returns the
    function it decorates.

  Raises:
    TypeError: if `name` is not a str or `builder` is not callable.
    ValueError: if `name` is empty, not such a word, or already registered.
  """
  return _validation.register(MODELS, "model", name, builder)


def build(name, input_shape, num_classes, seed, l2=1e-3):
  """Builds a registered model, its initial weights fixed by `seed`.

  The same seed gives the same initial model and the same dropout masks, so
  every algorithm of a trial starts from one hypothesis h_0.

  Args:
    name: a name in `MODELS`.
    input_shape: the shape of one image, (H, W, C).
    num_classes: the number of classes, the width of the logits.
    seed: the seed of the initial weights and of dropout.
    l2: the L2 penalty, for a model that has one (logistic).

  Returns:
    The Keras model.

  Raises:
    ValueError: if `name` is not in `MODELS`.
  """
  if name not in MODELS:
    raise ValueError(f"unknown model {name!r}; choose one of "
                     f"{tuple(MODELS)}")
  import tensorflow as tf
  tf.keras.utils.set_random_seed(seed)
  return MODELS[name](input_shape, num_classes, l2)


def paper_cnn(input_shape, num_classes):
  """The paper's CNN.

  As in cifar10_cnn, each block's first convolution pads ('same') and its
  second does not; inputs narrower than 10 pixels (8x8 digits) would shrink
  to nothing that way, so there both convolutions pad.
  """
  import tensorflow as tf
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
  import tensorflow as tf
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
  import tensorflow as tf
  return tf.keras.Sequential([
      tf.keras.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(hidden_units, activation="relu"),
      tf.keras.layers.Dense(num_classes)
  ],
                             name="mlp")


# The models without a penalty ignore l2.
register_model(
    "cnn",
    lambda input_shape, num_classes, l2: paper_cnn(input_shape, num_classes))
register_model("logistic", logistic_regression)
register_model(
    "mlp", lambda input_shape, num_classes, l2: mlp(input_shape, num_classes))
