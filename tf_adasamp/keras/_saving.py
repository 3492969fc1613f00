"""What an `AdaptiveSamplingModel` saves, and how it loads again.

Its config (the settings of the sampler and the stage, and the utility, each
refused up front if Keras could not load it back), the sampler's state as
Keras weights over its own tf.Variables (`SamplerVariable`), the wrapper's
saving and loading methods (`SavingMethods`), and the registration that lets
a sampler's schedule be saved.
"""

import warnings

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import _checkpointing
from tf_adasamp import data as data_lib
from tf_adasamp import distribute
from tf_adasamp import schedules
from tf_adasamp import utilities as utilities_lib
from tf_adasamp.keras import _arguments

# So that a trainer whose sampler follows one saves and loads.
keras.saving.register_keras_serializable(package="tf_adasamp")(
    schedules.PiecewiseLinear)


class SamplerVariable(keras.Variable):
  """A Keras variable over one of the sampler's tf.Variables (no copy)."""

  def __init__(self, variable):
    super().__init__(lambda shape, dtype: variable,
                     shape=variable.shape,
                     dtype=variable.dtype.name,
                     trainable=False,
                     autocast=False,
                     name="sampler_" +
                     variable.name.split(":")[0].split("/")[-1])

  def _initialize_with_initializer(self, initializer):
    # Keras's TensorFlow variable adopts a tf.Variable handed to it as its
    # value; the default would copy it into a new one.
    self._initialize(initializer(self._shape, dtype=self._dtype))


_UTILITY_FIX = ("Keras saves a function by a registered name: define it with "
                "def at a module's top level and register it with "
                "tf_adasamp.utilities.register_utility(name, utility)")

_SCHEDULE_FIX = ("Keras saves a schedule by its registered class: use one of "
                 "tf_adasamp.schedules (warmup, anneal, final_uniform, "
                 "PiecewiseLinear) or a registered "
                 "keras.optimizers.schedules.LearningRateSchedule")


def _savable(thing, what, fix):
  """`thing` as Keras serializes it, if Keras can load it back.

  Returns:
    Keras's serialized form of `thing`.

  Raises:
    ValueError: naming `thing` and `fix`, if Keras cannot (a lambda, a
      function nobody can import by name).
  """
  with warnings.catch_warnings():
    # Keras warns that a lambda loads only unsafely; it is refused below.
    warnings.simplefilter("ignore")
    config = keras.saving.serialize_keras_object(thing)
  try:
    keras.saving.deserialize_keras_object(config, safe_mode=True)
  except (AttributeError, ImportError, KeyError, TypeError,
          ValueError) as error:
    name = getattr(thing, "__qualname__", type(thing).__name__)
    raise ValueError(f"{what} {name} cannot be saved: {fix}") from error
  return config


def _serialize_setting(setting, name):
  """A sampler's setting for the config.

  Returns:
    The setting: a number, a dtype's name, or a schedule as Keras
    serializes it.

  Raises:
    ValueError: if the setting is a schedule that Keras cannot load back.
  """
  if callable(setting):
    return _savable(setting, f"the sampler's {name} schedule", _SCHEDULE_FIX)
  if name == "dtype":
    return tf.as_dtype(setting).name
  return setting


def _deserialize_setting(value):
  """A sampler's setting from the config, as `_serialize_setting` wrote it."""
  if isinstance(value, dict):
    return keras.saving.deserialize_keras_object(value)
  return value


