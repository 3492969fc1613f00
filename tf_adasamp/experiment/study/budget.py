"""The budget-limited regime: all of Fashion-MNIST for a few epochs, the
field's mechanisms against baselines a skeptic accepts.

The 784-512-10 MLP trains for a fixed budget of steps on Fashion-MNIST's
training images less a fixed validation split (the trainer's
--validation_size: the same images in every run), which the tuning, the
reducible-loss utility's irreducible model, the held-out targets and the
stopping point read; the test images give the final test accuracy alone.
Each trial runs, from the same seed:

  baselines     Shuffle-SGD (random reshuffling) and Unif-SGD (with
                replacement), each with the step-size schedule that its
                tuning chose among 1 / (1 + gamma t), linear and cosine to 0
  IS-SGD        loss-proportional importance sampling (presets.COMPETITORS)
  Algorithm 1   AdaSamp-01-SGD at the tuned amplitude and decay, its utility
                from the step's own logits, alone and with each of the
                field's mechanisms: unbiased weights (beta 1), a uniform
                finish or a uniform start (the last or first
                SCHEDULE_FRACTION of the run uniform), and the reducible-loss
                utility (RHO-LOSS's, its irreducible model the same MLP)

and, with NOISE of the training labels flipped (the validation split's too:
the trainer holds it out after the flips), Shuffle-SGD, Algorithm 1, IS-SGD
and the reducible-loss utility. `plan` lists the runs; `summary_markdown`
answers, per mechanism, whether it reaches Shuffle-SGD's final validation
accuracy sooner (`heldout`, read on the validation split) with a final test
accuracy not lower, in example passes and steps; `wall_time_markdown` the
same in seconds, from the runs of `plan` trained one at a time.
"""

import dataclasses
import math
import os

from tf_adasamp.experiment.study import design
from tf_adasamp.experiment.study import presets
from tf_adasamp.experiment.training import datasets

DATASET, MODEL = "fashion_mnist", "mlp"
REGIME = "fashion_mnist_budget"
BASELINE = "Shuffle-SGD"
ALGORITHM = "AdaSamp-01-SGD"
NOISE = 0.2
LEVELS = (0.0, NOISE)
SCHEDULE_FRACTION = 0.125
# Epochs of the irreducible model over the validation split: as many as the
# runs' budget over theirs. Its cost is charged to the method (`charged`),
# and ten epochs would cost most of the budget again.
IRREDUCIBLE_EPOCHS = 3.0
# The share of the budget over which the baseline's validation accuracy
# must still rise (`still_rising`).
RISING_FRACTION = 0.1
# Name -> (algorithm, TrainConfig fields): the runs of a trial, at the
# tuned amplitude and decay.
VARIANTS = {
    BASELINE: (BASELINE, {}),
    "Unif-SGD": ("Unif-SGD", {}),
    "IS-SGD": ("IS-SGD", {}),
    "Algorithm 1": (ALGORITHM, {}),
    "Algorithm 1, unbiased weights (beta 1)": (ALGORITHM, {
        "beta": 1.0
    }),
    "Algorithm 1, uniform finish (last 1/8)": (ALGORITHM, {
        "amplitude_schedule": "final_uniform",
        "schedule_fraction": SCHEDULE_FRACTION
    }),
    "Algorithm 1, uniform start (first 1/8)": (ALGORITHM, {
        "amplitude_schedule": "initial_uniform",
        "schedule_fraction": SCHEDULE_FRACTION
    }),
    "Algorithm 1, reducible-loss utility": (ALGORITHM, {
        "utility": "reducible_loss",
        "irreducible_epochs": IRREDUCIBLE_EPOCHS
    }),
}
REDUCIBLE = "Algorithm 1, reducible-loss utility"
# The runs under label noise.
NOISY = (BASELINE, "Algorithm 1", "IS-SGD", REDUCIBLE)


@dataclasses.dataclass(frozen=True)
class Scale:
  """How big the study is.

  Attributes:
    trials: reporting trials (seeds 0..trials-1).
    wall_time_trials: trials of the one-at-a-time pass (its first ones).
    train_size, test_size: Fashion-MNIST images drawn for a smoke test
      (`datasets.subset`); None: all 60,000 and 10,000.
    validation_size: training images held out as the validation split.
    train_eval_size: the fixed training subset the evaluations read.
    overrides: (Settings field, value) pairs replacing the preset's.
    tuning: (tuning.Options field, value) pairs: the tuning's rule.
    spawn: train the study's runs in worker processes, even one at a time
      (`pool.run_all`'s spawn): a process keeps ~170 MB of each run of all
      of Fashion-MNIST it trained.
  """
  trials: int
  wall_time_trials: int
  train_size: int | None
  test_size: int | None
  validation_size: int
  train_eval_size: int
  overrides: tuple = ()
  tuning: tuple = ()
  spawn: bool = True


