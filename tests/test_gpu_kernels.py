"""The CUDA build, and the CUDA kernels alone.

Where nvcc and a CUDA build of TensorFlow are found, the op library must have
its GPU kernels (docs/cuda.md). Where there is also a GPU, the standalone
driver (benchmarks/gpu_sum_tree_driver.cu) is built for it and checks every op,
through the kernels' C++ API and with no TensorFlow, against a sequential CPU
reference; benchmarks/gpu_sum_tree.py runs the same check, then the benchmark.
"""

import ctypes
import os
import runpy
import shutil
import subprocess

import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

from tf_adasamp import ops

OPS = [
    "AdaSamp>SumTreeBuild", "AdaSamp>SumTreeSet", "AdaSamp>SumTreeSample",
    "AdaSamp>SumTreeDraw", "AdaSamp>AdaptiveReweight"
]
# The ops a training step calls, which XLA compiles too (sum_tree_ops_xla.cc).
XLA_OPS = [
    "AdaSamp>SumTreeSample", "AdaSamp>SumTreeDraw", "AdaSamp>AdaptiveReweight"
]


def nvcc():
  """nvcc where setup.py and bazel/cuda.bzl look for it, or None."""
  cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
  return shutil.which("nvcc") or shutil.which(
      "nvcc", path=os.path.join(cuda_home, "bin"))


def visible_gpus():
  """The number of GPUs the CUDA driver sees; 0 without a driver."""
  try:
    cuda = ctypes.CDLL("libcuda.so.1")
  except OSError:
    return 0
  count = ctypes.c_int(0)
  if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
    return 0
  return count.value


@pytest.mark.skipif(os.environ.get("TF_ADASAMP_CUDA") == "0" or
                    nvcc() is None or not tf.test.is_built_with_cuda(),
                    reason="the build makes CPU kernels only here")
@pytest.mark.parametrize("op", OPS)
def test_op_library_has_gpu_kernels_where_nvcc_is_found(op):
  ops.load()
  registered = kernels.get_registered_kernels_for_op(op).kernel
  devices = {"CPU", "GPU"}
  if op in XLA_OPS:
    devices |= {"XLA_CPU_JIT", "XLA_GPU_JIT"}
  assert {kernel.device_type for kernel in registered} == devices


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpus() == 0, reason="no GPU visible")
@pytest.mark.skipif(nvcc() is None, reason="no nvcc")
def test_kernels_match_the_sequential_reference(tmp_path):
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  cuda_config = runpy.run_path(os.path.join(root, "bazel", "cuda_config.py"))
  driver = cuda_config["compile_program"](
      nvcc(), root,
      ["benchmarks/gpu_sum_tree_driver.cu", "cc/kernels/gpu/sum_tree_gpu.cu"],
      str(tmp_path / "gpu_sum_tree_driver"))
  result = subprocess.run([driver, "check"],
                          capture_output=True,
                          text=True,
                          check=False)
  assert result.returncode == 0, result.stdout + result.stderr
