"""The binary wheel: `pip wheel --no-build-isolation .` holds the op library
and installs into a fresh virtual environment that has only TensorFlow
without compiling anything; isolated builds are refused in one line."""

from importlib import metadata
import os
import pathlib
import re
import subprocess
import sys
import time
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What a build would run; each of them, if run, records its name and fails.
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "ld", "nvcc")

SMOKE_TEST = """
import os, sys
import keras
import numpy as np
import tensorflow as tf
import tf_adasamp

# The installed package, not a checkout's.
assert tf_adasamp.__file__.startswith(sys.prefix), tf_adasamp.__file__
sampler = tf_adasamp.AdaptiveSampler(100, amplitude=0.5, decay=0.5, seed=0)
indices = sampler.sample(8)
sampler.update(indices, tf.ones([8]))
assert float(sampler.kl_divergence()) > 0

rng = np.random.default_rng(0)
x = rng.normal(size=(100, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
model = keras.Sequential([keras.Input((4,)),
                          keras.layers.Dense(2, activation="softmax")])
stage = tf_adasamp.data.AdaptiveSampling(sampler, batch_size=10)
trainer = tf_adasamp.keras.AdaptiveSamplingModel(model, stage)
trainer.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
history = trainer.fit(x, y, steps_per_epoch=1, verbose=0)
print("smoke test passed: kl", history.history["kl"][-1])
"""


def run(command, **kwargs):
  """Runs `command`, echoing it; fails with its output if it fails."""
  print("+", " ".join(map(str, command)))
  result = subprocess.run(command,
                          capture_output=True,
                          text=True,
                          check=False,
                          **kwargs)
  assert result.returncode == 0, result.stdout + result.stderr
  print(result.stdout)
  return result


def no_compilers(directory):
  """A directory of stand-ins for COMPILERS, and the log they write."""
  directory.mkdir()
  log = directory / "invoked.log"
  for name in COMPILERS:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho {name} >> {log}\nexit 1\n")
    path.chmod(0o755)
  return log


def installed_tensorflow():
  """(distribution, version) of the TensorFlow the build runs with."""
  for name in ("tensorflow-cpu", "tensorflow"):
    try:
      return name, metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
  raise AssertionError("no tensorflow distribution installed")


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_venv_without_a_compiler(tmp_path):
  started = time.monotonic()
  wheelhouse = tmp_path / "wheelhouse"
  run([
      sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
      "-w", wheelhouse, ROOT
  ],
      cwd=ROOT)
  [wheel] = wheelhouse.glob("tf_adasamp-*.whl")
  distribution, version = installed_tensorflow()
  with zipfile.ZipFile(wheel) as archive:
    assert "tf_adasamp/_sum_tree_ops.so" in archive.namelist()
    requires = [
        line.split(":", 1)[1].strip()
        for line in archive.read(
            "tf_adasamp-0.1.0.dist-info/METADATA").decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
  # The TensorFlow distribution it was built with (tensorflow-cpu for a
  # tensorflow-cpu build), at its minor version.
  major, minor = (int(part) for part in version.split(".")[:2])
  assert f"{distribution}<{major}.{minor + 1},>={major}.{minor}" in requires
  print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB")

  venv = tmp_path / "venv"
  run([sys.executable, "-m", "venv", venv])
  python = venv / "bin" / "python"
  # From pip's cache after the first run.
  run([python, "-m", "pip", "install", "-q", f"{distribution}=={version}"])
  invoked = no_compilers(tmp_path / "no_compilers")
  environment = {
      key: value
      for key, value in os.environ.items()
      if key not in ("PYTHONPATH", "VIRTUAL_ENV")
  }
  environment.update(PATH=f"{invoked.parent}:{venv / 'bin'}:/usr/bin:/bin",
                     CC=str(invoked.parent / "cc"),
                     CXX=str(invoked.parent / "c++"),
                     TF_CPP_MIN_LOG_LEVEL="2")
  # --no-index: everything the wheel needs besides TensorFlow comes with it.
  run([python, "-m", "pip", "install", "--no-index", wheel],
      env=environment,
      cwd=tmp_path)
  result = run([python, "-c", SMOKE_TEST], env=environment, cwd=tmp_path)
  assert "smoke test passed" in result.stdout
  assert not invoked.exists(), invoked.read_text()
  print(f"built, installed and ran in {time.monotonic() - started:.0f} s")


def test_build_requires_pin_the_tensorflow_setup_builds_for():
  with open(ROOT / "pyproject.toml", "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
  supported = re.search(r'^SUPPORTED_TENSORFLOW = "(\d+)\.(\d+)"$',
                        (ROOT / "setup.py").read_text(), re.M)
  major, minor = int(supported[1]), int(supported[2])
  assert f"tensorflow>={major}.{minor},<{major}.{minor + 1}" in requires
  assert installed_tensorflow()[1].startswith(f"{major}.{minor}.")


def build_metadata(python_path):
  """Runs setup.py as pip's isolated build would, with the base interpreter
  and `python_path` as its only packages."""
  return subprocess.run([sys._base_executable, "setup.py", "--name"],
                        cwd=ROOT,
                        env=dict(os.environ,
                                 PYTHONPATH=python_path,
                                 PYTHONNOUSERSITE="1"),
                        capture_output=True,
                        text=True,
                        check=False)


@pytest.mark.parametrize("isolated", [True, False])
def test_a_build_that_cannot_work_is_refused_in_one_line(isolated):
  # Isolated: this environment's TensorFlow on the path, as pip's overlay
  # puts it, but not in the environment the package would install into.
  # Otherwise no TensorFlow at all.
  packages = os.path.dirname(os.path.dirname(pytest.__file__))
  result = build_metadata(packages if isolated else "")
  assert result.returncode == 1
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert lines[0].startswith("tf_adasamp: ")
  assert lines[0].endswith("install with: pip install --no-build-isolation .")
