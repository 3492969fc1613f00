"""Checkpointing of state that must be checked before it is restored.

A `tf.Module` saves each of its variables on its own, and a restore assigns
each on its own: a checkpoint of another sampler's size, or a hand-edited
one, would overwrite part of the state before any check could fail.
`CheckedState` saves a module's variables together with its size and
settings, and restores them through one function that validates everything
first; state that comes back another way (a Keras weights file) goes
through the same function (`CheckedState.restore`).
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

  @property
  def variables(self):
    """{name: tf.Variable}, in the order given."""
    return dict(self._variables)

  @property
  def constants(self):
    """{name: tensor}: the sizes and settings, as saved."""
    return {
        name: tf.constant(value, _constant_dtype(value))
        for name, value in self._constants.items()
    }

  def tensors(self):
    """{name: variable or tensor}: all that is saved."""
    return {**self._variables, **self.constants}

  def restore(self, values):
    """Restores `values`, read from somewhere other than a checkpoint, as a
    checkpoint's: all or nothing, through the same checks.

    Args:
      values: {name: array}, every name of `tensors()`, each of its dtype.

    Raises:
      ValueError: a name is missing or unknown, or a value is of another
        dtype (as a checkpoint's reader refuses it).
      tf.errors.InvalidArgumentError: the owner's checks refused the values.
      Either way, no variable has changed.
    """
    dtypes = {
        name: variable.dtype for name, variable in self._variables.items()
    }
    dtypes.update((name, _constant_dtype(value))
                  for name, value in self._constants.items())
    if set(values) != set(dtypes):
      raise ValueError(f"the saved state's entries are {sorted(values)}, not "
                       f"{sorted(dtypes)}: it was edited, or written by "
                       "another version")
    tensors = {}
    for name, value in values.items():
      tensor = tf.convert_to_tensor(value)
      if tensor.dtype != dtypes[name]:
        raise ValueError(f"the saved {name} is {tensor.dtype.name}, not "
                         f"{dtypes[name].name}")
      tensors[name] = tensor
    self._restore(tensors)

  def _serialize_to_tensors(self):
    return self.tensors()

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


def checked_state(module):
  """The `CheckedState` that `module` (a tf.Module) saves its state with."""
  view = tf.train.TrackableView(module)
  states = [
      child for child in view.children(module).values()
      if isinstance(child, CheckedState)
  ]
  if len(states) != 1:
    raise ValueError(f"{type(module).__name__} saves {len(states)} "
                     "CheckedStates, not one")
  return states[0]


def _constant_dtype(value):
  return tf.int64 if isinstance(value, int) else tf.float64


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
