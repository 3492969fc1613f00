"""Checks and benchmarks the sum-tree CUDA kernels, without TensorFlow.

Targets (issue 3, H100, the kernels alone): 2**20 draws from n = 10**7 in
<= 1 ms; 2**20 unique updates on n = 10**7 in <= 2 ms; at n = 50000, B = 100,
sample + reweight in <= 50 us of GPU time per training step.

Builds benchmarks/gpu_sum_tree_driver.cu with cc/kernels/gpu/sum_tree_gpu.cu
(nvcc, for this machine's GPU unless --arch says otherwise) and runs it: a
check of every op against a sequential CPU reference, then the benchmark, in
float64 (the library's default dtype). The benchmark prints a markdown table
for benchmarks/RESULTS.md: draws/s, and unique updates/s of SumTreeSet and
AdaptiveReweight, for n in {5e4, 1e6, 1e7} and B in {128, 4096, 2**20}; then
the per-step time.

  python -m benchmarks.gpu_sum_tree            # check, then benchmark
  python -m benchmarks.gpu_sum_tree --check    # check only
  python -m benchmarks.gpu_sum_tree --driver build/gpu_sum_tree_driver
                                               # a driver built elsewhere
"""

import argparse
import os
import runpy
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER_SOURCES = [
    "benchmarks/gpu_sum_tree_driver.cu", "cc/kernels/gpu/sum_tree_gpu.cu"
]


def build_driver(output, arch="native", nvcc=None):
  """Compiles the driver with `nvcc` (default: the PATH's) into `output`."""
  nvcc = nvcc or shutil.which("nvcc")
  if nvcc is None:
    raise RuntimeError("no nvcc on PATH: build the driver where there is one "
                       "(--arch) and pass it with --driver")
  cuda_config = runpy.run_path(os.path.join(ROOT, "bazel", "cuda_config.py"))
  return cuda_config["compile_program"](nvcc, ROOT, DRIVER_SOURCES, output,
                                        arch)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check",
                      action="store_true",
                      help="check the kernels only, no benchmark")
  parser.add_argument("--driver", help="a driver already built")
  parser.add_argument("--arch",
                      default="native",
                      help="nvcc -arch for the driver, e.g. sm_90")
  args = parser.parse_args()
  driver = args.driver or build_driver(
      os.path.join(ROOT, "build", "gpu_sum_tree_driver"), args.arch)
  for mode in ["check"] if args.check else ["check", "bench"]:
    status = subprocess.run([driver, mode], check=False).returncode
    if status:
      return status
  return 0


if __name__ == "__main__":
  sys.exit(main())
