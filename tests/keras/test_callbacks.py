"""The Keras callbacks of adaptive sampling (tf_adasamp.keras.callbacks):
SamplingTensorBoard."""

import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_trainers import BATCH_SIZE
from keras_trainers import make_trainer
from keras_trainers import NUM_EXAMPLES
from keras_trainers import toy_data
from tf_adasamp import diagnostics
from tf_adasamp.keras import SamplingTensorBoard


def summaries(log_dir):
  """{tag: [(step, value or histogram)]} from the event files under
  log_dir."""
  found = {}
  for root, _, files in os.walk(log_dir):
    for name in files:
      for record in tf.data.TFRecordDataset(os.path.join(root, name)):
        event = tf.compat.v1.Event.FromString(record.numpy())
        for value in event.summary.value:
          found.setdefault(value.tag, []).append(
              (event.step, tf.make_ndarray(value.tensor)))
  return found


def test_sampling_tensorboard_logs_the_distribution(tmp_path):
  pytest.importorskip("tensorboard")  # an extra, as for Keras's callback
  x, y = toy_data()
  trainer = make_trainer(utility="zero_one")
  trainer.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss="sparse_categorical_crossentropy")
  log_dir = os.path.join(tmp_path, "logs")
  trainer.fit(x,
              y,
              epochs=2,
              verbose=0,
              validation_data=(x, y),
              callbacks=[SamplingTensorBoard(log_dir, training_data=(x, y))])
  # Keras's runs, one tag per quantity: the step's kl and distinct_draws
  # only as the sampler's diagnostics.
  assert sorted(os.listdir(log_dir)) == ["train", "validation"]
  found = summaries(os.path.join(log_dir, "train"))
  assert set(found) == {
      "epoch_loss", "epoch_adaptive_loss", "epoch_learning_rate",
      *diagnostics.TAGS.values()
  }
  assert set(summaries(os.path.join(log_dir, "validation"))) == {
      "epoch_loss", "evaluation_loss_vs_iterations"
  }
  assert 1 <= found["sampler/distinct_draws"][-1][1] <= BATCH_SIZE
  wrong = np.argmax(trainer.predict(x, verbose=0), axis=-1) != y
  assert [step for step, _ in found["sampler/kl_divergence"]] == [0, 1]
  sampler = trainer.stage.sampler
  q = sampler.probabilities().numpy()
  assert found["sampler/kl_divergence"][-1][1] == pytest.approx(
      sampler.kl_divergence().numpy())
  assert found["sampler/max_probability"][-1][1] == pytest.approx(q.max())
  assert found["sampler/effective_sample_size"][-1][1] == pytest.approx(
      1 / np.sum(q**2) / NUM_EXAMPLES, rel=1e-5)
  assert found["epoch_learning_rate"][-1][1] == pytest.approx(0.05)
  assert found["sampler/misclassified_mass"][-1][1] == pytest.approx(
      q[wrong].sum(), rel=1e-5)


def test_sampling_tensorboard_says_how_to_install_tensorboard(monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorboard", None)
  with pytest.raises(ImportError, match="pip install tensorboard"):
    SamplingTensorBoard("logs")
