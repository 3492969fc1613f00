"""The paper's CNN at full scale (tf_adasamp.experiment.cnn_study): its
protocol, and its CPU smoke path, whose archive recomputes the summary."""

import json
import os

import numpy as np
import pytest

import child_process
from tf_adasamp.experiment import cnn_study
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import evaluator
from tf_adasamp.experiment.training import loop

needs_fashion_mnist = pytest.mark.skipif(
    not os.path.exists(
        os.path.join(datasets.FASHION_MNIST_DIR,
                     datasets.FASHION_MNIST_FILES[0])),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{datasets.FASHION_MNIST_DIR}")


def test_the_gpu_scale_is_the_papers_protocol(tmp_path):
  settings = cnn_study.settings_for("gpu")
  runs = cnn_study.plan("gpu", settings, str(tmp_path))
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
  settings = cnn_study.settings_for("gpu", epochs=10)
  assert (settings.steps, settings.eval_interval) == (6000, 600)
  with pytest.raises(ValueError, match="epochs"):
    cnn_study.settings_for("gpu", epochs=0)


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
  settings = cnn_study.settings_for("gpu", _tuning_json(tmp_path, 1.0))
  assert settings.learning_rate("Unif-SGD") == (0.03, 0.001)
  assert settings.learning_rate("Unif-AdaGrad") == (0.02, 0.0)
  assert settings.learning_rate("AdaSamp-L1-SGD") == (0.03, 0.001)
  assert settings.learning_rate("AdaSamp-L1-AdaGrad") == (0.04, 0.0)
  assert (settings.amplitude, settings.decay) == (1.0, 0.9)


def test_a_tuned_amplitude_outside_the_sweep_is_refused(tmp_path):
  with pytest.raises(ValueError, match="tuned amplitude 10 is not among"):
    cnn_study.settings_for("gpu", _tuning_json(tmp_path, 10.0))


def test_the_training_subset_evaluated_is_fixed_and_sorted():
  first = evaluator.train_eval_indices(60000, 10000)
  assert len(first) == len(np.unique(first)) == 10000
  assert np.all(np.diff(first) > 0)
  np.testing.assert_array_equal(first,
                                evaluator.train_eval_indices(60000, 10000))
  np.testing.assert_array_equal(evaluator.train_eval_indices(50, None),
                                np.arange(50))


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
  archive = report_dir / cnn_study.ARCHIVE
  summary = (report_dir / "summary.md").read_text()
  assert (report_dir / "figure1.png").exists()
  # 2 trials x (6 algorithms + the reshuffling baseline + importance
  # sampling + the sweep's one other amplitude), and the settings line.
  header, settings, runs = cnn_study.read_archive(archive, tmp_path / "read")
  assert len(runs) == 18 and header["trials"] == 2
  assert settings == cnn_study.settings_for("cpu_smoke")
  assert all(run_records_end_at(run, settings.steps) for run in runs)
  assert cnn_study.summary_from_archive(archive) == summary
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
  assert all(
      row["steps_per_s_second_half"] > 0 and row["wall_s"] > 0 for row in rows)


def test_evaluations_read_only_the_fixed_training_subset(tmp_path):
  from tf_adasamp.experiment.training import config as config_lib  # pylint: disable=import-outside-toplevel
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
