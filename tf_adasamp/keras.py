"""Adaptive sampling for `keras.Model.fit` (Keras 3, TensorFlow backend).

`AdaptiveSamplingModel` wraps a model, and its `fit` takes what
`keras.Model.fit` takes: it trains on batches drawn from an
`AdaptiveSampler`, computes each drawn example's utility and reweights it
(London, NIPS 2017, Algorithm 1; the utility of the step's own forward
pass, h_{t-1} with dropout on, or of the updated model h_t, `utility_at`),
and logs KL(Q_t || uniform) as the metric `kl` (the paper's Fig. 1e).
Loss, compiled metrics, callbacks, validation and saving work as usual; the
sampler's state is part of the model's weights.

Where the draws are made. Arrays, and a `tf.data.Dataset` of examples (read
into memory once), are drawn from inside the train step: Algorithm 1
exactly, with no lag, so a fit resumed from `BackupAndRestore` draws what
the uninterrupted one would. The stage's dataset (`stage.dataset(source)`,
for data read from disk by index) draws in the input pipeline instead,
ahead of the step by at most the stage's `max_lag`.

Training logs. The drawn batches over-represent the examples the model gets
wrong, so the loss and metrics measured on them (logged as `adaptive_loss`,
`adaptive_<metric>`) read worse than the same model on the training set.
`loss` and `<metric>` are the training set's under the uniform
distribution, estimated from the same batches with importance weights
1 / (n Q_t(i)) (unbiased for the loss; self-normalized for metrics), so they
compare with `val_loss` and `val_<metric>` as in uniform training. Each
epoch's logs, and the History, also hold the distribution's
`effective_sample_size` and `heaviest_share` (`tf_adasamp.diagnostics`).

The stage's update releases the pipeline's next draw, which XLA cannot
compile, so with `jit_compile=True` (or "auto" on a GPU) XLA compiles the
forward and backward pass and the update runs after it, outside the
compiled function; evaluation and prediction compile whole.
"""

import inspect
import math
import numbers
import os
import sys
import warnings

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import _checkpointing
from tf_adasamp import _keras_internals
from tf_adasamp import _validation
from tf_adasamp import data as data_lib
from tf_adasamp import defaults
from tf_adasamp import diagnostics
from tf_adasamp import distribute
from tf_adasamp import schedules
from tf_adasamp import utilities as utilities_lib
from tf_adasamp.sampler import AdaptiveSampler

# So that a trainer whose sampler follows one saves and loads.
keras.saving.register_keras_serializable(package="tf_adasamp")(
    schedules.PiecewiseLinear)

# What Keras's fit batches arrays in when not told.
KERAS_BATCH_SIZE = 32
UTILITY_AT = ("step", "updated")
# The sampler's arguments that `sampler_options` may set: all but its size
# (fit's training examples) and its name.
SAMPLER_OPTIONS = tuple(
    name for name in inspect.signature(AdaptiveSampler).parameters
    if name not in ("num_examples", "name"))


