"""A study's runs carried between machines that keep no files.

A lent device loses its disk when it is given back, and what comes back from
it is a few files of at most 16 MiB each. `pack` writes what resuming a
study elsewhere needs as such files: `runs.tar.gz`, the finished runs'
settings and metric records and every other file of the runs directory
(reports, tuning choices) but TensorBoard's and the checkpoints; and one
`cut-<i>.tar.gz` a run that was cut, holding its settings, its records and
its last checkpoint alone. `unpack` puts them into a runs directory that
holds no run yet; there the runner skips the finished runs, resumes the cut
ones from their checkpoints, and starts over a cut run whose archive did not
come back (or that was cut before its first checkpoint). No TensorFlow
here.

  python -m benchmarks.carry pack --runs_dir=RUNS --carry_dir=OUT
      [--skip=FOLDER,...]
  python -m benchmarks.carry unpack --carry_dir=OUT --runs_dir=RUNS

A refusal is one line on stderr and exit status 1.
"""

import argparse
import fnmatch
import glob
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zlib

from tf_adasamp.experiment import run_files

RUNS_ARCHIVE = "runs.tar.gz"
# Not in runs.tar.gz: TensorBoard's files, not needed to resume (a resumed
# run writes on), and checkpoints (a cut run's travel in its own archive).
_LEFT_OUT = {"tensorboard", run_files.CHECKPOINTS_DIR}
_CUT_ARCHIVES = "cut-*.tar.gz"
_LATEST = re.compile(r'^model_checkpoint_path: "([^"/]+)"$', re.MULTILINE)


def pack(runs_dir, out_dir, skip=()):
  """Writes runs.tar.gz and a cut-<i>.tar.gz per cut run to `out_dir`;
  returns the directories of the cut runs it carries, relative to
  `runs_dir`.

  Args:
    runs_dir: the study's runs directory.
    out_dir: where the archives go (not inside `runs_dir`).
    skip: folders of `runs_dir` to leave out (runs that never resume).
  """
  runs_dir = os.path.abspath(runs_dir)
  out_dir = os.path.abspath(out_dir)
  if os.path.commonpath([runs_dir, out_dir]) == runs_dir:
    raise ValueError(f"the archives' folder {out_dir} is inside the runs "
                     f"directory {runs_dir}")
  os.makedirs(out_dir, exist_ok=True)
  for old in glob.glob(os.path.join(out_dir, _CUT_ARCHIVES)):
    os.unlink(old)
  cut = []
  with tarfile.open(os.path.join(out_dir, RUNS_ARCHIVE), "w:gz") as archive:
    for directory, folders, files in os.walk(runs_dir):
      relative = os.path.relpath(directory, runs_dir)
      left_out = _LEFT_OUT | (set(skip) if relative == "." else set())
      folders[:] = sorted(set(folders) - left_out)
      if _is_cut(directory):
        # Carried whole with its checkpoint, or not at all: a run that has
        # begun resumes only from a checkpoint.
        if _last_checkpoint(directory):
          cut.append(relative)
        continue
      for name in sorted(files):
        if not fnmatch.fnmatch(name, run_files.TEMPORARY_FILES):
          archive.add(os.path.join(directory, name),
                      os.path.normpath(os.path.join(relative, name)))
  for i, relative in enumerate(cut):
    _pack_cut_run(runs_dir, relative, os.path.join(out_dir, f"cut-{i}.tar.gz"))
  return cut


def unpack(carried_dir, runs_dir):
  """Extracts `pack`'s archives from `carried_dir` into `runs_dir`, unless
  `runs_dir` already holds a run (newer than the archives: the machine kept
  them); returns whether it did.

  Raises:
    ValueError: runs.tar.gz is missing, or an archive is damaged or names
      a path out of `runs_dir`; then nothing is written to `runs_dir`.
  """
  if _holds_a_run(runs_dir):
    return False
  paths = [os.path.join(carried_dir, RUNS_ARCHIVE)] + sorted(
      glob.glob(os.path.join(carried_dir, _CUT_ARCHIVES)))
  # All archives into a folder beside runs_dir first, then moved in whole.
  parent = os.path.dirname(os.path.abspath(runs_dir))
  os.makedirs(parent, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=parent) as staging:
    for path in paths:
      try:
        with tarfile.open(path, "r:gz") as archive:
          # "data": no absolute paths, no ".." and no links out of staging.
          archive.extractall(staging, filter="data")
      except (OSError, EOFError, zlib.error, tarfile.TarError) as error:
        raise ValueError(f"cannot unpack {path}: {error}") from None
    os.makedirs(runs_dir, exist_ok=True)
    for name in os.listdir(staging):
      shutil.move(os.path.join(staging, name), os.path.join(runs_dir, name))
  return True


