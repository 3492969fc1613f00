"""Resuming a run (tf_adasamp.experiment.training.resume) from its checkpoint
and checkpoint state, edited at random: each edit is refused in one line,
the run's directory as it was, or, where it changes nothing, the run resumes
exactly (issue 53). And each hand-made edit of a checkpoint, a record or a
setting, refused in one line naming the file and the reason (issue 46).

Each sampler kind (adaptive with the controls, reshuffling, uniform), each
on labels with noise; an edit of one checkpointed variable (mostly the
sampler's) or of the checkpoint state that names the checkpoint to resume.
Derandomized and few examples: the same cases every run of the suite.
"""

import dataclasses
import json
import os
import pickle
import shutil
import tempfile

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf

import checkpoint_edits
from checkpoint_edits import edited_checkpoint
from run_records import refused
from run_records import snapshot
from run_records import tiny_config
from run_records import without_clocks
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import resume
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


STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"

ITERATIONS_KEY = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"


def last_checkpoint(config):
  return tf.train.latest_checkpoint(
      os.path.join(config.output_dir, run_files.CHECKPOINTS_DIR))


@pytest.mark.parametrize("step", [-5, 10**6, 3])
def test_resume_refuses_a_checkpoint_whose_step_is_not_its_number(
    run, digits, step):
  path = last_checkpoint(run)  # ckpt-4
  checkpoint_edits.edited_checkpoint(path,
                                     STEP_KEY,
                                     lambda value: np.int64(step),
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits,
          f"cannot resume from {path}: its step {step} is not its number")


def test_resume_refuses_a_checkpoint_past_the_runs_length(run, digits):
  # Renamed and listed as the latest, its step its number: still past the
  # run's 6 steps.
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  far = os.path.join(directory, "ckpt-1000000")
  checkpoint_edits.edited_checkpoint(last_checkpoint(run), STEP_KEY,
                                     lambda value: np.int64(10**6), far)
  checkpoint_edits.edited_checkpoint(far, ITERATIONS_KEY,
                                     lambda value: np.int64(10**6), far)
  checkpoint_edits.forge_digest(far)
  tf.compat.v1.train.update_checkpoint_state(directory, far)
  refused(run, digits, "its step 1000000 is past the run's 6 steps")


@pytest.mark.parametrize("iterations", [-1, 5])
def test_resume_refuses_a_checkpoint_whose_optimizer_updates_are_not_its_step(
    run, digits, iterations):
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     ITERATIONS_KEY,
                                     lambda value: np.int64(iterations),
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits,
          f"its optimizer's updates, {iterations}, are not its step 4")


def test_resume_refuses_a_checkpoint_whose_files_are_not_those_it_wrote(
    run, digits):
  # A value the other checks cannot tell from the run's own: the random
  # state of the sampler's generator.
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     "generator_state",
                                     lambda state: state + 1,
                                     copy=path)
  refused(
      run, digits, f"cannot resume from {path}: its files are not those the "
      f"run wrote (their SHA-256 is not the one in {path}.sha256)")


PERMUTATION_KEY = "sampler/permutation/.ATTRIBUTES/VARIABLE_VALUE"

