"""The experiment: plan, runner, figures and summary, and its command line."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import plots
from tf_adasamp.experiment.study import pool
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.study import report
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import run_files

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = presets.Settings(steps=4,
                        eval_interval=2,
                        sgd_learning_rate=0.1,
                        sgd_lr_decay=0.01,
                        adagrad_learning_rate=0.1,
                        amplitude=1.0,
                        decay=0.5,
                        sweep_amplitudes=(0.5, 1.0),
                        batch_size=16)


def test_plan_runs_each_algorithm_per_trial_with_the_trial_seed(tmp_path):
  runs = design.plan(TINY,
                     trials=2,
                     output_dir=str(tmp_path),
                     dataset="digits",
                     model="logistic")
  # Six algorithms, the reshuffling baseline, importance sampling and the
  # sweep's one new amplitude (1.0 is shared, and amplitude 0 is Unif-SGD),
  # per trial.
  assert len(runs) == 2 * (8 + 1)
  assert len({run.config.output_dir for run in runs}) == len(runs)
  for run in runs:
    assert run.config.seed == run.trial
    sampling, utility, optimizer = presets.RUNS[run.algorithm]
    assert (run.config.sampling, run.config.optimizer) == (sampling, optimizer)
    if sampling == "adaptive":
      assert run.config.utility == utility
  assert {run.amplitude for run in runs if run.algorithm == "AdaSamp-01-SGD"
         } == {0.5, 1.0}


def test_plan_runs_importance_sampling_with_its_own_sampler(tmp_path):
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")
  config = next(run.config for run in runs if run.algorithm == "IS-SGD")
  # Loss-proportional draws from the step's own losses, a third uniform,
  # unbiased weights; whatever the adaptive algorithms' amplitude.
  assert (config.sampling, config.utility,
          config.utility_at) == ("adaptive", "log_cross_entropy", "step")
  assert (config.amplitude, config.epsilon, config.beta) == (1.0, 1 / 3, 1.0)
  assert config.output_dir.endswith("IS-SGD/seed0")


def test_plan_runs_algorithm_1_whatever_the_trainers_defaults(tmp_path):
  # The library's defaults weigh losses (beta 1) and take the step's own
  # utility; the paper's algorithms set theirs.
  runs = design.plan(TINY, 1, str(tmp_path), "digits", model="logistic")
  for run in runs:
    if run.algorithm in presets.ALGORITHMS:
      assert run.config.beta == 0.0, run.algorithm
      assert run.config.utility_at == TINY.utility_at == "updated"


def test_plan_sweeps_both_utility_options_where_asked(tmp_path):
  settings = dataclasses.replace(TINY, sweep_both_utilities=True)
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  step = [
      run for run in runs
      if run.config.utility_at == "step" and run.algorithm in presets.ADAPTIVE
  ]
  assert sorted(run.amplitude for run in step) == [0.5, 1.0]
  assert all(run.algorithm == "AdaSamp-01-SGD" and
             run.config.output_dir.endswith(f"a{run.amplitude:g}-step/seed0")
             for run in step)
  assert len(runs) == len(design.plan(TINY, 1, str(tmp_path), "digits")) + 2


def test_plan_gives_adaptive_algorithms_their_own_step_sizes(tmp_path):
  settings = dataclasses.replace(TINY,
                                 adaptive_learning_rates=(0.2, 0.3, 0.4, 0.5))
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  rates = {run.algorithm: run.config.learning_rate for run in runs}
  assert rates == {
      "AdaSamp-01-SGD": 0.2,
      "AdaSamp-L1-SGD": 0.3,
      "Unif-SGD": 0.1,
      "AdaSamp-01-AdaGrad": 0.4,
      "AdaSamp-L1-AdaGrad": 0.5,
      "Unif-AdaGrad": 0.1,
      "Shuffle-SGD": 0.1,
      "IS-SGD": 0.1
  }
  with pytest.raises(ValueError, match="needs 4 values"):
    design.plan(dataclasses.replace(TINY, adaptive_learning_rates=(0.2,)), 1,
                str(tmp_path), "digits")


def test_the_replication_runs_the_headline_comparison(tmp_path):
  settings = dataclasses.replace(TINY, amplitude=1.0, utility_at="step")
  runs = design.replication_plan(settings,
                                 2,
                                 str(tmp_path),
                                 "digits",
                                 model="logistic")
  assert {(run.algorithm, run.amplitude, run.config.utility_at) for run in runs
         } == {
             ("AdaSamp-01-SGD", 1.0, "step"),
             ("Unif-SGD", 0.0, "step"),
             ("Shuffle-SGD", 0.0, "step"),
             ("IS-SGD", 0.0, "step"),
         }
  assert sorted(run.trial for run in runs) == [0] * 4 + [1] * 4
  curves = design.curves_by_algorithm([])
  assert curves == {}
  assert presets.preset("fashion_mnist_5k_b",
                        "mlp") == presets.preset("fashion_mnist_5k", "mlp")


def test_plan_refuses_a_uniform_sweep_algorithm(tmp_path):
  settings = dataclasses.replace(TINY, sweep_algorithm="Unif-SGD")
  with pytest.raises(ValueError, match="adaptive algorithm"):
    design.plan(settings, 1, str(tmp_path), "digits")


# TINY at a step size where no swept amplitude collapses in its 4 steps, so
# that the report draws the heaviest examples too.
TINY_STUDY = dataclasses.replace(TINY, sgd_learning_rate=1.0)


def _tiny_study(directory, data, stale_file=None):
  runs = design.plan(TINY_STUDY,
                     trials=1,
                     output_dir=str(directory / "runs"),
                     dataset="digits",
                     model="logistic")
  if stale_file:  # what a SIGKILL during write_atomically leaves
    os.makedirs(runs[0].config.output_dir)
    open(os.path.join(runs[0].config.output_dir, stale_file), "w").close()
  pool.run_all(runs, data)
  departures = presets.departures("digits", "logistic", TINY_STUDY, 1, 1500)
  report.report(runs, TINY_STUDY, 1, "tiny", str(directory / "report"), "cmd",
                departures)
  return runs


def test_a_tiny_study_twice_gives_byte_identical_summaries(tmp_path, capsys):
  data = datasets.load("digits")
  stale = ".metrics.jsonl.x1y2.tmp"
  runs = _tiny_study(tmp_path / "first", data, stale_file=stale)
  _tiny_study(tmp_path / "second", data)
  first = (tmp_path / "first" / "report" / "summary.md").read_bytes()
  assert first == (tmp_path / "second" / "report" / "summary.md").read_bytes()
  assert not os.path.exists(os.path.join(runs[0].config.output_dir, stale))
  summary = first.decode()
  for name in [
      "train_loss", "train_accuracy", "amplitude", "kl", "figure1", "heaviest"
  ]:
    assert (tmp_path / "first" / "report" / f"{name}.png").stat().st_size
  # The figure of the heaviest examples, named where the summary ends.
  assert summary.endswith("\n")
  assert summary.splitlines()[-3:-1] == ["## What the sampler looks at", ""]
  assert summary.splitlines()[-1].startswith("[heaviest.png](heaviest.png)")
  for algorithm in presets.ALGORITHMS:
    assert f"| {algorithm} |" in summary
  # The departures and the rules come first; one trial gives no verdict.
  assert (summary.index("## Departures") < summary.index("## Verdict rules") <
          summary.index("## The paper's claims"))
  assert "1 trials (a verdict needs 3)" in summary
  assert "Theorem 4's estimate from this single run" in summary
  capsys.readouterr()
  pool.run_all(runs, data)
  assert capsys.readouterr().out.count("skipped") == len(runs)
  # Every algorithm of a trial starts from the same model.
  curves, _ = design.collect(runs, TINY_STUDY)
  first_losses = [curve["train_loss"][:, 0] for curve in curves.values()]
  np.testing.assert_array_equal(np.ptp(first_losses, axis=0), 0)


def _heaviest_study(directory, records_of):
  """A planned study whose sweep runs of trial 0 hold the records
  `records_of(amplitude)`, and its sweep: amplitude 1 collapses (its KL
  leaves an effective support of exp(-5) n)."""
  runs = design.plan(TINY, 2, str(directory), "digits", model="logistic")
  for run in runs:
    if run.algorithm == TINY.sweep_algorithm and run.trial == 0:
      os.makedirs(run.config.output_dir)
      with open(os.path.join(run.config.output_dir, "metrics.jsonl"), "w") as f:
        f.writelines(
            json.dumps(record) + "\n" for record in records_of(run.amplitude))
  sweep = {
      "algorithm":
          TINY.sweep_algorithm,
      "amplitude": [0.0, 0.5, 1.0],
      "curves": [{
          "kl": np.full((2, 3), kl),
          "train_accuracy": np.full((2, 3), 0.9),
          "ess_fraction": np.full((2, 3), 0.5)
      } for kl in (0.0, 0.1, 5.0)]
  }
  return runs, sweep


def _records_with_heaviest(amplitude):
  weights = [[float(16 - rank) * amplitude for rank in range(16)],
             [2.0] * 16]  # a tie
  return [{
      "step": 0,
      "kl": 0.0,
      "heaviest": [[i, 1.0] for i in range(16)]
  }, {
      "step": 2,
      "kl": 0.3,
      "heaviest": [[100 + 3 * i, w] for i, w in enumerate(weights[0])]
  }, {
      "step": 4,
      "kl": 0.1,
      "heaviest": [[i * 7, w] for i, w in enumerate(weights[1])]
  }]


def test_heaviest_figure_shows_the_heaviest_images_at_the_kl_peak_and_end(
    tmp_path, monkeypatch):
  digits = datasets.load("digits")
  runs, sweep = _heaviest_study(tmp_path, _records_with_heaviest)
  drawn = []
  monkeypatch.setattr(plots, "heaviest_grid",
                      lambda rows, path, title: drawn.append(rows))
  lines = report.heaviest_figure(runs, TINY, sweep, str(tmp_path))
  # Amplitude 1 collapsed: only 0.5's rows, at the KL's peak then the end.
  [rows] = drawn
  assert [heading for heading, _, _ in rows] == [
      "amplitude 0.5, at the KL's peak (step 2, KL 0.3 nats)",
      "amplitude 0.5, at the end (step 4, KL 0.1 nats)"
  ]
  for (_, images, captions), indices, weights in zip(
      rows, ([100 + 3 * i for i in range(16)], [7 * i for i in range(16)]),
      ([8 - rank / 2 for rank in range(16)], [2.0] * 16)):
    np.testing.assert_array_equal(images, digits.x_train[indices])
    assert captions == [
        f"{label}\n{weight:.3g}×"
        for label, weight in zip(digits.y_train[indices], weights)
    ]
  assert lines[0] == "## What the sampler looks at"
  [text] = lines[2:]
  assert text.startswith("[heaviest.png](heaviest.png) shows the 16 training "
                         "images AdaSamp-01-SGD draws most in trial 0")
  assert "at amplitudes 0.5 (the swept ones that do not collapse)" in text
  assert "the largest n·q is 8 (amplitude 0.5, at the KL's peak)" in text
  assert text.endswith("At amplitude 0.5 a row's 16 weights tie, so it shows "
                       "16 of a larger set weighted alike.")
  monkeypatch.undo()
  report.heaviest_figure(runs, TINY, sweep, str(tmp_path))
  assert (tmp_path / "heaviest.png").stat().st_size


def test_heaviest_figure_is_left_out_for_runs_without_heaviest_examples(
    tmp_path):
  # Runs from before the trainer recorded their heaviest examples.
  def records_of(amplitude):
    return [{
        key: value for key, value in record.items() if key != "heaviest"
    } for record in _records_with_heaviest(amplitude)]

  runs, sweep = _heaviest_study(tmp_path, records_of)
  assert report.heaviest_figure(runs, TINY, sweep, str(tmp_path)) == []
  assert not (tmp_path / "heaviest.png").exists()


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


def test_mean_over_is_the_trapezoid_time_average():
  epochs = np.array([0, 1, 2, 4])
  np.testing.assert_allclose(design.mean_over(epochs, [3, 3, 3, 3]), 3)
  np.testing.assert_allclose(design.mean_over(epochs, epochs), 2)
  np.testing.assert_allclose(design.mean_over(epochs, epochs, until=2), 1)
  np.testing.assert_allclose(design.mean_over(epochs, epochs, since=2), 3)
  with pytest.raises(ValueError, match="fewer than 2 evaluations"):
    design.mean_over(epochs, epochs, until=0.5)


def _reproduce(tmp_path, *args):
  return subprocess.run([
      sys.executable, "-m", "tf_adasamp.experiment.reproduce",
      f"--output_dir={tmp_path}/runs", *args
  ],
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


@pytest.mark.parametrize("args, message", [
    (["--workers=0"], "workers must be >= 1, got 0"),
    (["--workers=-3"], "workers must be >= 1, got -3"),
    (["--dataset=digits", "--batch_size=2000"
     ], "--batch_size=2000 is larger than the 1500 training examples"),
])
def test_reproduce_refuses_in_one_line_before_any_run(tmp_path, args, message):
  result = _reproduce(tmp_path, *args)
  assert result.returncode == 1, result.stderr
  assert "Traceback" not in result.stderr
  assert "run again" not in result.stderr
  assert [line for line in result.stderr.splitlines() if message in line]
  # No run started (the report directory is checked up front).
  runs = tmp_path / "runs"
  assert not runs.exists() or set(os.listdir(runs)) <= {"report"}


def test_the_summary_names_the_command_that_reproduces_it(tmp_path):
  tiny = [
      "--dataset=digits", "--model=logistic", "--trials=1", "--steps=4",
      "--eval_interval=2"
  ]
  first = _reproduce(tmp_path, *tiny, "--workers=2")
  assert first.returncode == 0, first.stderr
  # Where the report goes and how the runs are paced change no number, so
  # the summary written again elsewhere is the same, byte for byte.
  again = _reproduce(tmp_path, *tiny, "--workers=1",
                     f"--report_dir={tmp_path}/elsewhere")
  assert again.returncode == 0, again.stderr
  summary = (tmp_path / "runs" / "report" / "summary.md").read_text()
  assert summary == (tmp_path / "elsewhere" / "summary.md").read_text()
  assert ("Produced by `python -m tf_adasamp.experiment.reproduce "
          "--dataset=digits --model=logistic --trials=1 --steps=4 "
          "--eval_interval=2`.") in summary


def test_plan_gives_baselines_their_own_step_sizes(tmp_path):
  names = presets.ALTERNATIVES
  gammas = tuple(0.001 * (presets.RUNS[name][2] == "sgd") for name in names)
  settings = dataclasses.replace(TINY,
                                 baseline_learning_rates=tuple(
                                     0.2 + 0.1 * i for i in range(len(names))),
                                 baseline_lr_decays=gammas)
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  rates = {
      run.algorithm: (run.config.learning_rate, run.config.lr_decay)
      for run in runs
  }
  for i, name in enumerate(names):
    assert rates[name] == pytest.approx((0.2 + 0.1 * i, gammas[i]))
  # The others keep their update rules'.
  assert rates["Unif-SGD"] == (0.1, 0.01)
  assert rates["AdaSamp-01-SGD"] == (0.1, 0.01)
  with pytest.raises(ValueError, match="baseline_learning_rates needs"):
    design.plan(dataclasses.replace(TINY, baseline_learning_rates=(0.2,) * 9),
                1, str(tmp_path), "digits")


def test_plan_gives_each_algorithm_its_step_size_schedule(tmp_path):
  settings = dataclasses.replace(
      TINY,
      sgd_lr_schedule="cosine",
      adaptive_lr_schedules=("linear", "inverse_time", "cosine", "linear"),
      baseline_lr_schedules=("linear", "inverse_time"))
  runs = design.plan(settings, 1, str(tmp_path), "digits", model="logistic")
  schedules = {run.algorithm: run.config.lr_schedule for run in runs}
  assert schedules == {
      "AdaSamp-01-SGD": "linear",
      "AdaSamp-L1-SGD": "inverse_time",
      "Unif-SGD": "cosine",
      "AdaSamp-01-AdaGrad": "cosine",
      "AdaSamp-L1-AdaGrad": "linear",
      "Unif-AdaGrad": "inverse_time",
      "Shuffle-SGD": "linear",
      "IS-SGD": "inverse_time"
  }
  # Empty tuples: each update rule's.
  rules = dataclasses.replace(TINY, adagrad_lr_schedule="linear")
  assert {
      run.algorithm: run.config.lr_schedule
      for run in design.plan(rules, 1, str(tmp_path), "digits")
  } == {
      name: "linear" if rule == "adagrad" else "inverse_time"
      for name, (_, _, rule) in presets.RUNS.items()
  }
  with pytest.raises(ValueError, match="IS-SGD's lr_schedule must be one of"):
    design.plan(
        dataclasses.replace(TINY, baseline_lr_schedules=("linear", "step")), 1,
        str(tmp_path), "digits")


@pytest.mark.parametrize("key", sorted(presets.PRESETS))
def test_the_presets_keep_the_papers_step_size_schedule(tmp_path, key):
  # Their runs as before the schedules existed: inverse_time throughout.
  dataset, model = key
  runs = design.plan(presets.PRESETS[key], 2, str(tmp_path), dataset, model)
  assert {run.config.lr_schedule for run in runs} == {"inverse_time"}
