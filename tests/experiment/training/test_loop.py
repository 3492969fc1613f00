"""A run's set-up (tf_adasamp.experiment.training.loop)."""

import subprocess
import sys

import child_process

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
