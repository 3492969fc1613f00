"""The trainer's reducible-loss utility: its irreducible model, its step,
its checkpoint."""

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
import child_process
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp import utilities
from tf_adasamp.experiment.training import components
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import irreducible
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import steps
from tf_adasamp.sampler import AdaptiveSampler


def reducible_config(**overrides):
  """A small adaptive run of the reducible loss, a validation split of 300
  of the 1,500 digits."""
  return tiny_config(
      **{
          **dict(utility="reducible_loss",
                 validation_size=300,
                 irreducible_epochs=2.0,
                 steps=6),
          **overrides
      })


@pytest.mark.parametrize("utility_at", ["updated", "step"])
def test_a_step_reweights_its_draws_by_their_reducible_loss(digits, utility_at):
  model = models.build("logistic", (8, 8, 1), 10, seed=0)
  before = tf.keras.models.clone_model(model)
  before.set_weights(model.get_weights())
  n = digits.num_train
  irreducible_losses = np.random.default_rng(0).uniform(0, 3, n)
  reducible = utilities.ReducibleLoss(irreducible_losses.astype(np.float32),
                                      bound=math.log(10))
  sampler = AdaptiveSampler(n, amplitude=1.0, decay=0.5, seed=0)
  step = steps.make_train_step(model,
                               components.make_optimizer("sgd", 1.0, 0.0),
                               sampler,
                               tf.constant(digits.x_train),
                               tf.constant(digits.y_train),
                               batch_size=32,
                               utility=reducible,
                               utility_at=utility_at)
  _, _, indices, batch_utilities = step()
  indices = indices.numpy()
  # From uniform, one update sets log w_i = amplitude * u_i, u_i in NumPy.
  source = model if utility_at == "updated" else before
  logits = source(digits.x_train[indices], training=False).numpy()
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      digits.y_train[indices], logits).numpy()
  expected = np.clip(losses - irreducible_losses[indices], 0,
                     math.log(10)) / math.log(10)
  np.testing.assert_allclose(batch_utilities, expected, rtol=1e-5, atol=1e-6)
  first = np.unique(indices, return_index=True)[1]
  np.testing.assert_allclose(sampler.log_weights.numpy()[indices[first]],
                             expected[first],
                             rtol=1e-5,
                             atol=1e-6)


def test_the_irreducible_model_learns_from_the_validation_split_alone(digits):
  config = reducible_config(irreducible_epochs=20.0)
  data = datasets.with_validation(digits, 300)
  losses = irreducible.fit(config, data).numpy()
  assert losses.shape == (1200,) and np.all(np.isfinite(losses))
  assert np.all(losses >= 0)
  # Other training images, the same validation split: the same model, so
  # the same losses on the images both share.
  x_train = data.x_train.copy()
  x_train[:100] = np.random.default_rng(0).uniform(size=x_train[:100].shape)
  other = irreducible.fit(config, dataclasses.replace(data, x_train=x_train))
  np.testing.assert_array_equal(other.numpy()[100:], losses[100:])
  assert np.all(other.numpy()[:100] != losses[:100])
  # Trained, it fits the training images better than chance.
  assert np.mean(losses) < 0.7 * math.log(10)
  # A model of another size gives other losses.
  mlp = irreducible.fit(dataclasses.replace(config, irreducible_model="mlp"),
                        data)
  assert not np.allclose(mlp, losses)


def test_the_bound_is_the_uniform_predictions_loss_unless_given(digits):
  data = datasets.with_validation(digits, 300)
  assert irreducible.reducible_loss(reducible_config(),
                                    data).bound == math.log(10)
  given = reducible_config(reducible_loss_bound=0.5)
  assert irreducible.reducible_loss(given, data).bound == 0.5


def test_a_reducible_loss_run_resumes_exactly_without_fitting_again(
    digits, tmp_path, monkeypatch):
  # The CNN, so that dropout's random state must be restored too.
  settings = dict(model="cnn", eval_interval=2)
  whole = loop.train(reducible_config(**settings), data=digits)
  assert whole[0]["irreducible_seconds"] > 0
  assert all(record["kl_bound"] >= 0 for record in whole)
  assert whole[-1]["kl"] > 0
  stopped = reducible_config(output_dir=str(tmp_path), steps=4, **settings)
  loop.train(stopped, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  saved = tf.train.load_checkpoint(path).get_tensor(
      "reducible_loss/_checkpointed/.ATTRIBUTES/irreducible_losses")
  fitted = irreducible.fit(stopped, datasets.with_validation(digits, 300))
  np.testing.assert_array_equal(saved, fitted)

  def refit(*_):
    raise AssertionError("a resumed run fitted its irreducible model again")

  monkeypatch.setattr(irreducible, "fit", refit)
  resumed = loop.train(dataclasses.replace(stopped, resume=True, steps=6),
                       data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert resumed[-1]["irreducible_seconds"] == resumed[0]["irreducible_seconds"]


def test_a_checkpoint_with_edited_irreducible_losses_is_refused(
    digits, tmp_path):
  config = reducible_config(output_dir=str(tmp_path), steps=4)
  records = loop.train(config, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  checkpoint_edits.edited_checkpoint(path,
                                     "irreducible_losses",
                                     lambda value: -value,
                                     copy=path)
  # Past the checkpoint's digest, as a forger who records it anew.
  checkpoint_edits.forge_digest(path)
  with pytest.raises(run_files.RunError,
                     match=f"cannot resume from {path}: it does not hold this "
                     "trainer's state .*irreducible losses must be finite"):
    loop.train(dataclasses.replace(config, resume=True, steps=6), data=digits)
  assert run_files.read_metrics(str(tmp_path)) == records


def test_other_runs_keep_their_checkpoints_layout(digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path), utility="l1"), data=digits)
  keys = tf.train.list_variables(
      tf.train.latest_checkpoint(str(tmp_path / "checkpoints")))
  assert not any("reducible" in key or "irreducible" in key for key, _ in keys)


def test_the_command_line_trains_with_the_reducible_loss(tmp_path):
  run = [
      "--utility=reducible_loss", "--validation_size=300",
      "--irreducible_model=logistic", "--irreducible_epochs=1",
      "--reducible_loss_bound=1", "--model=logistic", "--steps=4",
      "--eval_interval=2", "--batch_size=16", "--noprogress",
      f"--output_dir={tmp_path}"
  ]
  result = child_process.ran("tf_adasamp.experiment.train", *run, timeout=300)
  assert result.returncode == 0, result.stderr
  records = run_files.read_metrics(str(tmp_path))
  assert [record["step"] for record in records] == [0, 2, 4]
  assert {"validation_accuracy", "irreducible_seconds"} <= set(records[-1])


def test_a_mirrored_run_reads_the_irreducible_losses_on_its_replicas(digits):
  # One replica per logical CPU device (one here): the losses are a
  # mirrored variable, assigned once from outside the replicas.
  records = loop.train(reducible_config(strategy="mirrored", steps=4),
                       data=digits)
  assert records[-1]["kl"] > 0
  assert records[-1]["irreducible_seconds"] > 0


def test_a_run_compiled_by_xla_reads_the_same_reducible_losses(digits):
  plain = loop.train(reducible_config(steps=4), data=digits)
  compiled = loop.train(reducible_config(steps=4, jit_compile=True),
                        data=digits)
  # The same draws and steps, up to the rounding of XLA's fused kernels.
  for ours, theirs in zip(compiled, plain):
    for name in ("train_loss", "validation_loss", "kl", "kl_bound"):
      assert ours[name] == pytest.approx(theirs[name], rel=1e-4, abs=1e-6)
