"""Packing and unpacking runs (tf_adasamp.experiment.study.carry)."""

import gzip
import io
import os
import shutil
import tarfile

import pytest

from carried_runs import config
from carried_runs import copied
from carried_runs import files
from carried_runs import snapshot
from run_records import without_clocks
from tf_adasamp.experiment.study import carry
from tf_adasamp.experiment.training import loop
from tf_adasamp.experiment.training import run_files


def test_a_carried_cut_run_resumes_from_its_last_checkpoint_exactly(
    study, digits, tmp_path):
  runs, whole = study
  assert without_clocks(run_files.read_metrics(
      runs / "B" / "seed1")) == without_clocks(whole[:3])
  assert carry.pack(runs, tmp_path / "out") == ["B/seed1"]
  assert files(tmp_path / "out") == ["cut-0.tar.gz", "runs.tar.gz"]

  moved = tmp_path / "elsewhere"
  assert carry.unpack(tmp_path / "out", moved)
  # The finished run's records, settings and data's identity, no checkpoint
  # of it; the cut run's last checkpoint alone, with its data's identity.
  carried = files(moved)
  assert [name for name in carried if name.startswith("A/")] == [
      "A/seed0/config.json", "A/seed0/data.json", "A/seed0/metrics.jsonl"
  ]
  assert "B/seed1/data.json" in carried
  assert [name for name in carried if "checkpoints" in name] == [
      "B/seed1/checkpoints/checkpoint",
      "B/seed1/checkpoints/ckpt-4.data-00000-of-00001",
      "B/seed1/checkpoints/ckpt-4.index", "B/seed1/checkpoints/ckpt-4.sha256"
  ]
  assert "tuning.json" in carried
  assert run_files.is_complete(moved / "A" / "seed0", 6)
  resumed = loop.train(config(moved / "B" / "seed1", seed=1), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)
  assert without_clocks(run_files.read_metrics(
      moved / "B" / "seed1")) == without_clocks(whole)


def test_a_cut_run_whose_checkpoint_did_not_come_back_starts_over(
    study, digits, tmp_path):
  runs, whole = study
  carry.pack(runs, tmp_path / "out")
  os.unlink(tmp_path / "out" / "cut-0.tar.gz")
  moved = tmp_path / "elsewhere"
  assert carry.unpack(tmp_path / "out", moved)
  assert not os.path.exists(moved / "B")
  resumed = loop.train(config(moved / "B" / "seed1", seed=1), data=digits)
  assert without_clocks(resumed) == without_clocks(whole)


def test_a_run_cut_before_its_first_checkpoint_is_left_to_start_over(
    study, digits, tmp_path):
  runs, whole = study
  copy = tmp_path / "runs"
  shutil.copytree(runs, copy)
  # Killed as it began: its settings written, no checkpoint yet.
  (copy / "C" / "seed1").mkdir(parents=True)
  shutil.copy(runs / "B" / "seed1" / "config.json", copy / "C" / "seed1")
  assert carry.pack(copy, tmp_path / "out") == ["B/seed1"]
  moved = tmp_path / "elsewhere"
  carry.unpack(tmp_path / "out", moved)
  assert not os.path.exists(moved / "C")
  assert without_clocks(
      loop.train(config(moved / "C" / "seed1", seed=1),
                 data=digits)) == without_clocks(whole)


def test_pack_leaves_out_tensorboard_temporaries_and_skipped_folders(
    study, tmp_path):
  runs, _ = study
  copy = tmp_path / "runs"
  shutil.copytree(runs, copy)
  (copy / "A" / "seed0" / ".metrics.jsonl.x.tmp").write_text("cut")
  (copy / "measure").mkdir()
  (copy / "measure" / "config.json").write_text("{}")
  cut = carry.pack(copy, tmp_path / "out", skip=("measure",))
  assert cut == ["B/seed1"]
  with tarfile.open(tmp_path / "out" / carry.RUNS_ARCHIVE) as archive:
    names = archive.getnames()
  assert any(name.startswith("A/seed0/tensorboard") for name in files(copy))
  assert not [
      name for name in names if "tensorboard" in name or name.endswith(".tmp")
      or "checkpoints" in name or name.startswith(("measure", "B/"))
  ]


@pytest.mark.parametrize("spelling", ["path", "link"])
def test_pack_refuses_to_write_inside_the_runs_directory(
    study, tmp_path, spelling):
  runs, _ = study
  out = runs / "out"
  if spelling == "link":
    out = tmp_path / "out"
    os.symlink(runs, out)
  before = files(runs)
  with pytest.raises(ValueError, match="inside the runs directory"):
    carry.pack(runs, out)
  assert files(runs) == before


