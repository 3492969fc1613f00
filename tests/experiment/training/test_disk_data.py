"""The trainer's --data_path: training from ArrayRecord files on disk."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp import sources
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import disk_data
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files

pytest.importorskip("array_record")

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


def as_uint8(images):
  """Digits' pixels (sixteenths) as the uint8 that a record holds."""
  return np.round(images * 16).astype(np.uint8)


def write_images(path, images, labels):
  sources.write_array_record((sources.encode_image_example(image, label)
                              for image, label in zip(images, labels)),
                             str(path))
  return str(path)


@pytest.fixture(scope="module")
def files_and_arrays(tmp_path_factory):
  """Digits written as two ArrayRecord files by the library's writer, and
  the in-memory Dataset of the same pixels, as the records decode them."""
  digits = datasets.load("digits")
  folder = tmp_path_factory.mktemp("digits")
  train = write_images(folder / "train.array_record", as_uint8(digits.x_train),
                       digits.y_train)
  test = write_images(folder / "test.array_record", as_uint8(digits.x_test),
                      digits.y_test)
  in_memory = dataclasses.replace(
      digits,
      x_train=as_uint8(digits.x_train).astype(np.float32) / 255.0,
      x_test=as_uint8(digits.x_test).astype(np.float32) / 255.0)
  return train, test, in_memory


def file_config(train, test, **overrides):
  return tiny_config(
      **{
          "data_path": train,
          "test_data_path": test,
          "num_classes": 10,
          "sampling": "adaptive",
          "steps": 6,
          **overrides
      })


def test_a_run_from_files_matches_the_run_from_the_same_arrays(
    files_and_arrays):
  train, test, in_memory = files_and_arrays
  config = file_config(train, test)
  from_files = loop.train(config)
  from_arrays = loop.train(config, data=in_memory)
  assert [r["step"] for r in from_files] == [0, 2, 4, 6]
  assert without_clocks(from_files) == without_clocks(from_arrays)


def test_a_run_from_files_resumes_exactly(files_and_arrays, tmp_path):
  train, test, _ = files_and_arrays
  whole = loop.train(
      file_config(train, test, output_dir=str(tmp_path / "whole")))
  stopped = file_config(train,
                        test,
                        output_dir=str(tmp_path / "stopped"),
                        steps=4)
  loop.train(stopped)
  resumed = loop.train(dataclasses.replace(stopped, steps=6, resume=True))
  assert without_clocks(resumed) == without_clocks(whole)


def test_evaluations_read_a_subset_of_the_training_file(files_and_arrays):
  train, test, in_memory = files_and_arrays
  config = file_config(train, test, train_eval_size=100, model="mlp")
  assert without_clocks(loop.train(config)) == without_clocks(
      loop.train(config, data=in_memory))


@pytest.mark.parametrize("records,labels,message", [
    ([b"not an Example"], None, "does not hold image-classification"),
    (None, [12], "holds label 12, outside [0, num_classes=10)"),
    (None, [-1], "holds label -1"),
])
def test_bad_training_records_are_a_run_error(files_and_arrays, tmp_path,
                                              records, labels, message):
  _, test, _ = files_and_arrays
  path = str(tmp_path / "bad.array_record")
  if records is not None:
    sources.write_array_record(records, path)
  else:
    write_images(path, np.zeros([1, 8, 8, 1], np.uint8), labels)
  with pytest.raises(run_files.RunError, match="^data_path") as raised:
    disk_data.load(path, test, 10)
  assert message in str(raised.value)


def test_test_images_of_another_shape_are_a_run_error(files_and_arrays,
                                                      tmp_path):
  train, _, _ = files_and_arrays
  test = write_images(tmp_path / "test.array_record",
                      np.zeros([3, 4, 4, 1], np.uint8), [0, 1, 2])
  with pytest.raises(run_files.RunError, match="images of one shape"):
    disk_data.load(train, test, 10)


def test_a_test_file_with_a_bad_record_is_a_run_error(files_and_arrays,
                                                      tmp_path):
  train, _, _ = files_and_arrays
  good = sources.encode_image_example(np.zeros([8, 8, 1], np.uint8), 0)
  path = str(tmp_path / "test.array_record")
  sources.write_array_record([good, good, b"\x00junk"], path)
  with pytest.raises(run_files.RunError, match="^test_data_path"):
    disk_data.load(train, path, 10)


def test_cli_trains_from_files_and_refuses_bad_records_in_one_line(
    files_and_arrays, tmp_path):
  train, test, _ = files_and_arrays
  bad = str(tmp_path / "bad.array_record")
  sources.write_array_record([b"not an Example"], bad)

  def run(data_path, output_dir):
    return subprocess.run([
        sys.executable, "-m", "tf_adasamp.experiment.train",
        f"--data_path={data_path}", f"--test_data_path={test}",
        "--num_classes=10", "--model=logistic", "--steps=4",
        "--eval_interval=2", f"--output_dir={output_dir}", "--noprogress"
    ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))

  trained = run(train, tmp_path / "run")
  assert trained.returncode == 0, trained.stderr
  assert trained.stdout.startswith("step 4: ")
  assert run_files.is_complete(str(tmp_path / "run"), 4)
  refused = run(bad, tmp_path / "refused")
  assert refused.returncode == 1
  assert "Traceback" not in refused.stderr
  assert [
      line for line in refused.stderr.splitlines()
      if line.startswith("tf-adasamp-train: data_path") and
      "does not hold image-classification records" in line
  ], refused.stderr
