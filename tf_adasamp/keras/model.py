"""`AdaptiveSamplingModel`: a Keras model's `fit` on adaptive draws.

The wrapper and its Keras hooks (`fit`, `train_step`, building, evaluation,
prediction); its saving methods, and what the hooks check and compute, live
in the package's private modules `_saving`, `_arguments` and `_training`.
"""

import math

import keras
import tensorflow as tf

from tf_adasamp import _checkpointing
from tf_adasamp import _keras_internals
from tf_adasamp import _validation
from tf_adasamp import data as data_lib
from tf_adasamp import defaults
from tf_adasamp import diagnostics
from tf_adasamp import distribute
from tf_adasamp import utilities as utilities_lib
from tf_adasamp.keras import _arguments
from tf_adasamp.keras import _saving
from tf_adasamp.keras import _training


@keras.saving.register_keras_serializable(package="tf_adasamp")
class AdaptiveSamplingModel(_keras_internals.StageBatchBuild,
                            _saving.SavingMethods, keras.Model):
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
    if utility_at not in _arguments.UTILITY_AT:
      raise ValueError(
          f"utility_at must be one of {_arguments.UTILITY_AT}, got "
          f"{utility_at!r}")
    sampler_options = _arguments.check_sampler_options(sampler_options, stage)
    if stage is not None:
      _arguments.check_sampler_placement(stage.sampler)
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
          _saving.SamplerVariable(variable)
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
    self._outputs_logits = _arguments.outputs_logits(self.from_logits,
                                                     self.loss)
    if self._built_estimates is not None:
      self._estimates, self._built_estimates = self._built_estimates, None
    else:
      self._estimates = _training.TrainingEstimates(
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
                            _arguments.verbosity(verbose), *args, **kwargs)

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
                           _arguments.verbosity(verbose), *args, **kwargs)

  def _batch_size(self, x, batch_size):
    """`batch_size`, or the stage's where Keras batches `x` itself."""
    if batch_size is None and self.stage is not None and all(
        hasattr(leaf, "__array__") for leaf in tf.nest.flatten(x)):
      return self.stage.batch_size
    return batch_size

  def export(self,
             filepath,
             format="tf_saved_model",
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
    class_weight = _arguments.check_class_weight(class_weight)
    if isinstance(validation_data, tf.data.Dataset):
      _arguments.refuse_stage_batches(validation_data.element_spec,
                                      "validation_data")
    for callback in callbacks or ():
      if (isinstance(callback, keras.callbacks.ModelCheckpoint) and
          not callback.save_weights_only):
        self.get_config()  # refuses now what the first save would
    replicas = self.distribute_strategy.num_replicas_in_sync
    if _arguments.is_stage_dataset(x):
      training = _arguments.stage_dataset(self.stage, x, y, sample_weight,
                                          batch_size, validation_split)
      global_batch = self.stage.batch_size * replicas
      if steps_per_epoch is None and _arguments.is_endless(x):
        steps_per_epoch = math.ceil(self.stage.sampler.num_examples /
                                    global_batch)
    else:
      examples, validation_data, global_batch = _arguments.examples_to_draw(
          self.stage, replicas, x, y, sample_weight, batch_size,
          validation_split, validation_data)
      num_examples = _arguments.rows(examples)
      # Checked; from here on, state changes.
      if self.stage is None:
        self._adopt_stage(self._new_stage(num_examples, global_batch))
      self._draw_from(examples, global_batch // replicas)
      training = self.distribute_strategy.distribute_datasets_from_function(
          _training.steps)
      if steps_per_epoch is None:
        steps_per_epoch = math.ceil(num_examples / global_batch)
    if class_weight != self._class_weight:
      self._class_weight = class_weight
      self.train_function = None  # traced with the previous weights
    return super().fit(training,
                       epochs=epochs,
                       verbose=_arguments.verbosity(verbose),
                       callbacks=[
                           _training.SamplingReport(
                               _arguments.verbosity(verbose)), *(callbacks or
                                                                 ())
                       ],
                       shuffle=False,
                       validation_data=validation_data,
                       initial_epoch=initial_epoch,
                       steps_per_epoch=steps_per_epoch,
                       validation_steps=validation_steps,
                       validation_batch_size=(validation_batch_size or
                                              global_batch),
                       validation_freq=validation_freq)

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
        _arguments.same_examples(self._examples, examples)):
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
    if self._examples is not None and not _arguments.is_stage_batch(data_batch):
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
    estimates = _training.TrainingEstimates(
        *_keras_internals.compiled_metrics(self))
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
    drawn_here = not _arguments.is_stage_batch(data)
    if drawn_here:
      data = self._draw()
    *batch, indices, probabilities = data
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(batch))
    if self._class_weight is not None:
      weights = _training.class_weights(self._class_weight,
                                        _training.class_ids(y))
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
      batch_utilities = utilities_lib.from_logits(self.utility,
                                                  _training.class_ids(y),
                                                  y_utility)
    else:
      _training.check_probabilities(y_utility)
      batch_utilities = utilities_lib.evaluate(self.utility,
                                               _training.class_ids(y),
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
    uniform_weight = _training.weighted(importance, sample_weight)
    optimized_weight = sample_weight
    if self.debias:
      optimized_weight = (uniform_weight if debias_importance is None else
                          _training.weighted(debias_importance, sample_weight))
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
    _arguments.refuse_stage_batches(data, "the evaluation data")
    return super().test_step(data)
