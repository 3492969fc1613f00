"""The two builds (setup.py and Bazel) share one list of each build fact.

bazel/build_facts.bzl names the op library's sources and flags, and
bazel/cuda_config.py finds the CUDA toolkit; setup.py reads the one and
imports the other, the BUILD files load the one and run the other. These
tests pin that: every C++/CUDA file is listed once, no build file lists
sources of its own, and setup.py builds from the facts.
"""

import glob
import os
import re
import runpy
import shutil
import subprocess
from unittest import mock

import pytest
import setuptools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_facts():
  return cuda_config()["read_build_facts"](os.path.join(ROOT, "bazel",
                                                        "build_facts.bzl"))


def listed_sources(facts):
  return set(facts["OP_LIBRARY_SOURCES"] + facts["OP_LIBRARY_GPU_SOURCES"] +
             facts["CUDA_HEADERS"] + [facts["CUDA_SOURCE"]])


def cc_tree():
  """Every C++/CUDA file under cc/, root-relative."""
  return {
      os.path.relpath(path, ROOT)
      for pattern in ("*.cc", "*.h", "*.cu")
      for path in glob.glob(os.path.join(ROOT, "cc", "**", pattern),
                            recursive=True)
  }


def cuda_config():
  return runpy.run_path(os.path.join(ROOT, "bazel", "cuda_config.py"))


def test_build_facts_are_plain_literals():
  facts = build_facts()
  for name in ("OP_LIBRARY_SOURCES", "OP_LIBRARY_GPU_SOURCES", "CUDA_HEADERS",
               "CPU_ALGORITHM_HEADERS", "CXX_FLAGS", "GPU_CXX_FLAGS",
               "NVCC_FLAGS", "CUDART_LINK_FLAGS", "CUDA_ARCHITECTURES",
               "CUDA_ENVIRON"):
    assert isinstance(facts[name], list) and facts[name], name
    assert all(isinstance(value, str) for value in facts[name]), name
  assert isinstance(facts["CUDA_SOURCE"], str)


def test_every_cc_file_is_listed_and_every_listed_file_exists():
  listed = listed_sources(build_facts())
  assert cc_tree() - listed == set(), "cc/ files no build compiles or tracks"
  missing = [
      path for path in listed if not os.path.exists(os.path.join(ROOT, path))
  ]
  assert not missing


def test_the_cpu_algorithms_need_no_tensorflow_framework():
  # The C++ unit tests build these headers with TSL's Philox header alone
  # (//cc:sum_tree_cpu): anything else they include is the standard
  # library's or another of them.
  headers = build_facts()["CPU_ALGORITHM_HEADERS"]
  allowed = set(headers) | {
      "xla/tsl/lib/random/philox_random.h",
      "xla/tsl/lib/random/random_distributions_utils.h",
  }
  for header in headers:
    assert header in build_facts()["OP_LIBRARY_SOURCES"], header
    with open(os.path.join(ROOT, header), encoding="utf-8") as source:
      included = re.findall(r'^#include "([^"]+)"', source.read(), re.M)
    assert set(included) <= allowed, (header, set(included) - allowed)


def test_no_build_file_lists_sources_of_its_own():
  # The facts are defined once: any other build file naming a source under
  # cc/ would be a second list that can drift.
  build_files = [os.path.join(ROOT, "setup.py")] + glob.glob(
      os.path.join(ROOT, "**", "BUILD"), recursive=True) + glob.glob(
          os.path.join(ROOT, "bazel", "*.bzl"))
  for path in build_files:
    if path.endswith("build_facts.bzl") or "/bazel-" in path:
      continue
    with open(path, encoding="utf-8") as build_file:
      text = build_file.read()
    for source in listed_sources(build_facts()):
      assert source not in text, f"{path} names {source}"
      assert source.replace("/", ":", 1) not in text, f"{path} names {source}"


def test_setup_py_builds_the_listed_sources_with_the_listed_flags():
  with mock.patch.object(setuptools, "setup") as setup:
    module = runpy.run_path(os.path.join(ROOT, "setup.py"))
  facts = build_facts()
  assert module["FACTS"] == facts
  (extension,) = setup.call_args.kwargs["ext_modules"]
  assert extension.name == "tf_adasamp._sum_tree_ops"
  assert extension.sources == [
      source for source in facts["OP_LIBRARY_SOURCES"]
      if not source.endswith(".h")
  ]
  # The discovery is the same file Bazel runs, not a copy.
  assert module["cuda_config"].__file__ == os.path.join(ROOT, "bazel",
                                                        "cuda_config.py")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_makefile_rebuilds_on_every_cc_file():
  if not os.path.exists(os.path.join(ROOT, "Makefile")):
    pytest.skip("no Makefile here")
  printed = subprocess.run(
      ["make", "-s", "-f", "Makefile", "-f", "-", "print-cc-sources"],
      input="print-cc-sources:\n\t@echo $(CC_SOURCES)\n",
      cwd=ROOT,
      capture_output=True,
      text=True,
      check=True).stdout
  assert set(printed.split()) >= cc_tree()


def test_cuda_off_when_asked():
  config = cuda_config()
  nvcc, reason = config["find_nvcc"]({
      "TF_ADASAMP_CUDA": "0"
  }, lambda: pytest.fail("imported TF"))
  assert nvcc is None and reason == "TF_ADASAMP_CUDA=0"


def test_cuda_required_but_missing_is_an_error(tmp_path):
  config = cuda_config()
  environ = {
      "TF_ADASAMP_CUDA": "1",
      "PATH": str(tmp_path),
      "CUDA_HOME": str(tmp_path)
  }
  with pytest.raises(RuntimeError, match="TF_ADASAMP_CUDA=1, but no nvcc"):
    config["find_nvcc"](environ, lambda: True)
  environ.pop("TF_ADASAMP_CUDA")
  assert config["find_nvcc"](
      environ, lambda: True) == (None, "no nvcc on PATH or in $CUDA_HOME/bin")


def test_cuda_architectures_default_to_the_facts_and_end_with_ptx():
  config = cuda_config()
  default = build_facts()["CUDA_ARCHITECTURES"]
  assert config["architectures"]({}, default) == default
  archs = config["architectures"]({
      "TF_ADASAMP_CUDA_ARCHITECTURES": "80,90"
  }, default)
  assert archs == ["80", "90"]
  assert config["gencode_flags"](archs) == [
      "-gencode=arch=compute_80,code=sm_80",
      "-gencode=arch=compute_90,code=sm_90",
      "-gencode=arch=compute_90,code=compute_90",
  ]
