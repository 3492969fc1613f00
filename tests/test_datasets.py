"""tf_adasamp.datasets: Fashion-MNIST and the digits, read in place."""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

import child_process
from tf_adasamp import datasets

fashion_mnist_installed = pytest.mark.skipif(
    not os.path.isdir(datasets.FASHION_MNIST_DIR),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{datasets.FASHION_MNIST_DIR}")


@fashion_mnist_installed
def test_fashion_mnist_is_read_in_place_as_keras_returns_it(tmp_path):
  code = (
      "import tf_adasamp\n"
      "(x, y), (x_test, y_test) = tf_adasamp.datasets.load_fashion_mnist()\n"
      "print(x.shape, x.dtype, y.dtype, x_test.shape, x.max(), "
      "sorted(set(y_test.tolist())) == list(range(10)))\n")
  home = tmp_path / "home"
  home.mkdir()
  result = subprocess.run([sys.executable, "-c", code],
                          env=child_process.environment(HOME=str(home),
                                                        KERAS_HOME=str(
                                                            home / ".keras")),
                          capture_output=True,
                          text=True,
                          check=True)
  assert result.stdout.split("\n")[-2] == (
      "(60000, 28, 28) uint8 uint8 (10000, 28, 28) 255 True")
  assert not any(home.iterdir())  # nothing written, Keras's cache included


def write_idx(path, array):
  array = np.asarray(array, np.uint8)
  header = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape,
                                                     ">i4").tobytes()
  with gzip.open(path, "wb") as f:
    f.write(header + array.tobytes())


def test_fashion_mnist_reads_any_directory_of_the_release(tmp_path):
  images = np.arange(2 * 28 * 28).reshape(2, 28, 28) % 256
  for name in datasets.FASHION_MNIST_FILES:
    write_idx(tmp_path / name, images if "images" in name else [3, 7])
  (x, y), (x_test, y_test) = datasets.load_fashion_mnist(str(tmp_path))
  np.testing.assert_array_equal(x, images)
  np.testing.assert_array_equal(y_test, [3, 7])
  assert x.dtype == y.dtype == np.uint8
  # A file cut short is refused, naming it.
  name = datasets.FASHION_MNIST_FILES[0]
  with gzip.open(tmp_path / name, "rb") as f:
    content = f.read()
  with gzip.open(tmp_path / name, "wb") as f:
    f.write(content[:-5])
  with pytest.raises(ValueError, match=f"{name} holds"):
    datasets.load_fashion_mnist(str(tmp_path))


def test_fashion_mnist_missing_names_the_apt_command(tmp_path):
  with pytest.raises(FileNotFoundError,
                     match="apt-get install -y dataset-fashion-mnist"):
    datasets.load_fashion_mnist(str(tmp_path))


def test_digits_split_1500_297_by_class_the_same_every_time():
  (x, y), (x_test, y_test) = datasets.load_digits()
  assert (x.shape, x_test.shape) == ((1500, 8, 8), (297, 8, 8))
  assert x.dtype == np.float32 and 0 <= x.min() and x.max() == 1
  assert set(y_test) == set(range(10))
  (again, _), _ = datasets.load_digits()
  np.testing.assert_array_equal(x, again)
