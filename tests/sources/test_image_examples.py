"""The image-classification records (tf_adasamp.sources._image_examples)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from source_files import BATCH_SIZE
from source_files import check_elements_hold_drawn_rows
from source_files import images_and_labels
from source_files import make_sampler
from source_files import write_images
import tf_adasamp
from tf_adasamp import data
from tf_adasamp import sources
from tf_adasamp.keras import AdaptiveSamplingModel

pytest.importorskip("array_record")


def test_array_record_source_decodes_each_drawn_record(tmp_path):
  images, labels = images_and_labels()
  path = write_images(tmp_path / "images.array_record", images, labels)
  sampler = make_sampler()
  stage = data.AdaptiveSampling(sampler, BATCH_SIZE)
  source = sources.open_image_classification(str(path))
  element_spec = stage.dataset(source).element_spec
  assert element_spec[0] == tf.TensorSpec([BATCH_SIZE, 3, 2, 1], tf.float32)
  assert element_spec[1] == tf.TensorSpec([BATCH_SIZE], tf.int32)
  check_elements_hold_drawn_rows(
      stage.dataset(source), sampler, lambda i:
      (images[i] / np.float32(255), labels[i]))


def test_fit_trains_a_keras_model_from_an_array_record_file(tmp_path):
  rng = np.random.default_rng(1)
  labels = rng.integers(0, 2, 400)
  # Class 1 is bright, class 0 dark: a linear model separates them.
  images = (rng.integers(0, 100,
                         (400, 4, 4, 1)) + 150 * labels[:, None, None, None])
  path = write_images(tmp_path / "train.array_record", images.astype(np.uint8),
                      labels)
  source = sources.open_image_classification(str(path))
  sampler = tf_adasamp.AdaptiveSampler(len(source), 0.5, 0.8, seed=0)
  stage = data.AdaptiveSampling(sampler, 32, max_lag=1)
  keras.utils.set_random_seed(0)
  net = keras.Sequential([
      keras.Input((4, 4, 1)),
      keras.layers.Flatten(),
      keras.layers.Dense(2, activation="softmax"),
  ])
  model = AdaptiveSamplingModel(net, stage, utility="zero_one")
  model.compile(optimizer=keras.optimizers.Adam(0.05),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"])
  history = model.fit(stage.dataset(source).prefetch(2),
                      steps_per_epoch=20,
                      epochs=3,
                      verbose=0)
  assert history.history["kl"][-1] > 0  # the updates reached the sampler
  x = images.astype(np.float32) / 255
  accuracy = np.mean(np.argmax(net.predict(x, verbose=0), axis=1) == labels)
  assert accuracy > 0.95


def example(**features):
  """A serialized tf.train.Example of `features`: name -> list of ints (an
  int64 feature) or of bytes."""

  def feature(values):
    if isinstance(values[0], bytes):
      return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  return tf.train.Example(features=tf.train.Features(
      feature={
          name: feature(values) for name, values in features.items()
      })).SerializeToString()


GOOD = {"image": [b"abcd"], "shape": [2, 2, 1], "label": [3]}


def edited(**changes):
  """A record of the image-classification format, but for `changes`."""
  return example(**{**GOOD, **changes})


def without(name):
  """A record of the image-classification format, but for feature `name`."""
  return example(**{key: GOOD[key] for key in GOOD if key != name})


NOT_IMAGE_EXAMPLES = [
    (without("image"), "no bytes_list feature 'image'"),
    (without("shape"), "no int64_list feature 'shape'"),
    (without("label"), "no int64_list feature 'label'"),
    (edited(label=[b"1"]), "no int64_list feature 'label'"),
    (edited(label=[1, 2]), "'label' holds 2 values, not 1"),
    (edited(shape=[2, 2]), "'shape' holds 2 values, not 3"),
    (edited(image=[b"abc"]), "has 3 bytes, not the 2x2x1"),
    (edited(shape=[-2, -2, 1]), "has 4 bytes, not the -2x-2x1"),
    (edited(label=[2**62]), "label 4611686018427387904 does not fit int32"),
    (edited(label=[-2**31 - 1]), "label -2147483649 does not fit int32"),
    (b"\xff\xff", "not a tf.train.Example"),
    (b"", "no bytes_list feature 'image'"),
]


@pytest.mark.parametrize("record, reason",
                         NOT_IMAGE_EXAMPLES,
                         ids=[reason for _, reason in NOT_IMAGE_EXAMPLES])
def test_a_record_that_is_not_an_image_example_is_named_with_its_file(
    tmp_path, record, reason):
  path = str(tmp_path / "images.array_record")
  sources.write_array_record([example(**GOOD), record], path)
  source = sources.open_image_classification(path)
  image, label = source[0]
  assert image.shape == (2, 2, 1) and label == 3
  expected = f"record 1 of ArrayRecord file {path!r}: .*{reason}"
  with pytest.raises(ValueError, match=expected):
    source[1]
  with pytest.raises(ValueError, match=expected):
    source.read_batch(np.array([0, 1]))


@pytest.mark.parametrize("label, error, message", [
    (3.7, TypeError, "label must be an int, got 3.7"),
    (np.float32(2), TypeError, "label must be an int"),
    (True, TypeError, "label must be an int, got True"),
    ("1", TypeError, "label must be an int"),
    (2**31, ValueError, "label 2147483648 does not fit int32"),
    (-2**31 - 1, ValueError, "does not fit int32"),
    (2**62, ValueError, "label 4611686018427387904 does not fit int32"),
])
def test_encode_image_example_refuses_a_label_it_could_not_give_back(
    label, error, message):
  with pytest.raises(error, match=message):
    sources.encode_image_example(np.zeros([2, 2, 1], np.uint8), label)


@pytest.mark.parametrize("label", [0, np.int64(-2**31), np.uint8(7), 2**31 - 1])
def test_encode_image_example_labels_decode_as_written(label):
  record = sources.encode_image_example(np.zeros([2, 2, 1], np.uint8), label)
  assert sources.decode_image_example(record)[1] == label
