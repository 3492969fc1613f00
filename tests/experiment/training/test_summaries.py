"""TensorBoard summaries (tf_adasamp.experiment.training.summaries)."""

import os

import numpy as np
import tensorflow as tf

from run_records import tiny_config
from tf_adasamp.experiment.training import loop


def test_tensorboard_shows_the_heaviest_examples_the_record_lists(
    digits, tmp_path):
  records = loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)
  tables, images = {}, {}
  for path in (tmp_path / "tensorboard" / "train").iterdir():
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        if value.tag == "sampler/heaviest/table":
          tables[event.step] = value.tensor.string_val[0].decode()
        elif value.tag == "sampler/heaviest/images":
          images[event.step] = [
              tf.io.decode_png(png).numpy()
              for png in value.tensor.string_val[2:]
          ]
  assert sorted(tables) == sorted(images) == [r["step"] for r in records]
  for record in records:
    rows = tables[record["step"]].splitlines()[2:]
    shown = [[int(cell) for cell in row.split("|")[2:4]] for row in rows]
    indices = [index for index, _ in record["heaviest"]]
    assert shown == [[index, digits.y_train[index]] for index in indices]
    expected = tf.image.convert_image_dtype(digits.x_train[indices],
                                            tf.uint8,
                                            saturate=True)
    np.testing.assert_array_equal(np.stack(images[record["step"]]), expected)


def test_a_resumed_run_writes_each_summary_step_once(digits, tmp_path):
  settings = dict(model="logistic", eval_interval=2, output_dir=str(tmp_path))
  loop.train(tiny_config(steps=4, **settings), data=digits)
  loop.train(tiny_config(steps=6, resume=True, **settings), data=digits)
  for run in ("train", "validation"):
    steps = {}
    for event_file in (tmp_path / "tensorboard" / run).iterdir():
      for event in tf.compat.v1.train.summary_iterator(str(event_file)):
        for value in event.summary.value:
          steps.setdefault(value.tag, []).append(event.step)
    assert sorted(steps["loss"]) == [0, 2, 4, 6], run
    for tag, tag_steps in steps.items():
      # Corollary 1's bound needs a step: none at step 0.
      assert sorted(set(tag_steps)) == sorted(tag_steps), (run, tag)


def test_tensorboard_has_train_and_validation_runs_and_the_samplers_view(
    digits, tmp_path):
  loop.train(tiny_config(output_dir=str(tmp_path)), data=digits)

  def tags(run):
    found = {}
    for path in (tmp_path / "tensorboard" / run).iterdir():
      for event in tf.compat.v1.train.summary_iterator(str(path)):
        for value in event.summary.value:
          found.setdefault(value.tag,
                           set()).add(value.metadata.plugin_data.plugin_name)
    return found

  assert sorted(os.listdir(tmp_path / "tensorboard")) == ["train", "validation"]
  train, validation = tags("train"), tags("validation")
  assert validation == {"loss": {"scalars"}, "accuracy": {"scalars"}}
  expected = {
      "loss", "accuracy", "epoch", "sampler/kl_divergence",
      "sampler/max_probability", "sampler/effective_sample_size",
      "sampler/distinct_draws", "sampler/misclassified_mass", "learning_rate",
      "bounds/kl_bound", "bounds/kl_bound_general", "bounds/corollary1_bound",
      "bounds/zero_one_gap"
  }
  assert {tag for tag, plugins in train.items() if plugins == {"scalars"}
         } == expected
  assert train["sampler/log_n_probability"] == {"histograms"}
  # An adaptive run's heaviest examples (tiny_config's sampling).
  assert train["sampler/heaviest/images"] == {"images"}
  assert train["sampler/heaviest/table"] == {"text"}