def test_unpack_leaves_a_runs_directory_that_holds_its_runs_as_far_on(
    study, digits, tmp_path):
  runs, _ = study
  carry.pack(runs, tmp_path / "out")
  kept = copied(runs, tmp_path)  # the machine kept its runs
  before = snapshot(kept)
  assert not carry.unpack(tmp_path / "out", kept)
  assert snapshot(kept) == before
  # Further on than the archives: the cut run resumed to its end.
  loop.train(config(kept / "B" / "seed1", seed=1), data=digits)
  before = snapshot(kept)
  assert not carry.unpack(tmp_path / "out", kept)
  assert snapshot(kept) == before


def behind(run_dir):
  """Takes the run in `run_dir` back to its checkpoint and record of step
  2, as a copy of it taken earlier would be."""
  metrics = run_dir / run_files.METRICS_FILE
  metrics.write_text("".join(metrics.read_text().splitlines(True)[:2]))
  (run_dir / "checkpoints" / "checkpoint").write_text(
      'model_checkpoint_path: "ckpt-2"\n'
      'all_model_checkpoint_paths: "ckpt-2"\n')


@pytest.mark.parametrize("older,message", [
    (lambda kept: behind(kept / "B" / "seed1"),
     "its B/seed1 is behind the one {out}/cut-0.tar.gz holds (last record "
     "and checkpoint at steps (2, 2) here, (4, 4) there)"),
    (lambda kept: shutil.rmtree(kept / "A"),
     "not A/seed0, which {out}/runs.tar.gz holds"),
    (lambda kept: (kept / "A" / "seed0" / "config.json").write_text("{}"),
     "its A/seed0 has other settings than the one {out}/runs.tar.gz holds"),
])
def test_unpack_refuses_a_runs_directory_that_holds_other_or_older_runs(
    study, tmp_path, older, message):
  runs, _ = study
  out = tmp_path / "out"
  carry.pack(runs, out)
  kept = copied(runs, tmp_path)
  older(kept)
  before = snapshot(kept)
  with pytest.raises(ValueError) as raised:
    carry.unpack(out, kept)
  assert str(raised.value) == (
      f"cannot unpack into {kept}: it holds runs already, and " +
      message.format(out=out) +
      "; move it away, or unpack into a directory without runs")
  assert snapshot(kept) == before


def add_archive(path, *members):
  """Writes the gzip'd tar file `path` of `members`: (TarInfo, bytes)."""
  with tarfile.open(path, "w:gz") as archive:
    for info, data in members:
      info.size = len(data)
      archive.addfile(info, io.BytesIO(data))


def member(name, kind=tarfile.REGTYPE, data=b"x"):
  info = tarfile.TarInfo(name)
  info.type = kind
  info.linkname = "../../etc/hostname" if kind == tarfile.SYMTYPE else ""
  return info, data


@pytest.mark.parametrize(
    "damage", ["escape", "link", "fifo", "negative_size", "truncate"])
