"""A run's files (tf_adasamp.experiment.training.run_files): its metric
records, their atomic writes, the settings a resumed run must share, and
one writer per run directory (issue 46)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest

from run_records import refused
from run_records import snapshot
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp import defaults
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files


def test_a_bad_metrics_line_before_the_last_is_a_run_error(tmp_path):
  (tmp_path /
   run_files.METRICS_FILE).write_text('{"step": 0}\nnot json\n{"step": 2}\n')
  with pytest.raises(run_files.RunError, match="line 2 is not a metric"):
    run_files.read_metrics(str(tmp_path))


def test_metrics_and_config_files_are_replaced_whole(tmp_path):
  path = tmp_path / "file.json"
  path.write_text("old")
  run_files.write_atomically(str(path), "new")
  assert path.read_text() == "new"
  assert os.listdir(tmp_path) == ["file.json"]
  umask = os.umask(0)
  os.umask(umask)
  assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_a_run_saved_before_a_setting_existed_resumes_with_its_default(
    tmp_path):
  config = config_lib.TrainConfig(output_dir=str(tmp_path), resume=True)
  settings = dataclasses.asdict(config)
  del settings["jit_compile"]  # a run from before the setting
  (tmp_path / run_files.METRICS_FILE).write_text('{"step": 0}\n')
  (tmp_path / run_files.CONFIG_FILE).write_text(json.dumps(settings))
  run_files.check_output_dir(config)
  with pytest.raises(run_files.RunExistsError,
                     match="jit_compile: False there, True here"):
    run_files.check_output_dir(dataclasses.replace(config, jit_compile=True))


def saved_run(directory, **settings):
  """A run of `settings` in `directory` (its config.json and a record);
  returns its config, resumed."""
  config = config_lib.TrainConfig(output_dir=str(directory),
                                  resume=True,
                                  **settings)
  (directory / run_files.METRICS_FILE).write_text('{"step": 0}\n')
  (directory / run_files.CONFIG_FILE).write_text(
      json.dumps(dataclasses.asdict(config)))
  return config


@pytest.mark.parametrize("schedule", ["warmup", "anneal", "final_uniform"])
@pytest.mark.parametrize("length", [{"steps": 200}, {"epochs": 2.0}])
def test_a_resume_may_not_change_the_length_a_schedule_depends_on(
    tmp_path, schedule, length):
  config = saved_run(tmp_path, amplitude_schedule=schedule, steps=100)
  run_files.check_output_dir(config)
  with pytest.raises(run_files.RunExistsError) as raised:
    run_files.check_output_dir(dataclasses.replace(config, **length))
  name, value = next(iter(length.items()))
  assert (f"with another length (steps 100 there, {name} {value} here): its "
          f"amplitude_schedule {schedule!r} follows the run's length"
          in str(raised.value))


def test_a_resume_may_change_the_length_of_a_run_without_a_schedule(tmp_path):
  config = saved_run(tmp_path, steps=100)
  run_files.check_output_dir(dataclasses.replace(config, steps=200))
  run_files.check_output_dir(dataclasses.replace(config, epochs=2.0))


ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

HOLD_LOCK = """
import sys
from tf_adasamp.experiment.training import run_files
with run_files.writer_lock(sys.argv[1]):
  print("held", flush=True)
  sys.stdin.read()
"""


@pytest.fixture
def held(run):
  """A process holding the writer lock of `run`'s directory."""
  holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, run.output_dir],
                            cwd=ROOT,
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            text=True)
  assert holder.stdout.readline() == "held\n"
  yield holder
  if holder.poll() is None:
    holder.kill()
  holder.wait()


def test_a_second_writer_of_a_run_directory_is_refused_and_changes_nothing(
    run, digits, held):
  message = refused(run, digits, f"{run.output_dir} is in use")
  assert run_files.LOCK_FILE in message
  # A new run there too, whatever it would have done.
  with pytest.raises(run_files.RunInUseError):
    with run_files.writer_lock(run.output_dir):
      pass


