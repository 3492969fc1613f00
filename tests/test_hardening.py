"""Bad input, in Python and through checkpoints, is refused before any
state changes (issue 16)."""

import re

import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from kernel_helpers import assert_same_state
from kernel_helpers import state_of
from tf_adasamp import AdaptiveSampler
from tf_adasamp import SumTree
from tf_adasamp import utilities

# Contracts of the CPU kernels (on a GPU, bad values are not raised).
pytestmark = pytest.mark.usefixtures("on_cpu")


def assert_unchanged(module, before):
  assert_same_state(state_of(module), before)


def save(module, path):
  return tf.train.Checkpoint(module=module).save(str(path / "ckpt"))


def restore(module, path):
  tf.train.Checkpoint(module=module).restore(path).assert_consumed()


def test_sum_tree_checkpoint_of_another_size_is_refused(tmp_path):
  path = save(SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.]), tmp_path)
  smaller = SumTree(5, initial_weights=[5., 4., 3., 2., 1.])
  before = state_of(smaller)
  with pytest.raises(tf.errors.InvalidArgumentError, match="number of leaves"):
    restore(smaller, path)
  assert_unchanged(smaller, before)


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


def test_sampler_checkpoint_restores_every_part(tmp_path):
  saved = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=1)
  saved.update([1, 2, 2], [1.0, 2.0, -3.0])
  path = save(saved, tmp_path)
  restored = AdaptiveSampler(6, amplitude=1.0, decay=0.5, seed=7)
  restore(restored, path)
  assert_unchanged(restored, state_of(saved))
  np.testing.assert_array_equal(restored.sample(20), saved.sample(20))


@pytest.mark.parametrize("edit, message", [
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[9]], [-1.0]),
     "negative weight"),
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[9]], [np.nan]),
     "weights"),
    (lambda tree: tf.tensor_scatter_nd_update(tree, [[15]], [1.0]), "padding"),
])
def test_edited_tree_in_a_checkpoint_is_refused(tmp_path, edit, message):
  edited = SumTree(6)
  edited.variable.assign(edit(edited.variable))  # Around the ops' checks.
  path = save(edited, tmp_path)
  tree = SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.])
  before = state_of(tree)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    restore(tree, path)
  assert_unchanged(tree, before)


def test_edited_sums_in_a_checkpoint_are_rebuilt(tmp_path):
  edited = SumTree(6, initial_weights=[1., 2., 3., 4., 5., 6.])
  edited.variable.assign(
      tf.tensor_scatter_nd_update(edited.variable, [[1], [2]], [1e9, -5.]))
  path = save(edited, tmp_path)
  tree = SumTree(6)
  restore(tree, path)
  assert float(tree.total()) == 21
  np.testing.assert_allclose(tree.probabilities(), np.arange(1, 7) / 21)


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


@pytest.mark.parametrize("method",
                         ["sample", "sample_with_probabilities", "uniforms"])
@pytest.mark.parametrize("batch_size, error",
                         [(-1, ValueError), (0, ValueError), (1.5, TypeError),
                          (True, TypeError), (2**40, ValueError),
                          ("4", TypeError)])
def test_refused_draw_leaves_the_random_state(method, batch_size, error):
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  before = state_of(sampler)
  with pytest.raises(error, match="batch_size"):
    getattr(sampler, method)(batch_size)
  assert_unchanged(sampler, before)


def test_numpy_integers_are_sizes():
  sampler = AdaptiveSampler(np.int64(10), amplitude=1.0, decay=0.5, seed=0)
  assert sampler.sample(np.int32(3)).shape == [3]
  assert SumTree(np.uint8(4)).num_leaves == 4


@pytest.mark.parametrize("kwargs, error, name", [
    ({
        "amplitude": None
    }, TypeError, "amplitude"),
    ({
        "amplitude": [1.0]
    }, TypeError, "amplitude"),
    ({
        "amplitude": "1.0"
    }, TypeError, "amplitude"),
    ({
        "amplitude": True
    }, TypeError, "amplitude"),
    ({
        "amplitude": float("inf")
    }, ValueError, "amplitude"),
    ({
        "decay": None
    }, TypeError, "decay"),
    ({
        "decay": [0.5]
    }, TypeError, "decay"),
    ({
        "decay": 1.0
    }, ValueError, "decay"),
    ({
        "seed": 1.5
    }, TypeError, "seed"),
    ({
        "seed": -1
    }, ValueError, "seed"),
    ({
        "stratified": "no"
    }, TypeError, "stratified"),
    ({
        "num_examples": True
    }, TypeError, "num_examples"),
    ({
        "num_examples": 0
    }, ValueError, "num_examples"),
    ({
        "dtype": tf.int32
    }, TypeError, "dtype"),
    ({
        "dtype": "half-precision"
    }, TypeError, "dtype"),
])
def test_bad_sampler_arguments_name_the_argument(kwargs, error, name):
  arguments = {"num_examples": 10, "amplitude": 1.0, "decay": 0.5, **kwargs}
  with pytest.raises(error, match=name):
    AdaptiveSampler(**arguments)


