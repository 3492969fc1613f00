"""Finds what the op library's CUDA kernels are built with (docs/cuda.md).

The one copy of the CUDA discovery: setup.py imports this file, and Bazel's
repository rule (bazel/cuda.bzl) runs it with the Python that has TensorFlow
and reads the `key=value` lines it prints. It also reads build_facts.bzl for
setup.py and tests/test_build_facts.py.

The kernels are built where nvcc is found (on PATH or in $CUDA_HOME/bin) and
the installed TensorFlow is a CUDA build, unless TF_ADASAMP_CUDA=0;
TF_ADASAMP_CUDA=1 makes either missing an error instead of a CPU-only build.
TF_ADASAMP_CUDA_ARCHITECTURES (e.g. "90") narrows the architectures.

  python bazel/cuda_config.py 75,80,86,89,90   # the default architectures
"""

import ast
import os
import shlex
import shutil
import subprocess
import sys


def read_build_facts(path):
  """The assignments of bazel/build_facts.bzl, the BUILD files' own lists of
  sources and flags: each value a Starlark literal, which is Python's."""
  with open(path, encoding="utf-8") as facts:
    tree = ast.parse(facts.read(), path)
  return {
      node.targets[0].id: ast.literal_eval(node.value)
      for node in tree.body
      if isinstance(node, ast.Assign)
  }


def find_nvcc(environ, built_with_cuda):
  """(nvcc's path, "") if the kernels are to be built, else (None, why).

  `built_with_cuda` is called only where nvcc is found, as it imports
  TensorFlow.
  """
  setting = environ.get("TF_ADASAMP_CUDA", "")
  cuda_home = environ.get("CUDA_HOME", "/usr/local/cuda")
  nvcc = shutil.which("nvcc", path=environ.get("PATH")) or shutil.which(
      "nvcc", path=os.path.join(cuda_home, "bin"))
  if setting == "0":
    reason = "TF_ADASAMP_CUDA=0"
  elif nvcc is None:
    reason = "no nvcc on PATH or in $CUDA_HOME/bin"
  elif not built_with_cuda():
    reason = "this TensorFlow is not built with CUDA"
  else:
    return nvcc, ""
  if setting == "1":
    raise RuntimeError(f"TF_ADASAMP_CUDA=1, but {reason}")
  return None, reason


def cudart_static_dir(nvcc):
  """Where nvcc's own link step finds libcudart_static.a."""
  dryrun = subprocess.run(
      [nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
      capture_output=True,
      text=True,
      check=True).stderr
  for line in dryrun.splitlines():
    if line.startswith("#$ LIBRARIES="):
      for flag in shlex.split(line.split("=", 1)[1]):
        if os.path.exists(os.path.join(flag[2:], "libcudart_static.a")):
          return flag[2:]
  raise RuntimeError(f"{nvcc} links no libcudart_static.a")


def architectures(environ, default):
  """The architectures to compile for: the environment's, else `default`."""
  setting = environ.get("TF_ADASAMP_CUDA_ARCHITECTURES", "")
  return setting.split(",") if setting else list(default)


def gencode_flags(archs):
  """nvcc's -gencode flags: machine code for each, PTX for the last."""
  flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
  flags.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
  return flags


def compile_program(nvcc, root, sources, output, arch="native"):
  """Compiles a standalone CUDA program from `sources` (paths under `root`)
  into `output`, with the kernels' arithmetic flags; returns `output`."""
  os.makedirs(os.path.dirname(output), exist_ok=True)
  subprocess.check_call([
      nvcc, "-std=c++17", "-O3", "--fmad=false", f"-arch={arch}", f"-I{root}",
      *[os.path.join(root, source) for source in sources], "-o", output
  ])
  return output


def _tensorflow_built_with_cuda():
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow as tf
  return tf.test.is_built_with_cuda()


def main(argv):
  """Prints enabled=, reason= and, if enabled, nvcc=, cudart_static_dir=,
  architectures= (comma-separated) and gencode= (space-separated flags)."""
  nvcc, reason = find_nvcc(os.environ, _tensorflow_built_with_cuda)
  lines = {"enabled": "1" if nvcc else "0", "reason": reason}
  if nvcc:
    lines["nvcc"] = nvcc
    lines["cudart_static_dir"] = cudart_static_dir(nvcc)
    archs = architectures(os.environ, argv[1].split(","))
    lines["architectures"] = ",".join(archs)
    lines["gencode"] = " ".join(gencode_flags(archs))
  for key, value in lines.items():
    print(f"{key}={value}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
