"""The trainer's data sets: digits and Fashion-MNIST offline, CIFAR-10
through tfds."""

import os
import socket
import sys
import time

import numpy as np
import pytest
from sklearn import datasets as sk_datasets

import child_process
from tf_adasamp import datasets as library_datasets
from tf_adasamp.experiment.training import datasets


def check_images_and_labels(images, labels, shape, num_classes=10):
  assert images.shape[1:] == shape
  assert images.dtype == np.float32
  assert 0 <= images.min() and images.max() <= 1
  assert labels.dtype == np.int32
  assert len(labels) == len(images)
  assert 0 <= labels.min() and labels.max() < num_classes


def test_digits_are_unit_interval_nhwc_images_split_1500_297():
  data = datasets.load("digits")
  check_images_and_labels(data.x_train, data.y_train, (8, 8, 1))
  check_images_and_labels(data.x_test, data.y_test, (8, 8, 1))
  assert (len(data.y_train), len(data.y_test)) == (1500, 297)
  assert data.image_shape == (8, 8, 1) and data.num_classes == 10
  # Stratified: every class is in the test split.
  assert set(data.y_test) == set(range(10))


def sorted_rows(images):
  return sorted(map(bytes, images.reshape(len(images), -1)))


def test_digits_split_is_deterministic_and_partitions_the_data():
  first, second = datasets.load_digits(), datasets.load_digits()
  np.testing.assert_array_equal(first.x_train, second.x_train)
  np.testing.assert_array_equal(first.y_test, second.y_test)
  everything = (sk_datasets.load_digits().images / 16.0).astype(np.float32)
  assert sorted_rows(np.concatenate([first.x_train, first.x_test
                                    ])) == (sorted_rows(everything))


