"""The committed summaries' provenance
(tf_adasamp.experiment.study.provenance)."""

import json
import os
import subprocess

from tf_adasamp.experiment.study import provenance


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
  assert "names no commit" in provenance.stale_reason()
  commit = subprocess.run(["git", "rev-parse", "HEAD"],
                          capture_output=True,
                          text=True,
                          check=True).stdout.strip()
  os.makedirs(provenance.DOCS)
  (tmp_path / provenance.PROVENANCE).write_text(f"Commit: {commit}\n")
  assert provenance.stale_reason() is None
  # Documentation may change; code may not.
  (tmp_path / "README.md").write_text("words\n")
  assert provenance.stale_reason() is None
  (tmp_path / "tf_adasamp" / "code.py").write_text("x = 2\n")
  assert "1 code files changed" in provenance.stale_reason()


def _run(directory, **last):
  os.makedirs(directory)
  with open(os.path.join(directory, "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 0, "train_loss": 2.3}) + "\n")
    f.write(json.dumps({"train_seconds": 1.5, **last}) + "\n")


def test_compare_names_the_runs_that_differ_from_the_committed(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  dataset = provenance.REGIMES[0][0]
  _run(f"runs/{dataset}/Unif-SGD/seed0", step=10, train_loss=0.5)
  _run(f"runs/{dataset}/AdaSamp-01-AdaGrad-a1/seed0", step=10, train_loss=0.4)
  committed = provenance.fingerprints(f"runs/{dataset}")
  # Clocks are left out: they differ from run to run.
  assert committed["Unif-SGD/seed0"] == {"step": 10, "train_loss": 0.5}
  os.makedirs(f"{provenance.DOCS}/{dataset}")
  with open(f"{provenance.DOCS}/{dataset}/{provenance.FINGERPRINTS}", "w") as f:
    json.dump(committed, f)
  (tmp_path /
   provenance.PROVENANCE).write_text("Commit: abc\n\nCPU: AMD EPYC\n")
  lines = provenance.compare()
  assert lines[0] == "committed on: AMD EPYC"
  assert f"{dataset}: 0 of 2 runs differ" in lines
  # A run that repeats its clocks but not its numbers is named.
  _run(f"runs/{dataset}/AdaSamp-01-AdaGrad-a1/seed1", step=10, train_loss=0.4)
  with open(f"runs/{dataset}/AdaSamp-01-AdaGrad-a1/seed0/metrics.jsonl",
            "a") as f:
    f.write(json.dumps({"step": 10, "train_loss": 0.41}) + "\n")
  assert (f"{dataset}: 2 of 2 runs differ: AdaSamp-01-AdaGrad-a1/seed0, "
          "AdaSamp-01-AdaGrad-a1/seed1") in provenance.compare()
