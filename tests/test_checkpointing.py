"""One validation path for a sampler's state (tf_adasamp/_checkpointing.py),
whichever way it comes back: a tf.train.Checkpoint of the sampler or of the
Keras trainer, a `.keras` file, a `ModelCheckpoint`'s weights file through
`load_weights` (as `BackupAndRestore` loads its own), or `set_weights`
(issue 46). Each saved entry is edited with finite and non-finite values;
the loaded sampler is refused, left as it was, or fits together."""

import os
import tempfile

from hypothesis import assume
from hypothesis import example
from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
import keras
import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from checkpoint_edits import edited_keras_weights
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
import tf_adasamp
from tf_adasamp import data
from tf_adasamp.keras import AdaptiveSamplingModel

# Contracts of the CPU kernels (on a GPU, bad values are not raised).
pytestmark = pytest.mark.usefixtures("on_cpu")

NUM_EXAMPLES = 6
AMPLITUDE, DECAY = 1.0, 0.5
# Every entry of the saved state, with its size.
ENTRIES = {
    "tree": 16,
    "entropy_tree": 16,
    "log_weights": NUM_EXAMPLES,
    "log_scale": 1,
    "generator_state": 3,
    "num_examples": 1,
    "amplitude": 1,
    "decay": 1,
}
INTEGER_ENTRIES = ("generator_state", "num_examples")
# The sampler's sizes and settings, saved beside its variables.
CONSTANTS = ("num_examples", "amplitude", "decay")
# The names of the sampler's variables among the trainer's weights.
KERAS_NAMES = {
    "tree": "sampler_tree",
    "entropy_tree": "sampler_entropy_tree",
    "log_weights": "sampler_log_weights",
    "log_scale": "sampler_log_scale",
    "generator_state": "sampler_StateVar",
}
PATHS = [
    "tf.train.Checkpoint", "tf.train.Checkpoint(model=trainer)", ".keras",
    "ModelCheckpoint", "set_weights"
]
# The values a hand or a damaged file leaves.
NOTABLE = [
    np.nan, np.inf, -np.inf, 1e300, -1e300, -1.0, 0.0, -0.0, 7.0, 5e-324,
    np.finfo(np.float64).max
]


def make_sampler(seed):
  sampler = tf_adasamp.AdaptiveSampler(NUM_EXAMPLES,
                                       AMPLITUDE,
                                       DECAY,
                                       seed=seed)
  sampler.update([1, 2, 2, 4], [1.0, 2.0, -3.0, 0.5])
  return sampler


