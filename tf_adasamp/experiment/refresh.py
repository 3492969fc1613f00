"""Regenerates the committed summaries in docs/experiment/ (`make
experiment-docs`), and says whether they are the committed code's (`make
experiment-docs-check`).

Both regimes run through `reproduce` (runs in runs/, which `make
experiment` shares, so a finished main job is only reported again):

  main    fashion_mnist_5k with the MLP, a model that fits its data;
  convex  fashion_mnist with the L2 logistic regression (Corollary 1's);
  quick   digits with the paper's CNN, its step sizes set by hand;

the label-noise study (`noise_study`) on the main regime's data, the
main regime's wall time to target, its runs trained one at a time
(`wall_time`), and the budget-limited regime (`budget_study`: its tuning,
its runs and their seconds).

The summaries are written only from a tree whose code is committed, and
docs/experiment/PROVENANCE.md records that commit and the CPU. A summary is
stale when any file under CODE_PATHS differs between that commit and the
working tree: the check says so, and the refresh is the one command that
mends it.

Each regime's runs also leave their fingerprints (every run's last record,
exactly) in <regime>/fingerprints.json. After `make experiment` (or the
refresh) on another machine, `--compare` says which of the runs in runs/
differ from the committed ones, and the CPUs of both.

  python -m tf_adasamp.experiment.refresh [--check | --compare]

--check also compares, where runs/ holds runs.
"""

import os
import subprocess
import sys

from tf_adasamp.experiment.study import provenance

PROGRAM = "tf-adasamp-refresh"


def refresh():
  if provenance.git("status", "--porcelain", "--", *provenance.CODE_PATHS):
    sys.exit(
        f"{PROGRAM}: commit the code under {', '.join(provenance.CODE_PATHS)} "
        "first: the summaries record the commit that produced them")
  commit = provenance.git("rev-parse", "HEAD")
  for _, _, command in provenance.commands():
    if subprocess.run(command, check=False).returncode:
      sys.exit(f"{PROGRAM}: {' '.join(command[1:])} failed")
  provenance.write(commit)
  print(f"wrote {provenance.PROVENANCE}")


def main(argv):
  if argv[1:] == ["--check"]:
    reason = provenance.stale_reason()
    if reason:
      sys.exit(f"{PROGRAM}: the summaries in {provenance.DOCS} are stale "
               f"({reason}); "
               "regenerate them with `make experiment-docs`")
    print(f"{PROGRAM}: the summaries in {provenance.DOCS} are the committed "
          "code's")
    if any(
        os.path.isdir(os.path.join("runs", d))
        for d in provenance.FINGERPRINTED_REGIMES):
      print("\n".join(provenance.compare()))
  elif argv[1:] == ["--compare"]:
    print("\n".join(provenance.compare()))
  elif argv[1:] in (["--help"], ["-h"]):
    print(__doc__)
  elif argv[1:]:
    sys.exit("usage: python -m tf_adasamp.experiment.refresh "
             "[--check | --compare]")
  else:
    refresh()


if __name__ == "__main__":
  main(sys.argv)
