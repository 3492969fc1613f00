"""Extending the trainer (docs/guide.md, "Extending"): a model, a utility
and a data set of one's own train end to end, and the registries are what
the flags offer."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import child_process
from tf_adasamp import utilities
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import run_files

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def registries(monkeypatch):
  """Each test registers into copies of the registries, dropped after it."""
  monkeypatch.setattr(models, "MODELS", dict(models.MODELS))
  monkeypatch.setattr(utilities, "UTILITIES", dict(utilities.UTILITIES))


def linear(input_shape, num_classes, l2):
  del l2  # unregularised
  return tf.keras.Sequential([
      tf.keras.Input(input_shape),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(num_classes)
  ],
                             name="linear")


def never(labels, probs):
  """A utility that never reweights: Q_t stays uniform."""
  del labels
  return tf.zeros_like(probs[:, 0])


def two_steps(**settings):
  return config_lib.TrainConfig(
      **{
          "steps": 2,
          "eval_interval": 2,
          "batch_size": 16,
          "learning_rate": 0.1,
          "amplitude": 1.0,
          **settings
      })


def test_a_registered_model_and_utility_train_end_to_end(digits):
  built = []

  @models.register_model("linear")
  def recorded_linear(input_shape, num_classes, l2):
    built.append((tuple(input_shape), num_classes, l2))
    return linear(input_shape, num_classes, l2)

  utilities.register_utility("never", never)
  records = loop.train(two_steps(model="linear", utility="never", l2=0.5),
                       data=digits)
  assert built == [((8, 8, 1), 10, 0.5)]
  assert records[-1]["step"] == 2
  # Used as given: any built-in utility would have moved Q_t off uniform.
  assert records[-1]["kl"] == pytest.approx(0.0, abs=1e-12)
  reweighted = loop.train(two_steps(model="linear", utility="l1"), data=digits)
  assert reweighted[-1]["kl"] > 1e-6


def test_from_logits_calls_a_registered_utility_on_the_softmax():
  squared = utilities.register_utility(
      "squared_true_probability", lambda labels, probs: tf.square(
          tf.gather(probs, labels, axis=1, batch_dims=1)))
  logits = tf.constant([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]])
  labels = tf.constant([0, 1])
  np.testing.assert_array_equal(
      utilities.from_logits("squared_true_probability", labels, logits),
      squared(labels, tf.nn.softmax(logits)))


def test_a_data_set_of_ones_own_trains_end_to_end():
  rng = np.random.default_rng(0)

  def images(n):
    return rng.uniform(size=(n, 4, 4, 1)).astype(np.float32)

  data = datasets.Dataset("squares", images(40),
                          rng.integers(0, 3, 40).astype(np.int32), images(10),
                          rng.integers(0, 3, 10).astype(np.int32), 3)
  records = loop.train(two_steps(model="logistic"), data=data)
  assert records[-1]["step"] == 2
  assert 0 <= records[-1]["test_accuracy"] <= 1


def test_the_flags_offer_what_is_registered():
  assert tuple(config_lib.MODELS) == ("cnn", "logistic", "mlp")
  # The registry's, then the reducible loss, which is no registry function.
  assert tuple(config_lib.UTILITIES) == (*config_lib.BUILT_IN_UTILITIES,
                                         config_lib.REDUCIBLE_LOSS)
  models.register_model("linear", linear)
  utilities.register_utility("never", never)
  assert tuple(config_lib.MODELS) == tuple(models.MODELS)
  assert tuple(config_lib.UTILITIES) == (*utilities.UTILITIES,
                                         config_lib.REDUCIBLE_LOSS)
  assert config_lib.TrainConfig(model="linear",
                                utility="never").model == ("linear")


def guide_script():
  """The script of docs/guide.md's "Extending" section."""
  with open(os.path.join(ROOT, "docs", "guide.md"), encoding="utf-8") as f:
    extending = f.read().split("\n## Extending\n", 1)[1]
  (script,) = re.findall(r"^```py\n(.*?)^```$", extending, re.M | re.S)
  return script


def test_the_guides_script_trains_its_model_and_utility_from_the_flags(
    tmp_path):
  script = tmp_path / "my_train.py"
  script.write_text(guide_script())
  result = subprocess.run([
      sys.executable,
      str(script), "--model=linear", "--utility=brier", "--dataset=digits",
      "--steps=2", "--eval_interval=2", "--batch_size=16",
      f"--output_dir={tmp_path / 'run'}", "--noprogress"
  ],
                          cwd=tmp_path,
                          capture_output=True,
                          text=True,
                          timeout=300,
                          env=child_process.environment())
  assert result.returncode == 0, result.stderr
  with open(tmp_path / "run" / run_files.METRICS_FILE, encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  assert records[-1]["step"] == 2
  assert records[-1]["kl"] > 0  # the Brier score reweighted the draws


@pytest.mark.parametrize("register",
                         [models.register_model, utilities.register_utility])
def test_registering_refuses_a_taken_name_or_a_non_callable(register):
  registry = (models.MODELS
              if register is models.register_model else utilities.UTILITIES)
  before = dict(registry)
  taken = next(iter(registry))
  with pytest.raises(ValueError, match="new, non-empty name"):
    register(taken, never)
  with pytest.raises(ValueError, match="new, non-empty name"):
    register("", never)
  with pytest.raises(TypeError, match="must be a str"):
    register(None, never)
  with pytest.raises(TypeError, match="must be callable"):
    register("new", "not a function")
  # A name is a flag's choice, in comma-separated lists too.
  for name in ("a,b", " l1", "--help", "-x", "a b", "a/b", "é"):
    with pytest.raises(ValueError, match="is a command-line choice"):
      register(name, never)
  assert registry == before
  register("Brier_2-class", never)


def test_a_utility_that_returns_other_than_one_utility_an_example_is_refused():
  utilities.register_utility("pairs", lambda labels, probs: probs)
  logits = tf.zeros([4, 2])
  with pytest.raises(ValueError,
                     match=r"utility 'pairs' must return one utility an "
                     r"example, \[batch\] = \(4,\), got shape \(4, 2\)"):
    utilities.from_logits("pairs", [0, 1, 0, 1], logits)
  with pytest.raises(ValueError, match="'pairs' must return one utility"):
    utilities.evaluate("pairs", [0, 1, 0, 1], tf.nn.softmax(logits))
  utilities.register_utility("brier", lambda labels, probs: probs[:, 0])
  assert utilities.from_logits("brier", [0, 1, 0, 1], logits).shape == [4]
