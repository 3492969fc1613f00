"""The CUDA kernels alone, without TensorFlow: the standalone driver's check.

Builds benchmarks/gpu_sum_tree_driver.cu for this machine's GPU and runs its
check of every op, through the kernels' C ABI, against a sequential CPU
reference (benchmarks/gpu_sum_tree.py runs the same check, then the
benchmark). Needs a GPU and nvcc; skipped without either.
"""

import ctypes
import shutil
import subprocess

import pytest


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


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpus() == 0, reason="no GPU visible")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_kernels_match_the_sequential_reference(tmp_path):
  # Importable from the repository's root only, so not where this is skipped.
  from benchmarks import gpu_sum_tree  # pylint: disable=import-outside-toplevel
  driver = gpu_sum_tree.build_driver(str(tmp_path / "gpu_sum_tree_driver"))
  result = subprocess.run([driver, "check"], capture_output=True, text=True,
                          check=False)
  assert result.returncode == 0, result.stdout + result.stderr
