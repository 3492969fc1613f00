"""The progress bar of a run in a terminal."""

import tensorflow as tf


class ProgressBar:
  """Shows the step, the mean loss and accuracy of the drawn batches
  (adaptively drawn under adaptive sampling: not the train-set metrics,
  which the records hold) and KL(Q_t || uniform)."""

  def __init__(self, total_steps, sampling):
    self._bar = tf.keras.utils.Progbar(total_steps, stateful_metrics=["kl"])
    self._sampling = sampling

  def update(self, step, output, sampler):
    """Shows `step`, reached by a trainer.TrainOutput `output`."""
    self._bar.update(
        step, [(f"{self._sampling} batch loss", output.mean_loss),
               (f"{self._sampling} batch accuracy", output.mean_accuracy),
               ("kl", float(sampler.kl_divergence()))])