def resume_from_the_command_line(run):
  """The trainer's command line resuming `run` for 6 steps, its result."""
  return subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.train", "--model=logistic",
      "--steps=6", "--eval_interval=2", "--batch_size=16",
      "--learning_rate=0.1", "--noprogress", "--resume",
      f"--output_dir={run.output_dir}"
  ],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_the_cli_refuses_a_second_trainer_in_one_line(run, held, tmp_path):
  before = snapshot(run.output_dir)
  result = resume_from_the_command_line(run)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  assert (f"tf-adasamp-train: {run.output_dir} is in use: another trainer "
          "writes to it" in result.stderr)
  assert snapshot(run.output_dir) == before


def test_a_killed_writers_lock_file_is_not_a_held_lock(run, digits, held):
  held.send_signal(signal.SIGKILL)
  held.wait()
  # The killed writer could not remove its lock file; the kernel released
  # its lock.
  assert os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))
  records = loop.train(run, data=digits)
  assert [r["step"] for r in records] == [0, 2, 4, 6]
  assert not os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))


def test_the_writer_lock_is_released_however_the_run_ends(run, digits):
  with pytest.raises(run_files.RunExistsError):
    loop.train(dataclasses.replace(run, amplitude=2.0), data=digits)
  with pytest.raises(KeyboardInterrupt):
    loop.train(run, data=digits, stop_requested=lambda: True)
  with run_files.writer_lock(run.output_dir):
    pass
  assert not os.path.exists(os.path.join(run.output_dir, run_files.LOCK_FILE))


def test_a_lock_file_removed_by_its_releasing_holder_is_opened_again(
    tmp_path, monkeypatch):
  # A writer that opened the lock file while its holder held it, and locks
  # it after the holder removed it and let go, holds a file no other writer
  # opens: it opens the new one instead.
  path = str(tmp_path / run_files.LOCK_FILE)
  with run_files.writer_lock(str(tmp_path)):
    stale = os.open(path, os.O_RDWR)
  opened, real_open = [], os.open

  def first_the_stale_file(*args, **kwargs):
    opened.append(args)
    return os.dup(stale) if len(opened) == 1 else real_open(*args, **kwargs)

  monkeypatch.setattr(run_files.os, "open", first_the_stale_file)
  try:
    with run_files.writer_lock(str(tmp_path)):
      assert len(opened) == 2
      with pytest.raises(run_files.RunInUseError):
        with run_files.writer_lock(str(tmp_path)):
          pass
  finally:
    os.close(stale)


