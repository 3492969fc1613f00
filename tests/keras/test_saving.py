"""AdaptiveSamplingModel saves, restores and copies the sampler's state
(tf_adasamp/keras/_saving.py)."""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import child_process
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
import sampler_controls
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import schedules
from tf_adasamp.keras import AdaptiveSamplingModel

NUM_EXAMPLES = 120
BATCH_SIZE = 16


def toy_data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
  return x, y


def make_trainer(seed=0):
  keras.utils.set_random_seed(seed)
  net = keras.Sequential([
      keras.Input((4,)),
      keras.layers.Dense(8, activation="relu"),
      keras.layers.Dense(2, activation="softmax")
  ])
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, 1.5, 0.8, seed=seed)
  trainer = AdaptiveSamplingModel(net,
                                  data.AdaptiveSampling(sampler,
                                                        BATCH_SIZE,
                                                        max_lag=0),
                                  utility="zero_one")
  trainer.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"],
                  jit_compile=True)
  return trainer


def sampler_state(trainer):
  sampler = trainer.stage.sampler
  return [v.numpy() for v in [*sampler.variables, sampler.generator.state]]


def test_sampler_state_is_non_trainable_weights_of_the_model():
  trainer = make_trainer()
  sampler = trainer.stage.sampler
  handles = {id(v.handle) for v in trainer.non_trainable_weights}
  for variable in [*sampler.variables, sampler.generator.state]:
    assert id(variable.handle) in handles
  assert len(trainer.trainable_weights) == len(trainer.model.trainable_weights)
  # Weights are the sampler's variables themselves, not copies.
  x, y = toy_data()
  trainer.fit(x, y, steps_per_epoch=3, verbose=0)
  stored = dict(zip([v.path for v in trainer.weights], trainer.get_weights()))
  log_weights = next(value for path, value in stored.items()
                     if path.endswith("sampler_log_weights"))
  np.testing.assert_array_equal(log_weights, sampler.log_weights.numpy())
  assert np.any(log_weights != 0)


def test_keras_file_round_trips_model_and_sampler(tmp_path):
  x, y = toy_data()
  trainer = make_trainer()
  trainer.fit(x, y, steps_per_epoch=5, verbose=0)
  path = os.path.join(tmp_path, "trainer.keras")
  trainer.save(path)
  loaded = keras.models.load_model(path)
  assert isinstance(loaded, AdaptiveSamplingModel)
  assert loaded.jit_compile
  assert_same_state(sampler_state(trainer), sampler_state(loaded))
  np.testing.assert_allclose(loaded.predict(x, verbose=0),
                             trainer.predict(x, verbose=0))
  # Same distribution and random state: the same next draws.
  np.testing.assert_array_equal(loaded.stage.sampler.sample(32),
                                trainer.stage.sampler.sample(32))
  loaded.fit(x, y, steps_per_epoch=2, verbose=0)


def run_child(code, *args):
  """Runs `code` in a fresh interpreter; returns its stdout."""
  return subprocess.run([sys.executable, "-c", code, *args],
                        env=child_process.environment(),
                        capture_output=True,
                        text=True,
                        check=True).stdout


LOAD_AFTER_IMPORT = {
    "tf_adasamp, then keras":
        "import tf_adasamp\nimport keras\n",
    "keras, then tf_adasamp":
        "import keras\nimport tf_adasamp\n",
    "tf_adasamp, then tf.keras": ("import tf_adasamp\nimport tensorflow as tf\n"
                                  "keras = tf.keras\n"),
}


@pytest.mark.parametrize("imports", LOAD_AFTER_IMPORT)
def test_import_tf_adasamp_is_enough_to_load_a_saved_trainer(tmp_path, imports):
  x, y = toy_data()
  trainer = make_trainer()
  trainer.fit(x, y, steps_per_epoch=2, verbose=0)
  path = os.path.join(tmp_path, "trainer.keras")
  trainer.save(path)
  np.save(os.path.join(tmp_path, "x.npy"), x)
  code = LOAD_AFTER_IMPORT[imports] + (
      "import sys, numpy as np\n"
      "loaded = keras.models.load_model(sys.argv[1])\n"
      "print(type(loaded).__name__)\n"
      "np.save(sys.argv[2], loaded.predict(np.load(sys.argv[3]), verbose=0))\n")
  predictions = os.path.join(tmp_path, "predictions.npy")
  out = run_child(code, path, predictions, os.path.join(tmp_path, "x.npy"))
  assert out.split()[-1] == "AdaptiveSamplingModel"
  np.testing.assert_allclose(np.load(predictions),
                             trainer.predict(x, verbose=0),
                             rtol=1e-6)


