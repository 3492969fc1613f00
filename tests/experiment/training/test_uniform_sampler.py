"""The uniform baselines' state: a reshuffling sampler's checkpoint is
restored only as its draws leave it."""

import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from tf_adasamp.experiment.training import uniform_sampler

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
