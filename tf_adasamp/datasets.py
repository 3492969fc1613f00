"""Data sets that need no download, to try the library on real images.

  load_fashion_mnist  Fashion-MNIST, 60,000 training and 10,000 test 28x28
                      grayscale images of 10 classes of clothing, from the
                      files of Debian's `dataset-fashion-mnist` package (or
                      any directory holding the four files of its release),
                      as `keras.datasets.fashion_mnist.load_data()` returns
                      them.
  load_digits         scikit-learn's bundled 8x8 handwritten digits (1,797
                      images), split 1,500 / 297, class-stratified and the
                      same every time.

Both read files in place and write nothing: no cache, no download. The
experiment's data sets (`tf_adasamp.experiment.training.datasets`) are made
from these.
"""

import gzip
import os

import numpy as np

# Where Debian's dataset-fashion-mnist puts the four files of the release.
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = ("train-images-idx3-ubyte.gz",
                       "train-labels-idx1-ubyte.gz",
                       "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
FASHION_MNIST_INSTALL = "apt-get install -y dataset-fashion-mnist"
# The names of Fashion-MNIST's class ids, from its documentation.
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
DIGITS_TEST_SIZE = 297  # leaves 1,500 training images


def load_fashion_mnist(path: str | None = None):
  """Reads Fashion-MNIST from its files, without a download.

  Example, in place of `keras.datasets.fashion_mnist.load_data()`:
    (x_train, y_train), (x_test, y_test) = (
        tf_adasamp.datasets.load_fashion_mnist())

  Args:
    path: the directory of the release's four files
      (`FASHION_MNIST_FILES`); None for Debian's, `FASHION_MNIST_DIR`.

  Returns:
    ((x_train, y_train), (x_test, y_test)): uint8 images [n, 28, 28] and
    uint8 labels [n], as Keras's loader returns them.

  Raises:
    FileNotFoundError: if a file is missing, naming the apt command that
      installs them.
    ValueError: if a file is not of the release's format.
  """
  path = FASHION_MNIST_DIR if path is None else path
  missing = [
      name for name in FASHION_MNIST_FILES
      if not os.path.exists(os.path.join(path, name))
  ]
  if missing:
    raise FileNotFoundError(
        f"Fashion-MNIST's {', '.join(missing)} not in {path}: install "
        f"Debian's files with `{FASHION_MNIST_INSTALL}`, or pass the "
        "directory of the release's files as path")
  train_images, train_labels, test_images, test_labels = (
      _read_idx(os.path.join(path, name)) for name in FASHION_MNIST_FILES)
  return (train_images, train_labels), (test_images, test_labels)


def _read_idx(filename):
  """An IDX file of unsigned bytes (the MNIST format), gzipped."""
  with gzip.open(filename, "rb") as f:
    content = f.read()
  # A header of two zero bytes, the type (8: unsigned byte) and the number
  # of dimensions, then each dimension as a big-endian int32.
  if len(content) < 4 or content[:3] != b"\x00\x00\x08":
    raise ValueError(f"{filename} is not an IDX file of unsigned bytes")
  rank = content[3]
  shape = tuple(np.frombuffer(content, ">i4", count=rank, offset=4))
  values = np.frombuffer(content, np.uint8, offset=4 + 4 * rank)
  if values.size != np.prod(shape):
    raise ValueError(f"{filename} holds {values.size} values, not the "
                     f"{int(np.prod(shape))} of its shape {shape}")
  return values.reshape(shape)


def load_digits():
  """scikit-learn's digits, split into training and test images.

  Returns:
    ((x_train, y_train), (x_test, y_test)): float32 images [n, 8, 8] in
    [0, 1] and int64 labels [n]; 1,500 training and 297 test images,
    every class in both in proportion, the same split every time.

  Raises:
    ImportError: if scikit-learn is not installed, saying how to install
      it.
  """
  try:
    from sklearn import datasets as sk_datasets
    from sklearn import model_selection
  except ImportError as error:
    raise ImportError("the digits come with scikit-learn: pip install "
                      "scikit-learn") from error
  digits = sk_datasets.load_digits()
  images = (digits.images / 16.0).astype(np.float32)
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      images,
      digits.target.astype(np.int64),
      test_size=DIGITS_TEST_SIZE,
      random_state=0,
      stratify=digits.target)
  return (x_train, y_train), (x_test, y_test)
