"""The docs name what exists: the tests behind each promise of
docs/guarantees.md, and every module in the README's layout."""

import glob
import os
import re

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
  for path in re.findall(r"`((?:experiment/)?test_\w+\.py)`", guarantees):
    assert os.path.exists(os.path.join(ROOT, "tests", path)), path


def test_the_readme_layout_lists_every_module():
  layout = read("README.md").split("## Layout", 1)[1].split("\n## ", 1)[0]
  for path in glob.glob(os.path.join(ROOT, "tf_adasamp", "**", "*.py"),
                        recursive=True):
    name = os.path.basename(path)
    if name != "__init__.py":
      assert re.search(rf"\b{re.escape(name)}\b", layout), name