def config_of(trainer):
  """`trainer.get_config()`: what `from_config` makes the wrapper from.

  Returns:
    The config, as `AdaptiveSamplingModel.get_config` says.

  Raises:
    ValueError: if the utility, or a schedule of the sampler's, cannot be
      saved.
  """
  # A registered utility is saved by its name, another by Keras.
  utility = next((name for name, function in utilities_lib.UTILITIES.items()
                  if function is trainer.utility), None)
  if utility is None:
    utility = _savable(trainer.utility, "the utility", _UTILITY_FIX)
  config = {
      "name": trainer.name,
      "trainable": trainer.trainable,
      "model": keras.saving.serialize_keras_object(trainer.model),
      "sampler": None,
      "batch_size": None,
      "max_lag": None,
      "sampler_options": None,
      "utility": utility,
      "from_logits": trainer.from_logits,
      "debias": trainer.debias,
      "utility_at": trainer.utility_at,
  }
  if trainer.stage is None:
    config["sampler_options"] = {
        option: _serialize_setting(value, option)
        for option, value in trainer.sampler_options.items()
    }
    return config
  sampler = trainer.stage.sampler
  config["sampler"] = {
      "num_examples": sampler.num_examples,
      "amplitude": _serialize_setting(sampler.amplitude, "amplitude"),
      "decay": sampler.decay,
      "stratified": sampler.stratified,
      "dtype": sampler.dtype.name,
      "epsilon": sampler.epsilon,
      "beta": _serialize_setting(sampler.beta, "beta")
  }
  config["batch_size"] = trainer.stage.batch_size
  config["max_lag"] = trainer.stage.max_lag
  return config


def wrapper_from_config(cls, config):
  """`cls.from_config(config)`: a wrapper, with a new stage and sampler.

  Returns:
    The wrapper, of class `cls`.
  """
  config = dict(config)
  model = keras.saving.deserialize_keras_object(config.pop("model"))
  sampler = config.pop("sampler")
  batch_size, max_lag = config.pop("batch_size"), config.pop("max_lag")
  stage = None
  if sampler is not None:
    sampler = {
        name: _deserialize_setting(value) for name, value in sampler.items()
    }
    # In a strategy's scope (load_model there), a copy per replica.
    stage = data_lib.AdaptiveSampling(distribute.create_sampler(
        tf.distribute.get_strategy(), **sampler),
                                      batch_size,
                                      max_lag=max_lag)
  options = config.pop("sampler_options", None)
  if options is not None:
    config["sampler_options"] = {
        name: _deserialize_setting(value) for name, value in options.items()
    }
  utility = config.pop("utility")
  if not isinstance(utility, str):
    utility = keras.saving.deserialize_keras_object(utility)
  return cls(model, stage, utility=utility, **config)


def assign_checked_weights(checkpoint, sampler_state, variables, weights):
  """Sets `variables` to `weights`, the sampler's part checked first.

  The sampler's variables (`sampler_state`, the `SamplerVariable`s over
  `checkpoint`'s) are restored through the checkpoint's checks,
  which refuse a state before any weight changes; then the others are set.

  Args:
    checkpoint: the sampler's `_checkpointing.checked_state`.
    sampler_state: the model's `SamplerVariable`s, in the checkpoint's
      order.
    variables: the model's weights.
    weights: their new values, of the same shapes.
  """
  names = {
      id(variable): name
      for name, variable in zip(checkpoint.variables, sampler_state)
  }
  checkpoint.restore({
      **checkpoint.constants,
      **{
          names[id(variable)]: value for variable, value in zip(
              variables, weights) if id(variable) in names
      }
  })
  for variable, value in zip(variables, weights):
    if id(variable) not in names:
      variable.assign(value)


