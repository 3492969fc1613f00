"""AdaptiveSamplingModel (tf_adasamp.keras.model): `fit` under adaptive
sampling."""

import math
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import child_process
from keras_trainers import AMPLITUDE
from keras_trainers import BATCH_SIZE
from keras_trainers import classifier
from keras_trainers import DECAY
from keras_trainers import frozen_fit
from keras_trainers import make_trainer
from keras_trainers import NUM_EXAMPLES
from keras_trainers import toy_data
import reference
import sampler_controls
import tf_adasamp
from tf_adasamp import AdaptiveSampler
from tf_adasamp import data
from tf_adasamp import utilities
from tf_adasamp.keras import AdaptiveSamplingModel


class BatchLogs(keras.callbacks.Callback):

  def __init__(self):
    super().__init__()
    self.logs = []

  def on_train_batch_end(self, batch, logs=None):
    self.logs.append(dict(logs))


def test_fit_reports_loss_metrics_kl_and_validation():
  x, y = toy_data()
  trainer = make_trainer(utility="zero_one")
  trainer.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
  batch_logs = BatchLogs()
  dataset = trainer.stage.dataset((x, y)).prefetch(2)
  history = trainer.fit(dataset,
                        steps_per_epoch=8,
                        epochs=2,
                        validation_data=(x, y),
                        callbacks=[batch_logs],
                        verbose=0)
  assert set(history.history) == {
      "loss", "accuracy", "adaptive_loss", "adaptive_accuracy", "kl",
      "distinct_draws", "effective_sample_size", "heaviest_share", "val_loss",
      "val_accuracy"
  }
  assert len(batch_logs.logs) == 16
  kl = [logs["kl"] for logs in batch_logs.logs]
  assert kl[0] > 0  # the first update already moves Q off uniform
  assert history.history["kl"][-1] == pytest.approx(
      trainer.stage.sampler.kl_divergence().numpy())
  assert np.all(np.isfinite(history.history["loss"]))
  evaluation = trainer.evaluate(x, y, verbose=0, return_dict=True)
  assert evaluation["accuracy"] == pytest.approx(
      history.history["val_accuracy"][-1])
  assert trainer.predict(x[:5], verbose=0).shape == (5, 2)
  # A second fit starts a fresh iterator and lag count.
  trainer.fit(dataset, steps_per_epoch=2, verbose=0)


@pytest.mark.parametrize("utility,from_logits,steps_per_execution", [
    ("l1", False, 1),
    ("cross_entropy", True, 3),
    ("zero_one", False, 1),
])
def test_fit_with_zero_lag_reweights_exactly_as_algorithm_1(
    utility, from_logits, steps_per_execution):
  x, y = toy_data()
  net = classifier(from_logits)
  trainer = make_trainer(max_lag=0,
                         seed=3,
                         net=net,
                         utility=utility,
                         from_logits=from_logits)
  # A zero learning rate freezes the model, so the replay below can compute
  # the same utilities.
  trainer.compile(
      optimizer=keras.optimizers.SGD(0.0),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits),
      steps_per_execution=steps_per_execution)
  steps = 6
  trainer.fit(trainer.stage.dataset((x, y)), steps_per_epoch=steps, verbose=0)

  twin = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=3)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, AMPLITUDE, DECAY)
  for _ in range(steps):
    indices = algorithm.draw(twin.uniforms(BATCH_SIZE).numpy())
    outputs = net(x[indices], training=True)
    probs = tf.nn.softmax(outputs) if from_logits else outputs
    algorithm.update(indices, utilities.get(utility)(y[indices], probs).numpy())
  np.testing.assert_allclose(trainer.stage.sampler.log_weights.numpy(),
                             algorithm.log_weights,
                             rtol=1e-6,
                             atol=1e-6)


def label_utility(labels, unused_probs):
  return 0.7 * tf.cast(labels, tf.float64)


@pytest.mark.parametrize("debias,with_sample_weight", [(False, False),
                                                       (True, False),
                                                       (True, True)])
