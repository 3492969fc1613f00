"""The train step's pieces (tf_adasamp.keras._training), seen through fit."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_fit_worker as worker
from keras_trainers import AMPLITUDE
from keras_trainers import BATCH_SIZE
from keras_trainers import classifier
from keras_trainers import DECAY
from keras_trainers import frozen_fit
from keras_trainers import make_trainer
from keras_trainers import NUM_EXAMPLES
from keras_trainers import three_lines
from keras_trainers import toy_data
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import diagnostics
from tf_adasamp.keras import AdaptiveSamplingModel


def test_outputs_that_are_not_probabilities_are_refused_naming_from_logits():
  # A logits model compiled with a loss that takes probabilities: its
  # outputs leave [0, 1], and the step refuses them before any update.
  x, y = toy_data()
  trainer = make_trainer(max_lag=0, net=classifier(from_logits=True))
  with pytest.raises(tf.errors.InvalidArgumentError, match="from_logits=True"):
    frozen_fit(trainer, x * 100, y, steps_per_epoch=1)
  assert not np.any(trainer.stage.sampler.log_weights.numpy())


def test_class_weight_multiplies_the_loss_of_each_class():
  x, y = toy_data()
  class_weight = {0: 0.25, 1: 3.0}
  net = classifier()
  trainer = make_trainer(max_lag=0, seed=4, net=net)
  history = frozen_fit(trainer,
                       x,
                       y,
                       steps_per_epoch=1,
                       class_weight=class_weight)
  twin = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, AMPLITUDE, DECAY, seed=4)
  indices = twin.sample(BATCH_SIZE).numpy()
  losses = keras.losses.sparse_categorical_crossentropy(
      y[indices], net(x[indices])).numpy()
  weights = np.array([class_weight[label] for label in y[indices]])
  assert history.history["adaptive_loss"][0] == pytest.approx(np.mean(weights *
                                                                      losses),
                                                              rel=1e-5)


def test_one_hot_labels_reweight_as_class_ids_do():
  x, y = toy_data()
  log_weights = []
  for labels, loss in [(y, "sparse_categorical_crossentropy"),
                       (np.eye(2, dtype=np.float32)[y],
                        "categorical_crossentropy")]:
    trainer = make_trainer(max_lag=0, seed=5, utility="zero_one")
    frozen_fit(trainer, x, labels, steps_per_epoch=4, loss=loss)
    log_weights.append(trainer.stage.sampler.log_weights.numpy())
  assert np.any(log_weights[0] != 0)
  np.testing.assert_array_equal(*log_weights)


def test_training_metrics_estimate_the_uniform_ones_adaptive_are_labelled():
  # A frozen model: the uniform training accuracy is fixed, while the
  # sampler moves onto the examples it gets wrong.
  rng = np.random.default_rng(1)
  x = rng.normal(size=(2000, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] + rng.normal(scale=0.8, size=2000) > 0)
  y = y.astype(np.int64)
  net = classifier(seed=2)
  # Weights within a factor e^2 of each other: a mild Q, a tight estimate.
  sampler = tf_adasamp.AdaptiveSampler(len(x), 1.0, 0.5, seed=0)
  trainer = AdaptiveSamplingModel(net,
                                  data.AdaptiveSampling(sampler, 100,
                                                        max_lag=0),
                                  utility="zero_one")
  trainer.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
  trainer.fit(x, y, epochs=1, verbose=0)  # Q moves off uniform
  history = trainer.fit(x, y, epochs=3, verbose=0)
  probs = net.predict(x, verbose=0)
  accuracy = np.mean(np.argmax(probs, 1) == y)
  loss = np.mean(-np.log(probs[np.arange(len(y)), y]))
  for epoch in range(3):
    # The drawn batches are mostly the misclassified examples...
    assert history.history["adaptive_accuracy"][epoch] < accuracy - 0.15
    # ...and the importance-weighted estimates recover the training set's
    # (2,000 draws an epoch; each tolerance is about four standard errors).
    assert history.history["accuracy"][epoch] == pytest.approx(accuracy,
                                                               abs=0.05)
    assert history.history["loss"][epoch] == pytest.approx(loss, rel=0.1)


def test_the_end_of_fit_says_what_sampling_did(capsys):
  trainer, history, _ = three_lines(epochs=2, batch_size=8)
  del history
  trainer.fit(*worker.toy_data(), epochs=1, verbose=2)
  printed = capsys.readouterr().out.splitlines()[-1]
  sampler = trainer.stage.sampler
  log_q = diagnostics.log_probabilities(sampler)
  share = float(diagnostics.heaviest_share(log_q, 2))  # 1% of 120, rounded up
  ess = float(diagnostics.effective_sample_size(log_q))
  assert printed == (
      f"Adaptive sampling: KL(Q || uniform) "
      f"{float(sampler.kl_divergence()):.4f}, effective sample size "
      f"{ess:.1%} of the 120 examples, the heaviest 2 draw {share:.1%} "
      "(uniform: 1.7%)")
  assert trainer.history.history["heaviest_share"] == [pytest.approx(share)]
  assert trainer.history.history["effective_sample_size"] == [
      pytest.approx(ess)
  ]
