"""Adaptive sampling for `keras.Model.fit` (Keras 3, TensorFlow backend).

`AdaptiveSamplingModel` wraps a model and trains it on batches from a
`tf_adasamp.data.AdaptiveSampling` stage: each step computes per-example
utilities from its own training forward pass and reweights the drawn
examples (London, NIPS 2017, Algorithm 1, in the variant that takes the
utilities of the model before the update, h_{t-1}, with dropout on, rather
than a second forward pass of the updated h_t; the trainer's
`--utility_at=step`), and logs KL(Q_t || uniform) as the metric `kl` (the
paper's Fig. 1e). Loss, compiled metrics, callbacks, validation and
saving work as usual; the sampler's state is part of the model's weights.

Training logs. The drawn batches over-represent the examples the model gets
wrong, so the loss and metrics measured on them (logged as `adaptive_loss`,
`adaptive_<metric>`) read worse than the same model on the training set.
`loss` and `<metric>` are the training set's under the uniform
distribution, estimated from the same batches with importance weights
1 / (n Q_t(i)) (unbiased for the loss; self-normalized for metrics), so they
compare with `val_loss` and `val_<metric>` as in uniform training.

The stage's update releases the pipeline's next draw, which XLA cannot
compile, so with `jit_compile=True` (or "auto" on a GPU) XLA compiles the
forward and backward pass and the update runs after it, outside the
compiled function; evaluation and prediction compile whole.
"""

import math
import numbers
import os
import sys

import keras
import numpy as np
import tensorflow as tf

from tf_adasamp import _checkpointing
from tf_adasamp import _keras_internals
from tf_adasamp import _validation
from tf_adasamp import data as data_lib
from tf_adasamp import diagnostics
from tf_adasamp import schedules
from tf_adasamp import utilities as utilities_lib
from tf_adasamp.sampler import AdaptiveSampler

# So that a trainer whose sampler follows one saves and loads.
keras.saving.register_keras_serializable(package="tf_adasamp")(
    schedules.PiecewiseLinear)


