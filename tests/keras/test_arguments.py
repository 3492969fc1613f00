"""`AdaptiveSamplingModel.fit` takes what `keras.Model.fit` takes, and the
wrapper's arguments are checked (tf_adasamp/keras/_arguments.py).

Each signature runs with one replica here and with two (MirroredStrategy
over two logical CPU devices) in a worker process,
tests/support/keras_fit_worker.py, which runs the same scenarios.
"""

import json
import math
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import child_process
import keras_fit_worker as worker
from keras_trainers import three_lines
import reference
import tf_adasamp
from tf_adasamp import defaults
from tf_adasamp import utilities
from tf_adasamp.keras import AdaptiveSamplingModel

WORKER = pathlib.Path(worker.__file__)
TIMEOUT_S = 600
TRAINING_PART = int(
    math.floor(worker.NUM_EXAMPLES * (1 - worker.VALIDATION_SPLIT)))


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
  out = tmp_path_factory.mktemp("keras_fit")
  result = subprocess.run(
      [sys.executable, str(WORKER), str(out)],
      env=child_process.environment(CUDA_VISIBLE_DEVICES=""),
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
      check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return json.loads((out / "results.json").read_text())


@pytest.fixture(params=["one replica", "two replicas"])
def scenario(request):
  """Runs a scenario of keras_fit_worker: here, or read from the worker."""
  if request.param == "one replica":
    return lambda name: worker.SCENARIOS[name](tf.distribute.get_strategy())
  outputs = request.getfixturevalue("two_replicas")
  return lambda name: outputs[name]


def check_common(output, num_examples, steps_per_epoch):
  assert output["num_examples"] == num_examples
  assert output["steps_per_epoch"] == [steps_per_epoch] * worker.EPOCHS
  # The stage's batch is a replica's share of the global batch.
  assert output["stage_batch_size"] * output["copies"] == worker.BATCH_SIZE
  assert output["copies_identical"]
  assert output["reweighted"] > 0
  assert np.all(np.isfinite(output["loss"]))
  assert {"kl", "effective_sample_size",
          "heaviest_share"} <= set(output["logs"])


def test_fit_on_arrays_draws_from_the_part_before_validation_split(scenario):
  output = scenario("arrays_with_batch_size_and_validation_split")
  check_common(output, TRAINING_PART,
               math.ceil(TRAINING_PART / worker.BATCH_SIZE))
  # Keras's held-out part, the last quarter, validated as Keras does.
  assert output["val_loss"][-1] == pytest.approx(output["evaluated_held_out"],
                                                 rel=1e-5)


def test_fit_on_arrays_with_validation_data(scenario):
  output = scenario("arrays_with_validation_data")
  check_common(output, worker.NUM_EXAMPLES,
               math.ceil(worker.NUM_EXAMPLES / worker.BATCH_SIZE))
  assert len(output["val_loss"]) == worker.EPOCHS


@pytest.mark.parametrize(
    "name", ["dataset_of_x_y", "dataset_of_x_y_sample_weight", "stage_dataset"])
def test_fit_on_a_dataset_in_its_batch_size(scenario, name):
  output = scenario(name)
  check_common(output, worker.NUM_EXAMPLES,
               math.ceil(worker.NUM_EXAMPLES / worker.BATCH_SIZE))


def test_a_sampler_without_copies_is_refused_in_a_strategys_scope(two_replicas):
  refusal = two_replicas["stage_of_a_sampler_without_copies"]["refusal"]
  assert "tf_adasamp.distribute.create_sampler" in refusal
  assert "\n" not in refusal


def test_an_adaptive_sampler_made_in_a_strategys_scope_is_refused():
  with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
    with pytest.raises(ValueError,
                       match="tf_adasamp.distribute.create_sampler"):
      tf_adasamp.AdaptiveSampler(10)


def test_three_lines_wrap_compile_fit_in_keras_batches():
  trainer, history, steps = three_lines(epochs=2)
  assert steps.per_epoch == [math.ceil(worker.NUM_EXAMPLES / 32)] * 2
  sampler = trainer.stage.sampler
  assert (sampler.num_examples,
          trainer.stage.batch_size) == (worker.NUM_EXAMPLES, 32)
  assert (sampler.amplitude, sampler.decay,
          sampler.beta) == (defaults.AMPLITUDE, defaults.DECAY, defaults.BETA)
  assert history.history["kl"][-1] > 0


@pytest.mark.parametrize("utility_at", ["step", "updated"])
def test_fit_on_arrays_reweights_exactly_as_algorithm_1(utility_at):
  # One step of SGD: the utilities are the initial model's ("step") or the
  # updated one's ("updated"); the draws are the seeded sampler's own.
  x, y = worker.toy_data()
  net = worker.classifier()
  initial = net.get_weights()
  trainer = AdaptiveSamplingModel(net,
                                  utility="l1",
                                  utility_at=utility_at,
                                  sampler_options=dict(seed=3,
                                                       amplitude=1.5,
                                                       decay=0.8))
  trainer.compile(optimizer=keras.optimizers.SGD(0.5),
                  loss="sparse_categorical_crossentropy")
  trainer.fit(x, y, batch_size=16, steps_per_epoch=1, verbose=0)

  twin = tf_adasamp.AdaptiveSampler(worker.NUM_EXAMPLES, 1.5, 0.8, seed=3)
  algorithm = reference.Algorithm1(worker.NUM_EXAMPLES, 1.5, 0.8)
  indices = algorithm.draw(twin.uniforms(16).numpy())
  if utility_at == "step":
    net = keras.models.clone_model(net)
    net.set_weights(initial)
  probs = net(x[indices], training=False)
  algorithm.update(indices, utilities.l1(y[indices], probs).numpy())
  np.testing.assert_allclose(trainer.stage.sampler.log_weights.numpy(),
                             algorithm.log_weights,
                             rtol=1e-5,
                             atol=1e-6)


def test_the_same_arrays_again_keep_the_traced_step():
  x, y = worker.toy_data()
  trainer, _, _ = three_lines(steps_per_epoch=1)
  traced = trainer.train_function
  trainer.fit(x.copy(), y.copy(), steps_per_epoch=1, verbose=0)
  assert trainer.train_function is traced
  trainer.fit(x, 1 - y, steps_per_epoch=1, verbose=0)
  assert trainer.train_function is not traced


class Endless(keras.utils.PyDataset):

  def __len__(self):
    return 1

  def __getitem__(self, index):
    return worker.toy_data()


def dataset(*, repeat=False, filtered=False, batched=True):
  x, y = worker.toy_data()
  result = tf.data.Dataset.from_tensor_slices((x, y))
  if batched:
    result = result.batch(16)
  if filtered:
    result = result.filter(lambda x, y: True)
  return result.repeat() if repeat else result


@pytest.mark.parametrize("fit_arguments,error,message", [
    (lambda: dict(x=dataset(repeat=True)), ValueError, "endless"),
    (lambda: dict(x=dataset(filtered=True)), ValueError,
     r"assert_cardinality\(num_batches\)"),
    (lambda: dict(x=dataset(batched=False)), ValueError, "x.batch"),
    (lambda: dict(x=dataset(), batch_size=8), ValueError,
     "batches of 16; leave it out"),
    (lambda: dict(x=Endless()), TypeError, "PyDataset"),
    (lambda: dict(x=worker.toy_data()[0]), ValueError, "fit needs labels"),
    (lambda: dict(x=worker.toy_data()[0], y=worker.toy_data(60)[1]), ValueError,
     "same number of rows"),
    (lambda: dict(
        x=worker.toy_data()[0], y=worker.toy_data()[1], validation_split=0.999),
     ValueError, "validation_split"),
])
def test_fit_names_what_it_cannot_take_and_makes_no_sampler(
    fit_arguments, error, message):
  trainer = AdaptiveSamplingModel(worker.classifier())
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  with pytest.raises(error, match=message):
    trainer.fit(**fit_arguments(), verbose=0)
  assert trainer.stage is None


def test_a_stage_of_another_size_is_refused_naming_the_size():
  x, y = worker.toy_data()
  stage = tf_adasamp.data.AdaptiveSampling(
      tf_adasamp.AdaptiveSampler(worker.NUM_EXAMPLES), 16)
  trainer = AdaptiveSamplingModel(worker.classifier(), stage)
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  with pytest.raises(ValueError, match=f"num_examples={TRAINING_PART}"):
    trainer.fit(x, y, validation_split=worker.VALIDATION_SPLIT, verbose=0)
  with pytest.raises(ValueError, match="validation_data=.x_val, y_val"):
    trainer.fit(stage.dataset((x, y)),
                steps_per_epoch=1,
                validation_split=0.5,
                verbose=0)
  assert not np.any(stage.sampler.log_weights.numpy())


@pytest.mark.parametrize("arguments,error,message", [
    (dict(sampler_options={"amplitud": 1.0}), ValueError, r"\['amplitud'\]"),
    (dict(sampler_options=[("seed", 0)]), TypeError, "must be a dict"),
    (dict(stage=tf_adasamp.data.AdaptiveSampling(tf_adasamp.AdaptiveSampler(4),
                                                 2),
          sampler_options={"seed": 0}), ValueError, "brings its own"),
    (dict(utility_at="later"), ValueError, "utility_at must be one of"),
])
def test_wrapper_arguments_are_checked(arguments, error, message):
  with pytest.raises(error, match=message):
    AdaptiveSamplingModel(worker.classifier(), **arguments)