def test_logged_losses_are_the_drawn_batch_and_the_uniform_estimate(
    debias, with_sample_weight):
  x, y = toy_data()
  sample_weight = np.linspace(0.5, 2.0, NUM_EXAMPLES).astype(np.float32)
  source = (x, y, sample_weight) if with_sample_weight else (x, y)
  net = classifier()
  trainer = make_trainer(max_lag=0,
                         seed=4,
                         net=net,
                         debias=debias,
                         utility=label_utility)
  trainer.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss="sparse_categorical_crossentropy")
  history = trainer.fit(trainer.stage.dataset(source),
                        steps_per_epoch=1,
                        epochs=2,
                        verbose=0)

  # The second step's batch, replayed.
  twin = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=4)
  first = twin.sample(BATCH_SIZE)
  twin.update(first, label_utility(tf.gather(y, first), None))
  indices, probabilities = twin.sample_with_probabilities(BATCH_SIZE)
  indices = indices.numpy()
  losses = keras.losses.sparse_categorical_crossentropy(
      y[indices], net(x[indices])).numpy()
  if with_sample_weight:
    losses *= sample_weight[indices]
  importance = 1 / (NUM_EXAMPLES * probabilities.numpy())
  # Whatever the loss optimized, the logs hold both.
  assert history.history["adaptive_loss"][1] == pytest.approx(np.mean(losses),
                                                              rel=1e-5)
  assert history.history["loss"][1] == pytest.approx(np.mean(importance *
                                                             losses),
                                                     rel=1e-5)


def test_jit_compile_runs_the_learning_step_under_xla():
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd",
                  loss="sparse_categorical_crossentropy",
                  jit_compile=True)
  history = trainer.fit(trainer.stage.dataset((x, y)),
                        steps_per_epoch=3,
                        verbose=0)
  assert history.history["kl"][-1] > 0
  assert trainer.jit_compile  # as set, for evaluate and predict too

  # The forward pass is XLA-compiled: an op XLA lacks makes fit fail.
  no_xla = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Lambda(
          lambda t: t + 0 * tf.strings.to_number(tf.strings.as_string(t))),
      keras.layers.Dense(2, activation="softmax"),
  ])
  trainer = make_trainer(net=no_xla)
  trainer.compile(optimizer="sgd",
                  loss="sparse_categorical_crossentropy",
                  jit_compile=True)
  with pytest.raises(tf.errors.InvalidArgumentError, match="XLA"):
    trainer.fit(trainer.stage.dataset((x, y)), steps_per_epoch=1, verbose=0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="XLA"):
    trainer.evaluate(x, y, verbose=0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="XLA"):
    trainer.predict(x, verbose=0)


def test_unknown_utility_name_is_refused():
  with pytest.raises(ValueError, match="unknown utility"):
    make_trainer(utility="hinge")


class Steps(keras.callbacks.Callback):

  def __init__(self):
    super().__init__()
    self.steps = 0

  def on_train_batch_end(self, batch, logs=None):
    self.steps += 1


def test_fit_on_arrays_draws_epochs_of_n_over_b_steps():
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  steps = Steps()
  trainer.fit(x, y, epochs=2, callbacks=[steps], verbose=0)
  assert steps.steps == 2 * math.ceil(NUM_EXAMPLES / BATCH_SIZE)
  # The stage's endless dataset too, without steps_per_epoch.
  trainer.fit(trainer.stage.dataset((x, y)), callbacks=[steps], verbose=0)
  assert steps.steps == 3 * math.ceil(NUM_EXAMPLES / BATCH_SIZE)


class Batches(keras.callbacks.Callback):
  """Counts the test and predict batches."""

  def __init__(self):
    super().__init__()
    self.test = self.predict = 0

  def on_test_batch_end(self, batch, logs=None):
    self.test += 1

  def on_predict_batch_end(self, batch, logs=None):
    self.predict += 1


def test_validation_evaluation_and_prediction_batch_as_the_stage():
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  stage_batches = math.ceil(NUM_EXAMPLES / BATCH_SIZE)
  batches = Batches()
  trainer.fit(x,
              y,
              steps_per_epoch=1,
              validation_data=(x, y),
              callbacks=[batches],
              verbose=0)
  assert batches.test == stage_batches  # Keras's default is 32
  batches.test = 0
  trainer.evaluate(x, y, callbacks=[batches], verbose=0)
  trainer.predict(x, callbacks=[batches], verbose=0)
  assert (batches.test, batches.predict) == (stage_batches, stage_batches)
  # An explicit size still wins, and a dataset keeps its own batches.
  batches.test = 0
  trainer.evaluate(x, y, batch_size=60, callbacks=[batches], verbose=0)
  trainer.evaluate(tf.data.Dataset.from_tensor_slices((x, y)).batch(40),
                   callbacks=[batches],
                   verbose=0)
  assert batches.test == 2 + 3


def log_weights_after_fit(from_logits, loss, seed=6):
  trainer = make_trainer(max_lag=0,
                         seed=seed,
                         net=classifier(from_logits=True),
                         utility="l1",
                         from_logits=from_logits)
  frozen_fit(trainer, *toy_data(), steps_per_epoch=3, loss=loss)
  return trainer.stage.sampler.log_weights.numpy()


def test_from_logits_is_read_from_the_compiled_loss():
  logits_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
  told = log_weights_after_fit(True, logits_loss)
  assert np.any(told != 0)
  np.testing.assert_array_equal(log_weights_after_fit(None, logits_loss), told)


