"""A training run's directory, read and written without TensorFlow.

A run keeps its settings in config.json, its data's identity in data.json,
one JSON metric record per evaluation in metrics.jsonl and its checkpoints
in checkpoints/ (written by `loop.train`). Here: reading the records,
whether a run is finished, whether a configuration may write to a directory
(a new run, or the same run resumed, on the same data), the lock that keeps
one writer per run directory, and the errors that stop a run. The command lines
check their runs with these before TensorFlow loads.
"""

import contextlib
import dataclasses
import errno
import fcntl
import glob
import hashlib
import json
import os
import stat
import tempfile

from absl import logging

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
# The identity of the data the run trains on (check_data).
DATA_FILE = "data.json"
# How much of each end of a data file its identity hashes: an ArrayRecord
# file's header, and its index and footer, with the records about them.
_HASHED_END_BYTES = 1 << 20
CHECKPOINTS_DIR = "checkpoints"
# The file whose lock the run's writer holds (writer_lock).
LOCK_FILE = "writer.lock"
# The names of write_atomically's temporary files, which a kill can leave.
TEMPORARY_FILES = ".*.tmp"


class RunError(ValueError):
  """A run cannot start or go on; the message says why, in one line."""


class RunExistsError(RunError):
  """A new run was asked to write where another run already is."""


class RunInUseError(RunError):
  """Another process is writing to the run's directory."""


@contextlib.contextmanager
def writer_lock(output_dir):
  """Holds the writer lock of run directory `output_dir` (nothing if it is
  empty or None) while the block runs: one writer per run directory.

  An advisory lock (fcntl.flock) on LOCK_FILE in the directory, which must
  exist. The kernel releases it when its process ends, however it ends, so
  a lock file that a killed writer left behind is not held, and the next
  writer takes it. The block's end, however it ends, releases the lock and
  removes the file.

  Raises:
    RunInUseError: another process (or another block of this one) holds
      the lock; the directory is left as it was.
    RunError: the lock file cannot be opened or locked.
  """
  if not output_dir:
    yield
    return
  path = os.path.join(output_dir, LOCK_FILE)
  fd = _locked(path, output_dir)
  try:
    yield
  finally:
    # Removed while still held, so no writer can hold it any more; one that
    # opened it before finds it gone (_locked). A file left behind (removal
    # failed) is harmless: not held.
    with contextlib.suppress(OSError):
      os.unlink(path)
    os.close(fd)


def _locked(path, output_dir):
  """A descriptor of lock file `path`, which this process now holds."""
  while True:
    try:
      # Not through a link: the lock is a file of the run's own.
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as error:
      raise RunError(f"cannot lock {output_dir}: cannot open {path}: "
                     f"{error.strerror or error}") from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      raise RunInUseError(
          f"{output_dir} is in use: another trainer writes to it (it holds "
          f"the lock on {path}); wait for it to end, or choose another "
          "output_dir") from None
    except OSError as error:
      os.close(fd)
      raise RunError(f"cannot lock {path}: {error.strerror or error}") from None
    # The holder before us removes the file as it releases it: a lock on a
    # file no longer at `path` guards nothing, so we open it again.
    try:
      if os.path.samestat(os.fstat(fd), os.stat(path)):
        return fd
    except FileNotFoundError:
      pass
    os.close(fd)


def write_atomically(path, text):
  """Replaces file `path` by one holding `text`, all at once.

  Writes a temporary file beside it, syncs it to disk and renames it over
  `path`: a kill at any moment leaves the old file or the new, never part
  of one.
  """
  directory = os.path.dirname(os.path.abspath(path))
  fd, temporary = tempfile.mkstemp(dir=directory,
                                   prefix=f".{os.path.basename(path)}.",
                                   suffix=".tmp")
  try:
    # mkstemp's file is private (0600); give it open()'s usual mode.
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    with os.fdopen(fd, "w") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temporary, path)
  except BaseException:
    if os.path.exists(temporary):
      os.unlink(temporary)
    raise
  # Makes the rename itself durable.
  directory_fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(directory_fd)
  finally:
    os.close(directory_fd)


