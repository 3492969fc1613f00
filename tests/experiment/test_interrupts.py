"""An interrupt ends the experiment runner in one line, exit status 130 and
no traceback, its workers with it; a kill of the runner ends them too.

SIGINT goes to the runner alone (as `kill -INT` sends it), which waits in
Python for its workers, so the KeyboardInterrupt always surfaces there. A
terminal's Ctrl-C reaches every process of the group, the workers inside
TensorFlow's calls, where an interrupt that lands while TensorFlow raises
one of its own errors can come out as a RuntimeError instead.
"""

import signal
import time

import pytest

import child_process

TIMEOUT = 240  # seconds; generous for a loaded machine


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


def assert_group_ends(group):
  """Asserts that the ended runner's process group empties: its workers
  (which train for hours) and multiprocessing's resource tracker (which
  ends soon after the runner) end too."""
  deadline = time.monotonic() + TIMEOUT
  while child_process.running_in_group(group):
    assert time.monotonic() < deadline, "a worker outlived the runner"
    time.sleep(0.2)


@pytest.fixture
def runner(tmp_path):
  """The runner and its log, started on runs that take hours, once each of
  its two workers has written a checkpoint."""
  output_dir, log = tmp_path / "runs", tmp_path / "log"
  with child_process.started("tf_adasamp.experiment.reproduce", log,
                             "--dataset=digits", "--model=logistic",
                             "--trials=1", "--steps=1000000",
                             "--eval_interval=1000", "--workers=2",
                             f"--output_dir={output_dir}") as process:
    wait_until(
        process, log,
        lambda: len(list(output_dir.rglob("checkpoints/checkpoint"))) >= 2)
    yield process, log


def test_an_interrupt_of_the_runner_alone_stops_its_workers(runner):
  process, log = runner
  stderr = interrupt(process, log)
  assert_group_ends(process.pid)
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
  assert_group_ends(process.pid)
