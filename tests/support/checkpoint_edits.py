"""Checkpoints and Keras weights files edited entry by entry, as a hand or
a damaged disk would leave them, and snapshots of what a
tf.train.Checkpoint holds."""

import io
import zipfile

import h5py
import keras
import numpy as np
import tensorflow as tf

from tf_adasamp.experiment.training import run_files

# The key of a tf.train.Checkpoint's own save counter in its files.
SAVE_COUNTER_KEY = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
# How corrupt_save_counter damages the counter: read as a float32, restoring
# raises InvalidArgumentError; with a byte of its value flipped, the data
# file's checksum fails and restoring raises DataLossError.
SAVE_COUNTER_DAMAGE = ["another dtype", "flipped byte"]


def edited_checkpoint(path, name, edit, copy=None):
  """A copy of the checkpoint at `path` whose entries named `name` (the
  whole key, or its last part: a sampler's "tree") are `edit`(their saved
  value), each other entry as saved. Written at `copy` (`path` itself
  replaces the original), by default `path` + "-edited"; returns its path.
  """
  reader = tf.train.load_checkpoint(path)
  keys = sorted(reader.get_variable_to_dtype_map())
  values = [reader.get_tensor(key) for key in keys]
  for position, key in enumerate(keys):
    if key == name or key.endswith(f"/.ATTRIBUTES/{name}"):
      values[position] = edit(values[position])
  copy = copy or path + "-edited"
  tf.raw_ops.SaveV2(prefix=copy,
                    tensor_names=keys,
                    shape_and_slices=[""] * len(keys),
                    tensors=[tf.constant(value) for value in values])
  return copy


def forge_digest(path):
  """Records the digest of the trainer's checkpoint at `path` as its files
  are now, as a forger who edited them would (a run written before digests
  has none at all): the trainer's checks past the digest still refuse."""
  run_files.record_checkpoint_digest(path)


def edited_keras_weights(path, name, edit, copy):
  """A copy at `copy` of the Keras file at `path` (`.keras` or
  `.weights.h5`) whose top-level model's entry `name` (an
  AdaptiveSamplingModel's sampler state: "tree", "amplitude", ...) is
  `edit`(its saved value), each other entry as saved; returns `copy`."""

  def edit_h5(file):
    with h5py.File(file, "r+") as weights:
      entries = weights["vars"]
      value = edit(entries[name][()])
      del entries[name]
      entries[name] = value

  if path.endswith(".weights.h5"):
    with open(path, "rb") as original, open(copy, "wb") as edited:
      edited.write(original.read())
    edit_h5(copy)
    return copy
  with zipfile.ZipFile(path) as original, zipfile.ZipFile(copy, "w") as edited:
    for member in original.namelist():
      contents = original.read(member)
      if member == "model.weights.h5":
        buffer = io.BytesIO(contents)
        edit_h5(buffer)
        contents = buffer.getvalue()
      edited.writestr(member, contents)
  return copy


def corrupt_save_counter(path, how):
  """Damages the save counter of the checkpoint at `path` in place, `how`
  one of SAVE_COUNTER_DAMAGE."""
  if how == "another dtype":
    edited_checkpoint(path, SAVE_COUNTER_KEY, np.float32, copy=path)
    return
  # A value whose 8 bytes occur once in the data file, then corrupted.
  marker = np.int64(0x123456789ABCDE).tobytes()
  edited_checkpoint(path,
                    SAVE_COUNTER_KEY,
                    lambda _: np.int64(0x123456789ABCDE),
                    copy=path)
  data_file = f"{path}.data-00000-of-00001"
  with open(data_file, "rb") as f:
    contents = bytearray(f.read())
  at = contents.find(marker)
  assert at >= 0 and contents.find(marker, at + 1) < 0, "marker not unique"
  contents[at] ^= 0xFF
  with open(data_file, "wb") as f:
    f.write(contents)


def checkpoint_state(checkpoint):
  """Every value the objects of tf.train.Checkpoint `checkpoint` hold, as
  NumPy arrays: its variables, those of its tf.Modules (which a sampler
  saves itself) and their random generators' states; not its save counter,
  which it makes when first read."""
  view = tf.train.TrackableView(checkpoint)
  variables = {}
  for name, child in view.children(checkpoint).items():
    if name == "save_counter":
      continue
    for trackable in tf.train.TrackableView(child).descendants():
      if isinstance(trackable, tf.Module):
        generator = getattr(trackable, "generator", None)
        extra = [generator.state] if generator is not None else []
        for variable in [*trackable.variables, *extra]:
          variables[id(variable)] = variable
      elif isinstance(trackable, (tf.Variable, keras.Variable)):
        variables[id(trackable)] = trackable
  return [variable.numpy().copy() for variable in variables.values()]