# The tuning's rule: SGD's step size under each schedule that suits a fixed
# budget, ranked by the final validation accuracy, then the amplitude of
# Algorithm 1 (utility at 'step'), then its own step size; on two tuning
# seeds, never the reporting ones.
_TUNING = {
    "seeds": "100,101",
    "fixed_validation": True,
    "adaptive": ALGORITHM,
    "score": "final",
    "sgd_learning_rates": "0.1,0.3,1",
    "sgd_lr_decays": "0.001",
    "lr_schedules": "inverse_time,linear,cosine",
    "decays": "0.5",
    "utilities_at": "step",
    "adaptive_lr_factors": "0.5,2",
}
SCALES = {
    "full":
        Scale(trials=10,
              wall_time_trials=5,
              train_size=None,
              test_size=None,
              validation_size=10000,
              train_eval_size=10000,
              tuning=tuple(_TUNING.items())),
    # The same path at toy size, for tests: seconds, not minutes.
    "smoke":
        Scale(trials=1,
              wall_time_trials=1,
              train_size=600,
              test_size=100,
              validation_size=100,
              train_eval_size=100,
              spawn=False,
              overrides=(("steps", 6), ("eval_interval",
                                        2), ("early_evaluations", 1),
                         ("batch_size", 10), ("sweep_amplitudes", (1.0,))),
              tuning=tuple({
                  **_TUNING, "seeds": "100",
                  "sgd_learning_rates": "0.1",
                  "lr_schedules": "linear",
                  "adaptive_lr_factors": "2"
              }.items())),
}


def load_data(scale):
  """Fashion-MNIST, or the fixed subset of it that `scale` names."""
  spec = SCALES[scale]
  data = datasets.load(DATASET)
  if spec.train_size is None:
    return data
  return datasets.subset(data, DATASET, spec.train_size, spec.test_size,
                         datasets.SUBSET_SEED)


def settings_for(scale):
  """The preset of the regime at `scale` (before tuning)."""
  return dataclasses.replace(presets.preset(DATASET, MODEL),
                             **dict(SCALES[scale].overrides))


def tuning_fields(scale, settings):
  """The tuning.Options fields of the regime's tuning at `scale`: its
  rule, on the validation split the runs hold out, over the preset's
  sweep_amplitudes."""
  spec = SCALES[scale]
  return dict(spec.tuning,
              dataset=DATASET,
              model=MODEL,
              validation_size=spec.validation_size,
              train_eval_size=spec.train_eval_size,
              amplitudes=",".join(f"{a:g}" for a in settings.sweep_amplitudes))


@dataclasses.dataclass(frozen=True)
class Run(design.Run):
  """A run of the study: a variant at a noise level in a trial."""
  variant: str = ""
  noise: float = 0.0


def variants_at(noise):
  """The variants that run at label-noise level `noise`."""
  return tuple(VARIANTS) if noise == 0 else NOISY


def level_name(noise):
  """The folder of a noise level's runs."""
  return "clean" if noise == 0 else f"noise{noise:g}"


def plan(settings, trials, output_dir, scale="full"):
  """Every run of the study, trial by trial (the order in which the
  one-at-a-time pass trains them).

  Args:
    settings: the runs' presets.Settings (tuned).
    trials: trials per variant and noise level (seeds 0..trials-1).
    output_dir: the runs' directory.
    scale: a key of SCALES.

  Returns:
    [Run].
  """
  spec = SCALES[scale]
  runs = []
  for trial in range(trials):
    for noise in LEVELS:
      for name in variants_at(noise):
        algorithm, fields = VARIANTS[name]
        folder = name.replace(", ", "-").replace(" ", "_").replace("/", "of")
        config = design.run_config(settings,
                                   algorithm,
                                   settings.amplitude,
                                   trial,
                                   os.path.join(output_dir, level_name(noise),
                                                folder, f"seed{trial}"),
                                   dataset=DATASET,
                                   model=MODEL,
                                   validation_size=spec.validation_size,
                                   train_eval_size=spec.train_eval_size,
                                   label_noise=noise,
                                   **fields)
        runs.append(Run(algorithm, config.amplitude, trial, config, name,
                        noise))
  return runs


def irreducible_passes(config, num_train):
  """(forwarded, backpropagated) examples of a reducible-loss run's
  irreducible model: its irreducible_epochs over the validation split in
  batches (`irreducible.fit`), then one forward pass over the `num_train`
  training examples for their irreducible losses."""
  batch = min(config.batch_size, config.validation_size)
  trained = math.ceil(
      config.irreducible_epochs * config.validation_size / batch) * batch
  return trained + num_train, trained


def charged(curve, config, num_train):
  """`curve` of runs of `config` with the irreducible model's cost (where
  its utility is reducible_loss) charged before their first step: its
  example passes added to the clocks' examples, its irreducible_seconds
  to train_seconds. Other curves are returned as they are."""
  if config.utility != "reducible_loss":
    return curve
  forwarded, backpropagated = irreducible_passes(config, num_train)
  return {
      **curve,
      "examples_forwarded": curve["examples_forwarded"] + forwarded,
      "examples_backpropagated":
          (curve["examples_backpropagated"] + backpropagated),
      "train_seconds": curve["train_seconds"] + curve["irreducible_seconds"],
  }


def collect(runs, num_train):
  """The runs' curves, {noise: {variant: curves}}, as `design.curves_of`
  gives them, the reducible-loss runs' irreducible model `charged`;
  `num_train`: the training examples beside the validation split."""
  by_key = {}
  for run in runs:
    by_key.setdefault((run.noise, run.variant), []).append(run)
  metrics = design.CURVE_METRICS + ("flipped_mass", "irreducible_seconds")
  return {
      noise: {
          name:
              charged(design.curves_of(by_key[(noise, name)], metrics),
                      by_key[(noise, name)][0].config, num_train)
          for name in variants_at(noise)
      } for noise in LEVELS
  }
