"""An interrupt ends the experiment runner in one line, exit status 130 and
no traceback, its workers with it; a kill of the runner ends them too.

SIGINT goes to the runner alone (as `kill -INT` sends it), which waits in
Python for its workers, so the KeyboardInterrupt always surfaces there. A
terminal's Ctrl-C reaches every process of the group, the workers inside
TensorFlow's calls, where an interrupt that lands while TensorFlow raises
one of its own errors can come out as a RuntimeError instead.
"""

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

import child_process

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 240  # seconds; generous for a loaded machine


@contextlib.contextmanager
def started(module, log, *args):
  """The command, running until the test ends; then it and every process it
  started are killed, whatever the test's outcome."""
  # Output goes to a file, which never fills.
  with open(log, "w") as output:
    process = subprocess.Popen(
        [sys.executable, "-m", f"tf_adasamp.experiment.{module}", *args],
        cwd=ROOT,
        stdout=output,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        start_new_session=True,  # a process group of its own, to kill
        preexec_fn=child_process.restore_sigint)
  try:
    yield process
  finally:
    try:
      os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass  # all ended
    process.wait()


def running_in_group(group):
  """The processes of process group `group` that have not ended (Linux)."""
  running = []
  for stat in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(stat, encoding="ascii") as f:
        # pid (command) state ppid group ...; the command may hold spaces.
        state, _, process_group = f.read().rsplit(")", 1)[1].split()[:3]
    except OSError:
      continue  # ended meanwhile
    if int(process_group) == group and state != "Z":
      running.append(stat)
  return running


def wait_until(process, log, written):
  deadline = time.monotonic() + TIMEOUT
  while not written():
    assert process.poll() is None, log.read_text()
    assert time.monotonic() < deadline, "no checkpoint in time"
    time.sleep(0.2)


def interrupt(process, log):
  process.send_signal(signal.SIGINT)
  process.wait(timeout=TIMEOUT)
  output = log.read_text()
  assert process.returncode == 130, output
  assert "Traceback" not in output, output
  return output


@pytest.fixture
def runner(tmp_path):
  """The runner and its log, started on runs that take hours, once each of
  its two workers has written a checkpoint."""
  output_dir, log = tmp_path / "runs", tmp_path / "log"
  with started("reproduce", log, "--dataset=digits", "--model=logistic",
               "--trials=1", "--steps=1000000", "--eval_interval=1000",
               "--workers=2", f"--output_dir={output_dir}") as process:
    wait_until(
        process, log,
        lambda: len(list(output_dir.rglob("checkpoints/checkpoint"))) >= 2)
    yield process, log


def test_an_interrupt_of_the_runner_alone_stops_its_workers(runner):
  process, log = runner
  stderr = interrupt(process, log)
  assert not running_in_group(process.pid), "a worker outlived the runner"
  assert ("tf-adasamp-reproduce: interrupted; the finished runs are kept, "
          "and the same command goes on with the others from their last "
          "checkpoints") in stderr


@pytest.mark.parametrize("kill", ["SIGTERM", "SIGKILL"])
def test_a_killed_runner_takes_its_workers_with_it(runner, kill):
  # Else they would train on, writing in the runs that the next command
  # resumes.
  process, _ = runner
  process.send_signal(getattr(signal, kill))
  process.wait(timeout=TIMEOUT)
  deadline = time.monotonic() + TIMEOUT
  while running_in_group(process.pid):
    assert time.monotonic() < deadline, "a worker outlived the runner"
    time.sleep(0.2)
