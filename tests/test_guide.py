"""Runs every Python snippet of docs/guide.md, docs/data.md and the README,
each in a fresh namespace and an empty directory, as written."""

import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
DOCS = {
    "guide": os.path.join(ROOT, "docs", "guide.md"),
    "readme": os.path.join(ROOT, "README.md"),
    "data": os.path.join(ROOT, "docs", "data.md"),
}


def snippets(doc):
  with open(DOCS[doc]) as f:
    return re.findall(r"^```python\n(.*?)^```$", f.read(), re.M | re.S)


def test_guide_has_the_three_ways_in_the_controls_and_the_reducible_loss():
  # The stage, the step's own draws, fit (arrays; a dataset under a
  # strategy), the controls, the reducible loss.
  assert len(snippets("guide")) == 6


def test_readme_has_its_quick_start():
  assert len(snippets("readme")) == 1


def test_the_data_doc_has_its_four_snippets():
  # The two sources, parsing after the stage, converting, and `fit`.
  assert len(snippets("data")) == 4


@pytest.mark.parametrize(
    "doc,index",
    [(doc, index) for doc in DOCS for index in range(len(snippets(doc)))])
def test_snippet_runs(doc, index, tmp_path, monkeypatch):
  if doc == "data":
    pytest.importorskip("array_record")  # the `data` extra
  monkeypatch.chdir(tmp_path)
  code = compile(snippets(doc)[index], f"{doc} snippet {index + 1}", "exec")
  exec(code, {"__name__": f"{doc}_snippet_{index + 1}"})
