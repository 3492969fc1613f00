"""The trainer's small runs, and comparing runs' metric records, which are
exact but for their clocks."""

from tf_adasamp.experiment.training import config as config_lib
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import trainer


def tiny_config(**overrides):
  """A TrainConfig of a few steps of the logistic model on small batches."""
  settings = dict(model="logistic",
                  steps=4,
                  eval_interval=2,
                  batch_size=16,
                  learning_rate=0.1)
  settings.update(overrides)
  return config_lib.TrainConfig(**settings)


def without_clocks(records):
  """`records` less the wall and CPU seconds, which no two runs share."""
  seconds = {"train_seconds", "train_cpu_seconds", loop.IRREDUCIBLE_SECONDS}
  assert seconds - {loop.IRREDUCIBLE_SECONDS} <= set(trainer.CLOCKS)
  return [{
      k: v for k, v in record.items() if k not in seconds
  } for record in records]