def test_from_logits_contradicting_the_loss_is_refused():
  with pytest.raises(ValueError, match="from_logits=False, but the compiled"):
    log_weights_after_fit(
        False, keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def test_a_failed_fit_does_not_hold_back_the_next():
  # The failed fit's iterator lives on in its traceback, its draw waiting
  # for a permit; the next fit's iterator owns the permits from its start.
  x, y = toy_data()
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=0)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=0, wait_timeout=30)
  trainer = AdaptiveSamplingModel(classifier(), stage)
  trainer.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
  with pytest.raises(tf.errors.InvalidArgumentError) as failed:
    # Labels out of range.
    trainer.fit(stage.dataset((x, y + 5)), steps_per_epoch=3, verbose=0)
  history = trainer.fit(stage.dataset((x, y)), steps_per_epoch=3, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  assert failed.traceback  # still held


def test_fit_with_a_seed_and_max_lag_0_repeats_itself():
  x, y = toy_data()
  runs = []
  for _ in range(2):
    trainer = make_trainer(max_lag=0, seed=7)
    trainer.compile(optimizer=keras.optimizers.SGD(0.1),
                    loss="sparse_categorical_crossentropy")
    history = trainer.fit(x, y, epochs=2, validation_data=(x, y), verbose=0)
    runs.append((history.history, trainer.get_weights()))
  assert runs[0][0] == runs[1][0]
  for first, second in zip(runs[0][1], runs[1][1]):
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("fit_arguments,error,message", [
    (lambda s, x, y: dict(x=s.dataset({
        "image": x,
        "label": y
    })), ValueError, r"dict with keys \['image', 'label'\]"),
    (lambda s, x, y: dict(x=x, y=y, validation_data=s.dataset(
        (x, y))), ValueError, "validation_data is the stage's dataset"),
    (lambda s, x, y: dict(x=x), ValueError, "fit needs labels"),
    (lambda s, x, y: dict(x=s.dataset(
        (x, y)), batch_size=5), ValueError, "batch_size=5"),
    (lambda s, x, y: dict(x=x, y=y, class_weight={"a": 1}), ValueError,
     "class_weight"),
])
def test_fit_names_what_it_cannot_take(fit_arguments, error, message):
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  before = trainer.stage.sampler.log_weights.numpy()
  with pytest.raises(error, match=message):
    trainer.fit(**fit_arguments(trainer.stage, x, y), epochs=1, verbose=0)
  np.testing.assert_array_equal(trainer.stage.sampler.log_weights.numpy(),
                                before)


def test_evaluate_refuses_the_stage_dataset():
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  with pytest.raises(ValueError, match="evaluation data is the stage's"):
    trainer.evaluate(trainer.stage.dataset((x, y)), steps=2, verbose=0)


def test_fit_writes_no_terminal_codes_into_a_file():
  code = """
import keras, numpy as np, tf_adasamp
from tf_adasamp.keras import AdaptiveSamplingModel
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
stage = tf_adasamp.data.AdaptiveSampling(
    tf_adasamp.AdaptiveSampler(64, 0.1, 0.5, seed=0), batch_size=16)
trainer = AdaptiveSamplingModel(keras.Sequential(
    [keras.Input((4,)), keras.layers.Dense(2, activation="softmax")]), stage)
trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
trainer.fit(x, y, epochs=2, validation_data=(x, y))
trainer.evaluate(x, y)
trainer.predict(x)
"""
  result = subprocess.run([sys.executable, "-c", code],
                          env=child_process.environment(),
                          capture_output=True,
                          text=True,
                          check=True)
  assert "\x1b" not in result.stdout
  assert result.stdout.count("val_loss") == 2  # a line an epoch


def test_keras_debias_weighs_the_loss_by_beta():
  # beta = 0: weights of 1, so debiasing trains as not debiasing does; the
  # same run at beta = 1 trains otherwise.
  x, y = sampler_controls.toy_data()
  trained = []
  for beta, debias in [(0.0, True), (1.0, False), (1.0, True)]:
    trainer = sampler_controls.keras_trainer(
        AdaptiveSampler(sampler_controls.NUM_EXAMPLES,
                        2.0,
                        0.5,
                        seed=1,
                        epsilon=0.1,
                        beta=beta),
        debias=debias)
    trainer.fit(x, y, steps_per_epoch=6, verbose=0)
    trained.append(trainer.model.get_weights())
  for unweighted, weighted_by_one in zip(trained[1], trained[0]):
    np.testing.assert_allclose(weighted_by_one, unweighted, rtol=1e-6)
  assert any(not np.allclose(debiased, unweighted)
             for debiased, unweighted in zip(trained[2], trained[1]))
