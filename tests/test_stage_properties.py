"""A property test of the bounded tf.data stage (hypothesis): over random
sequences of draws, updates (valid and rejected, eager and traced),
iterator re-creations and Ctrl-C, the next draw never waits for a permit
that a completed or rejected update should have released.

The sequences run in a subprocess with a timeout, and every draw the model
says is allowed must come before the stage's wait_timeout: a lost permit
fails the test (DeadlineExceededError) instead of hanging the suite.
"""

import subprocess
import sys

import child_process

TIMEOUT = 900  # seconds for all the sequences; never reached if sound

SEQUENCES = """
import os, signal, threading, time
from hypothesis import given, settings, strategies as st
import numpy as np, tensorflow as tf
from tf_adasamp import AdaptiveSampler, data

N, B = 23, 4
SOURCE = np.arange(N, dtype=np.float32)[:, None]
# A draw the model allows comes at once; this only bounds a lost permit.
WAIT_TIMEOUT = 30.0
BAD_UPDATES = {
    "nan": lambda i: (i, [float("nan"), 1.0, 1.0, 1.0]),
    "index": lambda i: (i + N, [1.0] * B),
    "length": lambda i: (i, [1.0] * (B - 1)),
    "overflow": lambda i: (i, [1e308] * B),  # amplitude 2: 2e308
}
ACTIONS = st.one_of(
    st.just(("draw",)),
    st.tuples(st.just("update"), st.sampled_from(["eager", "traced"]),
              st.sampled_from(["valid", *BAD_UPDATES])),
    st.just(("refused_as_traced",)),
    st.just(("new_iterator",)),
    st.just(("interrupt",)),
    st.just(("interrupt_a_waiting_draw",)),
)


class Model:
  \"\"\"What the stage promises: each iterator starts with max_lag + 1
  permits; each update, accepted or rejected, and each Ctrl-C adds one.\"\"\"

  def __init__(self, max_lag):
    self.max_lag = max_lag
    self.new_iterator()

  def new_iterator(self):
    self.allowed, self.drawn = self.max_lag + 1, 0

  @property
  def waits(self):
    return self.drawn == self.allowed


class Run:
  def __init__(self, max_lag):
    self.sampler = AdaptiveSampler(N, 2.0, 0.5, seed=0)
    self.stage = data.AdaptiveSampling(self.sampler, B, max_lag=max_lag,
                                       wait_timeout=WAIT_TIMEOUT)
    self.dataset = self.stage.dataset(SOURCE)
    self.traced = tf.function(self.stage.update, input_signature=[
        tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.float64)])
    self.model = Model(max_lag)
    self.iterator = iter(self.dataset)
    self.indices = tf.range(B, dtype=tf.int64)

  def draw(self):
    _, self.indices, _ = next(self.iterator)
    self.model.drawn += 1

  def update(self, mode, kind):
    update = self.stage.update if mode == "eager" else self.traced
    indices, utilities = ((self.indices, [0.5] * B) if kind == "valid" else
                          BAD_UPDATES[kind](self.indices))
    self.model.allowed += 1
    try:
      update(tf.constant(indices, tf.int64),
             tf.constant(utilities, tf.float64))
    except tf.errors.InvalidArgumentError:
      assert kind != "valid"
    else:
      assert kind == "valid"

  def refused_as_traced(self):
    # Static shapes that differ: refused while the step is traced.
    self.model.allowed += 1
    try:
      tf.function(self.stage.update)(self.indices, tf.ones([B - 1], tf.float64))
    except ValueError:
      return
    raise AssertionError("not refused")

  def new_iterator(self):
    del self.iterator  # one iterator at a time, as documented
    self.iterator = iter(self.dataset)
    self.model.new_iterator()

  def interrupt(self):
    self.model.allowed += 1
    try:
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(5)
    except KeyboardInterrupt:
      return
    raise AssertionError("not interrupted")

  def interrupt_a_waiting_draw(self):
    if not self.model.waits:
      return
    # The permit Ctrl-C adds ends the wait; the batch it draws is lost with
    # the call that raises.
    self.model.allowed += 1
    self.model.drawn += 1
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
      next(self.iterator)
      time.sleep(5)
    except KeyboardInterrupt:
      return
    raise AssertionError("not interrupted")


@settings(max_examples=int(os.environ["EXAMPLES"]), deadline=None,
          database=None, derandomize=True)
@given(st.integers(0, 2), st.lists(ACTIONS, max_size=12))
def test(max_lag, actions):
  run = Run(max_lag)
  for action, *arguments in actions:
    if action == "draw" and run.model.waits:
      continue  # would wait for an update: the lag bound, not a lost permit
    getattr(run, action)(*arguments)
  # Every draw the permits allow comes now, however the sequence went.
  while not run.model.waits:
    run.draw()
  del run.iterator

test()
print("held", flush=True)
"""


def test_the_next_draw_never_waits_for_a_permit_an_update_released():
  result = subprocess.run([sys.executable, "-c", SEQUENCES],
                          capture_output=True,
                          text=True,
                          timeout=TIMEOUT,
                          check=False,
                          env=child_process.environment(CUDA_VISIBLE_DEVICES="",
                                                        EXAMPLES="60"),
                          preexec_fn=child_process.restore_sigint)
  assert result.returncode == 0, result.stderr[-5000:]
  assert result.stdout.split()[-1:] == ["held"]
