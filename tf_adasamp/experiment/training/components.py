"""The run's parts, made from its settings: strategy, sampler (and its
amplitude schedule), optimizer (and its step-size schedule)."""

import functools

import tensorflow as tf

from tf_adasamp import _validation
from tf_adasamp import distribute
from tf_adasamp import schedules
from tf_adasamp.experiment.training import cluster
from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import run_files
from tf_adasamp.experiment.training import uniform_sampler


def make_strategy(name, cluster_timeout=config_lib.TrainConfig.cluster_timeout):
  """The tf.distribute strategy called `name` (one of config_lib.STRATEGIES).

  default: this process's default devices, no replication; mirrored: a
  replica per local GPU (per logical CPU device if none); multi_worker: the
  cluster of TF_CONFIG, a replica per GPU of every worker, once every worker
  has started (`cluster.join`, which waits `cluster_timeout` seconds at
  most).
  """
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    devices = (tf.config.list_logical_devices("GPU") or
               tf.config.list_logical_devices("CPU"))
    return tf.distribute.MirroredStrategy([d.name for d in devices])
  if name == "multi_worker":
    try:
      return cluster.join(cluster_timeout)
    except cluster.TFConfigError as error:
      raise run_files.RunError(str(error)) from None
  raise ValueError(
      f"unknown strategy {name!r}; choose one of {config_lib.STRATEGIES}")


def make_sampler(sampling,
                 num_examples,
                 amplitude,
                 decay,
                 seed,
                 strategy=None,
                 **controls):
  """A UniformSampler, ReshufflingSampler or AdaptiveSampler over
  `num_examples` examples.

  Under `strategy`, with a copy per replica: each replica draws its share of
  the batch from one distribution (tf_adasamp.distribute). `amplitude` may
  be a schedule (`amplitude_schedule`); `controls` are AdaptiveSampler's
  (epsilon, beta).
  """
  strategy = strategy or tf.distribute.get_strategy()
  if sampling == "uniform":
    with strategy.scope():
      return uniform_sampler.UniformSampler(num_examples, seed=seed)
  if sampling == "reshuffle":
    return uniform_sampler.ReshufflingSampler(num_examples, seed=seed)
  if sampling == "adaptive":
    return distribute.create_sampler(strategy,
                                     num_examples,
                                     amplitude,
                                     decay,
                                     seed=seed,
                                     **controls)
  raise ValueError(f"unknown sampling {sampling!r}; choose one of "
                   f"{config_lib.SAMPLINGS}")


def saved_state_checks(sampling, num_examples, seed):
  """The checks of a checkpoint's saved sampler state that
  `resume.check_checkpoint` runs: {"sampler": function} for a reshuffling
  sampler, whose state is a function of its draws; {} for the others (an
  AdaptiveSampler checks its own state as it restores)."""
  if sampling == "reshuffle":
    return {
        "sampler":
            functools.partial(uniform_sampler.check_saved_reshuffling,
                              num_examples=num_examples,
                              seed=seed)
    }
  return {}


def amplitude_schedule(name, amplitude, fraction, total_steps):
  """The amplitude over a run of `total_steps` updates (`schedules`).

  constant: `amplitude` throughout, as Algorithm 1; warmup: from 0 up to it
  over the first `fraction` of the run; anneal: from it down to 0 at the
  end; final_uniform: it, then 0 (uniform sampling) for the last `fraction`,
  as InfoBatch ends on the full data; initial_uniform: 0 for the first
  `fraction`, then it.
  """
  if name == "constant":
    return amplitude
  if name == "warmup":
    return schedules.warmup(amplitude, max(1, round(fraction * total_steps)))
  if name == "anneal":
    return schedules.anneal(amplitude, total_steps)
  if name == "final_uniform":
    return schedules.final_uniform(amplitude, total_steps, 1 - fraction)
  if name == "initial_uniform":
    return schedules.initial_uniform(amplitude, total_steps, fraction)
  raise ValueError(f"unknown amplitude_schedule {name!r}; choose one of "
                   f"{config_lib.AMPLITUDE_SCHEDULES}")


def make_optimizer(name,
                   learning_rate,
                   lr_decay,
                   lr_schedule="inverse_time",
                   total_steps=None):
  """SGD or AdaGrad whose step size follows `lr_schedule`
  (config_lib.LR_SCHEDULES).

  With t the number of updates made before this one and T = `total_steps`:
  inverse_time, the paper's learning_rate / (1 + lr_decay * t) (lr_decay = 0
  keeps it constant); linear, learning_rate * (1 - t / T); cosine,
  learning_rate * (1 + cos(pi t / T)) / 2. linear and cosine reach 0 at the
  run's end, t = T, and need `total_steps`; they do not read lr_decay.
  """
  schedule = _lr_schedule(lr_schedule, learning_rate, lr_decay, total_steps)
  if name == "sgd":
    return tf.keras.optimizers.SGD(schedule)
  if name == "adagrad":
    return tf.keras.optimizers.Adagrad(schedule)
  raise ValueError(
      f"unknown optimizer {name!r}; choose one of {config_lib.OPTIMIZERS}")


def _lr_schedule(name, learning_rate, lr_decay, total_steps):
  """The Keras LearningRateSchedule called `name` (`make_optimizer`)."""
  schedules_lib = tf.keras.optimizers.schedules
  if name == "inverse_time":
    return schedules_lib.InverseTimeDecay(learning_rate,
                                          decay_steps=1,
                                          decay_rate=lr_decay)
  if name not in config_lib.LR_SCHEDULES:
    raise ValueError(f"unknown lr_schedule {name!r}; choose one of "
                     f"{config_lib.LR_SCHEDULES}")
  total_steps = _validation.positive_int(total_steps, "total_steps")
  if name == "linear":
    return schedules_lib.PolynomialDecay(learning_rate,
                                         decay_steps=total_steps,
                                         end_learning_rate=0.0,
                                         power=1.0)
  return schedules_lib.CosineDecay(learning_rate,
                                   decay_steps=total_steps,
                                   alpha=0.0)
