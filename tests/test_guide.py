"""Runs every Python snippet of docs/guide.md and of the README, each in a
fresh namespace, as written."""

import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
DOCS = {
    "guide": os.path.join(ROOT, "docs", "guide.md"),
    "readme": os.path.join(ROOT, "README.md"),
}


def snippets(doc):
  with open(DOCS[doc]) as f:
    return re.findall(r"^```python\n(.*?)^```$", f.read(), re.M | re.S)


def test_guide_has_the_three_ways_in():
  assert len(snippets("guide")) == 3


def test_readme_has_its_three_snippets():
  # "Using it", `fit`, and tf.distribute.
  assert len(snippets("readme")) == 3


@pytest.mark.parametrize(
    "doc,index",
    [(doc, index) for doc in DOCS for index in range(len(snippets(doc)))])
def test_snippet_runs(doc, index, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  code = compile(snippets(doc)[index], f"{doc} snippet {index + 1}", "exec")
  exec(code, {"__name__": f"{doc}_snippet_{index + 1}"})