@keras.saving.register_keras_serializable(package="tf_adasamp")
class AdaptiveSamplingModel(_keras_internals.StageBatchBuild, keras.Model):
  """Trains `model` with `fit` on adaptive batches.

  Example, three lines around a Keras model:
    trainer = tf_adasamp.keras.AdaptiveSamplingModel(model)
    trainer.compile(optimizer="adam",
                    loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"])
    trainer.fit(x, y, batch_size=128, epochs=3, validation_split=0.1)
    trainer.save("trainer.keras")  # the model and the sampler's state

  `fit` takes what `keras.Model.fit` takes: arrays `x, y` (and
  `sample_weight`, `class_weight`) with `batch_size` and `validation_split`
  or `validation_data`, a finite `tf.data.Dataset` of `(x, y)` or
  `(x, y, sample_weight)` batches, or the stage's dataset
  (`stage.dataset((x, y))`). The first `fit` makes the sampler over its
  training examples, with `sampler_options`; pass a `stage` to make it
  yourself. An epoch is ceil(n / batch size) steps unless `steps_per_epoch`
  says otherwise. Labels y are class ids, or one-hot. Evaluation,
  prediction and validation take ordinary data.

  Under a `tf.distribute` strategy, build and compile the wrapper in its
  scope: `fit` then makes the sampler with one copy of its state per replica
  (`tf_adasamp.distribute.create_sampler`), and `batch_size` is the global
  batch, split evenly among the replicas.
  """

  def __init__(self,
               model: keras.Model,
               stage: data_lib.AdaptiveSampling | None = None,
               utility: str | utilities_lib.Utility = "l1",
               from_logits: bool | None = None,
               debias: bool = True,
               utility_at: str = defaults.UTILITY_AT,
               sampler_options: dict | None = None,
               **kwargs):
    """Wraps `model`.

    Args:
      model: the `keras.Model` to train; its outputs are class
        probabilities, or logits (see `from_logits`).
      stage: the `tf_adasamp.data.AdaptiveSampling` stage whose sampler
        draws the training examples; None (the default) for one that the
        first `fit` makes over its training examples. Under a
        `tf.distribute` strategy its sampler must come from
        `tf_adasamp.distribute.create_sampler` with that strategy.
      utility: "zero_one", "l1", "cross_entropy" or a callable
        (labels [B], probabilities [B, C]) -> [B]; see
        `tf_adasamp.utilities`. To save the model, a callable must be
        registered (`tf_adasamp.utilities.register_utility`).
      from_logits: whether `model` outputs logits; None (the default)
        takes it from the compiled loss (its `from_logits`, False for a
        loss that has none). Outputs taken as probabilities are checked to
        lie in [0, 1].
      debias: if True (the default), weight each example's loss by the
        sampler's importance weights (1 / (n Q_t(i))) ** beta
        (`AdaptiveSampler.importance_weights`): at beta 1 the optimized
        loss estimates the uniform average, at beta 0 it is Algorithm 1's,
        unweighted. False weighs none, whatever beta.
      utility_at: "step", the utility of the step's own forward pass (the
        model before its update, dropout on), or "updated", that of the
        updated model, as Algorithm 1 (a second forward pass, in inference
        mode).
      sampler_options: the `AdaptiveSampler` arguments of the sampler `fit`
        makes (amplitude, decay, seed, stratified, dtype, epsilon, beta);
        those left out take the sampler's defaults (`tf_adasamp.defaults`).
        Not with `stage`.
      **kwargs: passed to `keras.Model`, e.g. the model's name.

    Raises:
      TypeError: if `stage` is not a `tf_adasamp.data.AdaptiveSampling`, or
        `sampler_options` not a dict, or `from_logits` or `debias` is not
        a bool.
      ValueError: if `utility` is a name not in `tf_adasamp.utilities`,
        `utility_at` is not one of "step" and "updated", `sampler_options`
        names an argument the sampler does not take or comes with a stage,
        or the stage's sampler does not hold a copy per replica of the
        strategy in whose scope the wrapper is built.
    """
    if stage is not None and not isinstance(stage, data_lib.AdaptiveSampling):
      raise TypeError("stage must be a tf_adasamp.data.AdaptiveSampling, "
                      f"got {type(stage).__name__}")
    if utility_at not in UTILITY_AT:
      raise ValueError(f"utility_at must be one of {UTILITY_AT}, got "
                       f"{utility_at!r}")
    sampler_options = _check_sampler_options(sampler_options, stage)
    if stage is not None:
      _check_sampler_placement(stage.sampler)
    utility = utilities_lib.get(utility)
    super().__init__(**kwargs)
    self.model = model
    self.stage = None
    self.utility = utility
    # Booleans only: a .keras file's "false" would be True to bool().
    self.from_logits = (None if from_logits is None else _validation.boolean(
        from_logits, "from_logits"))
    self.debias = _validation.boolean(debias, "debias")
    self.utility_at = utility_at
    self.sampler_options = sampler_options
    if stage is not None:
      self._adopt_stage(stage)
    self._learn = None
    self._outputs_logits = None
    self._estimates = None
    # Under a strategy, the estimates `fit` builds before it traces the step.
    self._built_estimates = None
    self._class_weight = None
    # Set by `fit` for examples drawn in the step: their tensors, the device
    # they are on and the draws of a replica's step.
    self._examples = None
    self._examples_device = None
    self._draws = None
    self.built = model.built

  def _adopt_stage(self, stage):
    """Makes `stage` the wrapper's, its sampler's state the model's weights."""
    self.stage = stage
    # The sampler's state as its checkpoint saves it: tracked here, so that a
    # tf.train.Checkpoint of this model saves and checks it as the sampler's
    # own does; Keras's files and set_weights restore it through it too
    # (load_own_variables, set_weights).
    self._sampler_checkpoint = _checkpointing.checked_state(stage.sampler)
    # Its tf.Variables, as non-trainable weights of this model: saved,
    # restored and copied with the model's own. Made in the strategy's scope,
    # as the model's own are, also where `fit` makes the sampler.
    with self.distribute_strategy.scope():
      self._sampler_state = [
          _SamplerVariable(variable)
          for variable in self._sampler_checkpoint.variables.values()
      ]

  def build(self, input_shape):
    """Builds the wrapped model, if it is not built.

    Args:
      input_shape: the shape of the model's inputs.
    """
    if not self.model.built:
      self.model.build(input_shape)

  def call(self, inputs, training=None):
    """Runs the wrapped model.

    Args:
      inputs: the model's inputs.
      training: whether the model runs in training mode.

    Returns:
      The wrapped model's outputs.
    """
    return self.model(inputs, training=training)

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
    # A registered utility is saved by its name, another by Keras.
    utility = next((name for name, function in utilities_lib.UTILITIES.items()
                    if function is self.utility), None)
    if utility is None:
      utility = _savable(self.utility, "the utility", _UTILITY_FIX)
    config = {
        "name": self.name,
        "trainable": self.trainable,
        "model": keras.saving.serialize_keras_object(self.model),
        "sampler": None,
        "batch_size": None,
        "max_lag": None,
        "sampler_options": None,
        "utility": utility,
        "from_logits": self.from_logits,
        "debias": self.debias,
        "utility_at": self.utility_at,
    }
    if self.stage is None:
      config["sampler_options"] = {
          option: _serialize_setting(value, option)
          for option, value in self.sampler_options.items()
      }
      return config
    sampler = self.stage.sampler
    config["sampler"] = {
        "num_examples": sampler.num_examples,
        "amplitude": _serialize_setting(sampler.amplitude, "amplitude"),
        "decay": sampler.decay,
        "stratified": sampler.stratified,
        "dtype": sampler.dtype.name,
        "epsilon": sampler.epsilon,
        "beta": _serialize_setting(sampler.beta, "beta")
    }
    config["batch_size"] = self.stage.batch_size
    config["max_lag"] = self.stage.max_lag
    return config

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
                              KERAS_BATCH_SIZE)
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
    checkpoint = self._sampler_checkpoint
    names = {
        id(variable): name
        for name, variable in zip(checkpoint.variables, self._sampler_state)
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

  def make_train_function(self, force=False):
    """Makes Keras's train function, compiling only the learning step by XLA.

    Args:
      force: whether to make it again even if there is one.

    Returns:
      The train function.

    Raises:
      ValueError: if `from_logits` contradicts the compiled loss's.
    """
    if self.train_function is not None and not force:
      return self.train_function
    self._outputs_logits = _outputs_logits(self.from_logits, self.loss)
    if self._built_estimates is not None:
      self._estimates, self._built_estimates = self._built_estimates, None
    else:
      self._estimates = _TrainingEstimates(
          *_keras_internals.compiled_metrics(self))
    # With XLA on, it compiles `_learn`; the step around it runs the
    # stage's update, whose permit XLA cannot compile. `jit_compile` stays
    # as set, for evaluate and predict.
    jit_compile = self.jit_compile
    self._learn = (tf.function(self._learn_step, jit_compile=True)
                   if jit_compile else self._learn_step)
    self.jit_compile = False
    try:
      return super().make_train_function(force)
    finally:
      self.jit_compile = jit_compile

  def reset_metrics(self):
    """Resets Keras's metrics and the training logs' estimates."""
    super().reset_metrics()
    if self._estimates is not None:
      self._estimates.reset_state()

  def evaluate(self,
               x=None,
               y=None,
               batch_size=None,
               verbose="auto",
               *args,
               **kwargs):
    """Evaluates as `keras.Model.evaluate`, in batches of the stage's size.

    Args:
      x: as for `keras.Model.evaluate`; not the stage's dataset.
      y: as for `keras.Model.evaluate`.
      batch_size: the batch size; None for the stage's, where Keras batches
        `x` itself.
      verbose: as for `keras.Model.evaluate`; "auto" as in `fit`.
      *args: as for `keras.Model.evaluate`.
      **kwargs: as for `keras.Model.evaluate`.

    Returns:
      What `keras.Model.evaluate` returns.
    """
    return super().evaluate(x, y, self._batch_size(x, batch_size),
                            _verbosity(verbose), *args, **kwargs)

  def predict(self, x, batch_size=None, verbose="auto", *args, **kwargs):
    """Predicts as `keras.Model.predict`, in batches of the stage's size.

    Args:
      x: as for `keras.Model.predict`.
      batch_size: the batch size; None for the stage's, where Keras batches
        `x` itself.
      verbose: as for `keras.Model.predict`; "auto" as in `fit`.
      *args: as for `keras.Model.predict`.
      **kwargs: as for `keras.Model.predict`.

    Returns:
      The predictions, as `keras.Model.predict` returns them.
    """
    return super().predict(x, self._batch_size(x, batch_size),
                           _verbosity(verbose), *args, **kwargs)

  def _batch_size(self, x, batch_size):
    """`batch_size`, or the stage's where Keras batches `x` itself."""
    if batch_size is None and self.stage is not None and all(
        hasattr(leaf, "__array__") for leaf in tf.nest.flatten(x)):
      return self.stage.batch_size
    return batch_size

  def export(
      self,
      filepath,
      format="tf_saved_model",  # pylint: disable=redefined-builtin
      verbose=None,
      input_signature=None,
      **kwargs):
    """Exports the wrapped model for serving: `trainer.model.export(...)`.

    The artifact holds the wrapped model alone: the sampler's state is for
    training, and saving the trainer keeps it. A subclassed wrapped
    model needs `input_signature`.

    Args:
      filepath: as for `keras.Model.export`.
      format: as for `keras.Model.export`.
      verbose: as for `keras.Model.export`.
      input_signature: as for `keras.Model.export`.
      **kwargs: as for `keras.Model.export`.

    Returns:
      What `keras.Model.export` returns.
    """
    return self.model.export(filepath,
                             format=format,
                             verbose=verbose,
                             input_signature=input_signature,
                             **kwargs)

  def fit(self,
          x=None,
          y=None,
          batch_size=None,
          epochs=1,
          verbose="auto",
          callbacks=None,
          validation_split=0.0,
          validation_data=None,
          shuffle=True,
          class_weight=None,
          sample_weight=None,
          initial_epoch=0,
          steps_per_epoch=None,
          validation_steps=None,
          validation_batch_size=None,
          validation_freq=1):
    """Trains as `keras.Model.fit` does, on adaptive draws.

    Args:
      x: the training inputs (arrays or tensors, or a nest of them); a
        finite `tf.data.Dataset` of `(x, y)` or `(x, y, sample_weight)`
        batches, read into memory once; or the stage's dataset.
      y: the training labels (class ids, or one-hot); None for a dataset.
      batch_size: the draws of a step (split evenly among the replicas
        under a strategy); None for the stage's (per replica), or for
        Keras's 32 before the first fit has made one. Not for a dataset,
        whose batches say it.
      epochs: as for `keras.Model.fit`.
      verbose: as for `keras.Model.fit`; "auto" is Keras's progress bar on a
        terminal, and one line an epoch, free of terminal control codes,
        where stdout is a file or a pipe. Unless 0, `fit` ends with a line
        on the distribution it left.
      callbacks: as for `keras.Model.fit`.
      validation_split: the fraction of the training examples held out for
        validation, taken from the end as Keras takes it, and never drawn:
        the sampler is over the rest. Not for the stage's dataset.
      validation_data: as for `keras.Model.fit`; not the stage's dataset.
      shuffle: does not apply: the sampler draws.
      class_weight: {class id: weight >= 0}, multiplying the sample weights
        of each class, as in Keras.
      sample_weight: the training examples' sample weights, drawn with them.
      initial_epoch: as for `keras.Model.fit`.
      steps_per_epoch: the steps of an epoch; None for ceil(n / batch size)
        (for the stage's dataset, where it is endless).
      validation_steps: as for `keras.Model.fit`.
      validation_batch_size: the validation batches' size; None for the
        training batches'.
      validation_freq: as for `keras.Model.fit`.

    Returns:
      The `keras.callbacks.History` of the run.

    Raises:
      TypeError: if `x` is neither arrays nor a dataset (a
        `keras.utils.PyDataset`, a generator).
      ValueError: if a dataset `x` is endless or of unknown length, or not
        of `(x, y)` batches; `y` is missing (or given for a dataset);
        `batch_size` does not split among the replicas; the training
        examples are not the stage's number; `validation_split` comes with
        the stage's dataset or leaves no example on one side;
        `validation_data` is the stage's dataset; `class_weight` is not as
        above; or a `ModelCheckpoint` among the callbacks saves the model,
        whose utility or schedule cannot be saved. Nothing has changed
        then.
    """
    class_weight = _check_class_weight(class_weight)
    if isinstance(validation_data, tf.data.Dataset):
      _refuse_stage_batches(validation_data.element_spec, "validation_data")
    for callback in callbacks or ():
      if (isinstance(callback, keras.callbacks.ModelCheckpoint) and
          not callback.save_weights_only):
        self.get_config()  # refuses now what the first save would
    replicas = self.distribute_strategy.num_replicas_in_sync
    if _is_stage_dataset(x):
      training = self._stage_dataset(x, y, sample_weight, batch_size,
                                     validation_split)
      global_batch = self.stage.batch_size * replicas
      if steps_per_epoch is None and _is_endless(x):
        steps_per_epoch = math.ceil(self.stage.sampler.num_examples /
                                    global_batch)
    else:
      examples, validation_data, global_batch = self._examples_to_draw(
          x, y, sample_weight, batch_size, validation_split, validation_data)
      num_examples = _rows(examples)
      # Checked; from here on, state changes.
      if self.stage is None:
        self._adopt_stage(self._new_stage(num_examples, global_batch))
      self._draw_from(examples, global_batch // replicas)
      training = self.distribute_strategy.distribute_datasets_from_function(
          _steps)
      if steps_per_epoch is None:
        steps_per_epoch = math.ceil(num_examples / global_batch)
    if class_weight != self._class_weight:
      self._class_weight = class_weight
      self.train_function = None  # traced with the previous weights
    return super().fit(
        training,
        epochs=epochs,
        verbose=_verbosity(verbose),
        callbacks=[_SamplingReport(_verbosity(verbose)), *(callbacks or ())],
        shuffle=False,
        validation_data=validation_data,
        initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch,
        validation_steps=validation_steps,
        validation_batch_size=(validation_batch_size or global_batch),
        validation_freq=validation_freq)

  def _stage_dataset(self, x, y, sample_weight, batch_size, validation_split):
    """`x`, the stage's dataset, checked for `fit`."""
    if y is not None or sample_weight is not None:
      raise ValueError("x is a dataset, so y and sample_weight come from "
                       "its elements; do not pass them")
    if self.stage is None:
      raise ValueError("x is a stage's dataset, but this wrapper has no "
                       "stage; pass it the stage: AdaptiveSamplingModel("
                       "model, stage)")
    if batch_size is not None and batch_size != self.stage.batch_size:
      raise ValueError(f"batch_size={batch_size}, but the stage draws "
                       f"batches of {self.stage.batch_size}; leave it out")
    if validation_split:
      raise ValueError("validation_split cannot split the stage's dataset, "
                       "which draws from all of its source; pass "
                       "validation_data=(x_val, y_val)")
    if isinstance(x, tf.data.Dataset):
      _check_stage_batches(x.element_spec)
    return x

  def _examples_to_draw(self, x, y, sample_weight, batch_size, validation_split,
                        validation_data):
    """The training examples that `fit` draws from, checked.

    Returns:
      (examples, validation_data, global batch size): examples the nest
      (x, y) or (x, y, sample_weight) of arrays or tensors, less the
      validation split, which becomes validation_data unless that is given.

    Raises:
      TypeError: if `x` is neither arrays nor a dataset.
      ValueError: as `fit` says.
    """
    if isinstance(x, tf.data.Dataset):
      if y is not None or sample_weight is not None:
        raise ValueError("x is a dataset, so y and sample_weight come from "
                         "its elements; do not pass them")
      examples, dataset_batch = _read_dataset(x)
      if batch_size is not None and batch_size != dataset_batch:
        raise ValueError(f"batch_size={batch_size}, but x is a dataset of "
                         f"batches of {dataset_batch}; leave it out")
      batch_size = dataset_batch
    else:
      if not _is_nest(x):
        kind = ("keras.utils.PyDataset"
                if isinstance(x, keras.utils.PyDataset) else type(x).__name__)
        raise TypeError(
            f"x is a {kind}, which yields batches where the sampler draws "
            "examples: pass the arrays, a tf.data.Dataset of (x, y) "
            "batches, or a random-access source to stage.dataset(source)")
      if y is None:
        raise ValueError("fit needs labels: pass x and y, or a dataset of "
                         "(x, y) batches")
      examples = (x, y) if sample_weight is None else (x, y, sample_weight)
    _check_rows(examples)
    if validation_split:
      examples, held_out = _keras_internals.train_validation_split(
          examples, validation_split)
      if validation_data is None:
        validation_data = held_out
    replicas = self.distribute_strategy.num_replicas_in_sync
    if batch_size is None:
      batch_size = (KERAS_BATCH_SIZE
                    if self.stage is None else self.stage.batch_size * replicas)
    batch_size = _validation.batch_size(batch_size)
    if batch_size % replicas:
      raise ValueError(f"batch_size={batch_size} does not split evenly "
                       f"among the strategy's {replicas} replicas; pass a "
                       f"multiple of {replicas}")
    num_examples = _rows(examples)
    if self.stage is not None and (num_examples
                                   != self.stage.sampler.num_examples):
      split = (f" (after validation_split={validation_split})"
               if validation_split else "")
      raise ValueError(
          f"fit has {num_examples} training examples{split}, but the "
          f"stage's sampler draws from {self.stage.sampler.num_examples}; "
          f"make it with num_examples={num_examples}, or leave the stage "
          "out and fit makes it")
    return examples, validation_data, batch_size

  def _new_stage(self, num_examples, global_batch):
    """Makes a stage over a new sampler, as `sampler_options` say.

    Under a strategy, the sampler has a copy of its state per replica.

    Returns:
      The `AdaptiveSampling` stage, over `num_examples`, drawing a replica's
      share of `global_batch`.
    """
    strategy = self.distribute_strategy
    sampler = distribute.create_sampler(strategy, num_examples,
                                        **self.sampler_options)
    return data_lib.AdaptiveSampling(
        sampler, max(1, global_batch // strategy.num_replicas_in_sync))

  def _draw_from(self, examples, draws):
    """Makes the train step draw `draws` of `examples` a replica.

    The same examples again (say, a fit per epoch) keep the traced step.
    """
    if (self._draws == draws and self._examples is not None and
        _same_examples(self._examples, examples)):
      return
    # On the host, where Keras keeps arrays too; the step gathers each
    # batch there (`_draw`), so only the batch moves to the device.
    with tf.device("/cpu:0"):
      self._examples = tf.nest.map_structure(tf.convert_to_tensor, examples)
    self._examples_device = tf.nest.flatten(self._examples)[0].device
    self._draws = draws
    self.train_function = None  # traced with the previous examples

  def _batch_to_build_from(self, data_batch):
    """The (x, y, sample_weight) batch that fit builds the model from."""
    if self._examples is not None and not _is_stage_batch(data_batch):
      return keras.utils.unpack_x_y_sample_weight(
          tf.nest.map_structure(lambda t: t[:1], self._examples))
    if data_batch is not None and len(data_batch) > 3:
      return tuple(data_batch[:-2])
    return data_batch

  def _after_symbolic_build(self, data_batch):
    """Builds the training logs' metrics from the model's build batch.

    Under a strategy, a metric's variables must exist before the step is
    traced.
    """
    x, y, _ = keras.utils.unpack_x_y_sample_weight(data_batch)
    estimates = _TrainingEstimates(*_keras_internals.compiled_metrics(self))
    estimates.build(y, self(x, training=False))
    self._built_estimates = estimates

  def train_step(self, data):
    """Trains on one batch and reports its utilities.

    Args:
      data: the stage's batch, (x, y, indices, probabilities) or
        (x, y, sample_weight, indices, probabilities); or, where `fit` draws
        in the step, a placeholder.

    Returns:
      The step's logs: the training set's loss and metrics estimated under
      the uniform distribution, the drawn batch's (`adaptive_` ones), `kl`
      and `distinct_draws`.

    Raises:
      tf.errors.InvalidArgumentError: if outputs taken as probabilities lie
        outside [0, 1].
    """
    drawn_here = not _is_stage_batch(data)
    if drawn_here:
      data = self._draw()
    *batch, indices, probabilities = data
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(batch))
    if self._class_weight is not None:
      weights = _class_weights(self._class_weight, _class_ids(y))
      sample_weight = (weights if sample_weight is None else weights *
                       tf.cast(sample_weight, weights.dtype))
    sampler = self.stage.sampler
    importance = tf.cast(
        data_lib.importance_weights(probabilities, sampler.num_examples),
        self.compute_dtype)
    beta = sampler.beta
    debias_importance = None
    if self.debias and (callable(beta) or beta != 1):
      debias_importance = tf.cast(sampler.importance_weights(probabilities),
                                  self.compute_dtype)
    logs, y_utility = self._learn(x, y, sample_weight, importance,
                                  debias_importance)
    if self._outputs_logits:
      batch_utilities = utilities_lib.from_logits(self.utility, _class_ids(y),
                                                  y_utility)
    else:
      _check_probabilities(y_utility)
      batch_utilities = utilities_lib.evaluate(self.utility, _class_ids(y),
                                               y_utility)
    if drawn_here:
      sampler.update(indices, batch_utilities)
    else:
      self.stage.update(indices, batch_utilities)
    return {
        **logs, "kl": sampler.kl_divergence(),
        "distinct_draws": diagnostics.distinct_draws(indices)
    }

  def _draw(self):
    """This replica's draws from `fit`'s examples, as the stage's batch."""
    indices, probabilities = self.stage.sampler.sample_with_probabilities(
        self._draws)
    with tf.device(self._examples_device):
      batch = tf.nest.map_structure(lambda t: tf.gather(t, indices),
                                    self._examples)
    return (*batch, indices, probabilities)

  def _learn_step(self, x, y, sample_weight, importance, debias_importance):
    """Forward, backward and optimizer step.

    `debias_importance` weighs the optimized loss in place of `importance`
    where the sampler's beta makes them differ, else it is None.

    Returns:
      (logs, predictions the utilities are computed from) of the step.
    """
    uniform_weight = _weighted(importance, sample_weight)
    optimized_weight = sample_weight
    if self.debias:
      optimized_weight = (uniform_weight if debias_importance is None else
                          _weighted(debias_importance, sample_weight))
    with tf.GradientTape() as tape:
      y_pred = self(x, training=True)
      loss = self.compute_loss(x=x,
                               y=y,
                               y_pred=y_pred,
                               training=True,
                               sample_weight=optimized_weight)
      scaled_loss = self.optimizer.scale_loss(loss)
    gradients = tape.gradient(scaled_loss, self.trainable_weights)
    self.optimizer.apply(gradients, self.trainable_weights)

    # The drawn batch, as Keras measures it: the `adaptive_` logs.
    adaptive_loss = loss if not self.debias else self.compute_loss(
        x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    # Keras's own loss tracker is left to evaluation: its "loss" among the
    # compiled metrics' results is not this step's.
    adaptive = self.compute_metrics(x, y, y_pred, sample_weight)
    # The training set under the uniform distribution: the plain logs.
    unbiased = self.debias and debias_importance is None
    uniform_loss = loss if unbiased else self.compute_loss(
        x=x, y=y, y_pred=y_pred, sample_weight=uniform_weight, training=True)
    self._estimates.update_state(adaptive_loss, uniform_loss, y, y_pred,
                                 uniform_weight)
    logs = self._estimates.result()
    logs.update((f"adaptive_{name}", value)
                for name, value in adaptive.items()
                if name != "loss")
    if self.utility_at == "updated":
      # Algorithm 1's h_t: the updated model, in inference mode.
      y_pred = self(x, training=False)
    return logs, y_pred

  def test_step(self, data):
    """Evaluates one batch of ordinary data, as Keras does.

    Args:
      data: the batch.

    Returns:
      The step's logs.

    Raises:
      ValueError: if the batch is one of the stage's.
    """
    _refuse_stage_batches(data, "the evaluation data")
    return super().test_step(data)


class SamplingTensorBoard(keras.callbacks.TensorBoard):
  """`keras.callbacks.TensorBoard`, and the sampling distribution Q_t.

  Writes what Keras's callback writes (the runs `train` and `validation` in
  the log directory), and into the `train` run the sampler's diagnostics
  under the tags of `tf_adasamp.diagnostics.TAGS` (`sampler/kl_divergence`,
  `sampler/max_probability`, `sampler/effective_sample_size`,
  `sampler/distinct_draws`, the histogram `sampler/log_n_probability` and,
  given the training data, `sampler/misclassified_mass`); the module says
  what each means. The step's `kl` and `distinct_draws` logs are written
  there only, not also as Keras's `epoch_kl`: one tag per quantity. Use it
  in place of Keras's callback:

    callbacks=[tf_adasamp.keras.SamplingTensorBoard("logs")]
  """

  def __init__(self, log_dir="logs", training_data=None, **kwargs):
    """Creates the callback.

    Args:
      log_dir: the directory of the runs, as for Keras's callback.
      training_data: optional (x, y), the stage's examples in its order
        (class ids or one-hot labels); each write then predicts over x, a
        pass over the training set, to log `sampler/misclassified_mass`.
      **kwargs: passed to `keras.callbacks.TensorBoard`; its update_freq
        (an int: every that many batches) also sets how often the sampler's
        diagnostics are written.

    Raises:
      ImportError: if TensorBoard is not installed.
    """
    try:
      import tensorboard  # pylint: disable=g-import-not-at-top,unused-import
    except ImportError as error:
      raise ImportError(
          "SamplingTensorBoard writes TensorBoard summaries, "
          "which need TensorBoard: pip install tensorboard") from error
    super().__init__(log_dir, **kwargs)
    self.training_data = training_data
    self._sampler_writer = None
    self._batches = 0

  def on_train_begin(self, logs=None):
    """Opens the writer of the sampler's diagnostics, in the `train` run.

    Args:
      logs: as Keras passes them.

    Raises:
      TypeError: if the model is not an `AdaptiveSamplingModel`.
    """
    if not isinstance(self.model, AdaptiveSamplingModel):
      raise TypeError("SamplingTensorBoard logs an AdaptiveSamplingModel's "
                      f"sampler; the model is a {type(self.model).__name__}")
    super().on_train_begin(logs)
    if self._sampler_writer is None:
      self._sampler_writer = tf.summary.create_file_writer(
          os.path.join(self.log_dir, "train"))

  def on_train_batch_end(self, batch, logs=None):
    """Writes the diagnostics every update_freq batches, if it is an int.

    Args:
      batch: the batch's index in its epoch.
      logs: the step's logs.
    """
    super().on_train_batch_end(batch, _without_sampler_logs(logs))
    self._batches += 1
    if self.update_freq != "epoch" and self._batches % self.update_freq == 0:
      self._write_diagnostics(self._batches, logs)

  def on_epoch_end(self, epoch, logs=None):
    """Writes the diagnostics, if update_freq is "epoch".

    Args:
      epoch: the epoch's index.
      logs: the epoch's logs.
    """
    super().on_epoch_end(epoch, _without_sampler_logs(logs))
    if self.update_freq == "epoch":
      self._write_diagnostics(epoch, logs)

  def on_train_end(self, logs=None):
    """Flushes the diagnostics' writer.

    Args:
      logs: as Keras passes them.
    """
    super().on_train_end(logs)
    self._sampler_writer.flush()

  def _write_diagnostics(self, step, logs):
    misclassified = None
    if self.training_data is not None:
      x, y = self.training_data
      predicted = np.argmax(self.model.predict(x, verbose=0), axis=-1)
      misclassified = predicted != np.asarray(
          _class_ids(tf.convert_to_tensor(y)))
    values = diagnostics.compute(self.model.stage.sampler,
                                 misclassified=misclassified)
    if logs and "distinct_draws" in logs:
      values["distinct_draws"] = logs["distinct_draws"]
    with self._sampler_writer.as_default():
      diagnostics.write(values, step=step)


# The logs that SamplingTensorBoard writes as diagnostics: the step's, and
# those _SamplingReport adds to each epoch's.
_SAMPLER_LOGS = ("kl", "distinct_draws", "effective_sample_size",
                 "heaviest_share")


def _without_sampler_logs(logs):
  return logs and {
      name: value for name, value in logs.items() if name not in _SAMPLER_LOGS
  }


class _SamplerVariable(keras.Variable):
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


class _SamplingReport(keras.callbacks.Callback):
  """Puts what the distribution looks like into each epoch's logs.

  The effective sample size and the heaviest examples' share of the draws
  (`tf_adasamp.diagnostics`), which the History keeps; at the end of fit,
  unless verbose is 0, a line that says them with the KL.
  """

  def __init__(self, verbose):
    super().__init__()
    self._verbose = verbose
    self._last = None

  def on_epoch_end(self, epoch, logs=None):
    sampler = self.model.stage.sampler
    log_q = diagnostics.log_probabilities(sampler)
    self._last = {
        "effective_sample_size":
            float(diagnostics.effective_sample_size(log_q)),
        "heaviest_share":
            float(
                diagnostics.heaviest_share(
                    log_q, diagnostics.heaviest_count(sampler.num_examples))),
    }
    if logs is not None:
      logs.update(self._last)

  def on_train_end(self, logs=None):
    if not self._verbose or self._last is None:
      return
    sampler = self.model.stage.sampler
    n = sampler.num_examples
    k = diagnostics.heaviest_count(n)
    print(f"Adaptive sampling: KL(Q || uniform) "
          f"{float(sampler.kl_divergence()):.4f}, effective sample size "
          f"{self._last['effective_sample_size']:.1%} of the {n} examples, "
          f"the heaviest {k} draw {self._last['heaviest_share']:.1%} "
          f"(uniform: {k / n:.1%})")


def _steps(unused_input_context):
  """A placeholder a step: Keras's loop pulls one, the step draws its batch."""
  return tf.data.Dataset.from_tensors(tf.constant(0, tf.int8)).repeat()


def _is_stage_dataset(x):
  """Whether `x` is a dataset of the stage's batches.

  A finite dataset of three-part batches is Keras's (x, y, sample_weight);
  the stage's datasets are endless.

  Returns:
    A bool.
  """
  if isinstance(x, tf.distribute.DistributedDataset):
    return True
  if not isinstance(x, tf.data.Dataset) or not _is_stage_batch(x.element_spec):
    return False
  return len(x.element_spec) > 3 or _is_endless(x)


def _is_nest(x):
  """Whether `x` is arrays or tensors, or a nest (tuple, list, dict) of them."""
  leaves = tf.nest.flatten(x)
  return bool(leaves) and all(
      isinstance(leaf, np.ndarray) or tf.is_tensor(leaf) for leaf in leaves)


def _rows(examples):
  return int(tf.nest.flatten(examples)[0].shape[0])


def _check_rows(examples):
  """Raises unless every array of `examples` has the same rows, at least 1."""
  rows = sorted({
      int(leaf.shape[0]) if len(leaf.shape) else 0
      for leaf in tf.nest.flatten(examples)
  })
  if len(rows) != 1 or rows[0] == 0:
    raise ValueError("x, y and sample_weight must have the same number of "
                     f"rows, at least 1; got {rows}")


def _same_examples(tensors, examples):
  """Whether `examples` hold what `tensors` hold."""
  try:
    tf.nest.assert_same_structure(tensors, examples)
  except (TypeError, ValueError):
    return False
  return all(
      tuple(tensor.shape) == tuple(leaf.shape) and tensor.dtype == tf.as_dtype(
          leaf.dtype) and np.array_equal(tensor.numpy(), np.asarray(leaf)) for
      tensor, leaf in zip(tf.nest.flatten(tensors), tf.nest.flatten(examples)))


def _read_dataset(dataset):
  """Reads a finite dataset of (x, y) or (x, y, sample_weight) batches.

  Returns:
    (examples, batch size): every batch's rows, stacked, and the rows of
    its first batch.

  Raises:
    ValueError: if the dataset is endless, of unknown length, empty, or not
      of such batches.
  """
  cardinality = int(dataset.cardinality())
  if cardinality == tf.data.INFINITE_CARDINALITY:
    raise ValueError(
        "x is an endless tf.data.Dataset (after repeat()?), whose examples "
        "the sampler cannot count; pass one epoch of it")
  if cardinality == tf.data.UNKNOWN_CARDINALITY:
    raise ValueError(
        "x is a tf.data.Dataset of unknown length (after filter() or from a "
        "generator), so the sampler cannot be sized before it is read; "
        "state its number of batches with x.apply(tf.data.experimental."
        "assert_cardinality(num_batches)), or pass arrays")
  spec = dataset.element_spec
  if not (isinstance(spec, tuple) and len(spec) in (2, 3)):
    raise ValueError("fit takes a dataset of (x, y) or (x, y, sample_weight) "
                     f"batches; its elements are {spec}")
  if any(leaf.shape.rank == 0 for leaf in tf.nest.flatten(spec)):
    raise ValueError("x's elements are single examples, not batches; batch "
                     "it, e.g. x.batch(32)")
  batches = list(dataset)
  if not batches:
    raise ValueError("x is an empty tf.data.Dataset")
  examples = tf.nest.map_structure(lambda *parts: tf.concat(parts, 0), *batches)
  return examples, _rows(batches[0])


def _check_sampler_options(options, stage):
  """`options` as a dict of the sampler's arguments, checked by name."""
  if options is None:
    return {}
  if not isinstance(options, dict):
    raise TypeError("sampler_options must be a dict of AdaptiveSampler's "
                    f"arguments, got {type(options).__name__}")
  if stage is not None and options:
    raise ValueError(
        "sampler_options set the sampler that fit makes, but the stage "
        "brings its own: set them on it, or leave the stage out")
  unknown = sorted(set(options) - set(SAMPLER_OPTIONS))
  if unknown:
    raise ValueError(f"sampler_options names {unknown}, which "
                     f"AdaptiveSampler does not take; choose among "
                     f"{list(SAMPLER_OPTIONS)}")
  return dict(options)


def _check_sampler_placement(sampler):
  """Refuses a sampler without a copy per replica of the scope's strategy.

  Raises:
    ValueError: if the wrapper is built in a strategy's scope, and the
      sampler is not that strategy's.
  """
  if not tf.distribute.has_strategy():
    return
  if sampler.strategy is not tf.distribute.get_strategy():
    raise ValueError(
        "the wrapper is built in a tf.distribute strategy's scope, but the "
        "stage's sampler is not that strategy's; make it with "
        "tf_adasamp.distribute.create_sampler(strategy, ...), or leave the "
        "stage out and fit makes it")


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


def _weighted(importance, sample_weight):
  """Importance weights times the sample weights, if any."""
  if sample_weight is None:
    return importance
  return importance * tf.cast(sample_weight, importance.dtype)


class _TrainingEstimates:
  """The training logs' own metrics.

  The drawn batches' loss (`adaptive_loss`), and the training set's loss and
  metrics under the uniform distribution (importance-weighted copies of the
  compiled ones).

  Kept out of the model's metrics so that evaluation and validation log
  only Keras's own.
  """

  def __init__(self, metrics, weighted_metrics):
    self.adaptive_loss = keras.metrics.Mean(name="adaptive_loss")
    self.loss = keras.metrics.Mean(name="loss")
    every = [*_flat(metrics), *_flat(weighted_metrics)]
    self.metrics = (_keras_internals.metrics_like_compile(
        [_clone(metric) for metric in every]) if every else None)

  def build(self, y, y_pred):
    if self.metrics is not None:
      self.metrics.build(y, y_pred)

  def update_state(self, adaptive_loss, uniform_loss, y, y_pred, weights):
    # Each batch's mean loss counts by its size, as in Keras's own logs.
    batch_size = tf.shape(y_pred)[0]
    self.adaptive_loss.update_state(adaptive_loss, sample_weight=batch_size)
    self.loss.update_state(uniform_loss, sample_weight=batch_size)
    if self.metrics is not None:
      self.metrics.update_state(y, y_pred, sample_weight=weights)

  def result(self):
    results = {
        "loss": self.loss.result(),
        "adaptive_loss": self.adaptive_loss.result()
    }
    if self.metrics is not None and self.metrics.built:
      # Named as Keras would the unweighted ones (no `weighted_` prefix).
      results.update((metric.name.removeprefix("weighted_"), metric.result())
                     for metric in self.metrics.metrics)
    return results

  def reset_state(self):
    self.adaptive_loss.reset_state()
    self.loss.reset_state()
    if self.metrics is not None:
      self.metrics.reset_state()


def _flat(metrics):
  if not metrics:
    return []
  if isinstance(metrics, dict):
    return list(metrics.values())
  return list(metrics)


def _clone(metric):
  if isinstance(metric, keras.metrics.Metric):
    return metric.__class__.from_config(metric.get_config())
  return metric


def _verbosity(verbose):
  """Resolves Keras's `verbose="auto"` by where stdout goes.

  Keras's progress bar (1) writes terminal control codes even into a file.

  Args:
    verbose: Keras's `verbose`.

  Returns:
    `verbose`, or for "auto" 1 on a terminal and 2 otherwise.
  """
  if verbose != "auto":
    return verbose
  return 1 if sys.stdout.isatty() else 2


def _outputs_logits(from_logits, loss):
  """Decides whether the model outputs logits.

  Args:
    from_logits: the wrapper's argument; None to ask the loss.
    loss: the compiled loss.

  Returns:
    `from_logits`, else what the compiled `loss` says.

  Raises:
    ValueError: if `from_logits` contradicts the loss.
  """
  loss_says = (loss.get_config().get("from_logits") if isinstance(
      loss, keras.losses.Loss) else None)
  if from_logits is None:
    return bool(loss_says)
  if loss_says is not None and bool(loss_says) != from_logits:
    raise ValueError(
        f"from_logits={from_logits}, but the compiled loss has "
        f"from_logits={loss_says}: the utilities would be computed from "
        "outputs the loss reads otherwise; leave from_logits out to take the "
        "loss's")
  return from_logits


def _check_probabilities(y_pred):
  """Fails unless `y_pred` lies in [0, 1], as probabilities do."""
  y_pred = tf.cast(y_pred, tf.float32)
  tf.debugging.assert_equal(
      tf.reduce_all((y_pred >= 0) & (y_pred <= 1 + 1e-6)),
      True,
      message="the model's outputs are not probabilities (some lie outside "
      "[0, 1]), so utilities cannot be computed from them; for a model "
      "that outputs logits, compile with a loss that has from_logits=True "
      "or pass from_logits=True to AdaptiveSamplingModel")


def _is_endless(dataset):
  if isinstance(dataset, tf.distribute.DistributedDataset):
    # From strategy.distribute_datasets_from_function: as its datasets.
    cardinality = getattr(dataset, "cardinality", None)
  else:
    cardinality = dataset.cardinality()
  return cardinality == tf.data.INFINITE_CARDINALITY


def _check_stage_batches(spec):
  """Raises unless `spec` is of the stage's batches with labels, for `fit`."""
  if len(spec) == 3:
    source = spec[0]
    kind = (f"a dict with keys {sorted(source)}"
            if isinstance(source, dict) else "a single tensor")
    raise ValueError(
        f"the stage's source is {kind}, so its batches have no labels for "
        "fit; pass a tuple, stage.dataset((features, labels)) (for TFDS, "
        "tfds.load(..., as_supervised=True), or (d['image'], d['label']) "
        "from a dict d)")


def _refuse_stage_batches(spec, what):
  """Raises if `spec` (or a batch) is of the stage's batches with labels."""
  if _is_stage_batch(spec) and len(spec) > 3:
    raise ValueError(
        f"{what} is the stage's dataset, which draws the examples the model "
        "gets wrong, and without end; pass ordinary data, e.g. "
        "validation_data=(x_val, y_val)")


def _is_stage_batch(spec):
  """Checks whether an element spec, or a batch, is of the stage.

  Args:
    spec: an element spec, or a batch.

  Returns:
    Whether it ends with the stage's indices and Q_t(i).
  """
  if not isinstance(spec, tuple) or len(spec) < 3:
    return False
  indices, probabilities = spec[-2:]
  tensor_like = lambda t: isinstance(t, tf.TensorSpec) or tf.is_tensor(t)
  return (tensor_like(indices) and tensor_like(probabilities) and
          indices.dtype == tf.int64 and indices.shape.rank == 1 and
          probabilities.dtype.is_floating and probabilities.shape.rank == 1)


def _class_ids(y):
  """Class ids from labels: ids [B] or [B, 1], or one-hot [B, C]."""
  y = tf.convert_to_tensor(y)
  if y.shape.rank == 2 and y.shape[-1] != 1:
    return tf.argmax(y, axis=-1)
  if y.shape.rank == 2:
    y = tf.squeeze(y, axis=-1)
  return tf.cast(y, tf.int64)


def _check_class_weight(class_weight):
  if class_weight is None:
    return None
  if not (isinstance(class_weight, dict) and all(
      isinstance(k, numbers.Integral) and k >= 0 and
      isinstance(v, numbers.Real) and math.isfinite(v) and v >= 0
      for k, v in class_weight.items())):
    raise ValueError("class_weight must map class ids (ints >= 0) to "
                     f"finite weights >= 0; got {class_weight!r}")
  return {int(k): float(v) for k, v in class_weight.items()}


def _class_weights(class_weight, ids):
  """Each example's class weight; 1 for a class the dict leaves out."""
  table = np.ones(max(class_weight) + 1, np.float32)
  for class_id, weight in class_weight.items():
    table[class_id] = weight
  known = ids < len(table)
  return tf.where(known, tf.gather(table, tf.where(known, ids, 0)), 1.0)
