"""A run's set-up (tf_adasamp.experiment.training.loop)."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

import child_process
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files

# One AdaGrad step in a tf.function against the exact float32 update
# lr * g / sqrt(accumulator + epsilon): Grappler's rewrite to x * rsqrt(y)
# differs from it in the last bits, and by CPU (AVX2 against AVX-512).
ADAGRAD_STEP = """
import sys
import numpy as np
import keras
import tensorflow as tf
from tf_adasamp.experiment.training import loop
if sys.argv[1] == "exact":
  loop.exact_arithmetic()
rng = np.random.default_rng(0)
start = rng.random(4096).astype(np.float32)
grad = rng.normal(size=4096).astype(np.float32)
variable = tf.Variable(start)
optimizer = keras.optimizers.Adagrad(0.1)
optimizer.build([variable])
step = tf.function(
    lambda g: optimizer.apply_gradients([(g, variable)]))
step(tf.constant(grad))
accumulator = np.float32(0.1) + grad * grad
expected = start - np.float32(0.1) * grad / np.sqrt(
    accumulator + np.float32(1e-7))
print(int(np.sum(variable.numpy() != expected)))
"""


def differing(mode):
  result = subprocess.run(
      [sys.executable, "-c", ADAGRAD_STEP, mode],
      capture_output=True,
      text=True,
      timeout=120,
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""),
      check=True)
  return int(result.stdout.split()[-1])


def test_a_run_computes_adagrad_exactly_whatever_the_cpu():
  assert differing("exact") == 0
  # The rewrite it turns off is real here: the default differs.
  assert differing("default") > 0


def test_uniform_and_adaptive_runs_start_from_the_same_model(digits):
  uniform = loop.train(tiny_config(sampling="uniform", model="cnn"),
                       data=digits)
  adaptive = loop.train(tiny_config(sampling="adaptive", model="cnn"),
                        data=digits)
  # Their first records differ only in the adaptive run's heaviest examples.
  assert uniform[0] == {
      key: value for key, value in adaptive[0].items() if key != "heaviest"
  }


@pytest.mark.skipif(
    bool(tf.config.list_physical_devices("GPU")),
    reason="GPU ops are not deterministic by default; on a GPU "
    "test_deterministic_resumed_run_on_the_gpu_matches_uninterrupted_run "
    "checks resume")
def test_resumed_run_matches_uninterrupted_run(digits, tmp_path):
  # The CNN, so that dropout's random state must be restored too.
  settings = dict(model="cnn", sampling="adaptive", steps=6, eval_interval=2)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 **settings),
                     data=digits)
  stopped = tiny_config(output_dir=str(tmp_path / "stopped"),
                        **dict(settings, steps=4))
  loop.train(stopped, data=digits)
  resumed = loop.train(tiny_config(output_dir=str(tmp_path / "stopped"),
                                   resume=True,
                                   **settings),
                       data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert without_clocks(run_files.read_metrics(str(
      tmp_path / "stopped"))) == without_clocks(whole)
  # Q_t's heaviest examples too, read back from metrics.jsonl.
  assert all(len(record["heaviest"]) == 16 for record in whole)


def test_run_writes_metrics_checkpoints_and_summaries(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  assert run_files.is_complete(str(tmp_path), 4)
  assert not run_files.is_complete(str(tmp_path), 6)
  assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  assert os.listdir(tmp_path / "tensorboard")


def test_batch_larger_than_the_data_is_a_run_error(digits, tmp_path):
  with pytest.raises(run_files.RunError, match="larger than the 1500"):
    loop.train(tiny_config(batch_size=1501, output_dir=str(tmp_path / "run")),
               data=digits)
  assert not (tmp_path / "run").exists()


def test_a_validation_split_that_leaves_no_training_examples_is_refused(
    digits, tmp_path):
  with pytest.raises(run_files.RunError,
                     match="validation_size: validation size 1500 leaves no "
                     "training"):
    loop.train(tiny_config(validation_size=1500, output_dir=str(tmp_path)),
               data=digits)
  assert not os.listdir(tmp_path)
