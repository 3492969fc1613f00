"""A sampler's checkpoint (tf_adasamp._sampler_checkpoint): restored whole,
or refused before any state changes when it is of another sampler or its
parts do not fit together."""

import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from kernel_helpers import assert_same_state
from kernel_helpers import assert_unchanged
from kernel_helpers import restore
from kernel_helpers import save
from kernel_helpers import state_of
from sampler_controls import controlled_sampler
from sampler_controls import controlled_steps
from sampler_controls import NUM_EXAMPLES
from tf_adasamp import AdaptiveSampler
from tf_adasamp import schedules


def test_checkpoint_restores_distribution_and_random_state(tmp_path):
  sampler = AdaptiveSampler(20, amplitude=1.5, decay=0.7, seed=5)
  for _ in range(5):
    indices = sampler.sample(4)
    sampler.update(indices, tf.ones([4], tf.float64))
  path = tf.train.Checkpoint(sampler=sampler).save(str(tmp_path / "ckpt"))
  saved_state = state_of(sampler)
  expected_draws = [sampler.sample(4).numpy() for _ in range(3)]
  sampler.update([0, 1, 2], [9.0, 9.0, 9.0])

  restored = AdaptiveSampler(20, amplitude=1.5, decay=0.7, seed=99)
  tf.train.Checkpoint(sampler=restored).restore(path).assert_consumed()
  for expected, actual in zip(saved_state, state_of(restored)):
    np.testing.assert_array_equal(expected, actual)
  for expected in expected_draws:
    np.testing.assert_array_equal(restored.sample(4).numpy(), expected)


@pytest.mark.usefixtures("on_cpu")
def test_sampler_checkpoint_of_another_size_changes_nothing(tmp_path):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2], [1.0, 2.0])
  path = save(saved, tmp_path)
  smaller = AdaptiveSampler(5, amplitude=1.0, decay=0.5, seed=2)
  before = state_of(smaller)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="number of examples"):
    restore(smaller, path)
  assert_unchanged(smaller, before)
  assert float(smaller.kl_divergence()) == 0


@pytest.mark.usefixtures("on_cpu")
def test_sampler_checkpoint_restores_every_part(tmp_path):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2, 2], [1.0, 2.0, -3.0])
  path = save(saved, tmp_path)
  restored = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=7)
  restore(restored, path)
  assert_unchanged(restored, state_of(saved))
  np.testing.assert_array_equal(restored.sample(20), saved.sample(20))


def scaled_at(position, factor):
  return lambda value: np.where(
      np.arange(value.size) == position, value * factor, value)


def shifted_at(position, shift):
  return lambda value: np.where(
      np.arange(value.size) == position, value + shift, value)


# Every entry of a sampler's checkpoint, each edited so that it no longer
# fits the others (leaf 8 + 2 of the tree and entropy tree is example 2).
SAMPLER_EDITS = [
    ("tree", scaled_at(10, 2.0), r"not exp\(log weights - log scale\)"),
    ("entropy_tree", shifted_at(10, 0.5), "entropy tree does not match"),
    ("entropy_tree", shifted_at(14, 0.5), "padding entropy terms"),
    ("log_weights", shifted_at(2, 1.0), r"not exp\(log weights - log scale\)"),
    ("log_scale", lambda value: value + 700, r"not exp\(log weights"),
    ("generator_state", lambda value: value[:2], "random state"),
    ("num_examples", lambda value: value - 1, "number of examples"),
    ("amplitude", lambda value: value * 2, "amplitude"),
    ("decay", lambda value: value / 2, "decay"),
]


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("name, edit, message", SAMPLER_EDITS)
def test_a_sampler_checkpoint_that_does_not_fit_together_is_refused(
    tmp_path, name, edit, message):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2, 2], [1.0, 2.0, -3.0])
  path = edited_checkpoint(save(saved, tmp_path), name, edit)
  sampler = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=2)
  sampler.update([0, 3], [0.5, 1.5])
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    restore(sampler, path)
  assert_unchanged(sampler, before)


@pytest.mark.usefixtures("on_cpu")
def test_the_sums_of_a_samplers_entropy_tree_are_rebuilt(tmp_path):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2, 2], [1.0, 2.0, -3.0])
  # Nodes 1 (the total of the entropy terms) and 3 are sums, not state.
  path = edited_checkpoint(save(saved, tmp_path), "entropy_tree",
                           shifted_at(1, 100.0))
  path = edited_checkpoint(path, "entropy_tree", shifted_at(3, -7.0))
  sampler = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=2)
  restore(sampler, path)
  assert_unchanged(sampler, state_of(saved))
  assert 0 <= float(sampler.kl_divergence()) <= np.log(6)


