"""A study's runs carried between machines that keep no files.

A lent device loses its disk when it is given back, and what comes back from
it is a few files of at most 16 MiB each. `pack` writes what resuming a
study elsewhere needs as such files: `runs.tar.gz`, the finished runs'
settings and metric records and every other file of the runs directory
(reports, tuning choices) but TensorBoard's and the checkpoints; and one
`cut-<i>.tar.gz` a run that was cut, holding its settings, its data's
identity, its records and its last checkpoint alone. `unpack` puts them into
a runs directory that holds no run yet; there the runner skips the finished
runs, resumes the cut ones from their checkpoints, and starts over a cut run
whose archive did not come back (or that was cut before its first
checkpoint). No TensorFlow here; tf_adasamp.experiment.carry is the command
line.
"""

import fnmatch
import glob
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib

from tf_adasamp.experiment.training import run_files

RUNS_ARCHIVE = "runs.tar.gz"
# Not in runs.tar.gz: TensorBoard's files, not needed to resume (a resumed
# run writes on), and checkpoints (a cut run's travel in its own archive).
_LEFT_OUT = {"tensorboard", run_files.CHECKPOINTS_DIR}
_CUT_ARCHIVES = "cut-*.tar.gz"
# What unpack expands at most, all archives together: a study's records
# take a few MB and a cut run's checkpoint of the paper's CNN about 10 MB,
# of which at most 7 come back from a device (8 files, one the log).
MAX_UNPACKED_BYTES = 256 << 20
# Each member also costs its file system entry: counted as one block.
_BLOCK = 4096
_LATEST = re.compile(r'^model_checkpoint_path: "([^"/]+)"$', re.MULTILINE)


def pack(runs_dir, out_dir, skip=()):
  """Writes the runs of `runs_dir` to `out_dir` as archives.

  Everything is checked before anything is written, and the archives are
  written beside the old ones in `out_dir`, replacing them only once all
  are complete: a refusal or a failure leaves `out_dir` as it was.

  Args:
    runs_dir: the study's runs directory.
    out_dir: where the archives go (not inside `runs_dir`).
    skip: folders of `runs_dir` to leave out (runs that never resume).

  Returns:
    The directories of the cut runs it carries, relative to `runs_dir`.

  Raises:
    ValueError: `runs_dir` is missing or holds nothing to carry; something
      to carry is not a regular file or folder (a link, a FIFO); a run's
      config.json is not a run's settings; a cut run's checkpoint state
      names a checkpoint whose files are missing; `out_dir` is inside
      `runs_dir` or not a folder; or a file cannot be read or written.
      The message names the file.
  """
  _check_given(runs_dir=runs_dir, out_dir=out_dir)
  for name in skip:
    if not name or "/" in name or name in (".", ".."):
      raise ValueError("skip takes folders of the runs directory, by name; "
                       f"got {name!r}")
  runs_dir = os.path.abspath(runs_dir)
  out_dir = os.path.abspath(out_dir)
  real_runs_dir = os.path.realpath(runs_dir)
  if os.path.commonpath([real_runs_dir,
                         os.path.realpath(out_dir)]) == real_runs_dir:
    raise ValueError(f"the archives' folder {out_dir} is inside the runs "
                     f"directory {runs_dir}")
  if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
    raise ValueError(f"the archives' folder {out_dir} is not a directory")
  finished, cut = _plan(runs_dir, set(skip))
  created = _first_missing(out_dir)
  try:
    os.makedirs(out_dir, exist_ok=True)
    staging = tempfile.mkdtemp(dir=out_dir, prefix=".carry-", suffix=".tmp")
    try:
      _write_archive(os.path.join(staging, RUNS_ARCHIVE), finished)
      for i, (_, members) in enumerate(cut):
        _write_archive(os.path.join(staging, f"cut-{i}.tar.gz"), members)
      # All complete: they replace the old archives.
      new = sorted(os.listdir(staging))
      for name in new:
        os.replace(os.path.join(staging, name), os.path.join(out_dir, name))
      for old in glob.glob(os.path.join(out_dir, _CUT_ARCHIVES)):
        if os.path.basename(old) not in new:
          os.unlink(old)
    finally:
      shutil.rmtree(staging, ignore_errors=True)
  except BaseException as error:
    if created:
      shutil.rmtree(created, ignore_errors=True)
    if isinstance(error, OSError):
      raise ValueError(f"cannot pack into {out_dir}: "
                       f"{_reason(error)}") from None
    raise
  return [relative for relative, _ in cut]


