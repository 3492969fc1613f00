"""The CNN study's protocol (tf_adasamp.experiment.study.cnn)."""

import json

import pytest

from tf_adasamp.experiment.study import cnn


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
