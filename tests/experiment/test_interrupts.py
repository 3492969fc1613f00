"""An interrupt ends the trainer, the demo, and the experiment runner and
the tuning with their workers, in one line, exit status 130 and no
traceback; a kill of the runner ends its workers too.

SIGINT goes to the runner alone (as `kill -INT` sends it), which waits in
Python for its workers, so the KeyboardInterrupt always surfaces there. A
terminal's Ctrl-C reaches every process of the group, the workers inside
TensorFlow's calls, where an interrupt that lands while TensorFlow raises
one of its own errors can come out as a RuntimeError instead.
"""

import functools
import os
import random
import re
import signal
import time

import pytest

import child_process
from run_records import without_clocks
from tf_adasamp.experiment.training import run_files

TIMEOUT = 240  # seconds; generous for a loaded machine


def wait_until(process, log, condition, what):
  """Waits for `condition()` while `process` runs."""

  def ready():
    assert process.poll() is None, log.read_text()
    return condition()

  child_process.wait_for(ready, what, TIMEOUT)


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
  child_process.wait_for(lambda: not child_process.running_in_group(group),
                         "end of every worker of the runner", TIMEOUT)


# The command lines that run their runs in worker processes, and the flags
# of their own (beside the runs' length) that keep them small.
RUNNERS = {
    "reproduce": ["--trials=1"],
    "tuning": ["--validation_size=300"],
}


@pytest.fixture
def program():
  """The command line `runner` starts; a test's parameter overrides it."""
  return "reproduce"


@pytest.fixture
def runner(program, tmp_path):
  """The runner and its log, started on runs that take hours, once each of
  its two workers has written a checkpoint."""
  output_dir, log = tmp_path / "runs", tmp_path / "log"
  with child_process.started(f"tf_adasamp.experiment.{program}", log,
                             "--dataset=digits", "--model=logistic",
                             *RUNNERS[program], "--steps=1000000",
                             "--eval_interval=1000", "--workers=2",
                             f"--output_dir={output_dir}") as process:
    wait_until(
        process, log,
        lambda: len(list(output_dir.rglob("checkpoints/checkpoint"))) >= 2,
        "checkpoint of each worker")
    yield process, log