DRAWS_KEY = "sampler/draws/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.mark.parametrize("key,edit,message", [
    (PERMUTATION_KEY, lambda p: p * 0, "permutation is not that of its epoch"),
    (PERMUTATION_KEY, lambda p: p + 1500, "permutation is not that of"),
    (DRAWS_KEY, lambda d: np.int64(-5), "draws -5 and epoch 0 must be >= 0"),
])
def test_resume_refuses_a_reshuffling_state_that_no_run_reaches(
    digits, tmp_path, key, edit, message):
  config = tiny_config(sampling="reshuffle", output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  resumed = dataclasses.replace(config, resume=True, steps=6)
  path = last_checkpoint(resumed)
  checkpoint_edits.edited_checkpoint(path, key, edit, copy=path)
  checkpoint_edits.forge_digest(path)
  refused(
      resumed, digits,
      f"cannot resume from {path}: it does not hold this trainer's state "
      f"(the reshuffling sampler's {message}")


@pytest.mark.parametrize("spelling", ["absolute", "relative", "in the list"])
def test_resume_refuses_a_checkpoint_state_that_names_another_runs_checkpoint(
    run, digits, tmp_path, spelling):
  other = tiny_config(output_dir=str(tmp_path / "other"), seed=1)
  loop.train(other, data=digits)
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  theirs = os.path.join(other.output_dir, run_files.CHECKPOINTS_DIR, "ckpt-4")
  ours = last_checkpoint(run)
  if spelling == "relative":
    theirs = os.path.relpath(theirs, directory)  # ../../other/checkpoints/..
  latest, listed = (ours,
                    [theirs, ours]) if spelling == "in the list" else (theirs,
                                                                       [theirs])
  with open(os.path.join(directory, "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{latest}"\n' + "".join(
        f'all_model_checkpoint_paths: "{path}"\n' for path in listed))
  refused(run, digits, f"{os.path.join(directory, 'checkpoint')} names ")
  refused(run, digits, f"outside {directory}: a run resumes its own")


def test_resume_refuses_an_older_checkpoint_than_the_records(run, digits):
  # The checkpoint state names ckpt-2 as the latest; records go to step 4.
  directory = os.path.join(run.output_dir, run_files.CHECKPOINTS_DIR)
  older = os.path.join(directory, "ckpt-2")
  tf.compat.v1.train.update_checkpoint_state(
      directory, older, [older, last_checkpoint(run)])
  refused(run, digits, "metrics.jsonl records step 4, past its step 2")


def _truncate(data_file):
  os.truncate(data_file, os.path.getsize(data_file) // 2)


def _zero(data_file):
  with open(data_file, "r+b") as f:
    f.write(bytes(os.path.getsize(data_file)))


@pytest.mark.parametrize("damage", [_truncate, _zero])
def test_resume_refuses_a_damaged_data_file_in_one_line(run, digits, damage):
  path = last_checkpoint(run)
  damage(f"{path}.data-00000-of-00001")
  refused(run, digits, f"cannot resume from {path}: its files are not those")
  checkpoint_edits.forge_digest(path)
  refused(run, digits, f"cannot resume from {path}: it does not hold")


def test_resume_refuses_a_corrupt_object_graph_in_one_line(run, digits):
  path = last_checkpoint(run)
  checkpoint_edits.edited_checkpoint(path,
                                     "_CHECKPOINTABLE_OBJECT_GRAPH",
                                     lambda value: b"\n\xff\xff garbage",
                                     copy=path)
  checkpoint_edits.forge_digest(path)
  refused(run, digits, f"cannot resume from {path}: it does not hold")


def test_resume_refuses_a_run_without_its_config_json(run, digits):
  os.unlink(os.path.join(run.output_dir, run_files.CONFIG_FILE))
  refused(dataclasses.replace(run, amplitude=2.0), digits,
          "config.json is missing")


def test_a_length_past_2_to_the_53_steps_writes_nothing(run, digits, tmp_path):
  new = tiny_config(epochs=1e300, output_dir=str(tmp_path / "new"))
  with pytest.raises(run_files.RunError, match="more steps than the 2"):
    loop.train(new, data=digits)
  assert not os.path.exists(new.output_dir)
  refused(dataclasses.replace(run, epochs=1e300), digits,
          "more steps than the 2**53")


def test_resume_refuses_reversed_metrics(run, digits):
  path = os.path.join(run.output_dir, run_files.METRICS_FILE)
  with open(path) as f:
    lines = f.readlines()
  with open(path, "w") as f:
    f.writelines(reversed(lines))
  refused(run, digits, f"{path} line 2 records step 2 after step 4")


def test_resume_refuses_other_in_memory_data_under_the_same_name(run, digits):
  relabelled = dataclasses.replace(digits, y_train=(digits.y_train + 1) % 10)
  before = snapshot(run.output_dir)
  with pytest.raises(run_files.RunError,
                     match=r"its data changed since it began \(train sha256: "
                     r"[0-9a-f]{64} then, [0-9a-f]{64} now\)"):
    loop.train(run, data=relabelled)
  assert snapshot(run.output_dir) == before
  records = loop.train(run, data=digits)
  assert records[-1]["step"] == 6


def test_a_run_from_before_data_identities_resumes_and_records_one(run, digits):
  os.remove(os.path.join(run.output_dir, run_files.DATA_FILE))
  loop.train(run, data=digits)
  with open(os.path.join(run.output_dir, run_files.DATA_FILE)) as f:
    assert json.load(f) == json.loads(json.dumps(digits.identity()))


def test_multi_worker_runs_resume_from_the_last_checkpoint_all_have(tmp_path):
  config = tiny_config(output_dir=str(tmp_path), resume=True)
  fingerprint, latest = resume.worker_state(config)
  assert latest == -1  # no checkpoint yet
  # The per-worker settings aside, the fingerprint is of the settings.
  assert resume.worker_state(
      dataclasses.replace(config, output_dir="elsewhere",
                          cluster_timeout=1))[0] == fingerprint
  other = resume.worker_state(dataclasses.replace(config, seed=1))[0]
  assert other != fingerprint
  common = resume.common_checkpoint_step
  assert common([[fingerprint, 50], [fingerprint, 25]]) == 25
  assert common([[fingerprint, -1], [fingerprint, -1]]) is None
  with pytest.raises(run_files.RunError, match="different settings"):
    common([[fingerprint, 50], [other, 50]])
  with pytest.raises(run_files.RunError, match="and some none"):
    common([[fingerprint, 50], [fingerprint, -1]])


def test_resume_ignores_a_tampered_checkpoint_entry_never_running_it(
    digits, tmp_path):
  config = tiny_config(output_dir=str(tmp_path / "run"))
  loop.train(config, data=digits)
  marker = tmp_path / "pwned"

  class Payload:

    def __reduce__(self):
      return (os.system, (f"touch {marker}",))

  class Pickled(tf.train.experimental.PythonState):
    """What an old checkpoint's bound_tracker entry was: a pickle."""

    def serialize(self):
      return pickle.dumps(Payload())

    def deserialize(self, string_value):
      pickle.loads(string_value)

  tampered = tf.train.Checkpoint(bound_tracker=Pickled(),
                                 step=tf.Variable(8, dtype=tf.int64))
  tf.train.CheckpointManager(tampered,
                             str(tmp_path / "run" / "checkpoints"),
                             max_to_keep=5).save(checkpoint_number=8)
  with pytest.raises(run_files.RunError,
                     match="does not hold this trainer's state"):
    loop.train(dataclasses.replace(config, resume=True, steps=8), data=digits)
  assert not marker.exists()
  # The run's records were left as they were.
  assert [r["step"] for r in run_files.read_metrics(config.output_dir)
         ] == [0, 2, 4]
  # The payload is live: unpickled, as the old trainer did, it runs.
  tf.train.Checkpoint(bound_tracker=Pickled()).restore(
      tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints")))
  assert marker.exists()


def _refused_resume_changes_no_variable(config, digits, monkeypatch, path):
  """Resumes `config` from the damaged checkpoint at `path`: refused, with
  every value the checkpoint restores into as it was before."""
  restore, restored = resume.restore, []

  def recorded(checkpoint, path, total_steps=None):
    restored.append((checkpoint, checkpoint_edits.checkpoint_state(checkpoint)))
    restore(checkpoint, path, total_steps)

  monkeypatch.setattr(resume, "restore", recorded)
  # The check before the run writes anything refuses some damage first;
  # here restore refuses it.
  monkeypatch.setattr(resume, "check_latest_checkpoint", lambda *_: None)
  with pytest.raises(run_files.RunError, match=f"cannot resume from {path}"):
    loop.train(dataclasses.replace(config, resume=True, steps=6), data=digits)
  [(checkpoint, before)] = restored
  after = checkpoint_edits.checkpoint_state(checkpoint)
  # The model, optimizer, sampler, bound sums and step: nothing assigned.
  assert len(before) == len(after) > 10
  for value, value_before in zip(after, before):
    np.testing.assert_array_equal(value, value_before)


@pytest.mark.parametrize("damage", checkpoint_edits.SAVE_COUNTER_DAMAGE)
def test_a_checkpoint_with_a_corrupt_save_counter_changes_no_variable(
    digits, tmp_path, monkeypatch, damage):
  config = tiny_config(output_dir=str(tmp_path))
  loop.train(config, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  checkpoint_edits.corrupt_save_counter(path, damage)
  checkpoint_edits.forge_digest(path)
  _refused_resume_changes_no_variable(config, digits, monkeypatch, path)


def test_a_checkpoint_with_a_weight_of_another_shape_changes_no_variable(
    digits, tmp_path, monkeypatch):
  config = tiny_config(output_dir=str(tmp_path))
  loop.train(config, data=digits)
  path = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
  # The model's last weight, one entry longer: refused only as it is
  # assigned, after the checkpoint's other values.
  reader = tf.train.load_checkpoint(path)
  last = max(key for key in reader.get_variable_to_shape_map()
             if key.startswith("model/"))
  checkpoint_edits.edited_checkpoint(
      path, last, lambda value: np.concatenate([value, value[:1]]), copy=path)
  checkpoint_edits.forge_digest(path)
  _refused_resume_changes_no_variable(config, digits, monkeypatch, path)
