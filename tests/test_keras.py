"""tf_adasamp.keras: `fit` under adaptive sampling."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import reference
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import utilities
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 120
BATCH_SIZE = 16
AMPLITUDE, DECAY = 1.5, 0.8


def toy_data(seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y


def classifier(from_logits=False, seed=0):
  keras.utils.set_random_seed(seed)
  return keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation=None if from_logits else "softmax"),
  ])


def make_trainer(max_lag=1, seed=0, net=None, **kwargs):
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY,
                                       seed=seed)
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE, max_lag=max_lag)
  return AdaptiveSamplingModel(net or classifier(), stage, **kwargs)


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
  history = trainer.fit(dataset, steps_per_epoch=8, epochs=2,
                        validation_data=(x, y), callbacks=[batch_logs],
                        verbose=0)
  assert set(history.history) == {"loss", "accuracy", "kl", "val_loss",
                                  "val_accuracy"}
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
  trainer = make_trainer(max_lag=0, seed=3, net=net, utility=utility,
                         from_logits=from_logits)
  # A zero learning rate freezes the model, so the replay below can compute
  # the same utilities.
  trainer.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=from_logits),
                  steps_per_execution=steps_per_execution)
  steps = 6
  trainer.fit(trainer.stage.dataset((x, y)), steps_per_epoch=steps,
              verbose=0)

  twin = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=3)
  algorithm = reference.Algorithm1(NUM_EXAMPLES, AMPLITUDE, DECAY)
  for _ in range(steps):
    indices = algorithm.draw(twin.uniforms(BATCH_SIZE).numpy())
    outputs = net(x[indices], training=True)
    probs = tf.nn.softmax(outputs) if from_logits else outputs
    algorithm.update(indices,
                     utilities.get(utility)(y[indices], probs).numpy())
  np.testing.assert_allclose(trainer.stage.sampler.log_weights.numpy(),
                             algorithm.log_weights, rtol=1e-6, atol=1e-6)


def label_utility(labels, unused_probs):
  return 0.7 * tf.cast(labels, tf.float64)


@pytest.mark.parametrize("debias,with_sample_weight", [
    (False, False), (True, False), (True, True)])
def test_loss_weights_are_inverse_n_q_when_debiased_times_sample_weight(
    debias, with_sample_weight):
  x, y = toy_data()
  sample_weight = np.linspace(0.5, 2.0, NUM_EXAMPLES).astype(np.float32)
  source = (x, y, sample_weight) if with_sample_weight else (x, y)
  net = classifier()
  trainer = make_trainer(max_lag=0, seed=4, net=net, debias=debias,
                         utility=label_utility)
  trainer.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss="sparse_categorical_crossentropy")
  history = trainer.fit(trainer.stage.dataset(source), steps_per_epoch=1,
                        epochs=2, verbose=0)

  # The second step's batch, replayed.
  twin = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=4)
  first = twin.sample(BATCH_SIZE)
  twin.update(first, label_utility(tf.gather(y, first), None))
  indices, probabilities = twin.sample_with_probabilities(BATCH_SIZE)
  indices = indices.numpy()
  losses = keras.losses.sparse_categorical_crossentropy(
      y[indices], net(x[indices])).numpy()
  if debias:
    losses *= 1 / (NUM_EXAMPLES * probabilities.numpy())
  if with_sample_weight:
    losses *= sample_weight[indices]
  assert history.history["loss"][1] == pytest.approx(np.mean(losses),
                                                     rel=1e-5)


def test_jit_compile_runs_the_learning_step_under_xla():
  x, y = toy_data()
  trainer = make_trainer()
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  jit_compile=True)
  history = trainer.fit(trainer.stage.dataset((x, y)), steps_per_epoch=3,
                        verbose=0)
  assert history.history["kl"][-1] > 0

  # The forward pass is XLA-compiled: an op XLA lacks makes fit fail.
  no_xla = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Lambda(lambda t: t + 0 * tf.strings.to_number(
          tf.strings.as_string(t))),
      keras.layers.Dense(2, activation="softmax"),
  ])
  trainer = make_trainer(net=no_xla)
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  jit_compile=True)
  with pytest.raises(tf.errors.InvalidArgumentError, match="XLA"):
    trainer.fit(trainer.stage.dataset((x, y)), steps_per_epoch=1, verbose=0)


def test_unknown_utility_name_is_refused():
  with pytest.raises(ValueError, match="unknown utility"):
    make_trainer(utility="hinge")
