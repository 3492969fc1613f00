"""A run's files: its metric records, their atomic writes, and the
settings a resumed run must share."""

import dataclasses
import json
import os

import pytest

from tf_adasamp.experiment.training import config as config_lib
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
