"""keras-io's "Simple MNIST convnet", on Fashion-MNIST, with Keras's `fit`.

The example of keras-io's examples/vision/mnist_convnet.py (by fchollet,
Apache 2.0), step for step: the same convnet, data preparation, `fit` call
and evaluation, on Fashion-MNIST instead of MNIST, read without a download.
fashion_mnist_convnet.py is this program with one line more, which trains it
with adaptive sampling; tests/test_examples.py checks that it is one line.

    python examples/fashion_mnist_convnet_keras.py
"""

# Setup

import keras
from keras import layers
import numpy as np

import tf_adasamp

# Prepare the data

# Model / data parameters
num_classes = 10
input_shape = (28, 28, 1)

# Load the data and split it between train and test sets
(x_train, y_train), (x_test, y_test) = tf_adasamp.datasets.load_fashion_mnist()

# Scale images to the [0, 1] range
x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
# Make sure images have shape (28, 28, 1)
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")

# convert class vectors to binary class matrices
y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

# Build the model

model = keras.Sequential([
    keras.Input(shape=input_shape),
    layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
    layers.MaxPooling2D(pool_size=(2, 2)),
    layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
    layers.MaxPooling2D(pool_size=(2, 2)),
    layers.Flatten(),
    layers.Dropout(0.5),
    layers.Dense(num_classes, activation="softmax"),
])

model.summary()

# Train the model

batch_size = 128
epochs = 15

model.compile(loss="categorical_crossentropy",
              optimizer="adam",
              metrics=["accuracy"])

model.fit(x_train,
          y_train,
          batch_size=batch_size,
          epochs=epochs,
          validation_split=0.1)

# Evaluate the trained model

score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
