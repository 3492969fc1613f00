"""Utility functions for adaptive sampling (London, NIPS 2017, Eq. 17).

Each maps a batch of integer labels [B] and predicted class probabilities
[B, C] to a [B] vector of utilities; the sampler raises the weight of an
example by exp(amplitude * utility).
"""

import numpy as np
import tensorflow as tf


def _true_class_probability(labels, probs):
  probs = tf.convert_to_tensor(probs)
  labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
  return tf.gather(probs, labels, axis=1, batch_dims=1)


def zero_one(labels, probs):
  """The 0-1 loss, 1{argmax_y' p(y') != y}."""
  probs = tf.convert_to_tensor(probs)
  predicted = tf.argmax(probs, axis=-1, output_type=tf.int32)
  labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
  return tf.cast(tf.not_equal(predicted, labels), probs.dtype)


def l1(labels, probs):
  """The L1 loss, 1 - p(y)."""
  return 1 - _true_class_probability(labels, probs)


def cross_entropy(labels, probs):
  """-log p(y), with p(y) floored at the dtype's smallest normal number so
  that a confident mistake gives a large but finite utility."""
  p = _true_class_probability(labels, probs)
  return -tf.math.log(tf.maximum(p, np.finfo(p.dtype.as_numpy_dtype).tiny))


UTILITIES = {"zero_one": zero_one, "l1": l1, "cross_entropy": cross_entropy}


def get(utility):
  """Returns the utility function named `utility`, or `utility` if callable."""
  if callable(utility):
    return utility
  if utility not in UTILITIES:
    raise ValueError(f"unknown utility {utility!r}; choose one of "
                     f"{sorted(UTILITIES)} or pass a callable")
  return UTILITIES[utility]
