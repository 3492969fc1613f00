"""The paper's CNN study's command line (tf_adasamp.experiment.cnn_study): its
CPU smoke path, whose archive recomputes the summary, the committed GPU
study's archive and its throughput measure; the training subset its
evaluations read."""

import json
import os
import pathlib

import pytest

import child_process
from tf_adasamp import datasets as library_datasets
from tf_adasamp.experiment.study import cnn

needs_fashion_mnist = pytest.mark.skipif(
    not os.path.exists(
        os.path.join(library_datasets.FASHION_MNIST_DIR,
                     library_datasets.FASHION_MNIST_FILES[0])),
    reason=f"needs Debian's dataset-fashion-mnist in "
    f"{library_datasets.FASHION_MNIST_DIR}")


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
