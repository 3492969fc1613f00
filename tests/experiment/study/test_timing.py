"""Timing runs and their report (tf_adasamp.experiment.study.timing)."""

import pytest

from heldout_curves import SETTINGS as HELDOUT_SETTINGS
from heldout_curves import study
from target_curves import SETTINGS
from target_curves import study as _study
from tf_adasamp.experiment.study import timing


def test_wall_time_gives_the_seconds_of_each_timed_run():
  # Amplitude 1 takes half the steps, each 4/3 as dear (a second forward);
  # Shuffle-SGD takes 0.8 of Unif's.
  curves, sweep = _study({"Shuffle-SGD": 1.25, 1.0: 2.0})
  timed = [("AdaSamp-01-SGD, amplitude 1", sweep["curves"][2],
            "AdaSamp-01-SGD"),
           ("Shuffle-SGD", curves["Shuffle-SGD"], "Shuffle-SGD")]
  baselines = {name: curves[name] for name in ("Unif-SGD", "Shuffle-SGD")}
  wall = timing.markdown_of(baselines, timed, SETTINGS, "synthetic", "cmd",
                            "a CPU")
  to_loss = wall.split("## To Unif's final train loss")[1]
  row = next(line for line in to_loss.splitlines()
             if line.startswith("| AdaSamp-01-SGD, amplitude 1 |"))
  versus_unif, versus_shuffle = (
      float(cell.split()[0]) for cell in row.split("|")[2:4])
  assert versus_unif == pytest.approx(2 / 3, rel=0.05)
  assert versus_shuffle == pytest.approx(2 / 3 * 1.25, rel=0.05)
  # A step with a second forward pass costs 4/3 of Unif's.
  assert "| 1.33x |" in wall.split("## Training milliseconds")[1].split(
      "## To")[0]


def test_wall_time_times_the_runs_one_trial_at_a_time(tmp_path):
  runs = timing.plan(SETTINGS, (0.1, 1.0), 2, str(tmp_path), "digits",
                     "logistic")
  # Trial by trial, so that uniform and adaptive runs alternate.
  assert [run.trial for run in runs] == [0] * 7 + [1] * 7
  assert {
      (run.algorithm, run.amplitude, run.config.utility_at) for run in runs[:7]
  } == {("Unif-SGD", 0.0, SETTINGS.utility_at),
        ("Shuffle-SGD", 0.0, SETTINGS.utility_at), ("IS-SGD", 0.0, "step"),
        ("AdaSamp-01-SGD", 0.1, "updated"), ("AdaSamp-01-SGD", 0.1, "step"),
        ("AdaSamp-01-SGD", 1.0, "updated"), ("AdaSamp-01-SGD", 1.0, "step")}


def test_wall_time_opens_with_the_chosen_settings_held_out_answer():
  curves, sweep = study(2.0)
  timed = [("AdaSamp-01-SGD, amplitude 1", sweep["curves"][1],
            "AdaSamp-01-SGD"),
           ("Shuffle-SGD", curves["Shuffle-SGD"], "Shuffle-SGD")]
  baselines = {name: curves[name] for name in ("Unif-SGD", "Shuffle-SGD")}
  wall = timing.markdown_of(baselines, timed, HELDOUT_SETTINGS, "synthetic",
                            "cmd", "a CPU")
  answer = next(line for line in wall.splitlines() if "Held-out answer" in line)
  assert "of Shuffle-SGD's training seconds" in answer
  assert "**met**" in answer