fashion_mnist_installed = pytest.mark.skipif(
    not os.path.isdir(library_datasets.FASHION_MNIST_DIR),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{library_datasets.FASHION_MNIST_DIR}")


@fashion_mnist_installed
def test_fashion_mnist_loads_from_the_debian_files():
  data = datasets.load("fashion_mnist")
  check_images_and_labels(data.x_train, data.y_train, (28, 28, 1))
  check_images_and_labels(data.x_test, data.y_test, (28, 28, 1))
  assert (len(data.y_train), len(data.y_test)) == (60000, 10000)
  assert set(data.y_test) == set(range(10))
  assert data.x_train.max() == 1.0  # scaled from uint8 by 255


def test_fashion_mnist_missing_names_the_apt_command(tmp_path):
  with pytest.raises(datasets.DatasetUnavailableError,
                     match="apt-get install -y dataset-fashion-mnist"):
    datasets.load_fashion_mnist(source_dir=str(tmp_path / "absent"))


def test_validation_split_holds_out_training_examples_only():
  data = datasets.load("digits")
  split = datasets.validation_split(data, 300, seed=7)
  assert (len(split.y_train), len(split.y_test)) == (1200, 300)
  # The two parts partition the training set; the test set is not used.
  assert sorted_rows(np.concatenate([split.x_train, split.x_test
                                    ])) == (sorted_rows(data.x_train))
  again = datasets.validation_split(data, 0.2, seed=7)
  np.testing.assert_array_equal(again.y_test, split.y_test)
  other = datasets.validation_split(data, 300, seed=8)
  assert sorted_rows(other.x_test) != sorted_rows(split.x_test)
  with pytest.raises(ValueError, match="leaves no training"):
    datasets.validation_split(data, 1500, seed=0)


def test_with_validation_holds_out_a_fixed_split_and_keeps_the_test_set():
  data = datasets.load("digits")
  held = datasets.with_validation(data, 300)
  assert (len(held.y_train), len(held.y_validation)) == (1200, 300)
  np.testing.assert_array_equal(held.x_test, data.x_test)
  # The two parts partition the training set, in their original order.
  assert sorted_rows(np.concatenate([held.x_train, held.x_validation
                                    ])) == sorted_rows(data.x_train)
  # validation_split's draw, with the fixed seed: the same split every run.
  np.testing.assert_array_equal(
      held.y_validation,
      datasets.validation_split(data, 300, datasets.VALIDATION_SEED).y_test)
  # After label noise: the same examples held out, and each part keeps the
  # flips of its examples.
  noisy = datasets.with_validation(datasets.with_label_noise(data, 0.2), 300)
  flipped = noisy.flipped
  assert flipped.shape == (1200,)
  np.testing.assert_array_equal(noisy.y_train != held.y_train, flipped)
  flipped_held = noisy.y_validation != held.y_validation
  assert flipped.sum() + flipped_held.sum() == round(0.2 * 1500)
  # Drawn apart from the flips: each part about as noisy as the whole.
  assert flipped.mean() == pytest.approx(0.2, abs=0.03)
  assert flipped_held.mean() == pytest.approx(0.2, abs=0.06)
  with pytest.raises(ValueError, match="holds a validation split already"):
    datasets.with_validation(held, 10)
  with pytest.raises(ValueError, match="leaves no training"):
    datasets.with_validation(data, 1500)


def test_the_trainer_imports_neither_tfds_nor_sklearn():
  # As on a machine without them (the GPU machine lacks tensorflow_datasets):
  # each is imported only to load the data set that needs it.
  attempts = child_process.import_attempts(
      "import tf_adasamp.experiment.training.loop\n"
      "import tf_adasamp.experiment.train\n"
      "import tf_adasamp.experiment.reproduce",
      absent=["tensorflow_datasets", "sklearn"])
  assert attempts == []


def test_cifar10_loads_through_tfds_as_unit_interval_images(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  with tfds.testing.mock_data(num_examples=7):
    data = datasets.load("cifar10", data_dir=str(tmp_path))
  assert data.name == "cifar10"
  check_images_and_labels(data.x_train, data.y_train, (32, 32, 3))
  check_images_and_labels(data.x_test, data.y_test, (32, 32, 3))
  assert len(data.y_train) == 7


def closed_port():
  """A local TCP port that nothing listens on."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_cifar10_without_data_or_network_fails_fast_naming_digits(
    tmp_path, monkeypatch):
  monkeypatch.setattr(datasets, "CIFAR10_HOST", ("127.0.0.1", closed_port()))
  start = time.monotonic()
  with pytest.raises(datasets.DatasetUnavailableError,
                     match="--dataset=fashion_mnist or --dataset=digits"):
    datasets.load("cifar10", data_dir=str(tmp_path))
  # Fast means no download retries; a generous bound, not a benchmark.
  assert time.monotonic() - start < 10


def test_cifar10_without_tfds_names_the_install_and_the_offline_options(
    monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # unimportable
  with pytest.raises(datasets.DatasetUnavailableError,
                     match="pip install tensorflow-datasets.*--dataset=digits"):
    datasets.load("cifar10")


def test_network_reachable_tells_listening_from_closed_port():
  with socket.socket() as server:
    server.bind(("127.0.0.1", 0))
    server.listen()
    assert datasets.network_reachable(server.getsockname(), timeout=1)
  assert not datasets.network_reachable(("127.0.0.1", closed_port()), timeout=1)


def test_unknown_dataset_is_a_value_error():
  with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
    datasets.load("mnist")


def test_subset_is_a_fixed_sample_of_both_splits_in_their_order():
  full = datasets.load_digits()
  first = datasets.subset(full, "small", 500, 100, seed=0)
  again = datasets.subset(full, "small", 500, 100, seed=0)
  other = datasets.subset(full, "small", 500, 100, seed=1)
  assert (len(first.y_train), len(first.y_test)) == (500, 100)
  np.testing.assert_array_equal(first.x_train, again.x_train)
  np.testing.assert_array_equal(first.y_test, again.y_test)
  assert not np.array_equal(first.y_train, other.y_train)
  # Rows of the original, in its order.
  rows = [
      int(np.flatnonzero((full.x_train == image).all(axis=(1, 2, 3)))[0])
      for image in first.x_train[:20]
  ]
  assert rows == sorted(rows)
  with pytest.raises(ValueError, match="subset size 0"):
    datasets.subset(full, "small", 0, 100, seed=0)
  with pytest.raises(ValueError, match="subset size 2000"):
    datasets.subset(full, "small", 500, 2000, seed=0)


def _rows(images):
  """The set of `full`'s rows that `images` are (as bytes)."""
  return {image.tobytes() for image in images}


def test_subset_parts_and_their_validation_splits_share_no_example():
  full = datasets.load_digits()
  parts = [
      datasets.subset(full, "small", 300, 100, 0, part=k, validation_size=200)
      for k in (0, 1)
  ]
  # Part 0 is the subset drawn without parts.
  plain = datasets.subset(full, "small", 300, 100, 0)
  np.testing.assert_array_equal(parts[0].x_train, plain.x_train)
  np.testing.assert_array_equal(parts[0].y_test, plain.y_test)
  trains = [_rows(p.x_train) for p in parts]
  validations = [_rows(p.x_validation) for p in parts]
  tests = [_rows(p.x_test) for p in parts]
  assert [len(v) for v in validations] == [200, 200]
  every = trains + validations
  for i, one in enumerate(every):
    for other in every[i + 1:]:
      assert not one & other
  assert not tests[0] & tests[1]
  with pytest.raises(ValueError, match="must fit in"):
    datasets.subset(full, "small", 300, 100, 0, part=1, validation_size=500)


@fashion_mnist_installed
def test_fashion_mnist_5k_is_5000_and_5000_of_fashion_mnist():
  data = datasets.load("fashion_mnist_5k")
  assert (len(data.y_train), len(data.y_test)) == (5000, 5000)
  assert data.image_shape == (28, 28, 1)
  # Every class is there, about equally.
  assert np.bincount(data.y_train, minlength=10).min() > 400


def test_label_noise_flips_a_fixed_fraction_to_other_classes(digits):
  noisy = datasets.with_label_noise(digits, 0.2)
  changed = noisy.y_train != digits.y_train
  np.testing.assert_array_equal(changed, noisy.flipped)
  assert changed.sum() == round(0.2 * digits.num_train)
  np.testing.assert_array_equal(noisy.y_test, digits.y_test)
  assert noisy.y_train.dtype == np.int32
  assert set(np.unique(noisy.y_train)) <= set(range(digits.num_classes))
  # Every run of the study flips the same examples the same way.
  again = datasets.with_label_noise(digits, 0.2)
  np.testing.assert_array_equal(again.y_train, noisy.y_train)
  with pytest.raises(ValueError, match="flipped already"):
    datasets.with_label_noise(noisy, 0.2)
  with pytest.raises(ValueError, match=r"in \[0, 1\)"):
    datasets.with_label_noise(digits, 1.0)