def test_unpack_refuses_a_bad_archive_and_writes_nothing(
    study, tmp_path, damage):
  runs, _ = study
  carried = tmp_path / "carried"
  carry.pack(runs, carried)
  if damage == "escape":
    add_archive(carried / "cut-1.tar.gz", member("../escaped"))
  elif damage == "link":
    add_archive(carried / "cut-1.tar.gz", member("C/link", tarfile.SYMTYPE,
                                                 b""))
  elif damage == "fifo":
    add_archive(carried / "cut-1.tar.gz", member("C/pipe", tarfile.FIFOTYPE,
                                                 b""))
  elif damage == "negative_size":
    # GNU's base-256 size field holds negative numbers; counted as they
    # are, they would let the next members past the cap.
    info = tarfile.TarInfo("C/negative")
    info.size = -carry.MAX_UNPACKED_BYTES
    with gzip.open(carried / "cut-1.tar.gz", "wb") as f:
      f.write(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(1024))
  else:
    whole = (carried / "cut-0.tar.gz").read_bytes()
    (carried / "cut-0.tar.gz").write_bytes(whole[:len(whole) // 2])
  with pytest.raises(ValueError, match="cannot unpack .*cut-"):
    carry.unpack(carried, tmp_path / "runs")
  assert os.listdir(tmp_path) == ["carried"]


@pytest.mark.parametrize(
    "settings",
    ["not JSON", "{}", '{"steps": "6"}', '{"steps": true}', "[6]", "\xff"])
def test_a_refused_pack_leaves_the_earlier_archives_as_they_were(
    study, tmp_path, settings):
  runs, _ = study
  copy = copied(runs, tmp_path)
  out = tmp_path / "out"
  carry.pack(copy, out)
  before = snapshot(out)
  (copy / "C" / "seed0").mkdir(parents=True)
  (copy / "C" / "seed0" / "config.json").write_text(settings,
                                                    encoding="latin-1")
  with pytest.raises(ValueError,
                     match="cannot pack .*C/seed0/config.json: it does not "
                     "hold a run's settings"):
    carry.pack(copy, out)
  assert snapshot(out) == before


def test_a_pack_that_fails_while_writing_leaves_the_earlier_archives(
    study, tmp_path, monkeypatch):
  runs, _ = study
  out = tmp_path / "out"
  carry.pack(runs, out)
  before = snapshot(out)
  write = carry._write_archive

  def disk_fills_at_the_cut_archive(path, members):
    if "cut-" in path:
      raise OSError(28, "No space left on device", path)
    write(path, members)

  monkeypatch.setattr(carry, "_write_archive", disk_fills_at_the_cut_archive)
  with pytest.raises(ValueError, match="cut-0.tar.gz: No space left"):
    carry.pack(runs, out)
  assert snapshot(out) == before
  # A folder it made for the archives goes too.
  with pytest.raises(ValueError, match="No space left"):
    carry.pack(runs, tmp_path / "new" / "out")
  assert not os.path.exists(tmp_path / "new")


@pytest.mark.parametrize("runs_dir", ["missing", "empty", "skipped", "file"])
def test_pack_refuses_a_missing_or_empty_runs_directory(tmp_path, runs_dir):
  path = tmp_path / "runs"
  if runs_dir != "missing":
    (path / "measure" / "p1").mkdir(parents=True)
    (path / "measure" / "p1" / "config.json").write_text('{"steps": 1}')
  if runs_dir == "empty":
    shutil.rmtree(path / "measure")
  if runs_dir == "file":
    shutil.rmtree(path)
    path.write_text("")
  with pytest.raises(ValueError,
                     match=f"the runs directory {path} (does not exist|"
                     "holds nothing to carry)"):
    carry.pack(path, tmp_path / "out", skip=("measure",))
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("empty", ["runs_dir", "out_dir", "carried_dir"])
def test_an_empty_path_is_refused_not_taken_as_the_working_directory(
    study, tmp_path, monkeypatch, empty):
  runs, _ = study
  carry.pack(runs, tmp_path / "carried")
  monkeypatch.chdir(tmp_path)
  before = snapshot(tmp_path)
  with pytest.raises(ValueError, match=f"^{empty} is empty; name a folder$"):
    if empty == "carried_dir":
      carry.unpack("", tmp_path / "runs")
    elif empty == "runs_dir":
      carry.unpack(tmp_path / "carried", "")
    else:
      carry.pack(runs, "")
  with pytest.raises(ValueError, match="^runs_dir is empty"):
    carry.pack("", tmp_path / "out")
  assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", [
    "link_to_a_system_file", "link_to_a_folder", "fifo",
    "link_as_a_cut_runs_records", "link_as_a_cut_runs_checkpoints"
])
def test_pack_refuses_a_link_or_a_fifo_and_writes_nothing(
    study, tmp_path, kind):
  runs, _ = study
  copy = copied(runs, tmp_path)
  cut_run = copy / "B" / "seed1"
  if kind == "link_to_a_system_file":
    target = copy / "A" / "seed0" / "notes.txt"
    os.symlink("/etc/hostname", target)
  elif kind == "link_to_a_folder":
    target = copy / "etc"
    os.symlink("/etc", target)
  elif kind == "fifo":
    target = copy / "A" / "seed0" / "pipe"
    os.mkfifo(target)
  elif kind == "link_as_a_cut_runs_records":
    target = cut_run / "metrics.jsonl"
    os.rename(target, tmp_path / "metrics.jsonl")
    os.symlink(tmp_path / "metrics.jsonl", target)
  else:
    target = cut_run / "checkpoints"
    os.rename(target, tmp_path / "checkpoints")
    os.symlink(tmp_path / "checkpoints", target)
  with pytest.raises(ValueError,
                     match=f"cannot pack {target}: it is (a symbolic link|"
                     "a FIFO); move it out of the runs directory"):
    carry.pack(copy, tmp_path / "out")
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("damage",
                         ["no_index", "no_data", "no_such_prefix", "empty"])
