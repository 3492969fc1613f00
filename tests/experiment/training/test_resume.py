"""Resuming a run from its checkpoint and checkpoint state, edited at
random: each edit is refused in one line, the run's directory as it was,
or, where it changes nothing, the run resumes exactly (issue 53).

Each sampler kind (adaptive with the controls, reshuffling, uniform), each
on labels with noise; an edit of one checkpointed variable (mostly the
sampler's) or of the checkpoint state that names the checkpoint to resume.
Derandomized and few examples: the same cases every run of the suite.
"""

import dataclasses
import os
import shutil
import tempfile

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf

from checkpoint_edits import edited_checkpoint
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files

KINDS = {
    "adaptive":
        dict(sampling="adaptive",
             epsilon=0.25,
             beta=0.5,
             amplitude_schedule="final_uniform",
             schedule_fraction=0.5),
    "reshuffle":
        dict(sampling="reshuffle"),
    "uniform":
        dict(sampling="uniform"),
}
LABEL_NOISE = 0.2
# What an edit does to a variable's saved value.
VALUE_EDITS = ("same", "element", "scale", "zero", "negate", "shorter", "dtype")
# What an edit does to the checkpoint state (checkpoints/checkpoint).
POINTER_EDITS = ("same", "older", "missing", "other run", "garbage")
GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


@pytest.fixture(scope="module")
def runs(digits, tmp_path_factory):
  """{kind: (config of a finished 4-step run in its own directory, the
  records of the same run uninterrupted to 6 steps)}."""
  found = {}
  for kind, controls in KINDS.items():
    config = tiny_config(label_noise=LABEL_NOISE,
                         output_dir=str(tmp_path_factory.mktemp(kind)),
                         **controls)
    loop.train(config, data=digits)
    whole = loop.train(dataclasses.replace(config, steps=6, output_dir=None),
                       data=digits)
    found[kind] = (config, whole)
  return found


def snapshot(directory):
  files = {}
  for folder, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        files[os.path.relpath(path, directory)] = f.read()
  return files


def edited_value(value, how, data):
  """`value` edited `how` (VALUE_EDITS), drawing from `data`."""
  if how == "same":
    return value.copy()
  if value.dtype.kind in "OSU":  # no numbers to edit: taken as it is
    return value.copy()
  if how == "element":
    edited = value.copy().reshape(-1)
    if not edited.size:
      return value.copy()
    at = data.draw(st.integers(0, edited.size - 1), label="element")
    if value.dtype.kind == "f":
      edited[at] = data.draw(st.floats(width=value.dtype.itemsize * 8),
                             label="new value")
    elif value.dtype.kind == "b":
      edited[at] = not edited[at]
    else:
      info = np.iinfo(value.dtype)
      edited[at] = data.draw(st.integers(int(info.min), int(info.max)),
                             label="new value")
    return edited.reshape(value.shape)
  if how == "scale":
    return (value * 3).astype(value.dtype)
  if how == "zero":
    return np.zeros_like(value)
  if how == "negate":
    return (-value).astype(value.dtype) if value.dtype.kind != "b" else ~value
  if how == "shorter":
    return value.reshape(-1)[:-1].copy() if value.size else value.copy()
  return value.astype(np.float32 if value.dtype != np.float32 else np.float64)


def is_same(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(
  )


def edit_checkpoint(config, data):
  """Edits one variable of the run's latest checkpoint; whether the edit
  left it as it was."""
  path = tf.train.latest_checkpoint(
      os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR))
  reader = tf.train.load_checkpoint(path)
  keys = sorted(
      key for key in reader.get_variable_to_dtype_map() if key != GRAPH_KEY)
  samplers = [key for key in keys if key.startswith("sampler/")]
  key = data.draw(st.one_of(st.sampled_from(samplers), st.sampled_from(keys)),
                  label="variable")
  how = data.draw(st.sampled_from(VALUE_EDITS), label="edit")
  value = np.asarray(reader.get_tensor(key))
  edited = edited_value(value, how, data)
  edited_checkpoint(path, key, lambda _: edited, copy=path)
  return is_same(edited, value)


def edit_pointer(config, others, data):
  """Edits the run's checkpoint state; whether the edit left it as it
  was."""
  directory = os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR)
  state = os.path.join(directory, "checkpoint")
  with open(state) as f:
    saved = f.read()
  how = data.draw(st.sampled_from(POINTER_EDITS), label="pointer edit")
  names = {
      "same": "ckpt-4",
      "older": "ckpt-2",  # the records go past it
      "missing": "ckpt-8",
      "other run": os.path.join(others, run_files.CHECKPOINTS_DIR, "ckpt-4"),
  }
  if how == "garbage":
    text = "\x00garbage {{{\n"
  else:
    text = (f'model_checkpoint_path: "{names[how]}"\n'
            f'all_model_checkpoint_paths: "{names[how]}"\n')
  with open(state, "w") as f:
    f.write(saved if how == "same" else text)
  return how == "same"


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=5, deadline=None, database=None, derandomize=True)
@given(data=st.data())
def test_an_edited_checkpoint_or_pointer_is_refused_or_resumes_exactly(
    runs, digits, kind, data):
  source, whole = runs[kind]
  others = runs[next(other for other in sorted(KINDS) if other != kind)][0]
  with tempfile.TemporaryDirectory() as directory:
    run_dir = os.path.join(directory, "run")
    shutil.copytree(source.output_dir, run_dir)
    config = dataclasses.replace(source, output_dir=run_dir)
    if data.draw(st.booleans(), label="edit the checkpoint state"):
      unchanged = edit_pointer(config, others.output_dir, data)
    else:
      unchanged = edit_checkpoint(config, data)
    before = snapshot(run_dir)
    resumed = dataclasses.replace(config, resume=True, steps=6)
    try:
      records = loop.train(resumed, data=digits)
    except run_files.RunError as error:
      assert "\n" not in str(error)
      assert snapshot(run_dir) == before
      return
    assert unchanged, "an edit that changes the run was resumed"
    assert without_clocks(records) == without_clocks(whole)
