"""In-memory image classification data for the trainer.

Training draws examples by index (`tf.gather` on sampled indices), so a data
set is four NumPy arrays held in memory: float32 images in [0, 1], NHWC, and
int32 labels.

  cifar10  CIFAR-10 through tensorflow_datasets (the paper's experiment):
           read from a prepared `data_dir`, or downloaded where a network is
           reachable. With neither it fails at once, naming the offline option.
  digits   scikit-learn's bundled 8x8 handwritten digits (1797 images), for
           runs with no network and no data; split train/test
           deterministically.
"""

import dataclasses
import socket

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import model_selection
import tensorflow_datasets as tfds

DATASETS = ("digits", "cifar10")
DIGITS_TEST_SIZE = 297  # leaves 1500 training images
# Where tensorflow_datasets downloads CIFAR-10 from.
CIFAR10_HOST = ("www.cs.toronto.edu", 443)


class DatasetUnavailableError(RuntimeError):
  """The data set is neither prepared locally nor downloadable."""


@dataclasses.dataclass(frozen=True)
class Dataset:
  """Train and test splits; images [n, H, W, C] float32, labels [n] int32."""
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int

  @property
  def image_shape(self):
    return self.x_train.shape[1:]


def load(name, data_dir=None):
  """Loads data set `name` (one of DATASETS)."""
  if name == "digits":
    return load_digits()
  if name == "cifar10":
    return load_cifar10(data_dir)
  raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def load_digits():
  """scikit-learn's digits as 8x8x1 images; a fixed, class-stratified split."""
  digits = sk_datasets.load_digits()
  images = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
  labels = digits.target.astype(np.int32)
  x_train, x_test, y_train, y_test = model_selection.train_test_split(
      images, labels, test_size=DIGITS_TEST_SIZE, random_state=0,
      stratify=labels)
  return Dataset("digits", x_train, y_train, x_test, y_test, num_classes=10)


def network_reachable(address, timeout=2.0):
  """Whether a TCP connection to `address` (host, port) opens in `timeout` s."""
  try:
    socket.create_connection(address, timeout=timeout).close()
    return True
  except OSError:
    return False


def load_cifar10(data_dir=None):
  """CIFAR-10 from tensorflow_datasets: 50000 train, 10000 test, 32x32x3.

  Reads a copy prepared under `data_dir` (tfds' default directory if None);
  downloads and prepares one only if the download host answers, so a machine
  with neither data nor network gets DatasetUnavailableError in about a
  second instead of minutes of retries.
  """
  def read(download):
    splits = tfds.load("cifar10", split=["train", "test"], data_dir=data_dir,
                       as_supervised=True, download=download)
    return [_as_arrays(split) for split in splits]

  try:
    train, test = read(download=False)
  except AssertionError:  # tfds' "could not find data in <data_dir>"
    if not network_reachable(CIFAR10_HOST):
      raise DatasetUnavailableError(
          "CIFAR-10 is not prepared in data_dir="
          f"{data_dir or '<tfds default, ~/tensorflow_datasets>'} and "
          f"{CIFAR10_HOST[0]} cannot be reached to download it. Run offline "
          "with --dataset=digits, or point --data_dir at a directory where "
          "`tfds build cifar10` has prepared it.") from None
    train, test = read(download=True)
  return Dataset("cifar10", *train, *test, num_classes=10)


def _as_arrays(split, chunk=10000):
  """A tf.data split of (uint8 image, label) pairs as (float images, labels)."""
  images, labels = [], []
  for image_chunk, label_chunk in tfds.as_numpy(split.batch(chunk)):
    images.append(image_chunk)
    labels.append(label_chunk)
  images = np.concatenate(images).astype(np.float32)
  images /= 255.0
  return images, np.concatenate(labels).astype(np.int32)
