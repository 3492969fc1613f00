"""Training with adaptive or uniform sampling (London, NIPS 2017, Algorithm 1).

`train(config)` builds a run's parts and runs it, in Orbit's shape:

  steps.make_train_step        one step of Algorithm 1 in one tf.function
  trainer.Trainer              `train(num_steps)`: steps_per_execution steps
                               in a while loop, updating the bounds'
                               running sums (bound_tracker.BoundTracker)
  evaluator.Evaluator          the metric record at an evaluation point
  controller.Controller        the schedule, checkpoints, records,
                               summaries, divergence and a lost worker
  resume                       which checkpoint a run (or a cluster's
                               worker) resumes from
  irreducible                  the irreducible losses of utility
                               reducible_loss, fitted before a new run's
                               first evaluation (Controller's `prepare`)

Uniform sampling takes the same step with `UniformSampler`, which draws from
the same seeded random stream as `AdaptiveSampler` and skips the utility and
the reweighting. With a shared seed, uniform and adaptive runs start from the
same model (see `models.build`) and draw the same first batch. Checkpoints
hold everything that shapes the run (model, dropout and sampler random
state, optimizer, step, bound sums: variables only, no Python objects), and
`resume=True` continues a run exactly where it stopped.
"""

import dataclasses
import functools
import json
import os
import time

import tensorflow as tf

from tf_adasamp.bound_tracker import BoundTracker
from tf_adasamp.experiment.training import cluster
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import datasets
from tf_adasamp.experiment.training import disk_data
from tf_adasamp.experiment.training import irreducible
from tf_adasamp.experiment.training import models
from tf_adasamp.experiment.training import resume
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training.components import amplitude_schedule
from tf_adasamp.experiment.training.components import make_optimizer
from tf_adasamp.experiment.training.components import make_sampler
from tf_adasamp.experiment.training.components import make_strategy
from tf_adasamp.experiment.training.components import saved_state_checks
from tf_adasamp.experiment.training.controller import checkpoint_manager_in
from tf_adasamp.experiment.training.controller import Controller
from tf_adasamp.experiment.training.controller import LATEST
from tf_adasamp.experiment.training.controller import summaries_in
from tf_adasamp.experiment.training.evaluator import Evaluator
from tf_adasamp.experiment.training.progress import ProgressBar
from tf_adasamp.experiment.training.resume import common_checkpoint_step
from tf_adasamp.experiment.training.resume import worker_state
from tf_adasamp.experiment.training.steps import make_reading_train_step
from tf_adasamp.experiment.training.trainer import Trainer

# The record key, and clock, of the wall seconds a reducible-loss run spent
# training its irreducible model and computing its irreducible losses,
# before its first step: a cost of the method that train_seconds leaves out.
IRREDUCIBLE_SECONDS = "irreducible_seconds"


def train(config, data=None, progress=False, stop_requested=None):
  """Runs `config` and returns its metric records (one dict per evaluation;
  their keys: evaluator's module docstring).

  Args:
    config: a config.TrainConfig.
    data: a datasets.Dataset or disk_data.DiskDataset; loaded from
      config.data_path or config.dataset if None (pass one to share it
      between runs). Its labels are flipped here if config.label_noise.
    progress: show a progress bar (progress.ProgressBar).
    stop_requested: optional callable; True stops the run with
      KeyboardInterrupt before the next call of the trainer.

  Raises:
    run_files.RunError: the run cannot start (a validation_size that leaves
      no training examples, output_dir unwritable,
      holding another run or in use by another writer (RunInUseError), a
      length past 2**53 steps, batch_size above the number of examples, a
      model too large for memory, workers
      of a multi_worker cluster with other settings, a resume with nothing
      to resume from), diverged (DivergedError; the last checkpoint is kept)
      or lost a worker of its cluster.
  """
  data = training_data(config, data)
  num_examples = data.num_train
  if config.batch_size > num_examples:
    raise run_files.RunError(f"batch_size {config.batch_size} is larger "
                             f"than the {num_examples} training examples")
  # Before anything is written: a length that cannot run leaves no trace.
  try:
    steps = config.num_steps(num_examples)
  except ValueError as error:
    raise run_files.RunError(str(error)) from None
  if config.output_dir:
    run_files.ensure_writable_dir(config.output_dir)
  with run_files.writer_lock(config.output_dir):
    _prepare_output_dir(config, steps, data)
    if config.deterministic:
      tf.config.experimental.enable_op_determinism()
    exact_arithmetic()
    strategy = make_strategy(config.strategy, config.cluster_timeout)
    common_step = _agree_on_checkpoint(config, strategy)
    try:
      controller = _build(config, data, strategy, common_step, stop_requested)
    except (tf.errors.ResourceExhaustedError, MemoryError) as error:
      raise run_files.RunError(
          f"out of memory ({type(error).__name__}) building the "
          f"{config.model} model of {data.num_classes} classes over images "
          f"{tuple(data.image_shape)}; is num_classes too large?") from None
    controller.start(steps)
    bar = ProgressBar(steps, config.sampling) if progress else None
    return controller.train_and_evaluate(steps, bar)