@pytest.mark.parametrize("program", RUNNERS)
def test_an_interrupt_of_the_runner_alone_stops_its_workers(runner, program):
  process, log = runner
  stderr = interrupt(process, log)
  assert_group_ends(process.pid)
  assert (f"tf-adasamp-{program}: interrupted; the finished runs are kept, "
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


def mapped(pid, library):
  """Whether process `pid` has loaded shared library `library` (Linux)."""
  with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as f:
    return library in f.read()


def started_trainer(tmp_path, *args):
  return child_process.started("tf_adasamp.experiment.train", tmp_path / "log",
                               "--dataset=digits", "--model=logistic",
                               "--noprogress", "--steps=1000000",
                               f"--output_dir={tmp_path / 'run'}", *args)


@pytest.mark.parametrize("program", ["train", "demo"])
def test_an_interrupt_while_tensorflow_loads(tmp_path, program):
  with (started_trainer(tmp_path) if program == "train" else
        child_process.started("tf_adasamp.experiment.demo", tmp_path /
                              "log")) as process:
    # The flags are checked: TensorFlow's import takes seconds from here.
    wait_until(process, tmp_path / "log",
               lambda: mapped(process.pid, "libtensorflow_framework"),
               "TensorFlow loading")
    stderr = interrupt(process, tmp_path / "log")
  # The trainer also says whether it had begun training.
  assert {
      "train": "tf-adasamp-train: interrupted; ",
      "demo": "tf-adasamp-demo: interrupted\n"
  }[program] in stderr


def test_an_interrupt_of_the_training_trainer_names_its_checkpoint(tmp_path):
  with started_trainer(tmp_path, "--eval_interval=100") as process:
    wait_until(process, tmp_path / "log",
               (tmp_path / "run" / "checkpoints" / "checkpoint").exists,
               "checkpoint")
    stderr = interrupt(process, tmp_path / "log")
  assert re.search(
      r"tf-adasamp-train: interrupted; the last checkpoint is of step \d+: "
      "the same command with --resume goes on from it", stderr), stderr


def run_to_the_end(module, log, *args):
  with child_process.started(module, log, *args) as process:
    process.wait(timeout=TIMEOUT)
  assert process.returncode == 0, log.read_text()


def kill_three_times(module,
                     log,
                     args,
                     has_written,
                     max_delay,
                     resume_args,
                     moment=None,
                     observe=None):
  """Starts `python -m module *args` three times (the second and third with
  `resume_args` added), each SIGKILLed a random time (seeded) of at most
  `max_delay` seconds after `has_written(its start time)` holds; given
  `moment`, at the first moment after that time when `moment()` holds
  (polled without pause: what it looks for may last milliseconds). Returns
  each start's exit status and what `observe()` returned after its kill."""
  rng = random.Random(0)
  outcomes = []
  for kill in range(3):
    with child_process.started(module, log, *args,
                               *(resume_args if kill else [])) as process:
      start = time.time()
      wait_until(process, log, functools.partial(has_written, start),
                 "a first write")
      time.sleep(rng.uniform(0, max_delay))
      deadline = time.monotonic() + TIMEOUT
      while (moment and not moment() and process.poll() is None and
             time.monotonic() < deadline):
        pass
      process.send_signal(signal.SIGKILL)
      process.wait(timeout=TIMEOUT)
      outcomes.append((process.returncode, observe and observe()))
  return outcomes


def test_a_trainer_killed_at_random_points_resumes_bit_for_bit(tmp_path):
  module = "tf_adasamp.experiment.train"
  run_args = [
      "--dataset=digits", "--model=logistic", "--noprogress", "--steps=150",
      "--eval_interval=5", "--steps_per_execution=1", "--batch_size=16"
  ]
  run_to_the_end(module, tmp_path / "whole.log", *run_args,
                 f"--output_dir={tmp_path / 'whole'}")
  killed = [*run_args, f"--output_dir={tmp_path / 'killed'}"]
  # SIGKILL at a random moment after a checkpoint was written: between
  # evaluations, or while one writes its checkpoint, record or summaries.
  checkpoints = tmp_path / "killed" / "checkpoints" / "checkpoint"
  kill_three_times(module, tmp_path / "killed.log", killed,
                   lambda _: checkpoints.exists(), 1.5, ["--resume"])
  run_to_the_end(module, tmp_path / "killed.log", *killed, "--resume")
  assert without_clocks(run_files.read_metrics(
      tmp_path / "killed")) == without_clocks(
          run_files.read_metrics(tmp_path / "whole"))
  assert not list((tmp_path / "killed").glob(".*.tmp"))


def files_under(directory, name_matches):
  """The files under `directory` whose name matches, as the walk finds
  them: a directory the runner removes mid-walk (TensorFlow's checkpoint
  `_temp` folders) is passed over, not an error."""
  return [
      os.path.join(folder, name)
      for folder, _, names in os.walk(directory)
      for name in names
      if name_matches(name)
  ]


def metrics_written_since(directory):
  """Whether a run's metrics.jsonl under `directory` changed since a time."""

  def written_since(start):
    return any(
        os.stat(path).st_mtime > start
        for path in files_under(directory, run_files.METRICS_FILE.__eq__))

  return written_since


def temporary_files(directory):
  """The temporary files under `directory`, listed when called."""
  return lambda: files_under(directory, lambda name: name.endswith(".tmp"))


@pytest.mark.slow
def test_a_runner_killed_mid_write_leaves_no_temporary_and_ends_exactly(
    tmp_path):
  module = "tf_adasamp.experiment.reproduce"
  # Both studies run in the same directory: a run's settings name it.
  study = tmp_path / "study"
  args = [
      "--dataset=digits", "--model=logistic", "--trials=1", "--steps=40",
      "--eval_interval=2", "--batch_size=16", "--sweep_amplitudes=1",
      "--workers=1", f"--output_dir={study}"
  ]
  run_to_the_end(module, tmp_path / "whole.log", *args)
  study.rename(tmp_path / "whole")
  # Each kill lands while the runner writes a run's record or settings (its
  # temporary file exists): the moments a kill can leave that file behind.
  outcomes = kill_three_times(module,
                              tmp_path / "killed.log",
                              args,
                              metrics_written_since(study),
                              2.0, [],
                              moment=temporary_files(study),
                              observe=temporary_files(study))
  assert [status for status, _ in outcomes] == [-signal.SIGKILL] * 3
  assert any(stranded for _, stranded in outcomes), "no kill left a .tmp"
  run_to_the_end(module, tmp_path / "killed.log", *args)
  assert not temporary_files(study)()
  whole = sorted(
      path.relative_to(tmp_path / "whole")
      for path in (tmp_path / "whole").rglob(run_files.METRICS_FILE))
  assert whole == sorted(
      path.relative_to(study) for path in study.rglob(run_files.METRICS_FILE))
  for path in whole:
    assert without_clocks(run_files.read_metrics(
        (study / path).parent)) == without_clocks(
            run_files.read_metrics((tmp_path / "whole" / path).parent)), path
  summary = "report/summary.md"
  assert (study / summary).read_bytes() == (tmp_path / "whole" /
                                            summary).read_bytes()
