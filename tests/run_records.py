"""Comparing runs' metric records, which are exact but for their clocks."""

from tf_adasamp.experiment.training import trainer


def without_clocks(records):
  """`records` less the wall and CPU seconds, which no two runs share."""
  seconds = {"train_seconds", "train_cpu_seconds"}
  assert seconds <= set(trainer.CLOCKS)
  return [{
      k: v for k, v in record.items() if k not in seconds
  } for record in records]