def test_export_serves_the_wrapped_model_without_the_sampler(tmp_path):
  x, y = toy_data()
  trainer = make_trainer()
  trainer.fit(x, y, steps_per_epoch=2, verbose=0)
  expected = trainer.predict(x, verbose=0)
  served = os.path.join(tmp_path, "served")
  trainer.export(served)
  np.save(os.path.join(tmp_path, "x.npy"), x)
  # Loaded where tf_adasamp is not: the model's weights, and nothing else.
  code = ("import sys, numpy as np, tensorflow as tf\n"
          "model = tf.saved_model.load(sys.argv[1])\n"
          "np.save(sys.argv[2], model.serve(np.load(sys.argv[3])).numpy())\n"
          "print(sorted(tuple(v.shape) for v in model.variables))\n"
          "assert not any(name.startswith('tf_adasamp') for name in "
          "sys.modules)\n")
  predictions = os.path.join(tmp_path, "predictions.npy")
  out = run_child(code, served, predictions, os.path.join(tmp_path, "x.npy"))
  np.testing.assert_allclose(np.load(predictions), expected, rtol=1e-6)
  assert out.split("\n")[-2] == str(
      sorted(tuple(v.shape) for v in trainer.model.variables))


@pytest.mark.parametrize("filename", ["best.keras", "best.weights.h5"])
def test_model_checkpoint_saves_the_distribution(tmp_path, filename):
  x, y = toy_data()
  trainer = make_trainer()
  path = os.path.join(tmp_path, filename)
  trainer.fit(x,
              y,
              steps_per_epoch=4,
              epochs=2,
              verbose=0,
              callbacks=[
                  keras.callbacks.ModelCheckpoint(
                      path, save_weights_only=filename.endswith(".h5"))
              ])
  assert os.path.getsize(path) > 0
  restored = make_trainer(seed=1)
  restored.load_weights(path)
  assert_saved_during_training(sampler_state(restored), sampler_state(trainer))


def assert_saved_during_training(saved, live):
  """`saved`, a sampler state written at the end of a training epoch, is
  `live`, the state after it, but for the generator, which may be one batch
  behind: the stage's pipeline may draw the next batch before or after the
  checkpoint is written (docs/guide.md)."""
  *saved, saved_generator = saved
  *live, live_generator = live
  assert_same_state(saved, live)
  behind = live_generator - saved_generator
  assert not behind.any() or np.array_equal(behind, one_batch_of_draws())


def one_batch_of_draws():
  """How far a batch of the stage moves the sampler's generator state."""
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES, 1.5, 0.8, seed=0)
  before = sampler.generator.state.numpy()
  sampler.sample(BATCH_SIZE)
  return sampler.generator.state.numpy() - before


class Interrupt(keras.callbacks.Callback):

  def on_epoch_end(self, epoch, logs=None):
    if epoch == 1:
      raise RuntimeError("interrupted")


def test_backup_and_restore_resumes_draw_for_draw(tmp_path):
  # fit draws arrays in the step, so the backup at an epoch's end holds the
  # generator as the next epoch starts from it: the resumed fit repeats the
  # uninterrupted one exactly.
  x, y = toy_data()
  whole = make_trainer()
  whole.fit(x, y, steps_per_epoch=3, epochs=3, verbose=0)
  backup = os.path.join(tmp_path, "backup")
  interrupted = make_trainer()
  with pytest.raises(RuntimeError, match="interrupted"):
    interrupted.fit(
        x,
        y,
        steps_per_epoch=3,
        epochs=3,
        verbose=0,
        callbacks=[keras.callbacks.BackupAndRestore(backup),
                   Interrupt()])
  resumed = make_trainer(seed=1)  # another start, no manual build
  resumed.fit(x,
              y,
              steps_per_epoch=3,
              epochs=3,
              verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup)])
  assert_same_state(sampler_state(resumed), sampler_state(whole))
  for ours, theirs in zip(resumed.get_weights(), whole.get_weights()):
    np.testing.assert_array_equal(ours, theirs)