class SavingMethods:
  """`AdaptiveSamplingModel`'s saving and loading: its config, and its weights
  with the sampler's state restored all or nothing through its checks."""

  def get_config(self):
    """Says how `from_config` makes the wrapper again.

    The sampler's state is among the model's weights, not in the config.

    Returns:
      A dict: the wrapped model serialized, the sampler's and the stage's
      settings (or, before the first `fit` made them, `sampler_options`),
      the utility (its name, or serialized), `from_logits`, `debias` and
      `utility_at`.

    Raises:
      ValueError: if the utility, or a schedule of the sampler's, cannot be
        saved (a lambda, a function that is not registered).
    """
    return config_of(self)

  def save(self, filepath, *args, **kwargs):
    """Saves as `keras.Model.save` does, if what it saves can be loaded.

    Args:
      filepath: as for `keras.Model.save`.
      *args: as for `keras.Model.save`.
      **kwargs: as for `keras.Model.save`.

    Returns:
      What `keras.Model.save` returns.

    Raises:
      ValueError: as `get_config`, before the file is opened (Keras opens,
        and empties, it before it asks for the config).
    """
    self.get_config()
    return super().save(filepath, *args, **kwargs)

  @classmethod
  def from_config(cls, config):
    """Makes a wrapper, with a new stage and sampler, from `get_config`'s dict.

    Args:
      config: a dict as `get_config` returns it.

    Returns:
      The `AdaptiveSamplingModel`.
    """
    return wrapper_from_config(cls, config)

  def save_own_variables(self, store):
    """Saves the sampler's state as its `tf.train.Checkpoint` does.

    The variables by name, with the sampler's size and settings.

    Args:
      store: Keras's store of this layer's variables.
    """
    if self.stage is None:
      return  # no sampler before the first fit
    for name, value in self._sampler_checkpoint.tensors().items():
      store[name] = value

  def load_own_variables(self, store):
    """Restores the sampler's state through its checkpoint's checks.

    As `tf.train.Checkpoint` restores it (docs/guarantees.md,
    "Checkpoints"): refused, the sampler left as it was, unless it is of
    this sampler's size and settings and fits together; sums are rebuilt
    from the leaves. `load_model`, `load_weights`, `ModelCheckpoint`'s files
    and `BackupAndRestore` all come here. A wrapper whose first `fit` has
    not made its sampler yet makes it here, over the saved state's number
    of examples, with its `sampler_options`.

    Args:
      store: Keras's store of this layer's variables.
    """
    saved = {name: store[name] for name in store.keys()}
    if self.stage is not None:
      self._sampler_checkpoint.restore(saved)
    elif saved:  # else saved before a fit too
      stage = self._new_stage(int(np.asarray(saved["num_examples"])),
                              _arguments.KERAS_BATCH_SIZE)
      # Checked before the wrapper takes it: a refused state changes nothing.
      _checkpointing.checked_state(stage.sampler).restore(saved)
      self._adopt_stage(stage)

  def load_weights(self, filepath, skip_mismatch=False, **kwargs):
    """Loads weights as `keras.Model.load_weights`, all or nothing.

    Keras goes on loading the other layers after one is refused (the
    sampler's state that does not fit together, a weight of another shape),
    so then every weight of the model and its optimizer is put back as it
    was before the error is raised. With `skip_mismatch=True`, what is
    refused is skipped, as in Keras.

    Args:
      filepath: as for `keras.Model.load_weights`.
      skip_mismatch: as for `keras.Model.load_weights`.
      **kwargs: as for `keras.Model.load_weights`.

    Returns:
      What `keras.Model.load_weights` returns.
    """
    variables = list(self.weights)
    if self.optimizer is not None:
      variables += self.optimizer.variables
    before = [variable.numpy() for variable in variables]
    try:
      return super().load_weights(filepath,
                                  skip_mismatch=skip_mismatch,
                                  **kwargs)
    except BaseException:
      for variable, value in zip(variables, before):
        variable.assign(value)
      raise

  def set_weights(self, weights):
    """Sets weights as `keras.Model.set_weights`.

    The sampler's part goes through the checks of `load_own_variables`
    first, so a refused state changes no weight.

    Args:
      weights: as for `keras.Model.set_weights`.
    """
    weights = list(weights)
    variables = self.weights
    if self.stage is None or len(weights) != len(variables) or any(
        tuple(variable.shape) != np.shape(value)
        for variable, value in zip(variables, weights)):
      # Without a sampler, Keras's own; else it raises Keras's error,
      # changing nothing.
      super().set_weights(weights)
      return
    assign_checked_weights(self._sampler_checkpoint, self._sampler_state,
                           variables, weights)