def _check_given(**paths):
  """ValueError if a path is empty: it would mean the working directory."""
  for name, path in paths.items():
    if not os.fspath(path):
      raise ValueError(f"{name} is empty; name a folder")


def _plan(runs_dir, skip):
  """What `pack` carries, checked and read without writing anything: the
  (path, name in the archive) pairs of runs.tar.gz, and a (directory,
  pairs) per cut run that has a checkpoint, directories relative to
  `runs_dir`."""
  if not os.path.isdir(runs_dir):
    raise ValueError(f"the runs directory {runs_dir} does not exist or is "
                     "not a directory")
  finished, cut = [], []

  def refuse(error):
    raise ValueError(f"cannot read {_reason(error)}")

  for directory, folders, files in os.walk(runs_dir, onerror=refuse):
    relative = os.path.relpath(directory, runs_dir)
    left_out = _LEFT_OUT | (skip if relative == "." else set())
    folders[:] = sorted(set(folders) - left_out)
    if run_files.CONFIG_FILE in files and _is_cut(directory):
      # Carried whole with its checkpoint, or not at all: a run that has
      # begun resumes only from a checkpoint.
      folders[:] = []
      members = _cut_run_members(runs_dir, relative)
      if members:
        cut.append((relative, members))
      continue
    for name in folders:
      _check_kind(os.path.join(directory, name), directory=True)
    for name in sorted(files):
      if not fnmatch.fnmatch(name, run_files.TEMPORARY_FILES):
        path = os.path.join(directory, name)
        _check_kind(path)
        finished.append((path, os.path.normpath(os.path.join(relative, name))))
  if not finished and not cut:
    raise ValueError(f"the runs directory {runs_dir} holds nothing to carry")
  return finished, cut


def _check_kind(path, directory=False):
  """ValueError unless `path` is a regular file (a folder if `directory`),
  not a link to one: an archive carries no links, FIFOs or devices."""
  mode = os.lstat(path).st_mode
  if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
    kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO"
            if stat.S_ISFIFO(mode) else "not a regular file or directory")
    raise ValueError(f"cannot pack {path}: it is {kind}; move it out of the "
                     "runs directory")


def _is_cut(run_dir):
  """Whether the run in `run_dir` has not recorded its last step; ValueError
  unless its settings (config.json) and records read as a run's."""
  path = os.path.join(run_dir, run_files.CONFIG_FILE)
  _check_kind(path)
  metrics = os.path.join(run_dir, run_files.METRICS_FILE)
  if os.path.lexists(metrics):
    _check_kind(metrics)
  try:
    with open(path, encoding="utf-8") as f:
      settings = json.load(f)
  except OSError as error:
    raise ValueError(f"cannot read {_reason(error)}") from None
  except ValueError:  # not JSON, or not UTF-8
    settings = None
  steps = settings.get("steps") if isinstance(settings, dict) else None
  if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
    raise ValueError(f"cannot pack {path}: it does not hold a run's settings "
                     "(a JSON object with a whole number of steps >= 1)")
  return not run_files.is_complete(run_dir, steps)


