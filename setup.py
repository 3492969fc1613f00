"""Builds tf_adasamp and its op library against the installed TensorFlow.

TensorFlow must be importable at build time, so install with
`pip install --no-build-isolation .` into an environment that has it (a plain
`pip install .` works too, but first installs TensorFlow into pip's isolated
build environment).
"""

import os
import shlex
import shutil
import subprocess

from setuptools import Extension
from setuptools import find_packages
from setuptools import setup
from setuptools.command.build_ext import build_ext

CPU_SOURCES = [
    "cc/ops/draw_permits_ops.cc",
    "cc/ops/sum_tree_ops.cc",
    "cc/kernels/draw_permits.cc",
    "cc/kernels/sum_tree_ops.cc",
]
# The GPU kernels (docs/cuda.md): built where nvcc and a CUDA build of
# TensorFlow are found, unless TF_ADASAMP_CUDA=0; TF_ADASAMP_CUDA=1 makes
# either missing an error instead of a CPU-only build.
CUDA_INPUTS = [  # The CUDA source, then what it includes.
    "cc/kernels/sum_tree_gpu.cu",
    "cc/kernels/sum_tree_gpu.h",
    "cc/kernels/sum_tree_parallel.h",
    "cc/kernels/sum_tree_algorithm.h",
]
GPU_SOURCES = ["cc/kernels/sum_tree_ops_gpu.cc"]
CUDA_ARCHITECTURES = ["75", "80", "86", "89", "90"]


def find_nvcc(tf):
  """nvcc's path if the CUDA kernels are to be built, else None.

  Prints one line saying which, and why.
  """
  setting = os.environ.get("TF_ADASAMP_CUDA", "")
  cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
  nvcc = shutil.which("nvcc") or shutil.which(
      "nvcc", path=os.path.join(cuda_home, "bin"))
  if setting == "0":
    reason = "TF_ADASAMP_CUDA=0"
  elif nvcc is None:
    reason = "no nvcc on PATH or in $CUDA_HOME/bin"
  elif not tf.test.is_built_with_cuda():
    reason = "this TensorFlow is not built with CUDA"
  else:
    print(f"tf_adasamp: building the CUDA kernels with {nvcc}")
    return nvcc
  if setting == "1":
    raise RuntimeError(f"TF_ADASAMP_CUDA=1, but {reason}")
  print(f"tf_adasamp: CPU kernels only ({reason})")
  return None


def cuda_library_dir(nvcc):
  """Where nvcc's own link step finds libcudart_static.a."""
  dryrun = subprocess.run(
      [nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
      capture_output=True, text=True, check=True).stderr
  for line in dryrun.splitlines():
    if line.startswith("#$ LIBRARIES="):
      for flag in shlex.split(line.split("=", 1)[1]):
        if os.path.exists(os.path.join(flag[2:], "libcudart_static.a")):
          return flag[2:]
  raise RuntimeError(f"{nvcc} links no libcudart_static.a")


def cuda_build(nvcc, root, build_temp):
  """Compiles the CUDA kernels; returns (sources, compile flags, link flags).

  The kernels link CUDA's static runtime from the same toolkit as nvcc,
  private to the library (docs/cuda.md says why), and the GPU OpKernels
  TensorFlow's GPU functors from libtensorflow_cc. nvcc reruns only when a
  CUDA source is newer than its object: five architectures take a minute.
  """
  architectures = os.environ.get("TF_ADASAMP_CUDA_ARCHITECTURES",
                                 ",".join(CUDA_ARCHITECTURES)).split(",")
  gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in architectures]
  gencode.append(f"-gencode=arch=compute_{architectures[-1]},"
                 f"code=compute_{architectures[-1]}")
  os.makedirs(build_temp, exist_ok=True)
  kernels = os.path.join(build_temp,
                         f"sum_tree_gpu_sm{'_'.join(architectures)}.o")
  inputs = [os.path.join(root, path) for path in CUDA_INPUTS]
  if not (os.path.exists(kernels) and os.path.getmtime(kernels) >= max(
      os.path.getmtime(path) for path in inputs)):
    command = [
        nvcc, "-std=c++17", "-O3", "--fmad=false", "-Xcompiler=-fPIC",
        "-Xcompiler=-fvisibility=hidden", f"-I{root}", *gencode, "-c",
        inputs[0], "-o", kernels,
    ]
    print(" ".join(command))
    subprocess.check_call(command)
  return (GPU_SOURCES, ["-DGOOGLE_CUDA=1"], [
      kernels, f"-L{cuda_library_dir(nvcc)}", "-l:libcudart_static.a",
      "-ldl", "-lrt", "-lpthread", "-Wl,--exclude-libs,ALL",
      "-l:libtensorflow_cc.so.2",
  ])