def _is_cut(directory):
  """Whether `directory` holds a run that has not recorded its last step."""
  path = os.path.join(directory, run_files.CONFIG_FILE)
  if not os.path.exists(path):
    return False
  with open(path, encoding="utf-8") as f:
    steps = json.load(f)["steps"]
  return not run_files.is_complete(directory, steps)


def _last_checkpoint(run_dir):
  """The prefix of the run's last checkpoint (its state file's), or None."""
  try:
    with open(os.path.join(run_dir, run_files.CHECKPOINTS_DIR, "checkpoint"),
              encoding="utf-8") as f:
      latest = _LATEST.search(f.read())
  except FileNotFoundError:
    return None
  return latest and latest.group(1)


def _pack_cut_run(runs_dir, relative, path):
  """Writes the cut run at `relative` to the archive `path`: its files, and
  of its checkpoints the last alone, with a state file that names it."""
  run_dir = os.path.join(runs_dir, relative)
  prefix = _last_checkpoint(run_dir)
  state = (f'model_checkpoint_path: "{prefix}"\n'
           f'all_model_checkpoint_paths: "{prefix}"\n').encode()
  with tarfile.open(path, "w:gz") as archive:
    for name in (run_files.CONFIG_FILE, run_files.METRICS_FILE):
      if os.path.exists(os.path.join(run_dir, name)):
        archive.add(os.path.join(run_dir, name), os.path.join(relative, name))
    inside = os.path.join(relative, run_files.CHECKPOINTS_DIR)
    info = tarfile.TarInfo(os.path.join(inside, "checkpoint"))
    info.size = len(state)
    archive.addfile(info, io.BytesIO(state))
    for name in sorted(
        os.listdir(os.path.join(run_dir, run_files.CHECKPOINTS_DIR))):
      if name.startswith(prefix + "."):
        archive.add(os.path.join(run_dir, run_files.CHECKPOINTS_DIR, name),
                    os.path.join(inside, name))


def _holds_a_run(runs_dir):
  return any(
      run_files.CONFIG_FILE in files for _, _, files in os.walk(runs_dir))


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.carry",
                                   description=__doc__.splitlines()[0])
  commands = parser.add_subparsers(dest="command", required=True)
  packing = commands.add_parser("pack", help=pack.__doc__.splitlines()[0])
  packing.add_argument("--runs_dir", required=True)
  packing.add_argument("--carry_dir",
                       required=True,
                       help="the folder to write the archives to")
  packing.add_argument("--skip",
                       default="",
                       help="comma-separated folders of --runs_dir to leave "
                       "out (runs that never resume)")
  unpacking = commands.add_parser("unpack", help=unpack.__doc__.splitlines()[0])
  unpacking.add_argument("--carry_dir",
                         required=True,
                         help="the folder to read the archives from")
  unpacking.add_argument("--runs_dir", required=True)
  args = parser.parse_args(argv)
  try:
    if args.command == "pack":
      cut = pack(args.runs_dir,
                 args.carry_dir,
                 skip=tuple(filter(None, args.skip.split(","))))
      print(f"packed {args.runs_dir} into {args.carry_dir}, with the "
            f"checkpoints of {len(cut)} cut runs")
    elif unpack(args.carry_dir, args.runs_dir):
      print(f"unpacked {args.carry_dir} into {args.runs_dir}")
    else:
      print(f"{args.runs_dir} already holds runs, newer than "
            f"{args.carry_dir}: left as it is")
  except (ValueError, OSError) as error:
    sys.exit(f"{parser.prog}: {error}")


if __name__ == "__main__":
  main()
