"""The trainer: step, samplers, models, loop, resume and command line."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_adasamp.experiment import datasets
from tf_adasamp.experiment import models
from tf_adasamp.experiment import training_loop
from tf_adasamp import utilities
from tf_adasamp.sampler import AdaptiveSampler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def digits():
  return datasets.load("digits")


def tiny_config(**overrides):
  settings = dict(model="logistic", steps=4, eval_interval=2, batch_size=16,
                  learning_rate=0.1)
  settings.update(overrides)
  return training_loop.TrainConfig(**settings)


@pytest.mark.parametrize("num_examples", [1, 1500, 1024])
def test_uniform_sampler_draws_what_adaptive_sampler_draws_at_amplitude_0(
    num_examples):
  uniform = training_loop.UniformSampler(num_examples, seed=3)
  adaptive = AdaptiveSampler(num_examples, amplitude=0.0, decay=0.5, seed=3)
  rng = np.random.default_rng(0)
  for _ in range(5):
    indices = adaptive.sample(64)
    np.testing.assert_array_equal(uniform.sample(64), indices)
    adaptive.update(indices, rng.uniform(size=64))


def test_uniform_sampler_ignores_utilities_and_has_zero_kl():
  sampler = training_loop.UniformSampler(10, seed=0)
  sampler.update(tf.constant([1, 2]), tf.constant([5.0, 5.0]))
  assert float(sampler.kl_divergence()) == 0.0


def test_sgd_step_size_is_eta_over_one_plus_gamma_t():
  optimizer = training_loop.make_optimizer("sgd", 0.5, 0.1)
  weight = tf.Variable(0.0)
  for _ in range(3):  # gradient 1: each step moves by the step size
    optimizer.apply_gradients([(tf.constant(1.0), weight)])
  expected = -sum(0.5 / (1 + 0.1 * t) for t in range(3))
  np.testing.assert_allclose(float(weight), expected, rtol=1e-6)


def test_paper_cnn_has_keras_cifar10_cnn_size_and_pads_small_inputs():
  cifar = models.build("cnn", (32, 32, 3), 10, seed=0)
  assert cifar.count_params() == 1250858  # Keras' cifar10_cnn example
  digits_cnn = models.build("cnn", (8, 8, 1), 10, seed=0)
  assert digits_cnn(tf.zeros([2, 8, 8, 1])).shape == (2, 10)


def test_same_seed_builds_the_same_initial_model():
  first = models.build("cnn", (8, 8, 1), 10, seed=7)
  second = models.build("cnn", (8, 8, 1), 10, seed=7)
  for a, b in zip(first.trainable_variables, second.trainable_variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_logistic_penalty_is_half_l2_times_squared_norm():
  model = models.build("logistic", (8, 8, 1), 10, seed=0, l2=0.3)
  model.layers[-1].bias.assign(tf.fill([10], 0.5))
  squared_norm = sum(float(tf.reduce_sum(v**2))
                     for v in model.trainable_variables)
  np.testing.assert_allclose(float(tf.add_n(model.losses)),
                             0.3 / 2 * squared_norm, rtol=1e-5)


@pytest.mark.parametrize("utility_at", ["updated", "step"])
def test_utilities_come_from_h_t_or_h_t_minus_1(digits, utility_at):
  # Logistic regression has no dropout, so training and inference passes
  # agree and the two options differ only in the model they use.
  model = models.build("logistic", (8, 8, 1), 10, seed=0)
  optimizer = training_loop.make_optimizer("sgd", 1.0, 0.0)
  sampler = AdaptiveSampler(len(digits.y_train), amplitude=1.0, decay=0.5,
                            seed=0)
  images, labels = tf.constant(digits.x_train), tf.constant(digits.y_train)
  before = tf.keras.models.clone_model(model)
  before.set_weights(model.get_weights())
  step = training_loop.make_train_step(model, optimizer, sampler, images, labels,
                                  batch_size=32, utility="l1",
                                  utility_at=utility_at)
  _, _, _, batch_utilities = step()
  # L1 utilities are > 0, so the drawn examples are those with weight != 1;
  # from uniform, one update sets log w_i = amplitude * u_i.
  drawn = np.flatnonzero(sampler.log_weights.numpy())
  source = model if utility_at == "updated" else before
  expected = utilities.l1(
      labels.numpy()[drawn],
      tf.nn.softmax(source(images.numpy()[drawn], training=False)))
  np.testing.assert_allclose(sampler.log_weights.numpy()[drawn], expected,
                             rtol=1e-5)
  assert batch_utilities.shape == (32,)


@pytest.mark.parametrize("sampling", ["uniform", "adaptive"])
def test_train_records_every_eval_interval(digits, sampling):
  records = training_loop.train(tiny_config(sampling=sampling), data=digits)
  assert [r["step"] for r in records] == [0, 2, 4]
  metrics = {"step", "epoch", "train_loss", "train_accuracy", "test_loss",
             "test_accuracy", "kl", "kl_bound", "kl_bound_general",
             "zero_one_gap"}  # the last for the logistic model
  assert set(records[0]) == metrics
  # Corollary 1 needs T >= 1 steps.
  assert set(records[-1]) == metrics | {"corollary1_bound"}
  for name in ["kl", "kl_bound"]:
    value = records[-1][name]
    assert value > 0 if sampling == "adaptive" else value == 0


def test_uniform_and_adaptive_runs_start_from_the_same_model(digits):
  uniform = training_loop.train(tiny_config(sampling="uniform", model="cnn"),
                           data=digits)
  adaptive = training_loop.train(tiny_config(sampling="adaptive", model="cnn"),
                            data=digits)
  assert uniform[0] == adaptive[0]


def test_resumed_run_matches_uninterrupted_run(digits, tmp_path):
  # The CNN, so that dropout's random state must be restored too.
  settings = dict(model="cnn", sampling="adaptive", steps=6, eval_interval=2)
  whole = training_loop.train(
      tiny_config(output_dir=str(tmp_path / "whole"), **settings),
      data=digits)
  stopped = tiny_config(output_dir=str(tmp_path / "stopped"),
                        **dict(settings, steps=4))
  training_loop.train(stopped, data=digits)
  resumed = training_loop.train(
      tiny_config(output_dir=str(tmp_path / "stopped"), resume=True,
                  **settings), data=digits)
  assert resumed == whole
  assert training_loop.read_metrics(str(tmp_path / "stopped")) == whole


def test_run_writes_metrics_checkpoints_and_summaries(digits, tmp_path):
  training_loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  assert training_loop.is_complete(str(tmp_path), 4)
  assert not training_loop.is_complete(str(tmp_path), 6)
  assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  assert os.listdir(tmp_path / "tensorboard")


def test_new_run_refuses_a_directory_holding_a_run(digits, tmp_path):
  training_loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(training_loop.RunExistsError, match="already holds a run"):
    training_loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)


def test_epochs_set_the_number_of_steps():
  assert tiny_config(epochs=2, batch_size=100).num_steps(1500) == 30
  assert tiny_config(steps=7).num_steps(1500) == 7


@pytest.mark.parametrize("overrides,message", [
    (dict(decay=1.0), "decay must be in"),
    (dict(amplitude=-1.0), "amplitude must be"),
    (dict(sampling="sometimes"), "sampling must be one of"),
    (dict(learning_rate=0.0), "learning_rate must be > 0"),
    (dict(epochs=-1.0), "epochs must be > 0"),
    (dict(resume=True), "resume needs an output_dir"),
])
def test_bad_config_values_raise_value_error(overrides, message):
  with pytest.raises(ValueError, match=message):
    tiny_config(**overrides)


def run_cli(*args):
  return subprocess.run(
      [sys.executable, "-m", "tf_adasamp.experiment.train", *args], cwd=ROOT,
      capture_output=True, text=True, timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_cli_bad_flag_value_is_one_line_without_traceback(tmp_path):
  result = run_cli("--decay=1.5", f"--output_dir={tmp_path}")
  assert result.returncode != 0
  assert ("tf-adasamp-train: decay must be in (0, 1), got 1.5\n" in
          result.stderr)
  assert "Traceback" not in result.stderr


def test_cli_takes_a_flagfile_and_writes_metrics(tmp_path):
  flagfile = tmp_path / "flags.txt"
  flagfile.write_text("\n".join([
      "--model=logistic", "--steps=4", "--eval_interval=2", "--noprogress",
      f"--output_dir={tmp_path / 'run'}"]))
  result = run_cli(f"--flagfile={flagfile}")
  assert result.returncode == 0, result.stderr
  with open(tmp_path / "run" / training_loop.METRICS_FILE) as f:
    assert [json.loads(line)["step"] for line in f] == [0, 2, 4]


def test_resume_refuses_a_run_of_other_settings(digits, tmp_path):
  training_loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  with pytest.raises(training_loop.RunExistsError,
                     match="amplitude: 1.0 there, 2.0 here"):
    training_loop.train(tiny_config(output_dir=str(tmp_path), resume=True,
                               amplitude=2.0), data=digits)
