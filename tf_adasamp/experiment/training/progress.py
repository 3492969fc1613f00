"""The progress of a run: a bar in a terminal, plain lines elsewhere."""

import sys
import time

import tensorflow as tf

# Seconds between two plain lines: a redirected log of a long run stays short.
LINE_INTERVAL = 10.0


class ProgressBar:
  """Shows the step, the mean loss and accuracy of the drawn batches
  (adaptively drawn under adaptive sampling: not the train-set metrics,
  which the records hold) and KL(Q_t || uniform).

  Keras's bar, which redraws itself with terminal control codes, where stdout
  is a terminal; elsewhere (a file, a pipe) a plain line every LINE_INTERVAL
  seconds and at the last step.
  """

  def __init__(self, total_steps, sampling):
    self._total_steps, self._sampling = total_steps, sampling
    self._bar = (tf.keras.utils.Progbar(total_steps, stateful_metrics=["kl"])
                 if sys.stdout.isatty() else None)
    self._last_line = time.monotonic()

  def update(self, step, output, sampler):
    """Shows `step`, reached by a trainer.TrainOutput `output`."""
    values = [(f"{self._sampling} batch loss", float(output.mean_loss)),
              (f"{self._sampling} batch accuracy", float(output.mean_accuracy)),
              ("kl", float(sampler.kl_divergence()))]
    if self._bar is not None:
      self._bar.update(step, values)
    elif (step >= self._total_steps or
          time.monotonic() - self._last_line >= LINE_INTERVAL):
      self._last_line = time.monotonic()
      print(f"step {step}/{self._total_steps} - " +
            " - ".join(f"{name}: {value:.4f}" for name, value in values),
            flush=True)
