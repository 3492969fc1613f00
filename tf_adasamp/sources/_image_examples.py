"""The image-classification records: a tf.train.Example per (image, label)."""

import math
import numbers

from google.protobuf import message
import numpy as np

from tf_adasamp.sources._lazy import tf
from tf_adasamp.sources._readers import ArrayRecordSource

# Labels are int32 where the record is read (decode_image_example).
_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def encode_image_example(image, label):
  """Encodes one image-classification record.

  Args:
    image: uint8 pixels [H, W, C].
    label: the class, an int.

  Returns:
    A serialized `tf.train.Example` with `image` (the pixels, row-major HWC
    bytes), `shape` ([H, W, C]) and `label`.

  Raises:
    TypeError: if `label` is not an int (a float is not rounded).
    ValueError: if `image` is not a uint8 array [H, W, C], or `label` does
      not fit int32, the label's type where the record is read.
  """
  image = np.asarray(image)
  if image.dtype != np.uint8 or image.ndim != 3:
    raise ValueError("image must be a uint8 array [H, W, C], got "
                     f"{image.dtype} {image.shape}")
  if isinstance(label,
                (bool, np.bool_)) or not isinstance(label, numbers.Integral):
    raise TypeError(f"label must be an int, got {label!r}")
  if not _INT32_MIN <= label <= _INT32_MAX:
    raise ValueError(f"label {label} does not fit int32")
  feature = {
      "image":
          tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[image.tobytes()])),
      "shape":
          tf.train.Feature(int64_list=tf.train.Int64List(value=image.shape)),
      "label":
          tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
  }
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def decode_image_example(record):
  """Decodes a record that `encode_image_example` wrote.

  Args:
    record: the record's bytes.

  Returns:
    (image, label): float32 [H, W, C] in [0, 1] and an int32, the
    trainer's in-memory form.

  Raises:
    ValueError: if `record` is not such a record, or its label does not fit
      int32.
  """
  try:
    example = tf.train.Example.FromString(record)
  except message.DecodeError as error:
    raise ValueError(f"not a tf.train.Example: {error}") from None
  feature = example.features.feature
  (pixels,) = _feature_values(feature, "image", "bytes_list", 1)
  shape = _feature_values(feature, "shape", "int64_list", 3)
  (label,) = _feature_values(feature, "label", "int64_list", 1)
  if min(shape) < 0 or math.prod(shape) != len(pixels):
    raise ValueError(f"its image has {len(pixels)} bytes, not the "
                     f"{'x'.join(map(str, shape))} of its shape")
  if not _INT32_MIN <= label <= _INT32_MAX:
    raise ValueError(f"its label {label} does not fit int32")
  image = np.frombuffer(pixels, np.uint8).reshape(shape)
  return image.astype(np.float32) / 255.0, np.int32(label)


def _feature_values(feature, name, kind, size):
  """The `size` values of `feature[name]`, a list of `kind`.

  Returns:
    The feature's values, as a list.

  Raises:
    ValueError: if the feature is missing, of another kind or size (naming
      `encode_image_example`, whose records these are meant to be).
  """
  if name not in feature or feature[name].WhichOneof("kind") != kind:
    raise ValueError(f"it has no {kind} feature {name!r}, so it is not an "
                     "encode_image_example record")
  values = getattr(feature[name], kind).value
  if len(values) != size:
    raise ValueError(f"its feature {name!r} holds {len(values)} values, "
                     f"not {size}")
  return list(values)


def open_image_classification(path):
  """Opens an image-classification ArrayRecord file as a source for the stage.

  Args:
    path: a file of `encode_image_example`'s records, or a list of shards.

  Returns:
    An `ArrayRecordSource` of (image, label), decoded by
    `decode_image_example`.

  Raises:
    ImportError: if the array-record package is not installed.
    OSError: if a file cannot be read as ArrayRecord.
    ValueError: if the files hold no records.
  """
  return ArrayRecordSource(path, decode=decode_image_example)
