import os

# Quiet TensorFlow's start-up logging before any test imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf


@pytest.fixture(autouse=True, scope="session")
def exact_float32():
  """float32 matmuls in full precision, also on GPUs that default to TF32
  (Ampere and later), so float32 results compare at tight tolerances."""
  tf.config.experimental.enable_tensor_float_32_execution(False)


@pytest.fixture
def on_cpu():
  """Runs the test on the CPU, for contracts of the CPU kernels: raising
  InvalidArgumentError on bad values. On a GPU the ops leave the state
  untouched instead (docs/cuda.md), which tests/test_gpu_ops.py pins."""
  with tf.device("/CPU:0"):
    yield
