"""The runner's worker processes (tf_adasamp.experiment.study.pool)."""

import dataclasses
import os

import pytest

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files
from tiny_settings import TINY


def test_the_runner_raises_a_workers_error(tmp_path):
  settings = dataclasses.replace(TINY, batch_size=2000)
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  with pytest.raises(run_files.RunError, match="batch_size 2000 is larger"):
    pool.run_all(runs[:2], datasets.load("digits"), workers=2)


def test_the_runner_replaces_its_workers_and_trains_every_run(
    tmp_path, monkeypatch, capsys):
  # One run a worker: two pools of two workers for three runs.
  monkeypatch.setattr(pool, "RUNS_PER_WORKER", 1)
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")[:3]
  pool.run_all(runs, datasets.load("digits"), workers=2)
  assert capsys.readouterr().out.count("final train loss") == 3
  assert all(
      run_files.is_complete(run.config.output_dir, run.config.steps)
      for run in runs)


def _digits_noting_the_process(run):
  """The digits, noting the process that trains `run` in its study's
  directory."""
  study = os.path.dirname(os.path.dirname(run.config.output_dir))
  with open(os.path.join(study, "processes"), "a") as f:
    f.write(f"{os.getpid()}\n")
  return datasets.load("digits")


def test_spawned_runs_train_one_at_a_time_in_replaced_workers(
    tmp_path, monkeypatch):
  monkeypatch.setattr(pool, "RUNS_PER_WORKER", 1)
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")[:2]
  pool.run_all(runs, _digits_noting_the_process, workers=1, spawn=True)
  processes = (tmp_path / "processes").read_text().split()
  assert len(set(processes)) == 2 and str(os.getpid()) not in processes
  assert all(
      run_files.is_complete(run.config.output_dir, run.config.steps)
      for run in runs)


def test_the_runner_refuses_bad_worker_counts(tmp_path):
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")
  with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
    pool.run_all(runs, None, workers=0)
