"""The paper's CNN at full scale (tf_adasamp.experiment.cnn_study): its
protocol, and its CPU smoke path, whose archive recomputes the summary."""

import json
import os
import pathlib

import numpy as np
import pytest

import child_process
from tf_adasamp import datasets as library_datasets
from tf_adasamp.experiment.study import cnn
from tf_adasamp.experiment.training import evaluator
from tf_adasamp.experiment.training import loop

needs_fashion_mnist = pytest.mark.skipif(
    not os.path.exists(
        os.path.join(library_datasets.FASHION_MNIST_DIR,
                     library_datasets.FASHION_MNIST_FILES[0])),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{library_datasets.FASHION_MNIST_DIR}")


def test_the_gpu_scale_is_the_papers_protocol(tmp_path):
  settings = cnn.settings_for("gpu")
  runs = cnn.plan("gpu", settings, str(tmp_path))
  assert settings.batch_size == 100
  assert settings.steps * settings.batch_size / 60000 >= 20
  assert settings.eval_interval == 600  # an evaluation each epoch
  assert sorted({run.trial for run in runs}) == list(range(10))
  # Six algorithms, the reshuffling baseline, importance sampling and the
  # sweep's other amplitudes, per trial.
  assert len(runs) == 10 * (8 + len(settings.sweep_amplitudes) - 1)
  assert set(settings.sweep_amplitudes) == {0.1, 0.3, 1.0, 3.0}
  assert all(run.config.model == "cnn" and run.config.jit_compile and
             run.config.train_eval_size == 10000 for run in runs)


def test_epochs_set_the_length_and_an_evaluation_each_epoch():
  settings = cnn.settings_for("gpu", epochs=10)
  assert (settings.steps, settings.eval_interval) == (6000, 600)
  with pytest.raises(ValueError, match="epochs"):
    cnn.settings_for("gpu", epochs=0)


def _tuning_json(tmp_path, amplitude):
  path = tmp_path / "tuning.json"
  path.write_text(
      json.dumps({
          "chosen_step_sizes": {
              "sgd": [0.03, 0.001],
              "adagrad": [0.02, 0.0]
          },
          "stage3_setting": [amplitude, 0.9],
          "chosen_adaptive_learning_rates": [0.015, 0.03, 0.01, 0.04],
      }))
  return str(path)


def test_the_tuning_choices_replace_the_presets(tmp_path):
  settings = cnn.settings_for("gpu", _tuning_json(tmp_path, 1.0))
  assert settings.learning_rate("Unif-SGD") == (0.03, 0.001)
  assert settings.learning_rate("Unif-AdaGrad") == (0.02, 0.0)
  assert settings.learning_rate("AdaSamp-L1-SGD") == (0.03, 0.001)
  assert settings.learning_rate("AdaSamp-L1-AdaGrad") == (0.04, 0.0)
  assert (settings.amplitude, settings.decay) == (1.0, 0.9)


def test_a_tuned_amplitude_outside_the_sweep_is_refused(tmp_path):
  with pytest.raises(ValueError, match="tuned amplitude 10 is not among"):
    cnn.settings_for("gpu", _tuning_json(tmp_path, 10.0))


def test_the_training_subset_evaluated_is_fixed_and_sorted():
  first = evaluator.train_eval_indices(60000, 10000)
  assert len(first) == len(np.unique(first)) == 10000
  assert np.all(np.diff(first) > 0)
  np.testing.assert_array_equal(first,
                                evaluator.train_eval_indices(60000, 10000))
  np.testing.assert_array_equal(evaluator.train_eval_indices(50, None),
                                np.arange(50))


def _throughput(step_ms=0.5, start_up_s=10.0, evaluation_s=0.5):
  """throughput.json's dict for 8 processes that each take `step_ms` a
  step while sharing the device, `start_up_s` to start a run and
  `evaluation_s` an evaluation."""
  steps = 3000
  return {
      "measure_steps":
          steps,
      "rows": [{
          "processes": 8,
          "steps_per_s_training": 8 / (step_ms / 1000),
          "evaluation_s": evaluation_s,
          "wall_s": start_up_s + steps * step_ms / 1000 + 3 * evaluation_s,
      }]
  }


def test_the_length_is_the_most_epochs_the_throughput_predicts_to_fit():
  settings = cnn.settings_for("gpu")
  throughput = _throughput()

  # 110 runs on 8 processes: 14 rounds. A run of E epochs: 10 s to start,
  # 600 E steps of 0.5 ms at 1.25x the measured cost (0.375 E s) and
  # E + 5 evaluations of 0.5 s (early ones included): 12.5 + 0.875 E s.
  def predicted(epochs):
    return 14 * (12.5 + 0.875 * epochs)

  assert cnn.epochs_that_fit(throughput, 8, 110, predicted(20), settings,
                             60000) == (20, pytest.approx(predicted(20)))
  # Just short of 10 epochs' time: 8.
  assert cnn.epochs_that_fit(throughput, 8, 110,
                             predicted(10) - 1, settings,
                             60000) == (8, pytest.approx(predicted(8)))
  # Not even 1 epoch fits: the ladder's last, with its prediction.
  assert cnn.epochs_that_fit(throughput, 8, 110, 1, settings,
                             60000) == (1, pytest.approx(predicted(1)))
  with pytest.raises(ValueError, match="no row of 4 processes"):
    cnn.epochs_that_fit(throughput, 4, 110, 1000, settings, 60000)


def test_the_fitted_length_is_kept_for_the_calls_that_resume(tmp_path):
  report_dir = tmp_path / "report"
  options = cnn.Options(report_dir=str(report_dir), fit_seconds=600, workers=8)
  settings = cnn.settings_for("gpu")
  with pytest.raises(ValueError, match="run --stage=measure first"):
    cnn.fitted_length(options, settings, 110, 60000)
  report_dir.mkdir()
  (report_dir / cnn.THROUGHPUT_FILE).write_text(json.dumps(_throughput()))
  length = cnn.fitted_length(options, settings, 110, 60000)
  assert length["epochs"] == 20 and length["fit_seconds"] == 600
  # A later call with less time left keeps the length its runs started.
  later = cnn.Options(report_dir=str(report_dir), fit_seconds=60, workers=8)
  assert cnn.fitted_length(later, settings, 110, 60000) == length
  lines = cnn.departures("gpu", settings, 60000, None, length)
  assert any(
      line.startswith("Length cut to 20 epochs") and "within 600 s" in line
      for line in lines)
  assert ("Evaluation: every 600 steps and at steps 37, 75, 150, 300, on the "
          "whole test set" in lines[-1])


def _cnn_study(*args):
  return child_process.ran("tf_adasamp.experiment.cnn_study",
                           *args,
                           timeout=600,
                           TF_CPP_MIN_LOG_LEVEL="3",
                           CUDA_VISIBLE_DEVICES="")


@needs_fashion_mnist
def test_the_cpu_smoke_studys_archive_recomputes_its_summary(tmp_path):
  report_dir = tmp_path / "report"
  result = _cnn_study("--scale=cpu_smoke", f"--runs_dir={tmp_path}/runs",
                      f"--report_dir={report_dir}", "--workers=2")
  assert result.returncode == 0, result.stderr[-2000:]
  archive = report_dir / cnn.ARCHIVE
  summary = (report_dir / "summary.md").read_text()
  assert (report_dir / "figure1.png").exists()
  # 2 trials x (6 algorithms + the reshuffling baseline + importance
  # sampling + the sweep's one other amplitude), and the settings line.
  header, settings, runs = cnn.read_archive(archive, tmp_path / "read")
  assert len(runs) == 18 and header["trials"] == 2
  assert settings == cnn.settings_for("cpu_smoke")
  assert all(run_records_end_at(run, settings.steps) for run in runs)
  assert cnn.summary_from_archive(archive) == summary
  assert "fixed random 200 of the 2000 training images" in summary
  assert "- Tuning: none; the preset's starting values" in summary
  # Where the runs and the report went, and how many workers, is left out.
  assert ("Produced by `python -m tf_adasamp.experiment.cnn_study "
          "--scale=cpu_smoke`." in summary)

  check = _cnn_study("--stage=recompute", "--check",
                     f"--report_dir={report_dir}")
  assert check.returncode == 0, check.stderr[-2000:]
  (report_dir / "summary.md").write_text(summary.replace("Unif-SGD", "X", 1))
  check = _cnn_study("--stage=recompute", "--check",
                     f"--report_dir={report_dir}")
  assert check.returncode == 1 and "differs from the summary" in check.stderr
  rewrite = _cnn_study("--stage=recompute", f"--report_dir={report_dir}")
  assert rewrite.returncode == 0, rewrite.stderr[-2000:]
  assert (report_dir / "summary.md").read_text() == summary

  # A run of trial 1 cut before its end: the report reads trial 0 alone.
  cut = next(
      run for run in cnn.plan("cpu_smoke", settings, str(tmp_path / "runs"))
      if run.trial == 1)
  metrics = pathlib.Path(cut.config.output_dir) / "metrics.jsonl"
  metrics.write_text("".join(metrics.read_text().splitlines(True)[:-1]))
  partial = _cnn_study("--stage=report", "--scale=cpu_smoke",
                       f"--runs_dir={tmp_path}/runs",
                       f"--report_dir={report_dir}")
  assert partial.returncode == 0, partial.stderr[-2000:]
  header, _, partial_runs = cnn.read_archive(archive, tmp_path / "partial")
  assert header["trials"] == 1 and len(partial_runs) == 9
  assert "- Trials: 1 of the 2 planned (those whose runs all finished" in (
      report_dir / "summary.md").read_text()


def test_the_committed_gpu_study_recomputes_its_summary():
  # docs/experiment/cnn holds the GPU run's archive and summary: the one
  # from the other, byte for byte.
  result = _cnn_study(
      "--stage=recompute", "--check", "--report_dir=" +
      os.path.join(child_process.ROOT, "docs", "experiment", "cnn"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert "matches" in result.stdout


def run_records_end_at(run, steps):
  with open(os.path.join(run.config.output_dir, "metrics.jsonl")) as f:
    return json.loads(f.readlines()[-1])["step"] == steps


@needs_fashion_mnist
def test_measure_writes_steps_per_second_of_1_and_n_processes(tmp_path):
  result = _cnn_study("--stage=measure", "--scale=cpu_smoke", "--workers=2",
                      "--measure_steps=20", f"--runs_dir={tmp_path}/runs",
                      f"--report_dir={tmp_path}/report")
  assert result.returncode == 0, result.stderr[-2000:]
  rows = json.loads(
      (tmp_path / "report" / "throughput.json").read_text())["rows"]
  assert [row["processes"] for row in rows] == [1, 2]
  for row in rows:
    assert row["wall_s"] > 0 and row["evaluation_s"] > 0
    # The steps alone go faster than the steps with an evaluation.
    assert row["steps_per_s_training"] > row["steps_per_s_second_half"] > 0


def test_evaluations_read_only_the_fixed_training_subset(tmp_path):
  from tf_adasamp.experiment.training import config as config_lib
  config = config_lib.TrainConfig(dataset="digits",
                                  model="logistic",
                                  steps=4,
                                  eval_interval=2,
                                  batch_size=16,
                                  train_eval_size=64,
                                  output_dir=str(tmp_path / "run"))
  records = loop.train(config)
  # Accuracies over 64 examples are multiples of 1/64; over all 1,500
  # training digits they would not all be.
  for record in records:
    assert record["train_accuracy"] * 64 == pytest.approx(
        round(record["train_accuracy"] * 64))
  with pytest.raises(ValueError, match="train_eval_size"):
    config_lib.TrainConfig(train_eval_size=0)
