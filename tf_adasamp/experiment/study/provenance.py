"""Where the committed summaries come from: the regimes and the commands
that regenerate them, the commit and CPU that PROVENANCE.md records, and
each regime's fingerprints (every run's last record), which tell whether
the runs in runs/ are the committed ones (the `refresh` command line)."""

import glob
import json
import os
import subprocess
import sys

DOCS = os.path.join("docs", "experiment")
PROVENANCE = os.path.join(DOCS, "PROVENANCE.md")
# Everything a summary's numbers depend on: the library, its ops, the
# experiment and the build.
CODE_PATHS = ("tf_adasamp", "cc", "setup.py", "pyproject.toml")
# (data set, model, trials, what the regime is for).
REGIMES = (
    ("fashion_mnist_5k", "mlp", 10,
     "the main regime: a model that fits its data"),
    ("fashion_mnist", "logistic", 10, "the convex regime (Corollary 1)"),
    ("digits", "cnn", 5, "quick runs of the paper's CNN on small images"),
)
# The budget-limited regime's folder under runs/ and DOCS (budget_study's).
BUDGET = "fashion_mnist_budget"
# The folders under runs/ and DOCS whose runs leave fingerprints.
FINGERPRINTED_REGIMES = (*(dataset for dataset, *_ in REGIMES), BUDGET)


def git(*args):
  return subprocess.run(["git", *args],
                        capture_output=True,
                        text=True,
                        check=True).stdout.strip()


def _recorded(field):
  """The value PROVENANCE.md gives on its '<field>: ' line, or None."""
  if not os.path.exists(PROVENANCE):
    return None
  with open(PROVENANCE) as f:
    for line in f:
      if line.startswith(f"{field}: "):
        return line[len(field) + 2:].strip()
  return None


def recorded_commit():
  """The commit PROVENANCE.md names, or None."""
  commit = _recorded("Commit")
  return commit.split()[0] if commit else None


def stale_reason():
  """Why the committed summaries are not the working tree's code's, or
  None where they are."""
  commit = recorded_commit()
  if commit is None:
    return f"{PROVENANCE} names no commit"
  changed = git("diff", "--name-only", commit, "--", *CODE_PATHS)
  if changed:
    files = changed.splitlines()
    return (f"{len(files)} code files changed since {commit[:12]}, e.g. "
            f"{files[0]}")
  return None


FINGERPRINTS = "fingerprints.json"
# What a fingerprint keeps of a run's last record: the numbers its training
# made, not its clocks.
FINGERPRINTED = ("step", "train_loss", "train_accuracy", "test_loss",
                 "test_accuracy", "kl")


def cpu():
  """This machine's CPU model and its widest vector instructions, from
  /proc/cpuinfo."""
  model, flags = "unknown", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name":
          model = value.strip()
        elif key.strip() == "flags":
          flags = set(value.split())
  except OSError:
    pass
  widest = [name for name in ("avx512f", "amx_tile") if name in flags]
  return f"{model} ({', '.join(widest) or 'no AVX-512'})"


def fingerprints(runs_dir):
  """{run's folder under `runs_dir`: its last record's FINGERPRINTED
  values} of every finished run there."""
  result = {}
  for path in sorted(
      glob.glob(os.path.join(glob.escape(runs_dir), "**", "metrics.jsonl"),
                recursive=True)):
    with open(path) as f:
      lines = [line for line in f if line.strip()]
    if lines:
      last = json.loads(lines[-1])
      result[os.path.relpath(os.path.dirname(path), runs_dir)] = {
          key: last[key] for key in FINGERPRINTED if key in last
      }
  return result


def differing_runs(committed, here):
  """The runs whose fingerprints differ between `committed` and `here`
  (`fingerprints` of each), and those only one of them has."""
  return sorted(name for name in committed.keys() | here.keys()
                if committed.get(name) != here.get(name))


def compare():
  """Lines saying, per regime, which runs in runs/ differ from the
  committed fingerprints."""
  lines = [
      f"committed on: {_recorded('CPU') or 'an unrecorded CPU'}",
      f"here: {cpu()}"
  ]
  for dataset in FINGERPRINTED_REGIMES:
    path = os.path.join(DOCS, dataset, FINGERPRINTS)
    runs_dir = os.path.join("runs", dataset)
    if not os.path.exists(path) or not os.path.isdir(runs_dir):
      lines.append(f"{dataset}: nothing to compare (no {path} or no "
                   f"{runs_dir})")
      continue
    with open(path) as f:
      committed = json.load(f)
    differ = differing_runs(committed, fingerprints(runs_dir))
    lines.append(f"{dataset}: {len(differ)} of {len(committed)} runs differ" +
                 (": " + ", ".join(differ) if differ else ""))
  return lines


NOISE_TRIALS = 10
WALL_TIME_TRIALS = 10


def commands():
  """(summary path, what it is, command) of each committed summary."""
  commands = [(f"{dataset}/summary.md", regime, [
      sys.executable, "-m", "tf_adasamp.experiment.reproduce",
      f"--dataset={dataset}", f"--model={model}", f"--trials={trials}",
      f"--output_dir=runs/{dataset}", f"--report_dir={DOCS}/{dataset}"
  ]) for dataset, model, trials, regime in REGIMES]
  commands.append(
      ("label_noise/summary.md", "the main regime under label noise", [
          sys.executable, "-m", "tf_adasamp.experiment.noise_study",
          f"--trials={NOISE_TRIALS}", "--output_dir=runs/label_noise",
          f"--report_dir={DOCS}/label_noise"
      ]))
  commands.append(("fashion_mnist_5k/wall_time.md",
                   "the main regime's wall time, one run at a time", [
                       sys.executable, "-m", "tf_adasamp.experiment.wall_time",
                       f"--trials={WALL_TIME_TRIALS}",
                       "--output_dir=runs/wall_time/fashion_mnist_5k",
                       f"--report={DOCS}/fashion_mnist_5k/wall_time.md"
                   ]))
  commands.append(
      (f"{BUDGET}/summary.md",
       "the budget-limited regime, its tuning and its seconds", [
           sys.executable, "-m", "tf_adasamp.experiment.budget_study",
           "--stage=all", f"--output_dir=runs/{BUDGET}",
           f"--report_dir={DOCS}/{BUDGET}"
       ]))
  return commands


def write(commit):
  """Writes each regime's fingerprints.json from runs/ and PROVENANCE.md,
  naming `commit` and this machine's CPU."""
  for dataset in FINGERPRINTED_REGIMES:
    with open(os.path.join(DOCS, dataset, FINGERPRINTS), "w") as f:
      json.dump(fingerprints(os.path.join("runs", dataset)),
                f,
                indent=1,
                sort_keys=True)
      f.write("\n")
  lines = [
      "# Where the summaries come from", "", f"Commit: {commit}", "",
      f"CPU: {cpu()}", "", "Regenerated by `make experiment-docs` (`python -m "
      "tf_adasamp.experiment.refresh`) from that commit's code, with:", ""
  ]
  for summary, what, command in commands():
    lines.append(f"- {what}, [{summary}]({summary}): `python "
                 f"{' '.join(command[1:])}`")
  lines += [
      "", "Each regime's `fingerprints.json` holds every run's last record; "
      "`python -m tf_adasamp.experiment.refresh --compare` says which runs "
      "in runs/ differ from them, on any machine."
  ]
  with open(PROVENANCE, "w") as f:
    f.write("\n".join(lines) + "\n")
