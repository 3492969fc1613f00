"""In-memory image classification data for the trainer.

Training draws examples by index (`tf.gather` on sampled indices), so a data
set is four NumPy arrays held in memory: float32 images in [0, 1], NHWC, and
int32 labels.

  fashion_mnist  Fashion-MNIST (60000 train, 10000 test, 28x28x1, 10
                 classes) from Debian's `dataset-fashion-mnist` package
                 (`tf_adasamp.datasets.load_fashion_mnist`).
  fashion_mnist_5k
                 a fixed random 5,000 of Fashion-MNIST's training images
                 and 5,000 of its test images (the experiment's main data
                 set: small enough that a model fits it, and every
                 evaluation reads the whole of both, in the time a 2-core
                 CPU has), with a validation split of 5,000 other training
                 images.
  fashion_mnist_5k_b
                 its replication: 5,000 other training images, the other
                 5,000 test images and 5,000 more training images for
                 validation, none shared with fashion_mnist_5k.
  cifar10        CIFAR-10 through tensorflow_datasets (the paper's data):
                 read from a prepared `data_dir`, or downloaded where a
                 network is reachable. With neither it fails at once, naming
                 the offline options.
  digits         scikit-learn's bundled 8x8 handwritten digits (1797
                 images), for tests and quick runs; split train/test
                 deterministically (`tf_adasamp.datasets.load_digits`).

scikit-learn and tensorflow_datasets are imported inside their loaders, so
the trainer imports neither until it needs one.

`with_validation` holds a fixed validation split out of a training set
(the trainer's --validation_size): never trained on, evaluated beside the
test set. `validation_split` carves one out in place of the test set, for
tuning hyperparameters without touching it.
"""

import dataclasses
import hashlib
import socket

import numpy as np

from tf_adasamp import datasets as library_datasets

DATASETS = ("digits", "fashion_mnist", "fashion_mnist_5k", "fashion_mnist_5k_b",
            "cifar10")
# fashion_mnist_5k's sizes, and the seed that draws its examples; its
# replication is the next part of the same draw (subset's `part`).
SUBSET_TRAIN_SIZE = 5000
SUBSET_TEST_SIZE = 5000
SUBSET_VALIDATION_SIZE = 5000
SUBSET_SEED = 0
SUBSET_PARTS = {"fashion_mnist_5k": 0, "fashion_mnist_5k_b": 1}
NUM_SUBSETS = len(SUBSET_PARTS)
# The examples whose labels with_label_noise flips, and their new labels,
# are fixed by this seed: the same in every trial, so runs pair.
LABEL_NOISE_SEED = 0
# The trainer's validation split (with_validation) is drawn with this seed:
# the same examples in every run of a data set, whatever the run's seed.
# Not LABEL_NOISE_SEED: its permutation picks the flipped labels first, and
# would hold them out as the validation split.
VALIDATION_SEED = 1
# Where tensorflow_datasets downloads CIFAR-10 from.
CIFAR10_HOST = ("www.cs.toronto.edu", 443)
# The names of the class ids, from the data set's own documentation.
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog",
                   "frog", "horse", "ship", "truck")


class DatasetUnavailableError(RuntimeError):
  """The data set is neither prepared locally nor downloadable."""


@dataclasses.dataclass(frozen=True)
class Dataset:
  """Train and test splits; images [n, H, W, C] float32, labels [n] int32.

  `flipped`, where labels were flipped (`with_label_noise`): a bool [n]
  mask of the training examples whose label is not their true one.
  `class_names`, where the data set names its classes: the name of each
  class id. `x_validation` and `y_validation`, where a validation split is
  held out of the training examples (`with_validation`): its images and
  labels.
  """
  name: str
  x_train: np.ndarray
  y_train: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  num_classes: int
  flipped: np.ndarray | None = None
  class_names: tuple | None = None
  x_validation: np.ndarray | None = None
  y_validation: np.ndarray | None = None

  @property
  def image_shape(self):
    return self.x_train.shape[1:]

  @property
  def num_train(self):
    return len(self.y_train)

  def training_examples(self, indices):
    """The training (images, labels) at `indices` (all of them: no copy)."""
    if len(indices) == self.num_train:
      return self.x_train, self.y_train
    return self.x_train[indices], self.y_train[indices]

  def training_image_chunks(self):
    """The training images, all of them, a chunk at a time (one here)."""
    yield self.x_train

  def identity(self):
    """What tells this data from other data (run_files.check_data): its
    name, and each split's size and the SHA-256 of its images and labels."""
    return {
        "name": self.name,
        "train": _arrays_identity(self.x_train, self.y_train),
        "test": _arrays_identity(self.x_test, self.y_test)
    }

  def batch_reader(self):
    """A function from int64 indices (a tensor) to the training (images,
    labels) there, gathered from constants in the graph."""
    import tensorflow as tf
    images, labels = tf.constant(self.x_train), tf.constant(self.y_train)
    return lambda indices: (tf.gather(images, indices),
                            tf.gather(labels, indices))


