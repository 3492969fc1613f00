"""Runs every Python snippet of docs/guide.md, docs/data.md and the README,
each in a fresh namespace and an empty directory, as written."""

import os
import re
import subprocess
import sys

import pytest

import child_process

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
  assert len(snippets("guide")) == 5


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


def test_fashion_mnist_loads_from_an_empty_keras_cache(tmp_path):
  # As the guide says: Debian's files, linked into an empty Keras cache.
  code = ("from tf_adasamp.experiment.training import datasets\n"
          "data = datasets.load_fashion_mnist()\n"
          "print(data.x_train.shape, data.x_test.shape)\n")
  result = subprocess.run(
      [sys.executable, "-c", code],
      env=child_process.environment(KERAS_HOME=str(tmp_path / "keras")),
      capture_output=True,
      text=True,
      check=True)
  assert result.stdout.split(
      "\n")[-2] == "(60000, 28, 28, 1) (10000, 28, 28, 1)"
  cache = tmp_path / "keras" / "datasets" / "fashion-mnist"
  linked = sorted(path.name for path in cache.iterdir() if path.is_symlink())
  assert len(linked) == 4, linked