@keras.saving.register_keras_serializable(package="tf_adasamp")
class AdaptiveSamplingModel(_keras_internals.StageBatchBuild, keras.Model):
  """Trains `model` with `fit` on adaptive batches.

  Example:
    sampler = tf_adasamp.AdaptiveSampler(len(x), amplitude=1.0, decay=0.5)
    stage = tf_adasamp.data.AdaptiveSampling(sampler, batch_size=32)
    trainer = tf_adasamp.keras.AdaptiveSamplingModel(model, stage, "l1")
    trainer.compile(optimizer="adam",
                    loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"], jit_compile=True)
    trainer.fit(x, y, epochs=3, validation_data=(x_val, y_val))
    trainer.save("trainer.keras")  # the model and the sampler's state

  `fit` takes arrays `x, y` (and `sample_weight`), drawn by the stage, or
  the stage's dataset (`stage.dataset((x, y))`, elements (x, y, indices,
  probabilities) or (x, y, sample_weight, indices, probabilities)); an
  epoch is ceil(n / batch_size) steps unless `steps_per_epoch` says
  otherwise. Labels y are class ids, or one-hot. Evaluation, prediction and
  validation take ordinary data.
  """

  def __init__(self,
               model: keras.Model,
               stage: data_lib.AdaptiveSampling,
               utility: str | utilities_lib.Utility = "l1",
               from_logits: bool | None = None,
               debias: bool = False,
               **kwargs):
    """Wraps `model`.

    Args:
      model: the `keras.Model` to train; its outputs are class
        probabilities, or logits (see `from_logits`).
      stage: the `tf_adasamp.data.AdaptiveSampling` stage that draws the
        training batches; the step reports utilities through it.
      utility: "zero_one", "l1", "cross_entropy" or a callable
        (labels [B], probabilities [B, C]) -> [B]; see
        `tf_adasamp.utilities`. To save the model, a callable must be
        registered with `keras.saving.register_keras_serializable`.
      from_logits: whether `model` outputs logits; None (the default)
        takes it from the compiled loss (its `from_logits`, False for a
        loss that has none). Outputs taken as probabilities are checked to
        lie in [0, 1].
      debias: if True, weight each example's loss by 1 / (n Q_t(i)), so the
        optimized loss estimates the uniform average; Algorithm 1 does not.
        With the sampler's `beta` other than 1, by its importance weights
        (1 / (n Q_t(i))) ** beta instead (`AdaptiveSampler.importance_weights`).
      **kwargs: passed to `keras.Model`, e.g. the model's name.

    Raises:
      TypeError: if `stage` is not a `tf_adasamp.data.AdaptiveSampling`, or
        `from_logits` or `debias` is not a bool.
      ValueError: if `utility` is a name not in `tf_adasamp.utilities`.
    """
    super().__init__(**kwargs)
    if not isinstance(stage, data_lib.AdaptiveSampling):
      raise TypeError("stage must be a tf_adasamp.data.AdaptiveSampling, "
                      f"got {type(stage).__name__}")
    self.model = model
    self.stage = stage
    self.utility = utilities_lib.get(utility)
    # Booleans only: a .keras file's "false" would be True to bool().
    self.from_logits = (None if from_logits is None else _validation.boolean(
        from_logits, "from_logits"))
    self.debias = _validation.boolean(debias, "debias")
    # The sampler's state as its checkpoint saves it: tracked here, so that a
    # tf.train.Checkpoint of this model saves and checks it as the sampler's
    # own does; Keras's files and set_weights restore it through it too
    # (load_own_variables, set_weights).
    self._sampler_checkpoint = _checkpointing.checked_state(stage.sampler)
    # Its tf.Variables, as non-trainable weights of this model: saved,
    # restored and copied with the model's own.
    self._sampler_state = [
        _SamplerVariable(variable)
        for variable in self._sampler_checkpoint.variables.values()
    ]
    self._learn = None
    self._outputs_logits = None
    self._estimates = None
    self._class_weight = None
    self.built = model.built

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
      settings, the utility (its name, or serialized), `from_logits` and
      `debias`.
    """
    sampler = self.stage.sampler
    utility = self.utility
    name = next((name for name, function in utilities_lib.UTILITIES.items()
                 if function is utility), None)
    return {
        "name": self.name,
        "trainable": self.trainable,
        "model": keras.saving.serialize_keras_object(self.model),
        "sampler": {
            "num_examples": sampler.num_examples,
            "amplitude": _serialize_setting(sampler.amplitude),
            "decay": sampler.decay,
            "stratified": sampler.stratified,
            "dtype": sampler.dtype.name,
            "epsilon": sampler.epsilon,
            "beta": _serialize_setting(sampler.beta)
        },
        "batch_size": self.stage.batch_size,
        "max_lag": self.stage.max_lag,
        "utility": name or keras.saving.serialize_keras_object(utility),
        "from_logits": self.from_logits,
        "debias": self.debias,
    }

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
    sampler = {
        name: _deserialize_setting(value)
        for name, value in config.pop("sampler").items()
    }
    stage = data_lib.AdaptiveSampling(AdaptiveSampler(**sampler),
                                      config.pop("batch_size"),
                                      max_lag=config.pop("max_lag"))
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
    for name, value in self._sampler_checkpoint.tensors().items():
      store[name] = value

  def load_own_variables(self, store):
    """Restores the sampler's state through its checkpoint's checks.

    As `tf.train.Checkpoint` restores it (docs/guarantees.md,
    "Checkpoints"): refused, the sampler left as it was, unless it is of
    this sampler's size and settings and fits together; sums are rebuilt
    from the leaves. `load_model`, `load_weights`, `ModelCheckpoint`'s files
    and `BackupAndRestore` all come here.

    Args:
      store: Keras's store of this layer's variables.
    """
    self._sampler_checkpoint.restore(
        {name: store[name] for name in store.keys()})

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
    if len(weights) != len(variables) or any(
        tuple(variable.shape) != np.shape(value)
        for variable, value in zip(variables, weights)):
      super().set_weights(weights)  # raises Keras's error, changing nothing
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
    if batch_size is None and all(
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
    """Trains as `keras.Model.fit` does, on the stage's draws.

    Args:
      x: the training set's inputs, drawn from by the stage; or the stage's
        dataset.
      y: the training set's labels (class ids, or one-hot); None for the
        stage's dataset.
      batch_size: None, or the stage's: the stage sets it.
      epochs: as for `keras.Model.fit`.
      verbose: as for `keras.Model.fit`; "auto" is Keras's progress bar on a
        terminal, and one line an epoch, free of terminal control codes,
        where stdout is a file or a pipe.
      callbacks: as for `keras.Model.fit`.
      validation_split: not supported (pass `validation_data`).
      validation_data: as for `keras.Model.fit`; not the stage's dataset.
      shuffle: does not apply: the stage draws.
      class_weight: {class id: weight >= 0}, multiplying the sample weights
        of each class, as in Keras.
      sample_weight: the training set's sample weights, drawn with it.
      initial_epoch: as for `keras.Model.fit`.
      steps_per_epoch: the steps of an epoch; None for ceil(n / global
        batch size) where the dataset is endless.
      validation_steps: as for `keras.Model.fit`.
      validation_batch_size: the validation batches' size; None for the
        stage's.
      validation_freq: as for `keras.Model.fit`.

    Returns:
      The `keras.callbacks.History` of the run.

    Raises:
      TypeError: if `x` is a `keras.utils.PyDataset`.
      ValueError: if `validation_split` is set, `batch_size` differs from
        the stage's, `validation_data` is the stage's dataset, `class_weight`
        is not as above, `y` is missing for arrays (or given for a dataset),
        or a dataset `x` does not yield the stage's batches with labels.
    """
    if validation_split:
      raise ValueError("validation_split is not supported: the stage draws "
                       "from all of x; pass validation_data=(x_val, y_val)")
    if batch_size is not None and batch_size != self.stage.batch_size:
      raise ValueError(f"batch_size={batch_size}, but the stage draws "
                       f"batches of {self.stage.batch_size}; leave it out")
    if isinstance(validation_data, tf.data.Dataset):
      _refuse_stage_batches(validation_data.element_spec, "validation_data")
    x = self._training_dataset(x, y, sample_weight)
    if steps_per_epoch is None and _is_endless(x):
      global_batch = (self.stage.batch_size *
                      self.distribute_strategy.num_replicas_in_sync)
      steps_per_epoch = math.ceil(self.stage.sampler.num_examples /
                                  global_batch)
    class_weight = _check_class_weight(class_weight)
    if class_weight != self._class_weight:
      self._class_weight = class_weight
      self.train_function = None  # traced with the previous weights
    return super().fit(x,
                       epochs=epochs,
                       verbose=_verbosity(verbose),
                       callbacks=callbacks,
                       shuffle=False,
                       validation_data=validation_data,
                       initial_epoch=initial_epoch,
                       steps_per_epoch=steps_per_epoch,
                       validation_steps=validation_steps,
                       validation_batch_size=(validation_batch_size or
                                              self.stage.batch_size),
                       validation_freq=validation_freq)

  def _training_dataset(self, x, y, sample_weight):
    """The stage's dataset for `fit`'s x, y and sample_weight."""
    if isinstance(x, (tf.data.Dataset, tf.distribute.DistributedDataset)):
      if y is not None or sample_weight is not None:
        raise ValueError("x is a dataset, so y and sample_weight come from "
                         "its elements; do not pass them")
      if isinstance(x, tf.data.Dataset):
        _check_stage_batches(x.element_spec)
      return x
    if isinstance(x, keras.utils.PyDataset):
      raise TypeError(
          "x is a keras.utils.PyDataset, which yields batches; the stage "
          "draws examples: pass arrays x, y, or "
          "stage.dataset(source) for a random-access source")
    if y is None:
      raise ValueError("fit needs labels: pass x and y, or the stage's "
                       "dataset, stage.dataset((x, y))")
    source = (x, y) if sample_weight is None else (x, y, sample_weight)
    return self.stage.dataset(source)

  def train_step(self, data):
    """Trains on one batch of the stage and reports its utilities.

    Args:
      data: the stage's batch, (x, y, indices, probabilities) or
        (x, y, sample_weight, indices, probabilities).

    Returns:
      The step's logs: the training set's loss and metrics estimated under
      the uniform distribution, the drawn batch's (`adaptive_` ones), `kl`
      and `distinct_draws`.

    Raises:
      tf.errors.InvalidArgumentError: if outputs taken as probabilities lie
        outside [0, 1].
    """
    *batch, indices, probabilities = data
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(batch))
    if self._class_weight is not None:
      weights = _class_weights(self._class_weight, _class_ids(y))
      sample_weight = (weights if sample_weight is None else weights *
                       tf.cast(sample_weight, weights.dtype))
    importance = tf.cast(
        data_lib.importance_weights(probabilities,
                                    self.stage.sampler.num_examples),
        self.compute_dtype)
    beta = self.stage.sampler.beta
    debias_importance = None
    if self.debias and (callable(beta) or beta != 1):
      debias_importance = tf.cast(
          self.stage.sampler.importance_weights(probabilities),
          self.compute_dtype)
    logs, y_pred = self._learn(x, y, sample_weight, importance,
                               debias_importance)
    if self._outputs_logits:
      batch_utilities = utilities_lib.from_logits(self.utility, _class_ids(y),
                                                  y_pred)
    else:
      _check_probabilities(y_pred)
      batch_utilities = utilities_lib.evaluate(self.utility, _class_ids(y),
                                               y_pred)
    self.stage.update(indices, batch_utilities)
    return {
        **logs, "kl": self.stage.sampler.kl_divergence(),
        "distinct_draws": diagnostics.distinct_draws(indices)
    }

  def _learn_step(self, x, y, sample_weight, importance, debias_importance):
    """Forward, backward and optimizer step.

    `debias_importance` weighs the optimized loss in place of `importance`
    where the sampler's beta makes them differ, else it is None.

    Returns:
      (logs, predictions) of the step.
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


# The train step's logs that SamplingTensorBoard writes as diagnostics.
_SAMPLER_LOGS = ("kl", "distinct_draws")


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


def _serialize_setting(setting):
  """A sampler's setting for the config.

  Returns:
    The setting: a float, or a schedule as Keras serializes it.
  """
  if callable(setting):
    return keras.saving.serialize_keras_object(setting)
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
  """Raises unless `spec` is of the stage's batches, for `fit`."""
  if not _is_stage_batch(spec):
    raise ValueError(
        "fit trains on the stage's batches, (x, y, indices, probabilities) "
        f"or (x, y, sample_weight, indices, probabilities); got {spec}. "
        "Pass arrays, fit(x, y), or the stage's dataset, "
        "stage.dataset((x, y))")
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
