"""The Keras callbacks of adaptive sampling: `SamplingTensorBoard`.

It writes the sampler's diagnostics beside Keras's TensorBoard logs. (The
callback that `fit` adds by itself, to put the distribution's state into
each epoch's logs, is `_training.SamplingReport`.)
"""

import os

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import diagnostics
from tf_adasamp.keras import _training
from tf_adasamp.keras.model import AdaptiveSamplingModel


class SamplingTensorBoard(keras.callbacks.TensorBoard):
  """`keras.callbacks.TensorBoard`, and the sampling distribution Q_t.

  Writes what Keras's callback writes (the runs `train` and `validation` in
  the log directory), and into the `train` run the sampler's diagnostics
  under the tags of `tf_adasamp.diagnostics.TAGS` (`sampler/kl_divergence`,
  `sampler/max_probability`, `sampler/effective_sample_size`,
  `sampler/distinct_draws`, the histogram `sampler/log_n_probability` and,
  given the training data, `sampler/misclassified_mass`); the module says
  what each means. The step's `kl` and `distinct_draws` logs are written
  there only, not also as Keras's `epoch_kl`: one tag per quantity. Use it
  in place of Keras's callback:

    callbacks=[tf_adasamp.keras.SamplingTensorBoard("logs")]
  """

  def __init__(self, log_dir="logs", training_data=None, **kwargs):
    """Creates the callback.

    Args:
      log_dir: the directory of the runs, as for Keras's callback.
      training_data: optional (x, y), the stage's examples in its order
        (class ids or one-hot labels); each write then predicts over x, a
        pass over the training set, to log `sampler/misclassified_mass`.
      **kwargs: passed to `keras.callbacks.TensorBoard`; its update_freq
        (an int: every that many batches) also sets how often the sampler's
        diagnostics are written.

    Raises:
      ImportError: if TensorBoard is not installed.
    """
    try:
      import tensorboard  # noqa: F401 (is it installed?)
    except ImportError as error:
      raise ImportError(
          "SamplingTensorBoard writes TensorBoard summaries, "
          "which need TensorBoard: pip install tensorboard") from error
    super().__init__(log_dir, **kwargs)
    self.training_data = training_data
    self._sampler_writer = None
    self._batches = 0

  def on_train_begin(self, logs=None):
    """Opens the writer of the sampler's diagnostics, in the `train` run.

    Args:
      logs: as Keras passes them.

    Raises:
      TypeError: if the model is not an `AdaptiveSamplingModel`.
    """
    if not isinstance(self.model, AdaptiveSamplingModel):
      raise TypeError("SamplingTensorBoard logs an AdaptiveSamplingModel's "
                      f"sampler; the model is a {type(self.model).__name__}")
    super().on_train_begin(logs)
    if self._sampler_writer is None:
      self._sampler_writer = tf.summary.create_file_writer(
          os.path.join(self.log_dir, "train"))

  def on_train_batch_end(self, batch, logs=None):
    """Writes the diagnostics every update_freq batches, if it is an int.

    Args:
      batch: the batch's index in its epoch.
      logs: the step's logs.
    """
    super().on_train_batch_end(batch, _without_sampler_logs(logs))
    self._batches += 1
    if self.update_freq != "epoch" and self._batches % self.update_freq == 0:
      self._write_diagnostics(self._batches, logs)

  def on_epoch_end(self, epoch, logs=None):
    """Writes the diagnostics, if update_freq is "epoch".

    Args:
      epoch: the epoch's index.
      logs: the epoch's logs.
    """
    super().on_epoch_end(epoch, _without_sampler_logs(logs))
    if self.update_freq == "epoch":
      self._write_diagnostics(epoch, logs)

  def on_train_end(self, logs=None):
    """Flushes the diagnostics' writer.

    Args:
      logs: as Keras passes them.
    """
    super().on_train_end(logs)
    self._sampler_writer.flush()

  def _write_diagnostics(self, step, logs):
    misclassified = None
    if self.training_data is not None:
      x, y = self.training_data
      predicted = np.argmax(self.model.predict(x, verbose=0), axis=-1)
      misclassified = predicted != np.asarray(
          _training.class_ids(tf.convert_to_tensor(y)))
    values = diagnostics.compute(self.model.stage.sampler,
                                 misclassified=misclassified)
    if logs and "distinct_draws" in logs:
      values["distinct_draws"] = logs["distinct_draws"]
    with self._sampler_writer.as_default():
      diagnostics.write(values, step=step)


# The logs that SamplingTensorBoard writes as diagnostics: the step's, and
# those _training.SamplingReport adds to each epoch's.
_SAMPLER_LOGS = ("kl", "distinct_draws", "effective_sample_size",
                 "heaviest_share")


def _without_sampler_logs(logs):
  return logs and {
      name: value for name, value in logs.items() if name not in _SAMPLER_LOGS
  }
