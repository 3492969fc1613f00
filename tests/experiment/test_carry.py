"""The carry command line (tf_adasamp.experiment.carry): it packs and unpacks,
and each refusal is one line naming the file."""

import os

import pytest

from carried_runs import copied
from carried_runs import files
from carried_runs import snapshot
import child_process
from tf_adasamp.experiment.study import carry


def test_unpack_refuses_a_fifo_for_an_archive_without_waiting(study, tmp_path):
  runs, _ = study
  carried = tmp_path / "carried"
  carry.pack(runs, carried)
  os.mkfifo(carried / "cut-1.tar.gz")
  # In a process of its own: opening the FIFO would wait for a writer.
  refused = carry_command("unpack", f"--runs_dir={tmp_path / 'runs'}",
                          f"--carry_dir={carried}")
  assert refused.returncode == 1
  assert refused.stderr.splitlines() == [
      "python -m tf_adasamp.experiment.carry: cannot unpack "
      f"{carried / 'cut-1.tar.gz'}: "
      "it is not a regular file"
  ]
  assert os.listdir(tmp_path) == ["carried"]


@pytest.mark.parametrize("runs_dir", ["file", "dangling_link"])
def test_unpack_onto_a_file_or_a_dangling_link_is_refused_in_one_line(
    study, tmp_path, runs_dir):
  runs, _ = study
  carry.pack(runs, tmp_path / "carried")
  target = tmp_path / "target"
  if runs_dir == "file":
    target.write_text("")
  else:
    os.symlink(tmp_path / "nowhere", target)
  before = snapshot(tmp_path)
  refused = carry_command("unpack", f"--runs_dir={target}",
                          f"--carry_dir={tmp_path / 'carried'}")
  assert refused.returncode == 1
  kind = "a file" if runs_dir == "file" else "a dangling link"
  assert refused.stderr.splitlines() == [
      "python -m tf_adasamp.experiment.carry: cannot unpack into "
      f"{target}: it is "
      f"{kind}, not a directory"
  ]
  assert snapshot(tmp_path) == before


def carry_command(*args):
  return child_process.ran("tf_adasamp.experiment.carry", *args, timeout=120)


def test_the_command_packs_and_unpacks_and_names_a_missing_argument(
    study, tmp_path):
  runs, _ = study
  packed = carry_command("pack", f"--runs_dir={runs}",
                         f"--carry_dir={tmp_path / 'out'}")
  assert packed.returncode == 0, packed.stderr[-2000:]
  assert "checkpoints of 1 cut runs" in packed.stdout
  unpacked = carry_command("unpack", f"--runs_dir={tmp_path / 'moved'}",
                           f"--carry_dir={tmp_path / 'out'}")
  assert unpacked.returncode == 0, unpacked.stderr[-2000:]
  assert "B/seed1/checkpoints/ckpt-4.index" in files(tmp_path / "moved")
  again = carry_command("unpack", f"--runs_dir={tmp_path / 'moved'}",
                        f"--carry_dir={tmp_path / 'out'}")
  assert again.returncode == 0 and "left as it is" in again.stdout
  missing = carry_command("pack", f"--runs_dir={runs}")
  assert missing.returncode == 1
  assert missing.stderr.splitlines() == [
      "python -m tf_adasamp.experiment.carry: the following arguments are "
      "required: "
      "--carry_dir"
  ]


def test_a_refused_pack_is_one_line_naming_the_file(study, tmp_path):
  runs, _ = study
  copy = copied(runs, tmp_path)
  (copy / "C" / "seed0").mkdir(parents=True)
  (copy / "C" / "seed0" / "config.json").write_text('{"dataset": "digits"}')
  refused = carry_command("pack", f"--runs_dir={copy}",
                          f"--carry_dir={tmp_path / 'out'}")
  assert refused.returncode == 1
  assert refused.stderr.splitlines() == [
      "python -m tf_adasamp.experiment.carry: cannot pack "
      f"{copy}/C/seed0/config.json: "
      "it does not hold a run's settings (a JSON object with a whole number "
      "of steps >= 1)"
  ]
  assert not os.path.exists(tmp_path / "out")
