"""Checkpointing of state that must be checked before it is restored.

A `tf.Module` saves each of its variables on its own, and a restore assigns
each on its own: a checkpoint of another sampler's size, or a hand-edited
one, would overwrite part of the state before any check could fail.
`CheckedState` saves a module's variables together with its size and
settings, and restores them through one function that validates everything
first.
"""

import tensorflow as tf
from tensorflow.python.trackable import base


class CheckedState(base.Trackable):
  """Variables that are saved together and restored all or nothing.

  Owners keep the variables untracked (`NoDependency`) and track this
  object instead; a SavedModel still holds the variables themselves, for
  the functions that use them.
  """

  def __init__(self, variables, constants, restore):
    """Creates the state.

    Args:
      variables: {name: tf.Variable}, saved under these names.
      constants: {name: int or float}, sizes and settings saved beside them
        (as int64 or float64), to check on restore.
      restore: function({name: restored tensor}, with the constants too) ->
        the op that assigns the variables, after asserting that the values
        are valid (on the CPU an assertion raises before anything is
        assigned).
    """
    self._variables = dict(variables)
    self._constants = dict(constants)
    self._restore = restore

  def _trackable_children(self, save_type=base.SaveType.CHECKPOINT, **kwargs):
    if save_type == base.SaveType.SAVEDMODEL:
      return dict(self._variables)
    return {}

  def _serialize_to_tensors(self):
    constants = {
        name:
            tf.constant(value,
                        tf.int64 if isinstance(value, int) else tf.float64)
        for name, value in self._constants.items()
    }
    return {**self._variables, **constants}

  def _restore_from_tensors(self, restored_tensors):
    return self._restore(restored_tensors)

  def _export_to_saved_model_graph(self, object_map, tensor_map, options,
                                   **kwargs):
    # The exported graph's copy saves and restores the exported variables.
    exported = {
        name: object_map[variable] for name, variable in self._variables.items()
    }

    def assign(restored):
      return tf.group(*[
          variable.assign(restored[name])
          for name, variable in exported.items()
      ])

    object_map[self] = CheckedState(exported, self._constants, assign)
    return []


def assert_size(saved, expected, what):
  """Asserts that a checkpoint's saved `what` is `expected`."""
  return tf.debugging.assert_equal(
      tf.cast(saved, tf.int64),
      tf.constant(expected, tf.int64),
      message=f"the checkpoint's {what} differs from this one's {expected}")


def assert_setting(saved, expected, name):
  """Asserts that a checkpoint's saved setting `name` is `expected`: a run
  restored under another would change it silently, halfway."""
  return tf.debugging.assert_equal(
      tf.cast(saved, tf.float64),
      tf.constant(expected, tf.float64),
      message=f"the checkpoint's {name} differs from this one's {expected}: "
      f"restore into a sampler made with the checkpoint's {name}")


def assert_shape(tensor, shape, what):
  """Asserts that a restored tensor has `shape`."""
  return tf.debugging.assert_equal(
      tf.shape(tensor, out_type=tf.int64),
      tf.constant(tf.TensorShape(shape).as_list(), tf.int64),
      message=f"the checkpoint's {what} is not of shape {list(shape)}")