def _arrays_identity(images, labels):
  digest = hashlib.sha256()
  for array in (images, labels):
    array = np.ascontiguousarray(array)
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(memoryview(array).cast("B"))
  return {"examples": len(labels), "sha256": digest.hexdigest()}


def load(name, data_dir=None):
  """Loads data set `name` (one of DATASETS)."""
  if name == "digits":
    return load_digits()
  if name == "fashion_mnist":
    return load_fashion_mnist()
  if name in SUBSET_PARTS:
    return subset(load_fashion_mnist(),
                  name,
                  SUBSET_TRAIN_SIZE,
                  SUBSET_TEST_SIZE,
                  SUBSET_SEED,
                  part=SUBSET_PARTS[name],
                  validation_size=SUBSET_VALIDATION_SIZE)
  if name == "cifar10":
    return load_cifar10(data_dir)
  raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def load_digits():
  """scikit-learn's digits as 8x8x1 images; a fixed, class-stratified split."""
  (x_train, y_train), (x_test, y_test) = library_datasets.load_digits()
  return Dataset("digits",
                 x_train[..., np.newaxis],
                 y_train.astype(np.int32),
                 x_test[..., np.newaxis],
                 y_test.astype(np.int32),
                 num_classes=10)


def load_fashion_mnist(source_dir=None):
  """Fashion-MNIST as 28x28x1 images in [0, 1]: 60000 train, 10000 test.

  Read from the files of Debian's dataset-fashion-mnist (in `source_dir`,
  `tf_adasamp.datasets.FASHION_MNIST_DIR` by default), so nothing is
  downloaded. Raises DatasetUnavailableError, naming the apt command, where
  they are missing.
  """
  try:
    (x_train,
     y_train), (x_test,
                y_test) = (library_datasets.load_fashion_mnist(source_dir))
  except FileNotFoundError as error:
    raise DatasetUnavailableError(
        f"{error} (run `apt-get update` first if apt does not find it)"
    ) from None

  def images(x):
    return (x.astype(np.float32) / 255.0)[..., np.newaxis]

  return Dataset("fashion_mnist",
                 images(x_train),
                 y_train.astype(np.int32),
                 images(x_test),
                 y_test.astype(np.int32),
                 num_classes=10,
                 class_names=library_datasets.FASHION_MNIST_CLASSES)


def subset(data,
           name,
           train_size,
           test_size,
           seed,
           part=0,
           validation_size=0,
           parts=NUM_SUBSETS):
  """A fixed random `train_size` of `data`'s training examples and
  `test_size` of its test examples, in their original order, drawn with
  `seed`; with `validation_size`, that many other training examples as its
  validation split.

  One random order of the training examples and one of the test examples
  are drawn; part k takes the k-th `train_size` and `test_size` of them,
  and its validation split the k-th `validation_size` after the `parts`
  parts' training examples: the parts, and their validation splits, share
  no example.
  """
  rng = np.random.default_rng(seed)
  train_order = rng.permutation(len(data.y_train))
  test_order = rng.permutation(len(data.y_test))

  def pick(order, start, count):
    if not 0 < count or start + count > len(order):
      raise ValueError(f"subset size {count} from {start} must fit in "
                       f"{len(order)} examples")
    return np.sort(order[start:start + count])

  train = pick(train_order, part * train_size, train_size)
  test = pick(test_order, part * test_size, test_size)
  validation = {}
  if validation_size:
    held = pick(train_order, parts * train_size + part * validation_size,
                validation_size)
    validation = dict(x_validation=data.x_train[held],
                      y_validation=data.y_train[held])
  return Dataset(name,
                 data.x_train[train],
                 data.y_train[train],
                 data.x_test[test],
                 data.y_test[test],
                 data.num_classes,
                 class_names=data.class_names,
                 **validation)