@pytest.mark.usefixtures("on_cpu")
@pytest.mark.parametrize("setting", ["amplitude", "decay"])
def test_restoring_into_a_sampler_of_another_setting_is_refused(
    tmp_path, setting):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2], [1.0, 2.0])
  path = save(saved, tmp_path)
  settings = {"amplitude": 1.0, "decay": 0.5, setting: 0.25}
  sampler = AdaptiveSampler(6, seed=2, **settings)
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=f"checkpoint's {setting} differs"):
    restore(sampler, path)
  assert_unchanged(sampler, before)


@pytest.mark.usefixtures("on_cpu")
def test_a_corrupt_checkpoint_changes_no_sampler_whose_counter_exists_first(
    tmp_path):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2], [1.0, 2.0])
  checkpoint = tf.train.Checkpoint(module=saved)
  # A counter whose 8 bytes can be found in the data file, then corrupted.
  checkpoint.save_counter.assign(0x123456789ABCDE)
  path = checkpoint.save(str(tmp_path / "ckpt"))
  data_file = next(tmp_path.glob(f"{path.split('/')[-1]}.data-*"))
  contents = bytearray(data_file.read_bytes())
  at = contents.find(np.int64(0x123456789ABCDF).tobytes())
  contents[at] ^= 0xFF
  data_file.write_bytes(bytes(contents))
  sampler = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=2)
  before = state_of(sampler)
  restorer = tf.train.Checkpoint(module=sampler)
  # Made now, not after the module is restored: read with it.
  _ = restorer.save_counter
  with pytest.raises(tf.errors.DataLossError):
    restorer.restore(path)
  assert_unchanged(sampler, before)


@pytest.mark.parametrize("saved,restored,error,message", [
    ({
        "epsilon": 0.1
    }, {
        "epsilon": 0.2
    }, tf.errors.InvalidArgumentError, "checkpoint's epsilon differs"),
    ({
        "beta": 0.5
    }, {
        "beta": 0.6
    }, tf.errors.InvalidArgumentError, "checkpoint's beta differs"),
    ({}, {
        "epsilon": 0.2
    }, tf.errors.NotFoundError, "epsilon"),
    ({}, {
        "amplitude": schedules.warmup(1.0, 5)
    }, tf.errors.NotFoundError, "update_count"),
    ({
        "amplitude": schedules.warmup(1.0, 5)
    }, {}, tf.errors.NotFoundError, "amplitude"),
])
def test_a_checkpoint_of_other_controls_is_refused(tmp_path, saved, restored,
                                                   error, message):
  sampler = AdaptiveSampler(NUM_EXAMPLES, **{
      "amplitude": 1.0,
      "decay": 0.5,
      **saved
  })
  sampler.update([1, 2], [1.0, 2.0])
  path = save(sampler, tmp_path)
  target = AdaptiveSampler(NUM_EXAMPLES, **{
      "amplitude": 1.0,
      "decay": 0.5,
      **restored
  })
  before = state_of(target)
  with pytest.raises(error, match=message):
    restore(target, path)
  assert_same_state(state_of(target), before)


def test_a_checkpoint_with_a_negative_update_count_is_refused(tmp_path):
  sampler = controlled_sampler(seed=0)
  controlled_steps(sampler, 3)
  sampler._update_count.assign(-1)
  path = save(sampler, tmp_path)
  target = controlled_sampler(seed=0)
  before = state_of(target)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="update count is negative"):
    restore(target, path)
  assert_same_state(state_of(target), before)


def test_controls_off_keep_the_checkpoint_layout(tmp_path):
  # A sampler made without controls saves what one made before they
  # existed: its checkpoints restore either way.
  path = save(AdaptiveSampler(NUM_EXAMPLES, 1.0, 0.5, epsilon=0.0, beta=1.0),
              tmp_path)
  names = {
      name.split("/")[-1].split(".")[0]
      for name, _ in tf.train.list_variables(path)
  }
  assert {"epsilon", "beta", "update_count"}.isdisjoint(names)
  assert {"amplitude", "decay", "log_weights"} <= names