def _last_checkpoint(run_dir):
  """(prefix, file names) of the last checkpoint that the run's state file
  names, checked complete (its index and every data shard), with its
  digest where it has one; None without a state file (the run was cut
  before its first checkpoint)."""
  folder = os.path.join(run_dir, run_files.CHECKPOINTS_DIR)
  state = os.path.join(folder, "checkpoint")
  if not os.path.lexists(state):
    return None
  _check_kind(folder, directory=True)
  _check_kind(state)
  try:
    with open(state, encoding="utf-8") as f:
      latest = _LATEST.search(f.read())
    present = set(os.listdir(folder))
  except (OSError, ValueError) as error:
    raise ValueError(f"cannot read {state}: {_reason(error, state)}") from None
  if not latest:
    raise ValueError(f"cannot pack {state}: it names no checkpoint in its "
                     "folder")
  prefix = latest.group(1)
  shards = re.compile(re.escape(prefix) + r"\.data-\d{5}-of-(\d{5})$")
  counts = {int(m.group(1)) for m in map(shards.match, present) if m}
  count = max(counts, default=1)
  needed = [f"{prefix}.index"
           ] + [f"{prefix}.data-{i:05d}-of-{count:05d}" for i in range(count)]
  missing = [name for name in needed if name not in present]
  if missing:
    raise ValueError(f"cannot pack {state}: it names checkpoint {prefix}, "
                     f"but {os.path.join(folder, missing[0])} is missing")
  # Its recorded digest, which the resumed run checks its files against.
  digest = prefix + run_files.DIGEST_SUFFIX
  if digest in present:
    needed.append(digest)
  for name in needed:
    _check_kind(os.path.join(folder, name))
  return prefix, needed


def _cut_run_members(runs_dir, relative):
  """The (path or bytes, name in the archive) pairs of the cut run at
  `relative`: its settings, its data's identity, its records and, of its
  checkpoints, the last alone with a state file that names it; [] if it
  has no checkpoint."""
  run_dir = os.path.join(runs_dir, relative)
  last = _last_checkpoint(run_dir)
  if not last:
    return []
  prefix, names = last
  members = []
  for name in (run_files.CONFIG_FILE, run_files.DATA_FILE,
               run_files.METRICS_FILE):
    path = os.path.join(run_dir, name)
    if os.path.lexists(path):
      _check_kind(path)
      members.append((path, os.path.join(relative, name)))
  inside = os.path.join(relative, run_files.CHECKPOINTS_DIR)
  state = (f'model_checkpoint_path: "{prefix}"\n'
           f'all_model_checkpoint_paths: "{prefix}"\n').encode()
  members.append((state, os.path.join(inside, "checkpoint")))
  members.extend((os.path.join(run_dir, run_files.CHECKPOINTS_DIR, name),
                  os.path.join(inside, name)) for name in names)
  return members


def _write_archive(path, members):
  """A gzip'd tar file at `path` of `members`: (file path or bytes, name in
  the archive) pairs."""
  with tarfile.open(path, "w:gz") as archive:
    for source, name in members:
      if isinstance(source, bytes):
        info = tarfile.TarInfo(name)
        info.size = len(source)
        archive.addfile(info, io.BytesIO(source))
      else:
        archive.add(source, name, recursive=False)


def _first_missing(path):
  """The topmost folder of `path` (itself included) that does not exist
  yet, or None: what creating `path` creates."""
  missing = None
  while not os.path.lexists(path):
    missing = path
    path = os.path.dirname(path)
  return missing


def _reason(error, path=None):
  """Why `error` happened, in words, led by the file it names unless that
  is `path` (which the message names already)."""
  if isinstance(error, OSError) and error.strerror:
    if error.filename and os.fspath(error.filename) != os.fspath(path or ""):
      return f"{error.filename}: {error.strerror}"
    return error.strerror
  return str(error)