def make_trainer(seed):
  keras.utils.set_random_seed(seed)
  net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
  trainer = AdaptiveSamplingModel(net,
                                  data.AdaptiveSampling(make_sampler(seed), 2),
                                  utility="l1")
  trainer.compile(
      optimizer="sgd",
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return trainer


def toy_data():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  return x, (x[:, 0] > 0).astype(np.int64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """{path: a file of the saved state} for each way it comes back."""
  directory = str(tmp_path_factory.mktemp("saved"))
  files = {}
  sampler = make_sampler(seed=1)
  files["tf.train.Checkpoint"] = tf.train.Checkpoint(sampler=sampler).write(
      os.path.join(directory, "ckpt"))
  trainer = make_trainer(seed=1)
  weights = os.path.join(directory, "trainer.weights.h5")
  trainer.fit(*toy_data(),
              steps_per_epoch=2,
              verbose=0,
              callbacks=[
                  keras.callbacks.ModelCheckpoint(weights,
                                                  save_weights_only=True)
              ])
  files["ModelCheckpoint"] = weights
  files[".keras"] = os.path.join(directory, "trainer.keras")
  trainer.save(files[".keras"])
  files["weights"] = trainer.get_weights()
  files["tf.train.Checkpoint(model=trainer)"] = tf.train.Checkpoint(
      model=trainer).write(os.path.join(directory, "trainer"))
  trained = trainer.stage.sampler.log_weights.numpy()
  files["log_weights"] = {
      "tf.train.Checkpoint": sampler.log_weights.numpy(),
      "tf.train.Checkpoint(model=trainer)": trained,
      ".keras": trained,
      "ModelCheckpoint": trained,
      "set_weights": trained
  }
  return files


def loaded(path, files, name, edit, directory):
  """The sampler after loading the state edited at `name` through `path`.

  Raises what the load raises, once it has checked that a sampler that
  existed before the load is as it was.
  """
  if path == ".keras":
    edited = edited_keras_weights(files[path], name, edit,
                                  os.path.join(directory, "trainer.keras"))
    return keras.models.load_model(edited).stage.sampler
  if path == "tf.train.Checkpoint":
    sampler = make_sampler(seed=2)
    load = lambda: tf.train.Checkpoint(sampler=sampler).read(
        edited_checkpoint(
            files[path], name, edit, copy=os.path.join(directory, "ckpt"))
    ).assert_consumed()
  elif path == "tf.train.Checkpoint(model=trainer)":
    trainer = make_trainer(seed=2)
    sampler = trainer.stage.sampler
    load = lambda: tf.train.Checkpoint(model=trainer).read(
        edited_checkpoint(
            files[path], name, edit, copy=os.path.join(directory, "trainer")))
  elif path == "ModelCheckpoint":
    trainer = make_trainer(seed=2)
    sampler = trainer.stage.sampler
    load = lambda: trainer.load_weights(
        edited_keras_weights(files[path], name, edit,
                             os.path.join(directory, "trainer.weights.h5")))
  else:
    trainer = make_trainer(seed=2)
    sampler = trainer.stage.sampler
    weights = list(files["weights"])
    position = next(i for i, variable in enumerate(trainer.weights)
                    if variable.path.endswith(KERAS_NAMES[name]))
    weights[position] = edit(weights[position])
    load = lambda: trainer.set_weights(weights)
  before = state_of(sampler)
  try:
    load()
  except Exception:
    assert_same_state(state_of(sampler), before)
    raise
  return sampler


def assert_fits_together(sampler):
  """Probabilities that sum to 1 and are the log weights' softmax; a KL
  that is its O(n) recomputation; a tree whose sums are its leaves'."""
  log_weights = sampler.log_weights.numpy()
  assert np.all(np.isfinite(log_weights))
  probabilities = sampler.probabilities().numpy()
  assert np.all(probabilities >= 0)
  assert probabilities.sum() == pytest.approx(1, abs=1e-12)
  softmax = np.exp(log_weights - log_weights.max())
  np.testing.assert_allclose(probabilities,
                             softmax / softmax.sum(),
                             rtol=1e-12,
                             atol=1e-300)
  drawn = probabilities > 0
  kl = np.sum(probabilities[drawn] *
              np.log(NUM_EXAMPLES * probabilities[drawn]))
  assert float(sampler.kl_divergence()) == pytest.approx(max(kl, 0), abs=1e-12)
  tree = sampler.tree.variable.numpy()
  leaves = tree[8:]
  assert tree[1] == pytest.approx(leaves.sum(), rel=1e-12)
  assert sampler.amplitude == AMPLITUDE and sampler.decay == DECAY
  assert sampler.num_examples == NUM_EXAMPLES


def edit_at(position, value):
  """An edit that sets entry `position` (None: every entry) to `value`."""

  def edit(saved):
    edited = np.array(saved, copy=True)
    if edited.ndim == 0:
      return np.array(value, edited.dtype)
    if position is None:
      edited[...] = value
    else:
      edited[position % edited.size] = value
    return edited

  return edit


FLOAT_VALUES = st.one_of(st.sampled_from(NOTABLE),
                         st.floats(allow_nan=True, allow_infinity=True))
INTEGER_VALUES = st.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max)


@st.composite
def edits(draw):
  """(entry, position or None for all, value)."""
  name = draw(st.sampled_from(sorted(ENTRIES)))
  position = draw(st.none() | st.integers(0, ENTRIES[name] - 1))
  values = INTEGER_VALUES if name in INTEGER_ENTRIES else FLOAT_VALUES
  return name, position, draw(values)


# The edits of issue 46, each on every path.
ISSUE_EDITS = [
    ("tree", 1, 1e300),  # the root: a sum, rebuilt
    ("tree", 9, np.nan),  # leaf 1
    ("tree", 9, -1.0),
    ("entropy_tree", 1, 7.0),  # a sum, rebuilt
    ("entropy_tree", 10, 7.0),  # leaf 2
    ("log_weights", 2, np.nan),
    ("log_weights", 2, np.inf),
    ("log_weights", 2, 1e300),
    ("log_scale", None, np.nan),
    ("log_weights", None, np.nan),
]


def with_examples(test):
  for name, position, value in ISSUE_EDITS:
    test = example(edit=(name, position, value))(test)
  return test


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=50,
          deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit=edits())
@with_examples
def test_an_edited_sampler_state_is_refused_or_fits_together_on_every_path(
    saved, path, edit):
  name, position, value = edit
  # set_weights takes the variables only; the sampler keeps its settings.
  assume(not (path == "set_weights" and name in CONSTANTS))
  with tempfile.TemporaryDirectory() as directory:
    try:
      sampler = loaded(path, saved, name, edit_at(position, value), directory)
    except (ValueError, tf.errors.InvalidArgumentError):
      return  # refused, and (where it existed) the sampler is as it was
    assert_fits_together(sampler)


@pytest.mark.parametrize("path", PATHS)
def test_an_unedited_sampler_state_comes_back_on_every_path(saved, path):
  with tempfile.TemporaryDirectory() as directory:
    sampler = loaded(path, saved, "tree", lambda value: value, directory)
  np.testing.assert_array_equal(sampler.log_weights.numpy(),
                                saved["log_weights"][path])
  assert_fits_together(sampler)


def test_a_refused_weights_file_changes_no_weight_of_the_trainer(saved):
  # Keras loads the other layers after it refused the sampler's state;
  # load_weights puts them back.
  trainer = make_trainer(seed=2)
  trainer.fit(*toy_data(), steps_per_epoch=1, verbose=0)  # builds the optimizer
  variables = [*trainer.weights, *trainer.optimizer.variables]
  before = [variable.numpy() for variable in variables]
  with tempfile.TemporaryDirectory() as directory:
    edited = edited_keras_weights(saved["ModelCheckpoint"], "tree",
                                  edit_at(9, np.nan),
                                  os.path.join(directory, "edited.weights.h5"))
    with pytest.raises(ValueError, match="the checkpoint's weights"):
      trainer.load_weights(edited)
  for variable, value in zip(variables, before):
    np.testing.assert_array_equal(variable.numpy(), value)
