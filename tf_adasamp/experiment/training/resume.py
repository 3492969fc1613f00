"""Which checkpoint a run resumes from, alone or as a worker of a cluster,
and its restore.

A multi-worker run's workers agree before they train: each tells the others
its `worker_state`, and all go back to `common_checkpoint_step`. A
checkpoint's step is read from the checkpoint itself (its `step` variable),
never from its file name.
"""

import dataclasses
import glob
import hashlib
import json
import os
import re

from google.protobuf import message
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from tf_adasamp.experiment.training import run_files

# The key of the trainer's step in a checkpoint (tf.train.Checkpoint(step=..)).
_STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"
# The key of the checkpoint's object graph, a TrackableObjectGraph proto.
_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# The key of the optimizer's count of updates, one a step.
_ITERATIONS_KEY = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"
# How a damaged checkpoint file fails as it is read: the reader raises
# IndexError for a file cut short, protobuf a DecodeError for a corrupt
# object graph, TensorFlow an OpError for a failed checksum.
_UNREADABLE_ERRORS = (IndexError, ValueError, message.DecodeError,
                      tf.errors.OpError)
# Fields the workers of one multi-worker run may set differently.
PER_WORKER = {"data_dir", "output_dir", "cluster_timeout"}
# How TensorFlow reports a worker that left the cluster.
LOST_WORKER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                      tf.errors.CancelledError, tf.errors.DeadlineExceededError)


def checkpoint_step(path):
  """The trainer's step saved in checkpoint `path`."""
  return int(tf.train.load_checkpoint(path).get_tensor(_STEP_KEY))


def latest_checkpoint(directory):
  """`tf.train.latest_checkpoint(directory)`, the path of the latest
  checkpoint that the checkpoint state in `directory` names, or None; a
  RunError if the state names any checkpoint outside `directory` (another
  run's, resumed, would mix two runs in one)."""
  run_files.check_regular_files([os.path.join(directory, "checkpoint")],
                                directory)
  state = tf.train.get_checkpoint_state(directory)
  if state is not None:
    inside = os.path.realpath(directory)
    for path in [
        state.model_checkpoint_path, *state.all_model_checkpoint_paths
    ]:
      # Relative paths are the directory's (get_checkpoint_state joins them).
      if os.path.realpath(os.path.dirname(path)) != inside:
        raise run_files.RunError(
            f"cannot resume: {os.path.join(directory, 'checkpoint')} names "
            f"{path}, outside {directory}: a run resumes its own checkpoints "
            "only; name the run's latest ckpt-N there, or start over in "
            "another output_dir")
  return tf.train.latest_checkpoint(directory)


def checkpoint_to_resume(output_dir):
  """The path of the latest checkpoint of the run in `output_dir`, or None
  where the run has not begun (no records, no checkpoints).

  Raises:
    run_files.RunError: checkpoints/ is not a directory; the run has begun
      but has no readable checkpoint (its checkpoint state is missing,
      damaged or names missing files), or its state names a checkpoint
      outside the run.
  """
  run_files.check_checkpoints_dir(output_dir)
  directory = os.path.join(output_dir, run_files.CHECKPOINTS_DIR)
  # Unlike a CheckpointManager's, this looks for the checkpoint's files too.
  path = latest_checkpoint(directory)
  if path is None and (run_files.read_metrics(output_dir) or
                       run_files.holds_checkpoints(output_dir)):
    raise run_files.RunError(
        f"cannot resume: {directory} has no readable checkpoint (its "
        "'checkpoint' file is missing or damaged, or names missing files) "
        "though the run has begun; leave out --resume and choose another "
        "output_dir to start over")
  return path


def last_checkpoint_step(output_dir):
  """The step of the run's last checkpoint in `output_dir`, or None.

  May be called while the run writes checkpoints: one that its writer
  deletes (it keeps the last two) between the look-up and the read is looked
  up again.

  Raises:
    run_files.RunError: the checkpoint state names a checkpoint outside
      the run (`latest_checkpoint`).
  """
  directory = os.path.join(output_dir, run_files.CHECKPOINTS_DIR)
  for _ in range(3):
    path = latest_checkpoint(directory)
    if path is None:
      return None
    try:
      return checkpoint_step(path)
    except tf.errors.NotFoundError:
      continue
  return None


