"""The library stands apart from the paper's experiment, and loads lazily."""

import pathlib
import subprocess
import sys

import pytest

import child_process


def library_modules():
  """The library's modules, read from the tree: tf_adasamp/ less experiment/.

  Less `__main__` too, which runs its command when imported.
  """
  root = pathlib.Path(__file__).resolve().parent.parent
  modules = []
  for path in sorted((root / "tf_adasamp").rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    if "experiment" in parts or parts[-1] == "__main__":
      continue
    modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
  return modules


LIBRARY_MODULES = library_modules()
APPLICATION_ONLY = [
    "tf_adasamp.experiment", "tensorflow_datasets", "matplotlib", "sklearn"
]


def imported_after(statement):
  """The modules loaded by running `statement` in a fresh interpreter."""
  code = (f"import sys\n{statement}\n"
          "print('\\n'.join(sorted(sys.modules)))\n")
  result = subprocess.run([sys.executable, "-c", code],
                          capture_output=True,
                          text=True,
                          check=True)
  return set(result.stdout.split())


def test_library_modules_import_no_application_module():
  # One interpreter for all: each import of an application module fails
  # there and is recorded, so none is hidden by an earlier one.
  statement = "\n".join(f"import {module}" for module in LIBRARY_MODULES)
  assert child_process.import_attempts(statement, APPLICATION_ONLY) == []


def test_bounds_imports_neither_tensorflow_nor_the_op_library():
  modules = imported_after("import tf_adasamp.bounds")
  assert "numpy" in modules
  for forbidden in ("tensorflow", "tf_adasamp.ops", "absl"):
    assert forbidden not in modules, f"imported {forbidden}"


def test_import_tf_adasamp_loads_neither_tensorflow_nor_keras():
  modules = imported_after("import tf_adasamp")
  for forbidden in ("tensorflow", "keras", "tf_adasamp.keras"):
    assert forbidden not in modules, f"imported {forbidden}"
  # Keras's import brings the Keras integration, which registers its classes.
  modules = imported_after("import tf_adasamp\nimport keras")
  assert "tf_adasamp.keras" in modules


def test_op_library_loads_on_first_op_call():
  code = ("import tf_adasamp\n"
          "from tf_adasamp import ops\n"
          "sampler = tf_adasamp.AdaptiveSampler\n"
          "from tensorflow.python.framework import kernels\n"
          "def registered():\n"
          "  return kernels.get_registered_kernels_for_op(\n"
          "      'AdaSamp>SumTreeSample').kernel\n"
          "assert not registered(), 'loaded at import'\n"
          "tf_adasamp.SumTree(3)\n"
          "assert registered(), 'not loaded by an op'\n")
  subprocess.run([sys.executable, "-c", code], check=True)


def test_package_exports_resolve():
  import tf_adasamp
  for name in tf_adasamp.__all__:
    assert getattr(tf_adasamp, name) is not None
  with pytest.raises(AttributeError, match="no attribute 'nope'"):
    _ = tf_adasamp.nope


@pytest.mark.parametrize(
    "module",
    ["tf_adasamp.experiment.training.run_files", "tf_adasamp.experiment.carry"])
def test_the_run_file_modules_load_no_tensorflow(module):
  # The command lines check runs, and a device packs them, with these alone.
  assert "tensorflow" not in imported_after(f"import {module}")


def test_training_imports_nothing_of_the_study():
  # The trainer is one program and the study another that runs it: the
  # study may import training, never the other way round.
  training = pathlib.Path(__file__).parent.parent / (
      "tf_adasamp/experiment/training")
  statement = "\n".join(f"import tf_adasamp.experiment.training.{path.stem}"
                        for path in sorted(training.glob("[!_]*.py")))
  assert child_process.import_attempts(statement,
                                       ["tf_adasamp.experiment.study"]) == []