def test_early_stopping_restores_the_best_epochs_distribution():
  x, y = toy_data()
  trainer = make_trainer()
  at_epoch_end = []

  class Score(keras.callbacks.Callback):

    def on_epoch_end(self, epoch, logs=None):
      logs["score"] = float(epoch)  # best at epoch 0
      at_epoch_end.append(sampler_state(trainer))

  trainer.fit(x,
              y,
              steps_per_epoch=3,
              epochs=5,
              verbose=0,
              callbacks=[
                  Score(),
                  keras.callbacks.EarlyStopping("score",
                                                mode="min",
                                                patience=1,
                                                restore_best_weights=True)
              ])
  assert len(at_epoch_end) == 2
  assert np.any(at_epoch_end[0][2] != at_epoch_end[1][2])
  # The distribution, not the generator: the stage may draw epoch 1's first
  # batch (advancing the generator) while epoch 0's callbacks run, so the
  # generator state Score saw and the one EarlyStopping kept can differ by
  # that draw.
  distribution = len(trainer.stage.sampler.variables)
  assert_same_state(
      sampler_state(trainer)[:distribution], at_epoch_end[0][:distribution])


def margin(labels, probs):
  """1 minus the true class's probability margin over the others' largest."""
  true = tf.gather(probs, labels, batch_dims=1)
  return 1 - true + tf.reduce_max(
      probs - tf.one_hot(labels, tf.shape(probs)[1], dtype=probs.dtype), 1)


def stage_less(utility="l1", **sampler_options):
  keras.utils.set_random_seed(0)
  trainer = AdaptiveSamplingModel(keras.Sequential(
      [keras.Input((4,)),
       keras.layers.Dense(2, activation="softmax")]),
                                  utility=utility,
                                  sampler_options=sampler_options)
  trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
  return trainer


@pytest.mark.parametrize("trainer,message", [
    (lambda: stage_less(lambda labels, probs: 1 - tf.reduce_max(probs, 1)),
     r"the utility \S*<lambda> cannot be saved: .* tf_adasamp.utilities."
     r"register_utility"),
    (lambda: stage_less(amplitude=lambda count: 1.0),
     r"the sampler's amplitude schedule \S*<lambda> cannot be saved: .* "
     r"tf_adasamp.schedules"),
])
def test_what_cannot_be_loaded_is_refused_at_save(tmp_path, trainer, message):
  trainer = trainer()
  x, y = toy_data()
  path = os.path.join(tmp_path, "trainer.keras")
  with pytest.raises(ValueError, match=message):
    trainer.save(path)
  trainer.fit(x, y, steps_per_epoch=1, verbose=0)  # with its sampler too
  with pytest.raises(ValueError, match=message):
    trainer.save(path)
  assert not os.path.exists(path)


def test_a_model_checkpoint_of_what_cannot_be_loaded_is_refused_at_fit(
    tmp_path):
  trainer = stage_less(lambda labels, probs: 1 - tf.reduce_max(probs, 1))
  x, y = toy_data()
  checkpoint = keras.callbacks.ModelCheckpoint(
      os.path.join(tmp_path, "best.keras"))
  with pytest.raises(ValueError, match="register_utility"):
    trainer.fit(x, y, epochs=2, callbacks=[checkpoint], verbose=0)
  assert trainer.stage is None  # refused before anything began
  # Weights alone hold no code: they save.
  weights = keras.callbacks.ModelCheckpoint(os.path.join(
      tmp_path, "best.weights.h5"),
                                            save_weights_only=True)
  trainer.fit(x, y, steps_per_epoch=2, callbacks=[weights], verbose=0)


