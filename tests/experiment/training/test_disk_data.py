"""The trainer's --data_path (tf_adasamp.experiment.training.disk_data):
training from ArrayRecord files on disk; bad records, and data files changed
under a run, refused in one line (issue 46)."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from run_records import snapshot
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
  """Writes (image, label) records, and a bytes image as the record."""
  sources.write_array_record([
      image if isinstance(image, bytes) else sources.encode_image_example(
          image, label) for image, label in zip(images, labels)
  ], str(path))
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


@pytest.fixture
def image_files(tmp_path):
  """A 40-record training file and a 10-record test file of 8x8 images."""
  pytest.importorskip("array_record")
  rng = np.random.default_rng(0)
  images = list(rng.integers(0, 256, [40, 8, 8, 1], dtype=np.uint8))
  labels = [int(label) for label in rng.integers(0, 10, 40)]
  train = write_images(tmp_path / "train.array_record", images, labels)
  test = write_images(tmp_path / "test.array_record", images[:10], labels[:10])
  return images, labels, train, test


@pytest.mark.parametrize("record,message", [
    ((None, 15), "record 37 holds label 15, outside [0, num_classes=10)"),
    ((None, -2), "record 37 holds label -2"),
    ((np.zeros([14, 14, 1], np.uint8), 3),
     "record 37 holds an image of shape (14, 14, 1), record 0 one of "
     "(8, 8, 1)"),
    ((b"\x00undecodable", None), "record 37 of ArrayRecord file"),
])
def test_a_bad_training_record_past_record_0_is_refused_before_any_write(
    image_files, digits, tmp_path, record, message):
  images, labels, _, test = image_files
  image, label = record
  images[37] = images[37] if image is None else image
  labels[37] = labels[37] if label is None else label
  bad = write_images(tmp_path / "bad.array_record", images, labels)
  with pytest.raises(run_files.RunError) as raised:
    disk_data.load(bad, test, 10)
  assert str(raised.value).startswith(f"data_path {bad!r}")
  assert message in str(raised.value)
  config = tiny_config(data_path=bad,
                       test_data_path=test,
                       num_classes=10,
                       output_dir=str(tmp_path / "run"))
  with pytest.raises(run_files.RunError, match=f"^data_path {bad!r}"):
    loop.train(config)
  assert not os.path.exists(config.output_dir)


def test_a_model_too_large_for_memory_is_one_line(image_files, tmp_path):
  _, _, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=2_000_000_000,
                       output_dir=str(tmp_path / "run"))
  with pytest.raises(run_files.RunError,
                     match="out of memory .* 2000000000 classes"):
    loop.train(config)
  assert not os.path.exists(
      os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR))


def test_resume_refuses_a_data_path_replaced_by_other_data_of_its_length(
    image_files, tmp_path):
  images, labels, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=10,
                       batch_size=8,
                       output_dir=str(tmp_path / "run"))
  loop.train(config)
  resumed = dataclasses.replace(config, resume=True, steps=6)
  # As many records, of the same sizes: other images, other labels.
  write_images(train, images[::-1], labels[::-1])
  before = snapshot(config.output_dir)
  with pytest.raises(run_files.RunError) as raised:
    loop.train(resumed)
  message = str(raised.value)
  assert message.startswith(f"cannot resume the run in {config.output_dir}: "
                            "its data changed since it began (data_path "
                            "mtime_ns: ")
  assert "data_path sha256_of_its_ends: " in message
  assert "; put back the data it trained on, or start over" in message
  assert "\n" not in message and "test_data_path" not in message
  assert snapshot(config.output_dir) == before
  # The command line says so before TensorFlow loads, in one line.
  result = subprocess.run([
      sys.executable, "-c", LOADED_TENSORFLOW, "--model=logistic", "--steps=6",
      "--eval_interval=2", "--batch_size=8", "--learning_rate=0.1",
      "--noprogress", "--resume", f"--data_path={train}",
      f"--test_data_path={test}", "--num_classes=10",
      f"--output_dir={config.output_dir}"
  ],
                          cwd=ROOT,
                          capture_output=True,
                          text=True,
                          timeout=300)
  assert result.returncode == 1
  assert result.stderr.splitlines() == [f"tf-adasamp-train: {message}"]
  assert result.stdout.split() == ["False"]  # TensorFlow not loaded


# The trainer's command line, then whether TensorFlow had loaded.
LOADED_TENSORFLOW = """
import sys
from tf_adasamp.experiment import train
sys.argv[0] = train.PROGRAM
try:
  train.run()
finally:
  print("tensorflow" in sys.modules)
"""


def test_a_data_file_touched_since_names_the_time_to_give_back(
    image_files, tmp_path):
  _, _, train, test = image_files
  config = tiny_config(data_path=train,
                       test_data_path=test,
                       num_classes=10,
                       batch_size=8,
                       output_dir=str(tmp_path / "run"))
  loop.train(config)
  mtime_ns = os.stat(test).st_mtime_ns
  os.utime(test, ns=(mtime_ns + 10**9, mtime_ns + 10**9))
  resumed = dataclasses.replace(config, resume=True, steps=6)
  with pytest.raises(run_files.RunError,
                     match=r"\(test_data_path mtime_ns: \d+ then, \d+ now\); "
                     r"if the file holds the same records, give it back its "
                     rf"time \(touch -d @{mtime_ns / 1e9:.9f} FILE\)"):
    loop.train(resumed)
  os.utime(test, ns=(mtime_ns, mtime_ns))
  assert loop.train(resumed)[-1]["step"] == 6