def unpack(carried_dir, runs_dir, max_bytes=MAX_UNPACKED_BYTES):
  """Puts `pack`'s archives from `carried_dir` into `runs_dir`.

  Every archive is read and checked whole first, then extracted beside
  `runs_dir`, then moved in: a refusal or a failure leaves `runs_dir` as it
  was. Where `runs_dir` already holds runs (the machine kept them), nothing
  is moved: it is left as it is if it holds every run of the archives, of
  the same settings, at least as far on (its records and checkpoints), and
  refused otherwise, as neither copy may replace the other.

  Args:
    carried_dir: the folder of runs.tar.gz and the cut-<i>.tar.gz.
    runs_dir: the runs directory; what the archives hold must not exist in
      it yet (an earlier report/ is never merged into or nested).
    max_bytes: the most bytes all archives may expand to, each member
      counted with a file system block for its entry.

  Returns:
    Whether it unpacked (False: `runs_dir` holds the archives' runs as far
    on, left as it is).

  Raises:
    ValueError: runs.tar.gz is missing; an archive is damaged, expands
      past `max_bytes`, or holds anything but files and folders, a path out
      of `runs_dir`, or a name twice (in one archive or across two); a name
      it holds exists in `runs_dir`; `runs_dir` is not a directory, or
      holds runs of which one is behind the archives' or missing. The
      message names the file.
  """
  _check_given(carried_dir=carried_dir, runs_dir=runs_dir)
  if max_bytes < 0:
    raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
  if os.path.lexists(runs_dir) and not os.path.isdir(runs_dir):
    kind = "a dangling link" if os.path.islink(runs_dir) else "a file"
    raise ValueError(f"cannot unpack into {runs_dir}: it is {kind}, not a "
                     "directory")
  paths = [os.path.join(carried_dir, RUNS_ARCHIVE)] + sorted(
      glob.glob(os.path.join(carried_dir, _CUT_ARCHIVES)))
  tops = _check_archives(paths, max_bytes)
  if _holds_a_run(runs_dir):
    _check_as_far_on(runs_dir, paths)
    return False
  for name in tops:
    if os.path.lexists(os.path.join(runs_dir, name)):
      raise ValueError(f"cannot unpack into {runs_dir}: "
                       f"{os.path.join(runs_dir, name)} exists, and the "
                       "archives hold it too; move it away or unpack into "
                       "a directory without it")
  # Extracted beside runs_dir (the same file system), then renamed in.
  runs_dir = os.path.abspath(runs_dir)
  created = _first_missing(runs_dir)
  try:
    parent = os.path.dirname(os.path.realpath(runs_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(dir=parent, prefix=".unpack-", suffix=".tmp")
    try:
      for path in paths:
        with tarfile.open(path, "r:gz") as archive:
          # "data" as a second guard: no absolute paths, no "..", no links.
          archive.extractall(staging, filter="data")
      os.makedirs(runs_dir, exist_ok=True)
      _move_all(staging, runs_dir, tops)
    finally:
      shutil.rmtree(staging, ignore_errors=True)
  except BaseException as error:
    if created:
      shutil.rmtree(created, ignore_errors=True)
    if isinstance(error, (OSError, EOFError, zlib.error, tarfile.TarError)):
      raise ValueError(f"cannot unpack into {runs_dir}: "
                       f"{_reason(error)}") from None
    raise
  return True


def _check_archives(paths, max_bytes):
  """The top-level names that the archives at `paths` hold, once every
  member of every archive is checked: files and folders only, inside the
  runs directory, no file name twice or also a folder's, `max_bytes` in
  all. ValueError naming the archive otherwise."""
  files, folders = {}, set()
  total = 0
  for path in paths:
    try:
      # Opening a FIFO would wait for a writer.
      if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError("it is not a regular file")
      with tarfile.open(path, "r:gz") as archive:
        for member in archive:
          name = _member_name(member)
          # Headers come before the data: a bomb stops here, unread.
          total += member.size + _BLOCK
          if total > max_bytes:
            raise ValueError(f"the archives expand past {max_bytes} bytes "
                             f"(at {member.name})")
          folders.update(_parents(name))
          if member.isdir():
            folders.add(name)
          elif name in files:
            earlier = files[name]
            where = " twice" if earlier == path else f", also in {earlier}"
            raise ValueError(f"it holds {name}{where}")
          else:
            files[name] = path
    except (OSError, EOFError, zlib.error, tarfile.TarError,
            ValueError) as error:
      raise ValueError(f"cannot unpack {path}: "
                       f"{_reason(error, path)}") from None
  both = sorted(folders & files.keys())
  if both:
    raise ValueError(f"cannot unpack {files[both[0]]}: {both[0]} is a file "
                     "in it and a folder in the archives")
  return sorted({name.split("/")[0] for name in [*files, *folders] if name})


def _member_name(member):
  """The member's name normalised ("a/./b/" as "a/b"); ValueError unless
  it is a file or a folder inside the runs directory."""
  if not (member.isdir() or member.isfile()) or member.issparse():
    raise ValueError(f"{member.name} is not a regular file or folder")
  if member.size < 0:  # base-256 headers can say so; it would undercount
    raise ValueError(f"{member.name} has a negative size")
  parts = [part for part in member.name.split("/") if part not in ("", ".")]
  if member.name.startswith("/") or ".." in parts or (not parts and
                                                      not member.isdir()):
    raise ValueError(f"{member.name} is not a path inside the runs directory")
  return "/".join(parts)


def _parents(name):
  """The folders that hold the member `name` ("a/b/c": "a" and "a/b")."""
  parts = name.split("/")
  return {"/".join(parts[:i]) for i in range(1, len(parts))}


def _move_all(staging, runs_dir, names):
  """Renames `names` from `staging` into `runs_dir`, all or none: a failure
  moves back those already moved."""
  moved = []
  try:
    for name in names:
      os.rename(os.path.join(staging, name), os.path.join(runs_dir, name))
      moved.append(name)
  except OSError:
    for name in moved:
      os.rename(os.path.join(runs_dir, name), os.path.join(staging, name))
    raise


def _check_as_far_on(runs_dir, paths):
  """ValueError unless `runs_dir` holds each run of the archives at `paths`
  (checked), with the same settings, its records and last checkpoint at
  least as far on."""
  for path in paths:
    with tarfile.open(path, "r:gz") as archive:
      runs = _runs_in(archive)
    for relative, (settings, carried) in sorted(runs.items()):
      run_dir = os.path.join(runs_dir, relative)
      where = f"cannot unpack into {runs_dir}: it holds runs already, and "
      advice = ("; move it away, or unpack into a directory without runs")
      if not os.path.isfile(os.path.join(run_dir, run_files.CONFIG_FILE)):
        raise ValueError(f"{where}not {relative}, which {path} holds{advice}")
      if not run_files.same_run(
          _settings(_read_or_none(os.path.join(
              run_dir, run_files.CONFIG_FILE))), _settings(settings)):
        raise ValueError(f"{where}its {relative} has other settings than "
                         f"the one {path} holds{advice}")
      here = _progress(
          _read_or_none(os.path.join(run_dir, run_files.METRICS_FILE)),
          _read_or_none(
              os.path.join(run_dir, run_files.CHECKPOINTS_DIR, "checkpoint")))
      if any(ours < theirs for ours, theirs in zip(here, carried)):
        raise ValueError(
            f"{where}its {relative} is behind the one {path} holds (last "
            f"record and checkpoint at steps {here} here, {carried} there)"
            f"{advice}")


def _runs_in(archive):
  """{run directory: (its config.json's bytes, _progress)} of the runs
  that `archive` (an open, checked tarfile) holds."""
  members = {_member_name(member): member for member in archive}
  runs = {}
  for name in members:
    directory, _, base = name.rpartition("/")
    if base != run_files.CONFIG_FILE:
      continue

    def read(relative, directory=directory):
      member = members.get(f"{directory}/{relative}".lstrip("/"))
      return archive.extractfile(member).read() if member else None

    runs[directory] = (read(run_files.CONFIG_FILE),
                       _progress(
                           read(run_files.METRICS_FILE),
                           read(f"{run_files.CHECKPOINTS_DIR}/checkpoint")))
  return runs


def _progress(metrics, checkpoint_state):
  """(the last record's step, the last checkpoint's) of a run, from its
  metrics.jsonl's and its checkpoint state's bytes (None: absent); -1 for
  none."""
  last_record = -1
  for line in (metrics or b"").decode("utf-8", "replace").splitlines():
    try:
      last_record = max(last_record, int(json.loads(line)["step"]))
    except (ValueError, TypeError, KeyError):
      continue  # a line cut short
  latest = _LATEST.search((checkpoint_state or b"").decode("utf-8", "replace"))
  step = re.search(r"-(\d+)$", latest.group(1)) if latest else None
  return last_record, int(step.group(1)) if step else -1


def _settings(text):
  """The settings dict of a config.json's bytes; {} if it holds none."""
  try:
    settings = json.loads(text)
  except (TypeError, ValueError):
    return {}
  return settings if isinstance(settings, dict) else {}


def _read_or_none(path):
  try:
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def _holds_a_run(runs_dir):
  """Whether a run's settings (config.json) lie anywhere in `runs_dir`."""
  return any(
      run_files.CONFIG_FILE in files for _, _, files in os.walk(runs_dir))
