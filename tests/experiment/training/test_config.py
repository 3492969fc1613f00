"""TrainConfig's checks (tf_adasamp.experiment.training.config)."""

import pytest

from run_records import controls_config
from run_records import tiny_config
from tf_adasamp import utilities
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import models


def test_reshuffling_refuses_replicas():
  with pytest.raises(ValueError, match="reshuffle' needs strategy 'default'"):
    tiny_config(sampling="reshuffle", strategy="mirrored")


def test_the_settings_offer_the_models_and_utilities_there_are():
  # config names them without importing them (and TensorFlow).
  assert set(config_lib.BUILT_IN_UTILITIES) == set(utilities.UTILITIES)
  for name in config_lib.MODELS:
    models.build(name, (8, 8, 1), 10, seed=0)


def test_epochs_set_the_number_of_steps():
  assert tiny_config(epochs=2, batch_size=100).num_steps(1500) == 30
  assert tiny_config(steps=7).num_steps(1500) == 7


@pytest.mark.parametrize("overrides,message", [
    (dict(decay=1.0), "decay must be in"),
    (dict(amplitude=-1.0), "amplitude must be"),
    (dict(sampling="sometimes"), "sampling must be one of"),
    (dict(learning_rate=0.0), r"learning_rate must be finite and > 0"),
    (dict(learning_rate=float("inf")), r"learning_rate must be finite"),
    (dict(lr_decay=float("inf")), r"lr_decay must be finite"),
    (dict(lr_schedule="step"), "lr_schedule must be one of"),
    (dict(utility="reducible_loss"), "needs a validation_size > 0"),
    (dict(irreducible_model="mlp"), "^irreducible_model needs utility "
     "'reducible_loss', got 'zero_one'"),
    (dict(irreducible_model="mlp", reducible_loss_bound=1.0),
     "^irreducible_model and reducible_loss_bound need utility"),
    (dict(utility="reducible_loss",
          validation_size=10,
          reducible_loss_bound=0.0), "reducible_loss_bound must be finite"),
    (dict(irreducible_epochs=float("inf")), "irreducible_epochs must be"),
    (dict(irreducible_model="resnet"), "irreducible_model must be one of"),
    (dict(validation_size=-1), r"validation_size must be an int >= 0"),
    (dict(validation_size=1.5), r"validation_size must be an int >= 0"),
    (dict(validation_size=True), r"validation_size must be an int >= 0"),
    (dict(validation_size=10, data_path="a", test_data_path="b",
          num_classes=2), "validation_size holds out in-memory images"),
    (dict(l2=float("inf")), r"l2 must be finite and > 0, got inf"),
    (dict(epochs=-1.0), "epochs must be finite and > 0"),
    (dict(epochs=float("inf")), "epochs must be finite and > 0, got inf"),
    (dict(seed=-1), r"seed must be in \[0, 2\*\*32\), got -1"),
    (dict(seed=2**32), r"seed must be in \[0, 2\*\*32\)"),
    (dict(steps_per_execution=0), "steps_per_execution must be"),
    (dict(early_evaluations=-1), r"early_evaluations must be an int in"),
    (dict(early_evaluations=54), r"early_evaluations must be an int in"),
    (dict(early_evaluations=True), r"early_evaluations must be an int in"),
    (dict(resume=True), "resume needs an output_dir"),
    (dict(jit_compile=True, strategy="mirrored"), "jit_compile needs"),
    (dict(model="cnn", jit_compile=True, deterministic=True), "max pooling"),
])
def test_bad_config_values_raise_value_error(overrides, message):
  with pytest.raises(ValueError, match=message):
    tiny_config(**overrides)


@pytest.mark.parametrize("overrides,message", [
    (dict(epsilon=1.5), "epsilon must be in"),
    (dict(epsilon=float("nan")), "epsilon must be in"),
    (dict(beta=-0.1), "beta must be in"),
    (dict(schedule_fraction=2.0), "schedule_fraction must be in"),
    (dict(schedule_fraction=0.5), "'constant' ignores it"),
    (dict(amplitude_schedule="anneal",
          schedule_fraction=0.5), "'anneal' ignores it"),
    (dict(label_noise=1.0), "label_noise must be in"),
    (dict(sampling="uniform", epsilon=0.1), "^epsilon needs sampling "
     "'adaptive'"),
    (dict(sampling="reshuffle", epsilon=0.1, amplitude_schedule="warmup"),
     "^epsilon and amplitude_schedule need sampling 'adaptive'"),
    (dict(amplitude_schedule="cosine"), "amplitude_schedule must be one of"),
])
def test_bad_controls_are_refused(overrides, message):
  with pytest.raises(ValueError, match=message):
    controls_config(**overrides)