def worker_state(config):
  """What a worker of a multi-worker run tells the others before it starts:
  [a fingerprint of its settings but PER_WORKER, the step of its last
  checkpoint if it resumes one, else -1]."""
  settings = {
      name: value
      for name, value in dataclasses.asdict(config).items()
      if name not in PER_WORKER
  }
  digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
  latest = last_checkpoint_step(config.output_dir) if config.resume else None
  return [
      int.from_bytes(digest.digest()[:8], "little", signed=True),
      -1 if latest is None else latest
  ]


def common_checkpoint_step(states):
  """The step a multi-worker run starts from, given each worker's
  `worker_state` (a row each): that of the latest checkpoint every worker
  has, or None for a new run.

  The workers checkpoint at the same steps, but a worker killed while its
  peers wrote theirs misses the last one (each keeps two): they all go back
  to the latest they share, so their copies of the model and the sampler
  start equal. Raises RunError unless they run the same settings and all or
  none of them has a checkpoint (else the others' runs would start over).
  """
  states = np.asarray(states)
  if (states[:, 0] != states[0, 0]).any():
    raise run_files.RunError(
        "the workers of TF_CONFIG's cluster have different settings; start "
        "them with the same flags (only "
        f"{', '.join('--' + n for n in sorted(PER_WORKER))} may differ)")
  steps = states[:, 1]
  if steps.min() < 0 <= steps.max():
    raise run_files.RunError(
        "some workers of TF_CONFIG's cluster have a checkpoint to resume "
        "from, and some none; give each worker the --output_dir of its part "
        "of the run")
  return None if steps.min() < 0 else int(steps.min())


def checkpoint_of_step(directory, step):
  """The path of the checkpoint of `step` in `directory` (None if `step` is
  None); RunError if there is none.

  Looks through the paths of the directory's checkpoint state rather than
  `CheckpointManager.checkpoints`, which leaves out those whose state
  carries no timestamps (one written by `update_checkpoint_state`).
  """
  if step is None:
    return None
  latest_checkpoint(directory)  # refuses paths out of the run
  state = tf.train.get_checkpoint_state(directory)
  for path in state.all_model_checkpoint_paths if state else []:
    try:
      if checkpoint_step(path) == step:
        return path
    except tf.errors.NotFoundError:  # listed, but its files are gone
      continue
  raise run_files.RunError(
      f"{directory} has no checkpoint of step {step}, the latest that every "
      "worker of the cluster has; resume each worker from its own "
      "--output_dir")


def lost_worker(error, when):
  """The RunError for a cluster that lost a worker `when`."""
  return run_files.RunError(
      f"the cluster lost a worker {when} ({type(error).__name__}); start "
      "every worker again with --resume: they go on from the last checkpoint "
      "they all have")


def restore(checkpoint, path, total_steps=None):
  """Restores tf.train.Checkpoint `checkpoint` from the checkpoint at `path`;
  raises RunError naming `path` if it does not hold `checkpoint`'s state.

  A checkpoint whose entries cannot all be read or assigned (a corrupt
  value, one of another dtype or shape, its own `save_counter` included,
  a file cut short, a corrupt object graph) changes no variable; nor does
  one whose step is not its own number (the controller saves the
  checkpoint of step s as ckpt-s), lies outside [0, `total_steps`], or is
  not its optimizer's count of updates (which sets the step size).

  Args:
    checkpoint: the run's tf.train.Checkpoint.
    path: the checkpoint's path (its files' prefix).
    total_steps: the run's length, if known.

  Raises:
    run_files.RunError: in one line, as above.
  """
  check_checkpoint(path, total_steps)
  # tf.train.Checkpoint makes its save_counter when it is first read; a
  # restore that has to make it restores it alone, after it has assigned
  # every other variable. Made now, it is read with the others, before any
  # is assigned.
  _ = checkpoint.save_counter
  # A value of another shape is refused only as its variable is assigned,
  # after others were: those are put back.
  variables = _restored_variables(checkpoint)
  before = [tf.convert_to_tensor(variable) for variable in variables]
  try:
    checkpoint.restore(path).assert_consumed()
  except (AssertionError,) + _UNREADABLE_ERRORS as error:
    for variable, value in zip(variables, before):
      variable.assign(value)
    raise _not_this_trainers(path, error) from None


