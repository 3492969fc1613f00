"""The API reference (`make api-docs`) builds from the docstrings and holds.

The build is the Makefile's, so that `make test` checks what users run: a
pdoc warning fails it, and these tests check that it covers the public API
and that every link in it resolves.
"""

import html.parser
import os
import shutil
import subprocess
import sys
import urllib.parse

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC_MODULES = ("bounds", "data", "datasets", "defaults", "diagnostics",
                  "distribute", "keras", "schedules", "sources", "utilities")


class Page(html.parser.HTMLParser):
  """The element ids and link targets of one HTML page."""

  def __init__(self):
    super().__init__()
    self.ids = set()
    self.hrefs = []

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if "id" in attrs:
      self.ids.add(attrs["id"])
    if tag == "a" and attrs.get("href"):
      self.hrefs.append(attrs["href"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """The pages of `make api-docs`, built in a temporary folder: path -> Page."""
  if shutil.which("make") is None:
    pytest.skip("no make")
  output = tmp_path_factory.mktemp("api")
  # -o setup: this test runs in the environment that setup made.
  build = subprocess.run([
      "make", "-s", "-o", "setup", "api-docs", f"PY={sys.executable}",
      f"API_DOCS={output}"
  ],
                         cwd=ROOT,
                         capture_output=True,
                         text=True,
                         check=False)
  if build.returncode != 0:
    pytest.fail(f"make api-docs failed:\n{build.stdout}\n{build.stderr}")
  pages = {}
  for directory, _, files in os.walk(output):
    for name in files:
      if name.endswith(".html"):
        path = os.path.join(directory, name)
        page = Page()
        with open(path, encoding="utf-8") as f:
          page.feed(f.read())
        pages[os.path.relpath(path, output)] = page
  return pages


def test_api_reference_documents_the_public_api(reference):
  assert set(reference) == {
      "index.html", "tf_adasamp.html",
      *(f"tf_adasamp/{module}.html" for module in PUBLIC_MODULES)
  }
  assert {"SumTree", "AdaptiveSampler"} <= reference["tf_adasamp.html"].ids


def test_every_link_in_the_api_reference_resolves(reference):
  dead = []
  for path, page in reference.items():
    for href in page.hrefs:
      link = urllib.parse.urlsplit(href)
      # Other sites, and the search's template (${url}), filled in by script.
      if link.scheme or href.startswith("$"):
        continue
      target = os.path.normpath(os.path.join(os.path.dirname(path),
                                             link.path)) if link.path else path
      if target not in reference or (link.fragment and link.fragment
                                     not in reference[target].ids):
        dead.append(f"{path}: {href}")
  assert not dead, "\n".join(dead)
