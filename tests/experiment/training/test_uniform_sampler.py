"""The uniform baselines' state: a reshuffling sampler's checkpoint is
restored only as its draws leave it."""

import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import uniform_sampler
from tf_adasamp.sampler import AdaptiveSampler

NUM_EXAMPLES, BATCH_SIZE = 10, 4


@pytest.fixture
def saved(tmp_path):
  """A checkpoint of a reshuffling sampler in its second epoch, mid-way."""
  sampler = uniform_sampler.ReshufflingSampler(NUM_EXAMPLES, seed=3)
  for _ in range(4):
    sampler.sample(BATCH_SIZE)
  return tf.train.Checkpoint(sampler=sampler).save(str(tmp_path / "ckpt"))


def saved_state(path):
  """The sampler's values in the checkpoint at `path`, by variable."""
  reader = tf.train.load_checkpoint(path)
  return {
      name: reader.get_tensor(f"sampler/{name}/.ATTRIBUTES/VARIABLE_VALUE")
      for name in ("draws", "epoch", "permutation")
  }


def check(path, seed=3):
  uniform_sampler.check_saved_reshuffling(saved_state(path), NUM_EXAMPLES, seed)


def test_a_restored_reshuffling_sampler_draws_as_the_one_saved(saved):
  check(saved)
  sampler = uniform_sampler.ReshufflingSampler(NUM_EXAMPLES, seed=3)
  tf.train.Checkpoint(sampler=sampler).restore(saved).assert_consumed()
  again = uniform_sampler.ReshufflingSampler(NUM_EXAMPLES, seed=3)
  for _ in range(4):
    again.sample(BATCH_SIZE)
  np.testing.assert_array_equal(sampler.sample(BATCH_SIZE),
                                again.sample(BATCH_SIZE))


@pytest.mark.parametrize("name,edit,message", [
    ("permutation", lambda p: p * 0, "permutation is not that of its epoch 1"),
    ("permutation", lambda p: p + 100, "permutation is not that of"),
    ("permutation", lambda p: p[::-1].copy(), "permutation is not that of"),
    ("permutation", lambda p: p[:5].copy(), "permutation is not that of"),
    ("draws", lambda d: np.int64(-5), "draws -5 and epoch 1 must be >= 0"),
    ("draws", lambda d: np.int64(40), "draws 40 do not fall in its epoch 1"),
    ("epoch", lambda e: np.int64(0), "permutation is not that of its epoch 0"),
    ("epoch", lambda e: np.int64(2), "draws 16 do not fall in its epoch 2"),
    ("epoch", lambda e: np.int64(-1), "must be >= 0"),
])
def test_an_edited_reshuffling_state_is_refused(saved, name, edit, message):
  edited = edited_checkpoint(saved,
                             f"sampler/{name}/.ATTRIBUTES/VARIABLE_VALUE", edit)
  with pytest.raises(ValueError, match=message):
    check(edited)


def test_a_checkpoint_of_another_seed_is_refused(saved):
  with pytest.raises(ValueError, match="under seed 4"):
    check(saved, seed=4)


@pytest.mark.parametrize("num_examples", [1, 1500, 1024])
def test_uniform_sampler_draws_what_adaptive_sampler_draws_at_amplitude_0(
    num_examples):
  uniform = uniform_sampler.UniformSampler(num_examples, seed=3)
  adaptive = AdaptiveSampler(num_examples, amplitude=0.0, decay=0.5, seed=3)
  rng = np.random.default_rng(0)
  for _ in range(5):
    indices = adaptive.sample(64)
    np.testing.assert_array_equal(uniform.sample(64), indices)
    adaptive.update(indices, rng.uniform(size=64))


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("num_examples,batch_size", [(10, 4), (7, 7), (5, 1)])
def test_reshuffling_draws_each_example_once_an_epoch(num_examples, batch_size,
                                                      jit_compile):
  sampler = uniform_sampler.ReshufflingSampler(num_examples, seed=3)
  sample = tf.function(sampler.sample, jit_compile=jit_compile)
  epochs = 4
  draws = np.concatenate([
      sample(batch_size).numpy()
      for _ in range(epochs * num_examples // batch_size)
  ]).reshape(epochs, num_examples)
  for epoch in draws:
    np.testing.assert_array_equal(np.sort(epoch), np.arange(num_examples))
  if num_examples > 5:
    assert len({tuple(epoch) for epoch in draws}) == epochs
  again = uniform_sampler.ReshufflingSampler(num_examples, seed=3)
  np.testing.assert_array_equal(again.sample(num_examples), draws[0])


def test_reshuffled_run_resumes_exactly(digits, tmp_path):
  # 1500 examples in batches of 16: the third epoch starts mid-batch.
  settings = dict(sampling="reshuffle", steps=200, eval_interval=50)
  whole = loop.train(tiny_config(**settings), data=digits)
  stopped = dict(settings, output_dir=str(tmp_path))
  loop.train(tiny_config(**dict(stopped, steps=100)), data=digits)
  resumed = loop.train(tiny_config(resume=True, **stopped), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert whole[-1]["kl"] == 0


def test_uniform_sampler_ignores_utilities_and_has_zero_kl():
  sampler = uniform_sampler.UniformSampler(10, seed=0)
  sampler.update(tf.constant([1, 2]), tf.constant([5.0, 5.0]))
  assert float(sampler.kl_divergence()) == 0.0