class BuildOpLibrary(build_ext):
  """Compiles the op library with g++ and TensorFlow's own compile flags."""

  def get_ext_filename(self, ext_name):
    # tf.load_op_library wants a plain name: tf_adasamp/_sum_tree_ops.so.
    return os.path.join(*ext_name.split(".")) + ".so"

  def build_extension(self, ext):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    root = os.path.dirname(os.path.abspath(__file__))
    output = self.get_ext_fullpath(ext.name)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    compiler = os.environ.get("CXX", shutil.which("g++") or "c++")
    nvcc = find_nvcc(tf)
    gpu_sources, gpu_flags, gpu_link_flags = (
        cuda_build(nvcc, root, self.build_temp) if nvcc else ([], [], []))
    command = [
        compiler, "-O3", "-fPIC", "-shared", "-Wno-deprecated-declarations",
        "-Wno-interference-size", *gpu_flags,
        f"-I{root}", *tf.sysconfig.get_compile_flags(),
        *[os.path.join(root, source) for source in ext.sources + gpu_sources],
        "-o", output, *gpu_link_flags, *tf.sysconfig.get_link_flags(),
    ]
    print(" ".join(command))
    subprocess.check_call(command)


def tensorflow_requirement():
  """TensorFlow at the minor version the op library is built against (the
  .so is ABI-bound to it), under the distribution name that is installed:
  a user of tensorflow-cpu must not get the full tensorflow beside it."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel

  for name in ("tensorflow-cpu", "tensorflow", "tf-nightly"):
    try:
      version = metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
    major, minor = (int(part) for part in version.split(".")[:2])
    return f"{name}>={major}.{minor},<{major}.{minor + 1}"
  raise RuntimeError("tf_adasamp builds against the installed TensorFlow: "
                     "install tensorflow (or tensorflow-cpu) first, then "
                     "pip install --no-build-isolation .")


EXPERIMENT = [
    "absl-py",
    "tensorflow-datasets",
    "importlib_resources",  # imported, not declared, by tfds 4.9.10
    "matplotlib",
    "scikit-learn",  # ships the digits dataset used for offline runs
    "tensorboard",
]

setup(
    name="tf_adasamp",
    version="0.1.0",
    description=("Adaptive sampling SGD (London, NIPS 2017) as graph-native "
                 "TensorFlow ops"),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Programming Language :: C++",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=find_packages(include=["tf_adasamp", "tf_adasamp.*"]),
    ext_modules=[Extension("tf_adasamp._sum_tree_ops", sources=CPU_SOURCES)],
    cmdclass={"build_ext": BuildOpLibrary},
    python_requires=">=3.10",
    install_requires=[tensorflow_requirement(), "numpy"],
    extras_require={
        # The paper's experiment: tf_adasamp.experiment and its commands.
        "experiment": EXPERIMENT,
        "test": EXPERIMENT + ["pytest", "scipy", "hypothesis"],
    },
    entry_points={
        "console_scripts": [
            "tf-adasamp-train = tf_adasamp.experiment.train:run",
            "tf-adasamp-reproduce = tf_adasamp.experiment.reproduce:run",
            "tf-adasamp-bounds = tf_adasamp.experiment.bounds_table:run",
            "tf-adasamp-demo = tf_adasamp.experiment.demo:run",
        ],
    },
    zip_safe=False,
)
