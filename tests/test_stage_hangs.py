"""The tf.data stage never hangs: each use runs in a subprocess with a timeout.

A regression then fails its test (subprocess.TimeoutExpired) instead of
hanging the suite.
"""

import signal
import subprocess
import sys
import time

import pytest

import child_process

TIMEOUT = 120  # seconds; generous for a loaded machine, never reached if sound

PRELUDE = """
import itertools
import numpy as np, tensorflow as tf
from tf_adasamp import AdaptiveSampler, data
x = np.arange(37, dtype=np.float32)[:, None]
y = np.arange(37) % 3
"""


def run(script, **environment_overrides):
  result = subprocess.run(
      [sys.executable, "-c", PRELUDE + script],
      capture_output=True,
      text=True,
      timeout=TIMEOUT,
      check=False,
      env=child_process.environment(**environment_overrides))
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


PEEKS = """
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8)
dataset = stage.dataset((x, y)).prefetch(2)
print("take", len([b[2].numpy() for b in dataset.take(5)]), flush=True)
print("list", len(list(dataset.take(3))), flush=True)
print("iterator", len([next(iter(dataset)) for _ in range(4)]), flush=True)
print("break", len([b for b, _ in zip(dataset, range(6))]), flush=True)
"""


def test_default_stage_can_be_iterated_without_updates():
  # One process peeks in each way, then must exit with all four pipelines
  # left unfinished.
  assert run(PEEKS).splitlines()[-4:] == [
      "take 5", "list 3", "iterator 4", "break 6"
  ]


WAITS_FOR_AN_UPDATE = """
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8,
                              max_lag=0)
iterator = iter(stage.dataset((x, y)).prefetch(2))
next(iterator)  # never reported
try:
  print("waiting", flush=True)
  next(iterator)
except KeyboardInterrupt:
  print("interrupted", flush=True)
  raise
print("not reached", flush=True)
"""


def test_ctrl_c_interrupts_a_draw_waiting_for_an_update():
  process = subprocess.Popen(
      [sys.executable, "-c", PRELUDE + WAITS_FOR_AN_UPDATE],
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      env=child_process.environment(),
      preexec_fn=child_process.restore_sigint)
  try:
    assert process.stdout.readline().strip() == "waiting"
    # Time for next() to block inside TensorFlow, the case that needs the
    # stage's help (a signal that lands earlier raises just the same).
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT)
  finally:
    process.kill()
  assert stdout.split() == ["interrupted"], stderr[-3000:]
  assert "KeyboardInterrupt" in stderr
  assert process.returncode != 0


ENDS = """
def bounded_dataset():
  stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8,
                                max_lag=0)
  return stage, stage.dataset((x, y)).prefetch(2)

stage, dataset = bounded_dataset()
for step, (_, _, indices, probabilities) in enumerate(dataset):
  stage.update(indices, tf.ones_like(probabilities))
  if step == 2:
    break  # the prefetched next draw waits for an update
print("left by break", flush=True)
_, dataset = bounded_dataset()
iterator = iter(dataset)
next(iterator)
del iterator
print("left by del", flush=True)
"""


def test_leaving_a_bounded_stage_never_blocks():
  # Neither the loop nor the process's exit waits for the draws left
  # waiting for an update.
  assert run(ENDS).splitlines()[-2:] == ["left by break", "left by del"]


REJECTED_UPDATES = """
for mode, bad in itertools.product(["eager", "function"], ["nan", "index"]):
  sampler = AdaptiveSampler(37, 1.0, 0.9, seed=0)
  stage = data.AdaptiveSampling(sampler, 8, max_lag=0)
  iterator = iter(stage.dataset((x, y)).prefetch(2))
  update = {"eager": stage.update, "function": tf.function(stage.update)}[mode]
  bad_update = {"nan": lambda i: (i, tf.fill([8], float("nan"))),
                "index": lambda i: (i + 100, tf.ones([8], tf.float64))}[bad]
  _, _, indices, _ = next(iterator)
  before = sampler.log_weights.numpy()
  try:
    update(*bad_update(indices))
  except tf.errors.InvalidArgumentError as error:
    print(mode, bad, "rejected:", " ".join(error.message.split()))
  assert (sampler.log_weights.numpy() == before).all()
  _, _, indices, _ = next(iterator)  # the permit came back
  update(indices, tf.ones([8], tf.float64))
  next(iterator)
  print(mode, bad, "went on", flush=True)
"""


def test_a_rejected_update_still_lets_the_next_batch_be_drawn():
  # On the CPU, where the ops raise on bad values; on a GPU they leave the
  # state untouched without raising (docs/cuda.md).
  cases = [("eager", "nan", "is not finite"),
           ("eager", "index", "out of range"),
           ("function", "nan", "is not finite"),
           ("function", "index", "out of range")]
  lines = iter(
      run(REJECTED_UPDATES,
          CUDA_VISIBLE_DEVICES="").splitlines()[-2 * len(cases):])
  for mode, bad, message in cases:
    rejected = next(lines)
    assert rejected.startswith(f"{mode} {bad} rejected:"), rejected
    assert message in rejected, rejected
    assert next(lines) == f"{mode} {bad} went on"


