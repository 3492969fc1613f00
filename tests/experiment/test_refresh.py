"""The committed summaries' provenance check (tf_adasamp.experiment.refresh)."""

import os
import subprocess

from tf_adasamp.experiment import refresh


def _git(directory, *args):
  subprocess.run(["git", "-C", str(directory), *args],
                 check=True,
                 capture_output=True)


def test_summaries_are_stale_once_the_code_changes(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  _git(tmp_path, "init", "-q")
  os.makedirs("tf_adasamp")
  (tmp_path / "tf_adasamp" / "code.py").write_text("x = 1\n")
  _git(tmp_path, "add", ".")
  _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
       "code")
  assert "names no commit" in refresh.stale_reason()
  commit = subprocess.run(["git", "rev-parse", "HEAD"],
                          capture_output=True,
                          text=True,
                          check=True).stdout.strip()
  os.makedirs(refresh.DOCS)
  (tmp_path / refresh.PROVENANCE).write_text(f"Commit: {commit}\n")
  assert refresh.stale_reason() is None
  # Documentation may change; code may not.
  (tmp_path / "README.md").write_text("words\n")
  assert refresh.stale_reason() is None
  (tmp_path / "tf_adasamp" / "code.py").write_text("x = 2\n")
  assert "1 code files changed" in refresh.stale_reason()