def test_pack_refuses_a_cut_run_whose_checkpoint_state_names_no_checkpoint(
    study, tmp_path, damage):
  runs, _ = study
  copy = copied(runs, tmp_path)
  checkpoints = copy / "B" / "seed1" / "checkpoints"
  if damage == "no_index":
    os.unlink(checkpoints / "ckpt-4.index")
  elif damage == "no_data":
    os.unlink(checkpoints / "ckpt-4.data-00000-of-00001")
  else:
    (checkpoints / "checkpoint").write_text(
        "" if damage == "empty" else 'model_checkpoint_path: "ckpt-9"\n')
  with pytest.raises(ValueError,
                     match=f"cannot pack {checkpoints / 'checkpoint'}: it "
                     "names (checkpoint ckpt-[49], but .* is missing|"
                     "no checkpoint in its folder)"):
    carry.pack(copy, tmp_path / "out")
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("where", ["twice_in_one", "across_two", "as_a_folder"])
def test_unpack_refuses_a_name_held_twice_and_writes_nothing(
    study, tmp_path, where):
  runs, _ = study
  carried = tmp_path / "carried"
  carry.pack(runs, carried)
  if where == "twice_in_one":
    add_archive(carried / "cut-1.tar.gz", member("C/a.json", data=b"1"),
                member("C/./a.json", data=b"2"))
    held = "it holds C/a.json twice"
  elif where == "across_two":
    add_archive(carried / "cut-1.tar.gz",
                member("A/seed0/metrics.jsonl", data=b"{}"))
    held = f"it holds A/seed0/metrics.jsonl, also in {carried / 'runs.tar.gz'}"
  else:
    add_archive(carried / "cut-1.tar.gz", member("A/seed0"))
    held = "A/seed0 is a file in it and a folder in the archives"
  with pytest.raises(ValueError, match=f"cannot unpack .*: {held}"):
    carry.unpack(carried, tmp_path / "runs")
  assert os.listdir(tmp_path) == ["carried"]


class Zeros(io.RawIOBase):
  """`size` zero bytes to read: a member that gzip shrinks a thousandfold."""

  def __init__(self, size):
    self.left = size

  def readable(self):
    return True

  def readinto(self, buffer):
    n = min(len(buffer), self.left)
    buffer[:n] = bytes(n)
    self.left -= n
    return n


def test_unpack_refuses_archives_that_expand_past_the_cap(study, tmp_path):
  runs, _ = study
  carried = tmp_path / "carried"
  carry.pack(runs, carried)
  info = tarfile.TarInfo("C/zeros")
  info.size = carry.MAX_UNPACKED_BYTES
  with tarfile.open(carried / "cut-1.tar.gz", "w:gz",
                    compresslevel=1) as archive:
    archive.addfile(info, io.BufferedReader(Zeros(info.size)))
  assert os.path.getsize(carried / "cut-1.tar.gz") < 2 << 20
  with pytest.raises(ValueError,
                     match=f"cannot unpack .*cut-1.tar.gz: the archives "
                     f"expand past {carry.MAX_UNPACKED_BYTES} bytes "
                     "\\(at C/zeros\\)"):
    carry.unpack(carried, tmp_path / "runs")
  assert os.listdir(tmp_path) == ["carried"]
  # Smaller caps are the caller's to choose.
  with pytest.raises(ValueError, match="expand past 1000 bytes"):
    carry.unpack(carried, tmp_path / "runs", max_bytes=1000)


@pytest.mark.parametrize("there", ["a_file_named_like_a_run", "report"])
def test_unpack_refuses_what_exists_in_the_runs_directory_moving_nothing(
    study, tmp_path, there):
  runs, _ = study
  copy = copied(runs, tmp_path)
  (copy / "report").mkdir()
  (copy / "report" / "summary.md").write_text("carried")
  carry.pack(copy, tmp_path / "carried")
  target = tmp_path / "target"
  if there == "report":
    (target / "report").mkdir(parents=True)
    (target / "report" / "summary.md").write_text("here")
    clash = target / "report"
  else:
    target.mkdir()
    clash = target / "B"
    clash.write_text("not a run")
  before = snapshot(tmp_path)
  with pytest.raises(ValueError,
                     match=f"cannot unpack into {target}: {clash} exists, "
                     "and the archives hold it too"):
    carry.unpack(tmp_path / "carried", target)
  assert snapshot(tmp_path) == before