ANY_REJECTED_UPDATE = """
def sum_overflows(sampler):
  sampler.update([0, 1, 2, 3], [1.7e308] * 4)  # accepted: l = 1.7e308
  return [0, 1, 2, 3], [1.7e308] * 4  # 0.9 * l + u overflows

cases = {
    "short utilities": (tf.float64, lambda s: ([0, 1, 2, 3], [1.] * 3)),
    "float32 overflow": (tf.float32, lambda s: ([0, 1, 2, 3], [1e39] * 4)),
    "sum overflow": (tf.float64, sum_overflows),
}
for case, (dtype, bad_update) in cases.items():
  sampler = AdaptiveSampler(37, 1.0, 0.9, seed=0, dtype=dtype)
  stage = data.AdaptiveSampling(sampler, 4, max_lag=0, wait_timeout=2)
  update = tf.function(stage.update, input_signature=[
      tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.float64)])
  iterator = iter(stage.dataset((x, y)))
  next(iterator)
  indices, utilities = bad_update(sampler)
  before = sampler.log_weights.numpy()
  try:
    update(tf.constant(indices, tf.int64), tf.constant(utilities, tf.float64))
  except tf.errors.InvalidArgumentError:
    print(case, "rejected", flush=True)
  assert (sampler.log_weights.numpy() == before).all()
  _, _, indices, _ = next(iterator)  # DeadlineExceeded if the permit is lost
  update(indices, tf.ones([4], tf.float64))
  next(iterator)
  print(case, "went on", flush=True)
"""


def test_any_update_the_op_rejects_still_lets_the_next_batch_be_drawn():
  # Rejections that only the reweight op itself sees, traced once for
  # tensors of any length: the permit must come back all the same.
  lines = run(ANY_REJECTED_UPDATE, CUDA_VISIBLE_DEVICES="").splitlines()
  for case in ("short utilities", "float32 overflow", "sum overflow"):
    assert f"{case} rejected" in lines
    assert f"{case} went on" in lines


ENDLESS_SOURCES = """
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8)
for source in [tf.data.Dataset.range(10).repeat().filter(lambda i: i < 5),
               tf.data.Dataset.range(100).filter(lambda i: i >= 0)]:
  assert source.cardinality() == tf.data.UNKNOWN_CARDINALITY
  try:
    stage.dataset(source)
  except ValueError as error:
    print(" ".join(str(error).split()))
"""


def test_a_source_longer_than_the_sampler_is_refused():
  # An endless source, then a finite one too long, both of unknown length.
  refusals = run(ENDLESS_SOURCES).splitlines()[-2:]
  assert len(refusals) == 2
  for refusal in refusals:
    assert "more than 37 elements" in refusal


TIMES_OUT = """
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8,
                              max_lag=0, wait_timeout=2)
iterator = iter(stage.dataset((x, y)))
next(iterator)  # never reported
try:
  next(iterator)
except tf.errors.DeadlineExceededError as error:
  print("failed:", error.message)
"""


def test_a_bounded_stage_without_updates_fails_in_time_naming_the_fix():
  output = run(TIMES_OUT)
  assert output.startswith("failed:")
  assert "no update reported for 2 s" in output
  assert "stage.update(indices, utilities)" in output
  assert "max_lag=None" in output


SUBNORMAL_TIMEOUT = """
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8,
                              max_lag=0, wait_timeout=1e-310)
iterator = iter(stage.dataset((x, y)))
next(iterator)  # never reported
try:
  next(iterator)
except tf.errors.DeadlineExceededError:
  print("timed out", flush=True)
"""


def test_a_subnormal_wait_timeout_times_out_and_is_not_read_as_no_limit():
  # TensorFlow's threads flush denormals: 1e-310 compares equal to 0 there.
  assert run(SUBNORMAL_TIMEOUT).splitlines()[-1:] == ["timed out"]


SAVES_THE_ITERATOR = """
import tempfile
stage = data.AdaptiveSampling(AdaptiveSampler(37, 1.0, 0.9, seed=0), 8,
                              max_lag=1, wait_timeout=2)
iterator = iter(stage.dataset((x, y)).prefetch(2))
next(iterator)  # the pipeline now waits for its update
try:
  tf.train.Checkpoint(iterator=iterator).save(tempfile.mkdtemp() + "/ckpt")
except tf.errors.FailedPreconditionError as error:
  print("refused:", error.message)
"""


def test_saving_a_bounded_stages_iterator_is_refused_after_the_wait():
  # The save waits for the draw that waits for an update (the guide's
  # "Checkpoints"), so it must end with that draw's wait_timeout.
  assert run(SAVES_THE_ITERATOR).startswith("refused:")


@pytest.mark.parametrize("wait_timeout", [0, -1, float("inf"), "60", True])
def test_bad_wait_timeouts_are_refused(wait_timeout):
  from tf_adasamp import AdaptiveSampler
  from tf_adasamp import data
  with pytest.raises((TypeError, ValueError), match="wait_timeout"):
    data.AdaptiveSampling(AdaptiveSampler(10, 0.1, 0.5),
                          4,
                          max_lag=1,
                          wait_timeout=wait_timeout)