def exact_arithmetic():
  """Turns Grappler's arithmetic rewrites off for this process: they turn
  AdaGrad's x / sqrt(y) into x * rsqrt(y), an approximation whose last bits
  depend on the CPU's vector instructions (AVX2 and AVX-512 differ), so a
  run would not repeat across CPUs. sqrt and division are exact."""
  tf.config.optimizer.set_experimental_options(
      {"arithmetic_optimization": False})


def training_data(config, data=None):
  """The data a run of `config` trains on: `data`, else `load_data`'s, with
  its labels flipped where config.label_noise says, then its validation
  split held out where config.validation_size says.

  Raises:
    run_files.RunError: the validation split leaves no training examples.
  """
  if data is None:
    data = load_data(config)
  if config.label_noise:
    data = datasets.with_label_noise(data, config.label_noise)
  if config.validation_size:
    try:
      data = datasets.with_validation(data, config.validation_size)
    except ValueError as error:
      raise run_files.RunError(f"validation_size: {error}") from None
  return data


def load_data(config):
  """The run's data: config.data_path's files, else config.dataset."""
  if config.data_path is not None:
    return disk_data.load(config.data_path, config.test_data_path,
                          config.num_classes)
  return datasets.load(config.dataset, config.data_dir)


def _prepare_output_dir(config, steps, data):
  """Checks that config may write to its output_dir, that a resumed run's
  data are those it trained on, and the checkpoint it resumes alone (a
  cluster's workers agree on theirs later, and resume.restore checks that),
  then saves its settings and its data's identity."""
  run_files.check_output_dir(config)
  if not config.output_dir:
    return
  identity = data.identity()
  if config.resume:
    run_files.check_data(config.output_dir, identity)
  if config.resume and config.strategy != "multi_worker":
    resume.check_latest_checkpoint(
        config.output_dir, steps,
        saved_state_checks(config.sampling, data.num_train, config.seed))
  path = os.path.join(config.output_dir, run_files.CONFIG_FILE)
  try:
    run_files.write_atomically(path,
                               json.dumps(dataclasses.asdict(config), indent=2))
  except OSError as error:
    raise run_files.RunError(
        f"cannot write {path}: {error.strerror or error}") from None
  run_files.write_data_identity(config.output_dir, identity)


def _agree_on_checkpoint(config, strategy):
  """A multi-worker run's common checkpoint step (None otherwise)."""
  if config.strategy != "multi_worker":
    return None
  try:
    return common_checkpoint_step(cluster.gather(strategy,
                                                 worker_state(config)))
  except resume.LOST_WORKER_ERRORS as error:
    raise resume.lost_worker(error, "before training") from None


