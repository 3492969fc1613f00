"""The indexes of the source tree name what is there, read from the tree.

Each package's `__init__.py` docstring lists its modules, one a line (a
subpackage as `name/`), and docs/development.md lists the console scripts
that setup.py installs. Both lists are compared with what exists, both ways,
so that a module added, moved or removed fails here until its index says so.
And tests/ mirrors the package: each test file is named after the module it
tests, or listed as a concern of several.
"""

import ast
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
PACKAGE = os.path.join(ROOT, "tf_adasamp")
# An index line: two spaces, then its first column (names, ", " between
# them), then two or more spaces and what they are, or the line's end.
INDEX_LINE = re.compile(r"^  (?=\S)(.*?)(?:\s{2,}|$)")
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*/?$")


def packages():
  """Every package under tf_adasamp/, as its folder relative to the root."""
  found = []
  for directory, subdirectories, files in os.walk(PACKAGE):
    subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
    if "__init__.py" in files:
      found.append(os.path.relpath(directory, ROOT))
  return found


def modules_in(package):
  """The modules of `package` (`name`) and its subpackages (`name/`)."""
  directory = os.path.join(ROOT, package)
  names = set()
  for entry in os.listdir(directory):
    path = os.path.join(directory, entry)
    if entry.endswith(".py") and entry != "__init__.py":
      names.add(entry[:-len(".py")])
    elif os.path.isfile(os.path.join(path, "__init__.py")):
      names.add(entry + "/")
  return names


def indexed_in(package):
  """The names in the first column of the index in `package`'s docstring."""
  with open(os.path.join(ROOT, package, "__init__.py"), encoding="utf-8") as f:
    docstring = ast.get_docstring(ast.parse(f.read()), clean=False) or ""
  names = set()
  for line in docstring.splitlines():
    match = INDEX_LINE.match(line)
    if match:
      for name in match.group(1).split(", "):
        assert MODULE_NAME.match(name), (
            f"{package}/__init__.py: {line!r} is indented as an index line, "
            f"but {name!r} is not a module's name")
        names.add(name)
  return names


def test_the_tree_has_the_packages_the_indexes_are_read_from():
  # The walk still finds them (and would find a new one).
  assert {
      "tf_adasamp",
      os.path.join("tf_adasamp", "experiment"),
      os.path.join("tf_adasamp", "experiment", "study"),
      os.path.join("tf_adasamp", "experiment", "training"),
  } <= set(packages())


@pytest.mark.parametrize("package", packages())
def test_each_package_index_names_its_modules_and_no_others(package):
  present = modules_in(package)
  indexed = indexed_in(package)
  assert present, package
  assert not present - indexed, (
      f"{package}/__init__.py's docstring leaves out "
      f"{sorted(present - indexed)}")
  assert not indexed - present, (
      f"{package}/__init__.py's docstring names {sorted(indexed - present)}, "
      "which are not there")


def test_an_index_line_must_name_modules():
  # The parser reads a two-space line's first column, and only that.
  line = "  datasets, disk_data   in-memory data; ArrayRecord files  (2)"
  assert INDEX_LINE.match(line).group(1) == "datasets, disk_data"
  assert INDEX_LINE.match("  study/").group(1) == "study/"
  assert INDEX_LINE.match("    a continuation line") is None
  assert INDEX_LINE.match("Prose at the margin.") is None


def console_scripts():
  """setup.py's console scripts: {name: "module:function"}, read, not run."""
  with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.Dict):
      for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and key.value == "console_scripts":
          entries = ast.literal_eval(value)
          return dict(
              tuple(part.strip()
                    for part in entry.split("=", 1))
              for entry in entries)
  raise AssertionError("setup.py defines no console_scripts")


def test_the_development_guide_lists_the_console_scripts_setup_installs():
  scripts = console_scripts()
  assert len(scripts) >= 7, scripts  # the reading still finds them all
  with open(os.path.join(ROOT, "docs", "development.md"),
            encoding="utf-8") as f:
    guide = f.read()
  listed = dict(
      re.findall(r"^ {4}(tf-adasamp-[\w-]+) +(tf_adasamp[\w.]+)$", guide, re.M))
  assert listed == {
      name: target.split(":")[0] for name, target in scripts.items()
  }
  # And no other name of a script anywhere in the guide.
  assert set(re.findall(r"\btf-adasamp-[\w-]*\w", guide)) == set(scripts)


@pytest.mark.parametrize("name", sorted(console_scripts()))
def test_each_console_script_names_a_function_that_exists(name):
  module, function = console_scripts()[name].split(":")
  path = os.path.join(ROOT, *module.split(".")) + ".py"
  with open(path, encoding="utf-8") as f:
    defined = {
        node.name
        for node in ast.parse(f.read()).body
        if isinstance(node, ast.FunctionDef)
    }
  assert function in defined, f"{name}: {module} defines no {function}()"


# Test files about a concern that no single module owns, by their path under
# tests/. Every other test file tests/<package path>/test_<m>.py tests the
# module tf_adasamp/<package path>/<m>.py or _<m>.py.
CROSS_CUTTING = {
    "test_api_docs.py",
    "test_build_facts.py",
    "test_concurrency.py",
    "test_docs.py",
    "test_examples.py",
    "test_fast_paths.py",
    "test_gpu_kernels.py",
    "test_gpu_ops.py",
    "test_gpu_steps_on_host.py",
    "test_guide.py",
    "test_layering.py",
    "test_layout.py",
    "test_memory.py",
    "test_peer_benchmark.py",
    "test_properties.py",
    "test_stage_hangs.py",
    "test_stage_properties.py",
    "test_wheel.py",
    "test_xla.py",
    os.path.join("experiment", "test_cli_fuzz.py"),
    os.path.join("experiment", "test_extending.py"),
    os.path.join("experiment", "test_fashion_mnist.py"),
    os.path.join("experiment", "test_interrupts.py"),
    os.path.join("experiment", "test_multi_worker.py"),
}
TESTS = os.path.join(ROOT, "tests")


def files_under_tests():
  """Every test file under tests/, by its path relative to tests/."""
  found = []
  for directory, subdirectories, files in os.walk(TESTS):
    subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
    for name in sorted(files):
      if name.startswith("test_") and name.endswith(".py"):
        found.append(os.path.relpath(os.path.join(directory, name), TESTS))
  return found


def test_the_tests_mirror_the_package():
  files = files_under_tests()
  assert len(files) > 40, files  # the walk still finds them
  for path in files:
    if path in CROSS_CUTTING:
      continue
    folder, name = os.path.split(path)
    module = name[len("test_"):]
    package = os.path.join(PACKAGE, folder)
    assert os.path.isfile(os.path.join(package, "__init__.py")) and any(
        os.path.isfile(os.path.join(package, prefix + module))
        for prefix in ("", "_")), (
            f"tests/{path} tests no module tf_adasamp/{folder}/{module} "
            "(nor a private one): name it after the module it tests, or list "
            "it in CROSS_CUTTING")
  assert not CROSS_CUTTING - set(files), sorted(CROSS_CUTTING - set(files))
