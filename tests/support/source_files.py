"""The records, files and sampler that the tests of tf_adasamp.sources share
(tests/sources/): images and labels in ArrayRecord files, TFRecord files,
and the check that the stage's batches hold the drawn rows."""

import numpy as np
import tensorflow as tf

import tf_adasamp
from tf_adasamp import sources

NUM_EXAMPLES = 200
BATCH_SIZE = 16
AMPLITUDE, DECAY = 1.0, 0.6


def make_sampler(seed=3, num_examples=NUM_EXAMPLES):
  return tf_adasamp.AdaptiveSampler(num_examples, AMPLITUDE, DECAY, seed=seed)


def images_and_labels(num_examples=NUM_EXAMPLES, seed=0):
  rng = np.random.default_rng(seed)
  images = rng.integers(0, 256, (num_examples, 3, 2, 1), dtype=np.uint8)
  labels = np.arange(num_examples) % 5
  return images, labels


def write_images(path, images, labels):
  records = (sources.encode_image_example(image, label)
             for image, label in zip(images, labels))
  assert sources.write_array_record(records, path) == len(labels)
  return path


def check_elements_hold_drawn_rows(dataset, sampler, rows, steps=3):
  for element in dataset.take(steps):
    *batch, indices, probabilities = element
    assert indices.dtype == tf.int64 and indices.shape == (BATCH_SIZE,)
    np.testing.assert_allclose(probabilities,
                               sampler.probabilities().numpy()[indices],
                               rtol=1e-12)
    for got, expected in zip(batch, rows(indices.numpy())):
      np.testing.assert_array_equal(got, expected)


def write_tfrecord(path, records):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return str(path)


def file_bytes(directory):
  """{name: bytes} of the files in `directory`, links read through."""
  return {
      path.name: path.read_bytes()
      for path in sorted(directory.iterdir())
      if path.is_file()
  }