def test_a_lock_file_that_is_a_link_is_refused_not_followed(tmp_path):
  (tmp_path / run_files.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
  with pytest.raises(run_files.RunError,
                     match=f"^cannot lock {tmp_path}: cannot open "):
    with run_files.writer_lock(str(tmp_path)):
      pass
  assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("steps", [[4, 2, 0], [0, 2, 2, 4], [-2, 0]])
def test_metrics_whose_steps_do_not_increase_are_refused(tmp_path, steps):
  path = tmp_path / run_files.METRICS_FILE
  path.write_text("".join(f'{{"step": {step}}}\n' for step in steps))
  with pytest.raises(run_files.RunError,
                     match=f"^{path} line [0-9]+ records step -?[0-9]+ .*"
                     "increasing steps"):
    run_files.read_metrics(str(tmp_path))


@pytest.mark.parametrize("name", [
    "metrics.jsonl", "config.json", "data.json", "checkpoints/checkpoint",
    "checkpoints/ckpt-4.index", "checkpoints/ckpt-4.sha256"
])
def test_a_fifo_among_a_runs_files_is_refused_without_waiting(run, name):
  # Opening a FIFO to read waits for a writer: in a subprocess, to end.
  path = os.path.join(run.output_dir, name)
  os.remove(path)
  os.mkfifo(path)
  before = snapshot(run.output_dir)
  result = resume_from_the_command_line(run)
  assert result.returncode == 1
  assert f"{path} is not a regular file" in result.stderr.splitlines()[-1] or (
      f"cannot read {path}: not a regular file"
      in result.stderr.splitlines()[-1]), result.stderr
  assert snapshot(run.output_dir) == before


def test_a_run_whose_schedules_ignore_its_length_may_resume_longer(
    digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  longer = loop.train(tiny_config(output_dir=str(tmp_path),
                                  resume=True,
                                  steps=6),
                      data=digits)
  assert longer[-1]["step"] == 6
  stopped = tiny_config(output_dir=str(tmp_path / "scheduled"),
                        amplitude_schedule="warmup")
  loop.train(stopped, data=digits)
  with pytest.raises(run_files.RunExistsError,
                     match="amplitude_schedule 'warmup' follows"):
    loop.train(dataclasses.replace(stopped, resume=True, epochs=1.0),
               data=digits)


def test_new_run_refuses_a_directory_holding_a_run(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(run_files.RunExistsError, match="already holds a run"):
    loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)


def test_resume_refuses_a_run_of_other_settings(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(run_files.RunExistsError,
                     match=f"amplitude: {defaults.AMPLITUDE} there, 2.0 "
                     "here"):
    loop.train(tiny_config(output_dir=str(tmp_path), resume=True,
                           amplitude=2.0),
               data=digits)


def _whole_and_stopped_at_step_4(digits, tmp_path):
  """The records of a 6-step run, and the config of the same run stopped
  after step 4 (its files in tmp_path/stopped)."""
  settings = dict(model="logistic", steps=6, eval_interval=2)
  whole = loop.train(tiny_config(output_dir=str(tmp_path / "whole"),
                                 **settings),
                     data=digits)
  stopped = tiny_config(output_dir=str(tmp_path / "stopped"),
                        **dict(settings, steps=4))
  loop.train(stopped, data=digits)
  return whole, stopped


def test_a_kill_while_resuming_keeps_the_metrics(digits, tmp_path, monkeypatch,
                                                 on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)

  replace = os.replace

  def killed(source, destination):
    if destination.endswith(run_files.METRICS_FILE):
      raise KeyboardInterrupt
    replace(source, destination)

  # Killed at the resumed run's first write of metrics.jsonl.
  monkeypatch.setattr(loop.os, "replace", killed)
  resume = dataclasses.replace(stopped, resume=True, steps=6)
  with pytest.raises(KeyboardInterrupt):
    loop.train(resume, data=digits)
  monkeypatch.undo()
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:3])
  assert not [
      name for name in os.listdir(stopped.output_dir) if name.endswith(".tmp")
  ]
  assert without_clocks(loop.train(resume,
                                   data=digits)) == without_clocks(whole)


def _resume_to_the_whole_run(stopped, whole, digits):
  """Resumes the run stopped at step 4 to step 6: it returns, and leaves in
  metrics.jsonl, the records of the run never stopped."""
  resumed = loop.train(dataclasses.replace(stopped, resume=True, steps=6),
                       data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole)


def test_resume_drops_a_cut_last_metrics_line(digits, tmp_path, on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)
  path = tmp_path / "stopped" / run_files.METRICS_FILE
  with open(path, "a") as f:
    f.write('{"step": 6, "train_lo')  # as a kill mid-append leaves it
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:3])
  _resume_to_the_whole_run(stopped, whole, digits)


def test_resume_redoes_a_record_cut_at_the_checkpoints_step(
    digits, tmp_path, on_cpu):
  whole, stopped = _whole_and_stopped_at_step_4(digits, tmp_path)
  path = tmp_path / "stopped" / run_files.METRICS_FILE
  lines = path.read_text().splitlines(keepends=True)
  # The record of step 4, whose checkpoint was written, cut by a kill.
  path.write_text("".join(lines[:-1]) + lines[-1][:20])
  assert without_clocks(run_files.read_metrics(
      stopped.output_dir)) == without_clocks(whole[:2])
  _resume_to_the_whole_run(stopped, whole, digits)


@pytest.mark.parametrize("make_path,message", [
    (lambda tmp: tmp / "file", "is a file, not a directory"),
    (lambda tmp: tmp / "file" / "run", "Not a directory"),
    (lambda tmp: "/sys/tf_adasamp_run", "cannot write to output_dir"),
])
def test_unwritable_output_dir_is_a_run_error(digits, tmp_path, make_path,
                                              message):
  (tmp_path / "file").write_text("")
  with pytest.raises(run_files.RunError, match=message):
    loop.train(tiny_config(output_dir=str(make_path(tmp_path))), data=digits)
