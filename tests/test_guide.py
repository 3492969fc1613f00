"""Runs every Python snippet of docs/guide.md, each in a fresh namespace."""

import os
import re

import pytest

GUIDE = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "guide.md")


def snippets():
  with open(GUIDE) as f:
    return re.findall(r"^```python\n(.*?)^```$", f.read(), re.M | re.S)


def test_guide_has_the_three_ways_in():
  assert len(snippets()) == 3


@pytest.mark.parametrize("index", range(len(snippets())))
def test_guide_snippet_runs(index, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  code = compile(snippets()[index], f"docs/guide.md snippet {index + 1}",
                 "exec")
  exec(code, {"__name__": f"guide_snippet_{index + 1}"})
