"""A carried study's runs: a short run's settings, and the files of a runs
directory before and after a carry (tests/experiment/study/test_carry.py,
tests/experiment/test_carry.py)."""

import os
import shutil

from tf_adasamp.experiment.training import config as config_lib


def config(output_dir, **overrides):
  settings = dict(dataset="digits",
                  model="logistic",
                  sampling="adaptive",
                  steps=6,
                  eval_interval=2,
                  batch_size=16,
                  learning_rate=0.1,
                  resume=True,
                  output_dir=str(output_dir))
  settings.update(overrides)
  return config_lib.TrainConfig(**settings)


def files(directory):
  return sorted(
      os.path.relpath(os.path.join(path, name), directory)
      for path, _, names in os.walk(directory)
      for name in names)


def snapshot(directory):
  """Everything under `directory`: each file's bytes, each link's target,
  each folder and special file by its kind."""
  found = {}
  for path, folders, names in os.walk(directory):
    for name in folders + names:
      entry = os.path.join(path, name)
      if os.path.islink(entry):
        found[entry] = ("link", os.readlink(entry))
      elif os.path.isfile(entry):
        with open(entry, "rb") as f:
          found[entry] = f.read()
      else:
        found[entry] = "folder" if os.path.isdir(entry) else "special"
  return found


def copied(runs, tmp_path):
  copy = tmp_path / "runs"
  shutil.copytree(runs, copy)
  return copy
