"""The Keras internals tf_adasamp relies on (tf_adasamp/_keras_internals.py)
are still there, and behave as it assumes."""

import inspect

import keras
import numpy as np
import pytest

from tf_adasamp import _keras_internals


def test_keras_is_the_minor_version_the_internals_were_checked_against():
  minor = ".".join(keras.__version__.split(".")[:2])
  assert minor == _keras_internals.TESTED_KERAS_VERSION, (
      f"Keras {keras.__version__}: check each assumption of "
      "tf_adasamp/_keras_internals.py against this release (this file's "
      "other tests), then set TESTED_KERAS_VERSION")


def compiled_model(**compile_arguments):
  model = keras.Sequential(
      [keras.Input((3,)),
       keras.layers.Dense(2, activation="softmax")])
  model.compile(optimizer="sgd",
                loss="sparse_categorical_crossentropy",
                **compile_arguments)
  return model


def test_compiled_metrics_are_the_objects_compile_was_given():
  mean = keras.metrics.Mean()

  def custom(y_true, y_pred):  # not registered with Keras
    return y_pred[:, 0]

  model = compiled_model(metrics=["accuracy", custom], weighted_metrics=[mean])
  metrics, weighted = _keras_internals.compiled_metrics(model)
  assert metrics[0] == "accuracy" and metrics[1] is custom
  assert weighted[0] is mean


def test_metrics_like_compile_resolve_accuracy_by_the_labels_shape():
  metrics = _keras_internals.metrics_like_compile(["accuracy"])
  y_pred = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], np.float32)
  metrics.update_state(np.array([0, 1, 1]), y_pred)
  assert [float(m.result()) for m in metrics.metrics] == pytest.approx([2 / 3])
  assert isinstance(metrics, keras.metrics.Metric)


def test_symbolic_build_is_the_hook_fit_builds_through():
  # The mixin overrides this method by name and signature.
  parameters = inspect.signature(keras.Model._symbolic_build).parameters
  assert list(parameters) == ["self", "iterator", "data_batch"]
  source = inspect.getsource(keras.Model.fit)
  assert "_maybe_symbolic_build" in source
  builder = inspect.getsource(keras.Model._maybe_symbolic_build)
  assert "self._symbolic_build(data_batch=" in builder


def test_validation_split_holds_out_the_end_before_any_shuffle():
  x, y = np.arange(10), np.arange(10) * 2
  (x_train, y_train), (x_val, y_val) = _keras_internals.train_validation_split(
      (x, y), 0.25)
  np.testing.assert_array_equal(x_train, np.arange(7))  # floor(10 * 0.75)
  np.testing.assert_array_equal(y_val, [14, 16, 18])
  source = inspect.getsource(keras.Model.fit)
  assert "train_validation_split" in source  # the split fit makes