def test_a_registered_utility_and_a_named_schedule_round_trip(
    tmp_path, monkeypatch):
  # Registered into a copy, so other tests see the built-in utilities only.
  monkeypatch.setattr(tf_adasamp.utilities, "UTILITIES",
                      dict(tf_adasamp.utilities.UTILITIES))
  tf_adasamp.utilities.register_utility("test_keras_saving_margin", margin)
  trainer = stage_less("test_keras_saving_margin",
                       amplitude=tf_adasamp.schedules.warmup(1.0, 10),
                       seed=4)
  x, y = toy_data()
  trainer.fit(x, y, batch_size=8, validation_split=0.25, epochs=2, verbose=0)
  path = os.path.join(tmp_path, "trainer.keras")
  trainer.save(path)
  loaded = keras.models.load_model(path)
  assert loaded.utility is margin
  assert loaded.stage.batch_size == 8
  assert_same_state(sampler_state(loaded), sampler_state(trainer))


def test_a_fresh_wrapper_loads_weights_saved_after_a_fit(tmp_path):
  # Its first fit has not made the sampler yet: loading makes it, over the
  # saved state's examples.
  trainer = stage_less(seed=2)
  x, y = toy_data()
  trainer.fit(x, y, epochs=2, verbose=0)
  path = os.path.join(tmp_path, "trainer.weights.h5")
  trainer.save_weights(path)
  fresh = stage_less(seed=2)
  fresh.load_weights(path)
  assert_same_state(sampler_state(fresh), sampler_state(trainer))
  # Refused, it leaves the wrapper without a sampler, as it was.
  other = stage_less(amplitude=2.0)
  with pytest.raises(ValueError, match="checkpoint's amplitude differs"):
    other.load_weights(path)
  assert other.stage is None
  before_fit = os.path.join(tmp_path, "before.keras")
  stage_less().save(before_fit)
  assert keras.models.load_model(before_fit).stage is None


def with_config_edited(path, copy, **changes):
  """A copy at `copy` of the .keras file at `path` whose trainer's config
  has `changes`; returns `copy`."""
  with zipfile.ZipFile(path) as original, zipfile.ZipFile(copy, "w") as edited:
    for member in original.namelist():
      contents = original.read(member)
      if member == "config.json":
        config = json.loads(contents)
        config["config"].update(changes)
        contents = json.dumps(config)
      edited.writestr(member, contents)
  return copy


@pytest.mark.parametrize("changes", [{
    "debias": "false"
}, {
    "from_logits": "no"
}, {
    "debias": 0
}])
def test_a_keras_file_whose_booleans_are_not_booleans_is_refused(
    tmp_path, changes):
  path = str(tmp_path / "trainer.keras")
  trainer = make_trainer()
  trainer.save(path)
  edited = with_config_edited(path, str(tmp_path / "edited.keras"), **changes)
  (name, value), = changes.items()
  with pytest.raises(TypeError,
                     match=f"{name} must be True or False, got "
                     f"{value!r}"):
    keras.models.load_model(edited)
  # As saved, they load as the booleans they are.
  loaded = keras.models.load_model(
      with_config_edited(path, str(tmp_path / "same.keras")))
  assert loaded.debias is trainer.debias is True
  assert loaded.from_logits is trainer.from_logits is None


def test_keras_file_round_trips_the_controls_and_the_update_count(tmp_path):
  x, y = sampler_controls.toy_data()
  trainer = sampler_controls.keras_trainer(
      sampler_controls.controlled_sampler(seed=2))
  trainer.fit(x, y, steps_per_epoch=5, verbose=0)
  path = str(tmp_path / "trainer.keras")
  trainer.save(path)
  loaded = keras.models.load_model(path)
  sampler, restored = trainer.stage.sampler, loaded.stage.sampler
  assert restored.epsilon == 0.25
  assert isinstance(restored.amplitude, schedules.PiecewiseLinear)
  assert restored.amplitude.get_config() == sampler.amplitude.get_config()
  assert restored.beta.get_config() == sampler.beta.get_config()
  assert int(restored._update_count) == 5
  assert_same_state(state_of(restored), state_of(sampler))
  np.testing.assert_array_equal(
      restored.sample_with_weights(8)[1],
      sampler.sample_with_weights(8)[1])