def open_regular(path, mode="r", **kwargs):
  """`open(path, mode)` for reading, of a regular file only: OSError for a
  FIFO, which open() would wait on for a writer forever, or a device."""
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
  try:
    kind = os.fstat(fd).st_mode
    if stat.S_ISDIR(kind):
      raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if not stat.S_ISREG(kind):
      raise OSError(errno.EINVAL, "not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **kwargs)
  except BaseException:
    os.close(fd)
    raise


def ensure_writable_dir(path, name="output_dir"):
  """Creates directory `path` if missing; RunError, naming flag `name`,
  unless a file can be created in it."""
  if os.path.exists(path) and not os.path.isdir(path):
    raise RunError(f"{name} {path} is a file, not a directory")
  try:
    os.makedirs(path, exist_ok=True)
    tempfile.TemporaryFile(dir=path).close()
  except OSError as error:
    raise RunError(f"cannot write to {name} {path}: "
                   f"{error.strerror or error}") from None


def ensure_writable_file(path, name):
  """Creates the directory of file `path` if missing; RunError, naming flag
  `name`, unless `write_atomically` can replace the file there: `path` a
  directory, or not a regular file, or in a directory where no file can be
  created."""
  if os.path.isdir(path):
    raise RunError(f"{name} {path} is a directory, not a file")
  if os.path.lexists(path) and not os.path.isfile(path):
    raise RunError(f"{name} {path} is not a regular file")
  ensure_writable_dir(os.path.dirname(os.path.abspath(path)),
                      f"the directory of {name}")


def read_metrics(output_dir):
  """The metric records a run wrote to `output_dir`, oldest first.

  A last line cut short (by a kill while an older version appended it; the
  trainer now replaces the file whole) is dropped with a warning, and the
  run's next record rewrites the file without it. Any other line that is
  not a record raises RunError, as do records whose steps are negative or
  do not increase (a run records each step once, in order).
  """
  path = os.path.join(output_dir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  try:
    with open_regular(path, encoding="utf-8", errors="replace") as f:
      lines = [
          (number, line) for number, line in enumerate(f, 1) if line.strip()
      ]
  except OSError as error:
    raise RunError(f"cannot read {path}: {error.strerror or error}") from None
  records = []
  for number, line in lines:
    try:
      record = json.loads(line)
    except ValueError:
      record = None
    if not (isinstance(record, dict) and isinstance(record.get("step"), int)):
      if number == lines[-1][0]:
        logging.warning("%s: dropped its last line, %d, cut short: %.60r", path,
                        number, line)
        break
      raise RunError(f"{path} line {number} is not a metric record; move the "
                     "file away to start the run over")
    step = record["step"]
    if step < 0 or records and step <= records[-1]["step"]:
      where = (f"after step {records[-1]['step']}" if records else "first")
      raise RunError(f"{path} line {number} records step {step} {where}: a "
                     "run's records have increasing steps from 0; move the "
                     "file away to start the run over")
    records.append(record)
  return records


class MetricsLog:
  """A run's metric records, kept in memory and in `output_dir`/metrics.jsonl.

  Starts from the records already there up to `keep_until_step` (a resumed
  run redoes those past its checkpoint; -1 keeps none), and rewrites the
  file whole, atomically, at each `append`: a kill leaves the old file or
  the new. With no `output_dir` the records stay in memory.
  """

  def __init__(self, output_dir, keep_until_step):
    self.records = []
    self._path = None
    if output_dir:
      self.records = [
          r for r in read_metrics(output_dir) if r["step"] <= keep_until_step
      ]
      self._path = os.path.join(output_dir, METRICS_FILE)
      # A kill inside write_atomically leaves its temporary file behind.
      for name in os.listdir(output_dir):
        if name.startswith(f".{METRICS_FILE}.") and name.endswith(".tmp"):
          os.unlink(os.path.join(output_dir, name))

  @property
  def last_step(self):
    """The step of the last record, or None."""
    return self.records[-1]["step"] if self.records else None

  def append(self, record):
    self.records.append(record)
    if not self._path:
      return
    try:
      write_atomically(self._path,
                       "".join(json.dumps(r) + "\n" for r in self.records))
    except OSError as error:
      raise RunError(f"cannot write {self._path}: {error.strerror or error}; "
                     "the file keeps the records before step "
                     f"{record['step']}") from None


def file_identity(path):
  """What tells the file at `path` from another: its size, modification
  time and the SHA-256 of its first and last MiB. RunError if it cannot be
  read."""
  try:
    with open_regular(path, "rb") as f:
      size = os.fstat(f.fileno()).st_size
      mtime_ns = os.fstat(f.fileno()).st_mtime_ns
      digest = hashlib.sha256(f.read(_HASHED_END_BYTES))
      if size > _HASHED_END_BYTES:
        f.seek(max(_HASHED_END_BYTES, size - _HASHED_END_BYTES))
        digest.update(f.read())
  except OSError as error:
    raise RunError(f"cannot read {path}: {error.strerror or error}") from None
  return {
      "size": size,
      "mtime_ns": mtime_ns,
      "sha256_of_its_ends": digest.hexdigest()
  }


def data_files_identity(data_path, test_data_path):
  """The identity (check_data) of the data in files `data_path` and
  `test_data_path` (the trainer's --data_path and --test_data_path)."""
  return {
      "data_path": file_identity(data_path),
      "test_data_path": file_identity(test_data_path)
  }


def check_data(output_dir, identity):
  """Raises RunError unless `identity`, that of the data a resumed run
  would train on (a data set's `identity()`), is that of the data the run
  in `output_dir` trained on, as its DATA_FILE says: other data under the
  same name would mix two trainings in one run. A run without the file
  (one from before it was written) is not compared."""
  path = os.path.join(output_dir, DATA_FILE)
  if not os.path.lexists(path):
    return
  try:
    with open_regular(path, encoding="utf-8") as f:
      saved = json.load(f)
  except OSError as error:
    raise RunError(f"cannot read {path}: {error.strerror or error}") from None
  except ValueError:
    raise RunError(f"{path} does not hold a data set's identity; put it back, "
                   "or start over in another output_dir") from None
  changed = _differences(saved, identity)
  if not changed:
    return
  advice = "put back the data it trained on"
  if all(name.endswith("mtime_ns") for name, _, _ in changed):
    advice = ("if the file holds the same records, give it back its time "
              f"(touch -d @{changed[0][1] / 1e9:.9f} FILE)")
  raise RunError(
      f"cannot resume the run in {output_dir}: its data changed since it "
      "began (" + ", ".join(f"{name}: {theirs} then, {ours} now"
                            for name, theirs, ours in changed) +
      f"); {advice}, or start over in another output_dir")


def _differences(theirs, ours, prefix=""):
  """[(name, theirs, ours)] of the leaves where two nested dicts differ."""
  if not (isinstance(theirs, dict) and isinstance(ours, dict)):
    return [] if theirs == ours else [(prefix or "identity", theirs, ours)]
  found = []
  for key in sorted(theirs.keys() | ours.keys(), key=str):
    name = f"{prefix} {key}" if prefix else str(key)
    found += _differences(theirs.get(key), ours.get(key), name)
  return found


def write_data_identity(output_dir, identity):
  """Writes `identity` (check_data) to the run's DATA_FILE."""
  path = os.path.join(output_dir, DATA_FILE)
  try:
    write_atomically(path, json.dumps(identity, indent=1, sort_keys=True))
  except OSError as error:
    raise RunError(f"cannot write {path}: {error.strerror or error}") from None


# Beside a checkpoint's files (prefix.index, prefix.data-*), the SHA-256 of
# them all, written once they are (checkpoint_digest).
DIGEST_SUFFIX = ".sha256"


def checkpoint_digest(prefix):
  """The SHA-256 of the files of the checkpoint at `prefix` (its index and
  data shards, by name), as hex; OSError if one cannot be read."""
  digest = hashlib.sha256()
  names = [prefix + ".index"] + sorted(
      glob.glob(glob.escape(prefix) + ".data-?????-of-?????"))
  for name in names:
    digest.update(os.path.basename(name).encode() + b"\0")
    with open_regular(name, "rb") as f:
      while chunk := f.read(1 << 24):
        digest.update(chunk)
  return digest.hexdigest()


def record_checkpoint_digest(prefix):
  """Writes `checkpoint_digest(prefix)` beside the checkpoint, and removes
  the digests of checkpoints that are gone (its manager keeps two) and the
  temporary files of digests a kill cut short."""
  write_atomically(prefix + DIGEST_SUFFIX, checkpoint_digest(prefix) + "\n")
  directory = glob.escape(os.path.dirname(prefix))
  stale = [
      path for path in glob.glob(directory + "/*" + DIGEST_SUFFIX)
      if not os.path.exists(path[:-len(DIGEST_SUFFIX)] + ".index")
  ]
  for path in stale + glob.glob(directory + f"/.*{DIGEST_SUFFIX}.*.tmp"):
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


def check_checkpoint_digest(prefix):
  """RunError, naming the checkpoint at `prefix`, unless its files are
  those its run wrote: their SHA-256 is the one recorded beside them. A
  checkpoint without a recorded digest (written before digests were, or
  whose digest a kill cut off) is not compared."""
  path = prefix + DIGEST_SUFFIX
  if not os.path.lexists(path):
    return
  try:
    with open_regular(path, encoding="ascii", errors="replace") as f:
      recorded = f.read().strip()
    found = checkpoint_digest(prefix)
  except OSError as error:
    raise RunError(
        f"cannot resume from {prefix}: cannot read "
        f"{error.filename or path}: {error.strerror or error}") from None
  if found != recorded:
    raise RunError(
        f"cannot resume from {prefix}: its files are not those the run "
        f"wrote (their SHA-256 is not the one in {path}), so they were "
        "edited or damaged; resume from a checkpoint the run wrote, or "
        "start over in another output_dir")


def check_checkpoints_dir(output_dir):
  """RunError unless `output_dir`'s checkpoints/ is a directory or absent."""
  path = os.path.join(output_dir, CHECKPOINTS_DIR)
  if os.path.lexists(path) and not os.path.isdir(path):
    kind = "a dangling link" if os.path.islink(path) else "not a directory"
    raise RunError(
        f"{path} is {kind}, so the run's checkpoints cannot be read or "
        "written; move it away (and, to start over, the whole output_dir)")


def check_regular_files(paths, what):
  """RunError, naming `what` (a checkpoint), unless each of `paths` that
  exists is a regular file: TensorFlow's readers would wait forever on a
  FIFO's writer."""
  for path in paths:
    if os.path.lexists(path) and not os.path.isfile(path):
      raise RunError(f"cannot resume from {what}: {path} is not a regular "
                     "file")


def holds_checkpoints(output_dir):
  """Whether `output_dir`'s checkpoints/ holds anything (or is not a
  folder) but the temporary folders of a save cut short (TensorFlow's
  `<checkpoint>_temp`, which a kill can leave), which hold no checkpoint."""
  path = os.path.join(output_dir, CHECKPOINTS_DIR)
  if not os.path.lexists(path):
    return False
  if not os.path.isdir(path):
    return True
  return any(not name.endswith("_temp") for name in os.listdir(path))


def check_resumable(output_dir):
  """Raises RunError unless `output_dir` holds a run to resume (its
  checkpoints/ or metrics.jsonl): --resume never starts a run over."""
  if not os.path.isdir(output_dir):
    raise RunError(f"cannot resume: {output_dir} does not exist; leave out "
                   "--resume to start a new run there")
  if not (holds_checkpoints(output_dir) or read_metrics(output_dir)):
    raise RunError(f"cannot resume: {output_dir} holds no run (neither "
                   "checkpoints/ nor metrics.jsonl); leave out --resume to "
                   "start a new run there")


def is_complete(output_dir, steps):
  """Whether the run in `output_dir` has recorded its metrics at `steps`."""
  records = read_metrics(output_dir)
  return bool(records) and records[-1]["step"] >= steps


# Fields a resumed run may change: where it reads and writes, how long it is
# (unless a schedule reads its length: `check_output_dir`), and how many
# steps a call runs (which does not change the results). deterministic is
# not one: op determinism picks other kernels, whose results differ in the
# last bit.
_RESUMABLE_CHANGES = {
    "data_dir", "output_dir", "resume", "steps", "epochs",
    "steps_per_execution", "cluster_timeout"
}


def same_run(theirs, ours):
  """Whether two runs' settings (config.json's dicts) are those of one run,
  up to the fields a resumption may change (where it writes, its length)."""
  return all(
      theirs.get(name) == ours.get(name)
      for name in theirs.keys() | ours.keys()
      if name not in _RESUMABLE_CHANGES)


def check_output_dir(config):
  """Raises RunExistsError unless `config` may write to its output_dir.

  A new run needs a directory without a run; a resumed one, a run of the
  same configuration (config.json), up to the fields a resumption may
  change, and of the same length where a schedule reads it
  (`TrainConfig.schedules_over_length`): a run without its config.json is
  not resumed, as its settings cannot be compared.
  """
  if not config.output_dir:
    return
  # Read even beside checkpoints: records that are not a run's are refused
  # before the run writes anything.
  records = read_metrics(config.output_dir)
  has_run = holds_checkpoints(config.output_dir) or records
  if has_run and not config.resume:
    raise RunExistsError(f"{config.output_dir} already holds a run; resume "
                         "it or choose another output_dir")
  path = os.path.join(config.output_dir, CONFIG_FILE)
  if config.resume and (has_run or os.path.lexists(path)):
    saved = _saved_settings(path, config.output_dir)
    ours = dataclasses.asdict(config)
    # A setting newer than the saved run had its default there.
    theirs = {
        field.name: saved.get(field.name, field.default)
        for field in dataclasses.fields(config)
    }
    changed = sorted(name for name in ours.keys() - _RESUMABLE_CHANGES
                     if theirs[name] != ours[name])
    if changed:
      raise RunExistsError(
          f"{config.output_dir} holds a run with other settings (" +
          ", ".join(f"{name}: {theirs[name]!r} there, {ours[name]!r} here"
                    for name in changed) + "); choose another output_dir")
    over_length = config.schedules_over_length()
    if over_length and _length(theirs) != _length(ours):
      there, here = (
          " ".join(map(str, _length(settings))) for settings in (theirs, ours))
      verb = "follows" if len(over_length) == 1 else "follow"
      raise RunExistsError(
          f"cannot resume {config.output_dir} with another length ({there} "
          f"there, {here} here): its {' and '.join(over_length)} {verb} the "
          "run's length; resume with the run's own, or choose another "
          "output_dir")


def _length(settings):
  """A run's length as its settings (a dict) give it: ("epochs", epochs)
  where set, else ("steps", steps)."""
  if settings["epochs"] is not None:
    return "epochs", settings["epochs"]
  return "steps", settings["steps"]


def _saved_settings(path, output_dir):
  """The settings dict in config.json `path`, or RunExistsError."""
  if not os.path.lexists(path):
    raise RunExistsError(
        f"cannot resume: {path} is missing, so the settings of the run in "
        f"{output_dir} cannot be checked against these; put it back, or "
        "choose another output_dir to start over")
  try:
    with open_regular(path, encoding="utf-8", errors="replace") as f:
      saved = json.load(f)
  except OSError as error:
    raise RunExistsError(
        f"cannot read {path}: {error.strerror or error}") from None
  except ValueError:
    saved = None
  if not isinstance(saved, dict):
    raise RunExistsError(f"{path} does not hold a run's settings; choose "
                         "another output_dir")
  return saved