def _build(config, data, strategy, common_step=None, stop_requested=None):
  """The run's Controller, over its model, optimizer, sampler and trainer."""
  num_examples = data.num_train
  with strategy.scope():
    model = models.build(config.model,
                         data.image_shape,
                         data.num_classes,
                         seed=config.seed,
                         l2=config.l2)
    optimizer = make_optimizer(config.optimizer, config.learning_rate,
                               config.lr_decay, config.lr_schedule,
                               config.num_steps(num_examples))
    # Built now, so a checkpoint restores into existing slots.
    optimizer.build(model.trainable_variables)
  # Only the controls in use, so that Algorithm 1's checkpoints keep their
  # layout.
  controls = {
      name: getattr(config, name)
      for name in ("epsilon", "beta")
      if getattr(config, name)
  }
  amplitude = config.amplitude
  if config.amplitude_schedule != "constant":
    amplitude = amplitude_schedule(config.amplitude_schedule, amplitude,
                                   config.schedule_fraction,
                                   config.num_steps(num_examples))
  sampler = make_sampler(config.sampling, num_examples, amplitude, config.decay,
                         config.seed, strategy, **controls)
  # RHO-LOSS's utility keeps per-example state of its own, saved with the
  # run; only its runs have it, so that the others keep their checkpoints'
  # layout.
  reducible = None
  if (config.sampling == "adaptive" and
      config.utility == config_lib.REDUCIBLE_LOSS):
    with strategy.scope():
      reducible = irreducible.reducible_loss(config, data)
  step = make_reading_train_step(
      model,
      optimizer,
      sampler,
      data.batch_reader(),
      config.batch_size,
      config.utility if reducible is None else reducible,
      config.utility_at,
      strategy,
      weighted=config.sampling == "adaptive" and config.beta > 0)
  # Theorems 4 and 5 (and Corollary 1) for the run so far. Uniform sampling
  # is Algorithm 1 with amplitude 0: its bounds are 0, as KL(P || P) is.
  # Under a schedule they take its peak, config.amplitude, which bounds the
  # KL of every amplitude below it; a floor only lowers the KL (convexity).
  tracker = BoundTracker(
      num_examples,
      config.amplitude if config.sampling == "adaptive" else 0.0,
      config.decay,
      static_shapes=config.jit_compile)
  forward_passes = 2 if (config.sampling == "adaptive" and
                         config.utility_at == "updated") else 1
  trainer = Trainer(step,
                    tracker,
                    (forward_passes * config.batch_size, config.batch_size),
                    jit_compile=config.jit_compile,
                    extra_clocks=() if reducible is None else
                    (IRREDUCIBLE_SECONDS,))
  # model.variables includes Keras' dropout seed states. Variables only:
  # restoring reads numbers, never Python objects.
  checkpoint = tf.train.Checkpoint(
      model=model.variables,
      optimizer=optimizer,
      sampler=sampler,
      bound_tracker=tracker,
      step=trainer.step,
      interval_steps=trainer.interval_steps,
      interval_distinct_draws=trainer.interval_distinct_draws,
      **({} if reducible is None else {
          "reducible_loss": reducible
      }),
      **trainer.clocks)
  evaluator = Evaluator(model, sampler, optimizer, tracker, data, config)
  prepare = None
  if reducible is not None:
    prepare = functools.partial(_fit_irreducible_losses, config, data,
                                reducible, trainer.clocks[IRREDUCIBLE_SECONDS])
  return _controller(config, trainer, evaluator, checkpoint, sampler, data,
                     common_step, stop_requested, prepare)


def _fit_irreducible_losses(config, data, reducible, seconds):
  """Gives `reducible` the irreducible losses of `data` (irreducible.fit),
  and `seconds` the wall seconds that took."""
  start = time.perf_counter()
  reducible.assign(irreducible.fit(config, data))
  seconds.assign(time.perf_counter() - start)


def _controller(config,
                trainer,
                evaluator,
                checkpoint,
                sampler,
                data,
                common_step,
                stop_requested,
                prepare=None):
  """The run's Controller; `common_step` as in `_agree_on_checkpoint`."""
  multi_worker = config.strategy == "multi_worker"
  manager = summaries = resume_from = None
  if config.output_dir:
    manager = checkpoint_manager_in(config.output_dir, checkpoint)
    summaries = summaries_in(config.output_dir, data)
    if multi_worker:
      resume_from = common_step
    elif config.resume:
      resume_from = LATEST
  return Controller(trainer,
                    evaluator,
                    eval_interval=config.eval_interval,
                    early_evaluations=config.early_evaluations,
                    steps_per_execution=config.steps_per_execution,
                    checkpoint_manager=manager,
                    output_dir=config.output_dir,
                    summaries=summaries,
                    resume_from=resume_from,
                    multi_worker=multi_worker,
                    divergence_advice="try a learning_rate smaller than "
                    f"{config.learning_rate:g}",
                    sampler=sampler,
                    stop_requested=stop_requested,
                    prepare=prepare)