def check_latest_checkpoint(output_dir, total_steps, checks=None):
  """`check_checkpoint` of the latest checkpoint of the run in
  `output_dir`, if it has one: the one a run resumed alone restores, checked
  before the run writes anything. RunError too if the run has begun but has
  no readable checkpoint (`checkpoint_to_resume`), or if its records go past
  its step: a run records a step only after its checkpoint, and resuming
  would drop them (a cluster's worker may go back past its records, to the
  checkpoint all workers have)."""
  path = checkpoint_to_resume(output_dir)
  if not path:
    return
  step = check_checkpoint(path, total_steps, checks)
  records = run_files.read_metrics(output_dir)
  if records and records[-1]["step"] > step:
    raise run_files.RunError(
        f"cannot resume from {path}: {run_files.METRICS_FILE} records step "
        f"{records[-1]['step']}, past its step {step}, and resuming would drop "
        "that record; resume from the run's latest checkpoint")


def check_checkpoint(path, total_steps=None, checks=None):
  """The step of the checkpoint at `path`; RunError, naming `path`, unless
  its files are those the run wrote (their recorded SHA-256,
  `run_files.check_checkpoint_digest`), its every entry and its object graph
  can be read, its step (and its optimizer's count of updates) is its
  number, within [0, total_steps], and `checks` pass. Reads only.

  Args:
    path: the checkpoint's path (its files' prefix).
    total_steps: the run's length, if known.
    checks: {name: function}: each function takes the values saved under
      the checkpoint's object `name` ({variable name: value}) and raises
      ValueError where no run reaches them (components.saved_state_checks).
  """
  run_files.check_regular_files(glob.glob(glob.escape(path) + ".*"), path)
  run_files.check_checkpoint_digest(path)
  try:
    reader = tf.train.load_checkpoint(path)
    values = {
        key: reader.get_tensor(key)
        for key in reader.get_variable_to_dtype_map()
    }
    trackable_object_graph_pb2.TrackableObjectGraph().ParseFromString(
        values[_GRAPH_KEY])
    step = int(values[_STEP_KEY])
    iterations = (int(values[_ITERATIONS_KEY])
                  if _ITERATIONS_KEY in values else None)
    for name, check in (checks or {}).items():
      check(_saved_under(values, name))
  except (KeyError, TypeError) + _UNREADABLE_ERRORS as error:
    raise _not_this_trainers(path, error) from None
  number = re.search(r"-(\d+)$", path)
  reasons = []
  # The number has no sign: a negative step is never it.
  if number is None or int(number.group(1)) != step:
    reasons.append(f"its step {step} is not its number")
  if iterations is not None and iterations != step:
    reasons.append(f"its optimizer's updates, {iterations}, are not its step "
                   f"{step}")
  if reasons:
    raise run_files.RunError(
        f"cannot resume from {path}: {'; '.join(reasons)}, so it was edited "
        "or damaged; resume from a checkpoint the run wrote, or start over "
        "in another output_dir")
  if total_steps is not None and step > total_steps:
    raise run_files.RunError(
        f"cannot resume from {path}: its step {step} is past the run's "
        f"{total_steps} steps; give --steps (or --epochs) that reach it")
  return step


def _saved_under(values, name):
  """{variable: value} of the variables of object `name` in a checkpoint's
  `values` (keys "name/variable/.ATTRIBUTES/VARIABLE_VALUE")."""
  found = {}
  for key, value in values.items():
    parts = key.split("/")
    if (len(parts) == 4 and parts[0] == name and
        parts[2:] == [".ATTRIBUTES", "VARIABLE_VALUE"]):
      found[parts[1]] = value
  return found


def _not_this_trainers(path, error):
  text = str(error).strip()
  cause = text.splitlines()[0][:200] if text else type(error).__name__
  return run_files.RunError(f"cannot resume from {path}: it does not hold "
                            f"this trainer's state ({cause})")


def _restored_variables(checkpoint):
  """Every variable a restore of `checkpoint` may assign: those it tracks
  (TensorFlow's and Keras's), and those its tf.Modules (a sampler) save
  together, their random generators' states included."""
  import keras
  found = {}
  for trackable in tf.train.TrackableView(checkpoint).descendants():
    if isinstance(trackable, tf.Module):
      generator = getattr(trackable, "generator", None)
      states = [generator.state] if generator is not None else []
      for variable in [*trackable.variables, *states]:
        found[id(variable)] = variable
    elif isinstance(trackable, (tf.Variable, keras.Variable)):
      found[id(trackable)] = trackable
  return list(found.values())