def test_complex_utilities_are_refused_before_any_change():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  before = state_of(sampler)
  with pytest.raises(TypeError, match="utilities"):
    sampler.update([1], tf.constant([1 + 2j]))
  assert_unchanged(sampler, before)


def test_utilities_refuse_labels_out_of_range_and_flat_probabilities():
  probs = tf.constant([[0.9, 0.1], [0.2, 0.8]])
  for utility in (utilities.zero_one, utilities.l1, utilities.cross_entropy):
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels"):
      utility([0, 2], probs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels"):
      utility([-1, 0], probs)
    with pytest.raises(ValueError, match="probs"):
      utility([0, 1], tf.constant([0.9, 0.1]))


def test_utilities_take_one_hot_labels():
  probs = tf.constant([[0.9, 0.1], [0.2, 0.8]])
  one_hot = tf.constant([[0.0, 1.0], [0.0, 1.0]])
  for utility in (utilities.zero_one, utilities.l1, utilities.cross_entropy):
    np.testing.assert_array_equal(utility(one_hot, probs), utility([1, 1],
                                                                   probs))


def test_probabilities_of_an_all_zero_tree_are_refused():
  tree = SumTree(4)
  tree.assign(tf.zeros([4], tf.float64))
  with pytest.raises(tf.errors.InvalidArgumentError, match="total weight"):
    tree.probabilities()


def test_gradients_stop_at_draws_and_reweights():
  sampler = AdaptiveSampler(10, amplitude=1.0, decay=0.5, seed=0)
  scale = tf.Variable(2.0, dtype=tf.float64)
  with tf.GradientTape() as tape:
    indices, probabilities = sampler.sample_with_probabilities(4)
    sampler.update(indices, scale * tf.ones([4], tf.float64))
    loss = scale * tf.reduce_sum(probabilities)
  # Only the direct path counts; the ops are not differentiable.
  assert float(tape.gradient(loss, scale)) == pytest.approx(
      float(tf.reduce_sum(probabilities)))


@pytest.mark.parametrize("dtype,amplitude,decay,bound", [
    (tf.float64, 1e308, 0.5, "1.798e+300"),
    (tf.float64, 1e290, 1 - 1e-12, "1.798e+300"),
    (tf.float32, 1e30, 0.9, "3.403e+30"),
])
def test_an_amplitude_whose_log_weights_could_overflow_is_refused_with_bound(
    dtype, amplitude, decay, bound):
  with pytest.raises(ValueError,
                     match=rf"amplitude / \(1 - decay\) must be at most "
                     rf"{re.escape(bound)}, so that log weights stay finite"):
    AdaptiveSampler(4, amplitude, decay, dtype=dtype)


def test_log_weights_at_the_amplitude_cap_stay_finite_up_to_the_bound():
  # amplitude / (1 - decay) just below the cap, utilities of 1e8: the log
  # weights approach 1e308 and stay finite, however long the run.
  sampler = AdaptiveSampler(4, 8.98e299, 0.5)
  for _ in range(60):
    sampler.update([0, 1], [1e8, -1e8])
  for value in state_of(sampler):
    assert np.all(np.isfinite(value))
  assert sampler.log_weights.numpy()[0] == pytest.approx(1.796e308, rel=1e-3)
  # A utility past the bound whose log weight would overflow is refused,
  # the error naming the log weight, not the product (which is finite).
  sampler = AdaptiveSampler(4, 1e299, 0.9)
  sampler.update([0], [1e9])
  before = state_of(sampler)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"the new log weight of example 0, decay \* "
                     r"log_weight \+ amplitude \* utilities\[0\] = 0.9 \* "
                     r"1e\+308 \+ 1e\+299 \* 1e\+09, overflows"):
    sampler.update([0], [1e9])
  for expected, actual in zip(before, state_of(sampler)):
    np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("kwargs, name, message", [
    ({
        "decay": 0.99999999
    }, "decay", "rounds to 1.0 in float32"),
    ({
        "decay": 1e-50
    }, "decay", "rounds to 0.0 in float32"),
    ({
        "amplitude": 1e39
    }, "amplitude", "overflows float32"),
])
def test_float32_parameters_are_checked_as_rounded_to_float32(
    kwargs, name, message):
  arguments = {"amplitude": 1.0, "decay": 0.5, **kwargs}
  with pytest.raises(ValueError, match=name) as error:
    AdaptiveSampler(10, dtype=tf.float32, **arguments)
  assert message in str(error.value)
  # The same values are valid weights' parameters in float64.
  sampler = AdaptiveSampler(10, dtype=tf.float64, **arguments)
  sampler.update([0, 1], [0.5, -0.5])


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