def with_label_noise(data, fraction, seed=LABEL_NOISE_SEED):
  """`data` with a random `fraction` of its training labels flipped.

  Each flipped label is replaced by one of the other classes, uniformly;
  the test labels stay clean. The flipped examples are marked in
  `flipped`.

  Args:
    data: a Dataset without flipped labels.
    fraction: the fraction in [0, 1) of training labels to flip (rounded
      to a count).
    seed: fixes which examples are flipped and their new labels.

  Returns:
    A Dataset.

  Raises:
    ValueError: `fraction` is outside [0, 1), or `data`'s labels are
      flipped already.
  """
  if not 0 <= fraction < 1:
    raise ValueError(f"label noise must be in [0, 1), got {fraction}")
  if data.flipped is not None:
    raise ValueError(f"{data.name}'s labels are flipped already")
  rng = np.random.default_rng(seed)
  n = len(data.y_train)
  chosen = rng.permutation(n)[:int(round(fraction * n))]
  labels = data.y_train.copy()
  labels[chosen] = (labels[chosen] + rng.integers(
      1, data.num_classes, size=len(chosen))) % data.num_classes
  flipped = np.zeros(n, bool)
  flipped[chosen] = True
  return dataclasses.replace(data,
                             name=f"{data.name} ({fraction:g} label noise)",
                             y_train=labels.astype(np.int32),
                             flipped=flipped)


def with_validation(data, size, seed=VALIDATION_SEED):
  """`data` with a random `size` of its training examples held out as its
  validation split, which it does not train on; the test split stays.

  Args:
    data: a Dataset without a validation split.
    size: the number of examples held out, an int >= 1 below the number of
      training examples.
    seed: fixes which examples are held out.

  Returns:
    A Dataset: the held-out examples in `x_validation` and `y_validation`,
    the others (and their marks in `flipped`) in their original order.

  Raises:
    ValueError: `size` leaves no training or no validation examples, or
      `data` holds a validation split already.
  """
  if data.x_validation is not None:
    raise ValueError(f"{data.name} holds a validation split already")
  held, kept = _held_out(len(data.y_train), size, seed)
  return dataclasses.replace(
      data,
      x_train=data.x_train[kept],
      y_train=data.y_train[kept],
      flipped=None if data.flipped is None else data.flipped[kept],
      x_validation=data.x_train[held],
      y_validation=data.y_train[held])


def validation_split(data, size, seed):
  """`data` with a random `size` of its training examples held out as the
  test split (the test set itself is dropped): for tuning hyperparameters.

  `size` is a count (>= 1) or a fraction in (0, 1); `seed` fixes the split.
  """
  n = len(data.y_train)
  count = int(round(size * n)) if 0 < size < 1 else int(size)
  held, kept = _held_out(n, count, seed)
  return Dataset(f"{data.name} (validation split)",
                 data.x_train[kept],
                 data.y_train[kept],
                 data.x_train[held],
                 data.y_train[held],
                 data.num_classes,
                 class_names=data.class_names)


def _held_out(n, count, seed):
  """(held, kept): sorted indices of a random `count` of n examples, drawn
  with `seed`, and of the others."""
  if not 0 < count < n:
    raise ValueError(f"validation size {count} leaves no training or no "
                     f"validation examples out of {n}")
  order = np.random.default_rng(seed).permutation(n)
  return np.sort(order[:count]), np.sort(order[count:])


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
  offline = "Run offline with --dataset=fashion_mnist or --dataset=digits"
  try:
    import tensorflow_datasets as tfds
  except ImportError:
    raise DatasetUnavailableError(
        "CIFAR-10 is read through tensorflow_datasets, which is not "
        f"installed: `pip install tensorflow-datasets`. {offline}.") from None

  def read(download):
    splits = tfds.load("cifar10",
                       split=["train", "test"],
                       data_dir=data_dir,
                       as_supervised=True,
                       download=download)
    return [_as_arrays(split) for split in splits]

  try:
    train, test = read(download=False)
  except AssertionError:  # tfds' "could not find data in <data_dir>"
    if not network_reachable(CIFAR10_HOST):
      raise DatasetUnavailableError(
          "CIFAR-10 is not prepared in data_dir="
          f"{data_dir or '<tfds default, ~/tensorflow_datasets>'} and "
          f"{CIFAR10_HOST[0]} cannot be reached to download it. {offline}, "
          "or point --data_dir at a directory where `tfds build cifar10` has "
          "prepared it.") from None
    train, test = read(download=True)
  return Dataset("cifar10",
                 *train,
                 *test,
                 num_classes=10,
                 class_names=CIFAR10_CLASSES)


def _as_arrays(split, chunk=10000):
  """A tf.data split of (uint8 image, label) pairs as (float images, labels)."""
  import tensorflow_datasets as tfds
  images, labels = [], []
  for image_chunk, label_chunk in tfds.as_numpy(split.batch(chunk)):
    images.append(image_chunk)
    labels.append(label_chunk)
  images = np.concatenate(images).astype(np.float32)
  images /= 255.0
  return images, np.concatenate(labels).astype(np.int32)
