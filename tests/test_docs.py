"""The docs name what exists: the tests behind each promise of
docs/guarantees.md, every module in docs/development.md's layout, and the
files and headings that the README, docs/development.md and
benchmarks/RESULTS.md link to."""

import glob
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)


def read(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    return f.read()


def test_every_test_the_guarantees_name_exists():
  guarantees = read("docs/guarantees.md")
  defined = set()
  for path in glob.glob(os.path.join(ROOT, "tests", "**", "test_*.py"),
                        recursive=True):
    with open(path, encoding="utf-8") as f:
      defined.update(re.findall(r"^def (test_\w+)", f.read(), re.M))
  named = set(re.findall(r"`(test_\w+)(?!\w|\.py)", guarantees))
  assert len(named) > 30, named  # the pattern still finds them
  missing = named - defined
  assert not missing, missing
  for path in re.findall(r"`((?:\w+/)*test_\w+\.py)`", guarantees):
    assert os.path.exists(os.path.join(ROOT, "tests", path)), path


def test_the_layout_lists_every_module():
  layout = read("docs/development.md").split("## Layout",
                                             1)[1].split("\n## ", 1)[0]
  for path in glob.glob(os.path.join(ROOT, "tf_adasamp", "**", "*.py"),
                        recursive=True):
    name = os.path.basename(path)
    if name != "__init__.py":
      assert re.search(rf"\b{re.escape(name)}\b", layout), name


def anchors(markdown):
  """The anchors GitHub gives the headings of `markdown`."""
  found = set()
  for heading in re.findall(r"^#+ (.*)$", markdown, re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    found.add(slug)
  return found


# The README's results table: a regime's name, then its summary.
RESULT_SUMMARIES = {
    "main": "docs/experiment/fashion_mnist_5k/summary.md",
    "budget": "docs/experiment/fashion_mnist_budget/summary.md",
}
INTERVAL = r"[+-]?\d+\.\d+ \[[+-]?\d+\.\d+, [+-]?\d+\.\d+\]"


def test_the_readme_results_are_the_summaries():
  # Each figure the README's table states, and each count of runs that
  # never reach a target, is its regime's summary's: a regenerated summary
  # cannot leave the README behind.
  table = read("README.md").split("## Results", 1)[1].split("\n## ", 1)[0]
  rows = [
      line for line in table.splitlines()
      if line.startswith("| main") or line.startswith("| budget")
  ]
  assert len(rows) >= 5
  for row in rows:
    regime = row.split("|")[1].strip().split(",")[0]
    summary = read(RESULT_SUMMARIES[regime])
    intervals = re.findall(INTERVAL, row)
    assert intervals, row
    for interval in intervals:
      assert interval in summary, (regime, interval)
    for count in re.findall(r"(\d+) of 10 never", row):
      runs = "1 run" if count == "1" else f"{count} runs"
      assert f"({runs} never)" in summary, (regime, count)


@pytest.mark.parametrize(
    "doc", ["README.md", "docs/development.md", "benchmarks/RESULTS.md"])
def test_local_links_point_at_files_and_headings_that_exist(doc):
  directory = os.path.dirname(os.path.join(ROOT, doc))
  links = re.findall(r"\]\(([^)\s]+)\)", read(doc))
  local = [link for link in links if "://" not in link]
  assert local, doc  # the pattern still finds them
  for link in local:
    path, _, anchor = link.partition("#")
    target = os.path.join(directory, path) if path else os.path.join(ROOT, doc)
    assert os.path.exists(target), link
    if anchor:
      with open(target, encoding="utf-8") as f:
        assert anchor in anchors(f.read()), link
