"""A run's TensorBoard summaries, in the runs and tags Keras users know.

Two runs, as `keras.callbacks.TensorBoard` writes them: `train` (the whole
training set's loss and accuracy, the sampler's diagnostics, the learning
rate and the bounds) and `validation` (the held-out split's loss and
accuracy), so the two splits' curves overlay. The held-out split is the
test set, unless the run holds a validation split out of its training
images: then `validation` is that split's, and the test set's goes to a
third run, `test`. The sampler's tags are
`tf_adasamp.diagnostics.TAGS`, and an adaptive run's heaviest examples
(images and table) are under `tf_adasamp.diagnostics.HEAVIEST_TAG`;
docs/tensorboard.md lists every tag.
"""

import os

import tensorflow as tf

from tf_adasamp import diagnostics
from tf_adasamp.experiment.training import evaluator

RUNS = ("train", "validation")
# The run of the test set's scalars where a validation split has `validation`.
TEST_RUN = "test"

# Record key -> (run, tag) of the record's scalars that are not the
# sampler's diagnostics.
SCALAR_TAGS = {
    "train_loss": ("train", "loss"),
    "train_accuracy": ("train", "accuracy"),
    "test_loss": ("validation", "loss"),
    "test_accuracy": ("validation", "accuracy"),
    "validation_loss": ("validation", "loss"),
    "validation_accuracy": ("validation", "accuracy"),
    "epoch": ("train", "epoch"),
    "learning_rate": ("train", "learning_rate"),
    "kl_bound": ("train", "bounds/kl_bound"),
    "kl_bound_general": ("train", "bounds/kl_bound_general"),
    "corollary1_bound": ("train", "bounds/corollary1_bound"),
    "zero_one_gap": ("train", "bounds/zero_one_gap"),
}


class Summaries:
  """Writes evaluations to `log_dir`/train and `log_dir`/validation.

  Given the run's in-memory `data` (a datasets.Dataset), an evaluation
  whose record lists its heaviest examples (an adaptive run's) also writes
  their images and table (`diagnostics.heaviest_summary`) into `train`;
  the training images of a disk_data.DiskDataset stay on disk, and its
  runs write none.
  """

  def __init__(self, log_dir, data=None):
    self.log_dir = log_dir
    self._data = data if hasattr(data, "x_train") else None
    self._held_out = getattr(data, "x_validation", None) is not None
    self._writers = {
        run: tf.summary.create_file_writer(os.path.join(log_dir, run))
        for run in RUNS + ((TEST_RUN,) if self._held_out else ())
    }

  def write(self, evaluation):
    """Writes an evaluator.Evaluation at its record's step, once each tag."""
    record = evaluation.record
    step = record["step"]
    for key, value in record.items():
      if key in SCALAR_TAGS and value is not None:
        run, tag = SCALAR_TAGS[key]
        if self._held_out and key.startswith("test_"):
          run = TEST_RUN
        with self._writers[run].as_default(step=step):
          tf.summary.scalar(tag, value)
    sampler_view = {
        name: record[key]
        for key, name in evaluator.DIAGNOSTIC_KEYS.items()
        if key in record
    }
    log_q = evaluation.log_probabilities
    sampler_view["log_n_probability"] = diagnostics.log_n_probability(log_q)
    with self._writers["train"].as_default(step=step):
      diagnostics.write(sampler_view)
      if "heaviest" in record and self._data is not None:
        diagnostics.heaviest_summary(log_q,
                                     self._data.x_train,
                                     self._data.y_train,
                                     k=len(record["heaviest"]),
                                     class_names=self._data.class_names)
    for writer in self._writers.values():
      writer.flush()
