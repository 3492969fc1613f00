"""Builds tf_adasamp and its op library against the installed TensorFlow.

The op library is bound to the TensorFlow it is compiled against, so the
build uses the environment's own: `pip install --no-build-isolation .`, or
`pip wheel --no-build-isolation .` for a wheel that installs without a
compiler. A build in pip's isolated environment is refused in one line.
"""

import concurrent.futures
import importlib.util
import os
import shutil
import site
import subprocess
import sys

from setuptools import Extension
from setuptools import find_packages
from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# The TensorFlow minor version the op library is built for; pyproject.toml's
# build-system.requires pins the same (tests/test_wheel.py checks).
SUPPORTED_TENSORFLOW = "2.21"
INSTALL = "pip install --no-build-isolation ."


def load_cuda_config(path):
  """bazel/cuda_config.py, the CUDA discovery Bazel runs too."""
  spec = importlib.util.spec_from_file_location("cuda_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


cuda_config = load_cuda_config(os.path.join(ROOT, "bazel", "cuda_config.py"))
FACTS = cuda_config.read_build_facts(
    os.path.join(ROOT, "bazel", "build_facts.bzl"))


def compiled(sources):
  """The files of `sources` the compiler takes; the rest are headers."""
  return [source for source in sources if not source.endswith(".h")]


def find_nvcc(tf):
  """nvcc's path if the CUDA kernels are to be built, else None (docs/cuda.md:
  TF_ADASAMP_CUDA=0 or 1 forces either way).

  Prints one line saying which, and why.
  """
  nvcc, reason = cuda_config.find_nvcc(os.environ, tf.test.is_built_with_cuda)
  if nvcc:
    print(f"tf_adasamp: building the CUDA kernels with {nvcc}")
  else:
    print(f"tf_adasamp: CPU kernels only ({reason})")
  return nvcc


def cuda_build(nvcc, root, build_temp, tf_include):
  """How to build the CUDA kernels: (nvcc's command, None if its object is up
  to date; the C++ sources, compile flags and link flags they add).

  `tf_include`, TensorFlow's header directory, has the one header the CUDA
  side takes from it: TSL's Philox generator, framework-free.

  The kernels link CUDA's static runtime from the same toolkit as nvcc,
  private to the library (docs/cuda.md says why). nvcc reruns only when a
  CUDA source is newer than its object: five architectures take a minute.
  """
  architectures = cuda_config.architectures(os.environ,
                                            FACTS["CUDA_ARCHITECTURES"])
  kernels = os.path.join(build_temp,
                         f"sum_tree_gpu_sm{'_'.join(architectures)}.o")
  source = os.path.join(root, FACTS["CUDA_SOURCE"])
  inputs = [source
           ] + [os.path.join(root, path) for path in FACTS["CUDA_HEADERS"]]
  command = None
  if not (os.path.exists(kernels) and os.path.getmtime(kernels) >= max(
      os.path.getmtime(path) for path in inputs)):
    command = [
        nvcc,
        *FACTS["NVCC_FLAGS"],
        f"-I{root}",
        f"-I{tf_include}",
        *cuda_config.gencode_flags(architectures),
        "-c",
        source,
        "-o",
        kernels,
    ]
  return (command, compiled(FACTS["OP_LIBRARY_GPU_SOURCES"]),
          FACTS["GPU_CXX_FLAGS"], [
              kernels,
              f"-L{cuda_config.cudart_static_dir(nvcc)}",
              "-l:libcudart_static.a",
              *FACTS["CUDART_LINK_FLAGS"],
          ])


def run_all(commands):
  """Runs the commands side by side, one per core, as make -j would."""
  with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
    runs = []
    for command in commands:
      print(" ".join(command))
      runs.append(pool.submit(subprocess.check_call, command))
    for run in runs:
      run.result()


# Headers that TensorFlow's XLA headers include but its wheel lacks, and the
# Debian package of each.
XLA_HEADER_PACKAGES = {
    "highwayhash/arch_specific.h": "libhighwayhash-dev",
    "farmhash.h": "libfarmhash-dev",
}


def check_xla_headers(compiler):
  """Fails with the packages to install if the compiler cannot find
  XLA_HEADER_PACKAGES' headers, before a long compile fails on them."""
  missing = [
      package for header, package in XLA_HEADER_PACKAGES.items()
      if subprocess.run([compiler, "-E", "-x", "c++", "-o", os.devnull, "-"],
                        input=f"#include <{header}>\n",
                        capture_output=True,
                        text=True,
                        check=False).returncode != 0
  ]
  if missing:
    raise RuntimeError(
        "tf_adasamp: the op library's XLA kernels include TensorFlow headers "
        "that need headers its wheel lacks; install them first (Debian, "
        f"Ubuntu: apt-get install {' '.join(missing)})")


class BuildOpLibrary(build_ext):
  """Compiles the op library with g++ and TensorFlow's own compile flags."""

  def get_ext_filename(self, ext_name):
    # tf.load_op_library wants a plain name: tf_adasamp/_sum_tree_ops.so.
    return os.path.join(*ext_name.split(".")) + ".so"

  def build_extension(self, ext):
    output = self.get_ext_fullpath(ext.name)
    in_place = os.path.join(ROOT, self.get_ext_filename(ext.name))
    if not self.force and up_to_date(output):
      print(f"tf_adasamp: {output} is newer than its sources")
      return
    if not self.force and up_to_date(in_place):
      # A wheel of a checkout whose library is built in place (make setup).
      print(f"tf_adasamp: copying {in_place}, newer than its sources")
      os.makedirs(os.path.dirname(output), exist_ok=True)
      shutil.copy2(in_place, output)
      return
    import tensorflow as tf

    os.makedirs(os.path.dirname(output), exist_ok=True)
    os.makedirs(self.build_temp, exist_ok=True)
    compiler = os.environ.get("CXX", shutil.which("g++") or "c++")
    check_xla_headers(compiler)
    nvcc = find_nvcc(tf)
    nvcc_command, gpu_sources, gpu_flags, gpu_link_flags = (cuda_build(
        nvcc, ROOT, self.build_temp, tf.sysconfig.get_include()) if nvcc else
                                                            (None, [], [], []))
    # Each source to its object, and nvcc beside them; then one link.
    objects = {
        source:
            os.path.join(self.build_temp,
                         os.path.splitext(source)[0].replace("/", "_") + ".o")
        for source in ext.sources + gpu_sources
    }
    compiles = [nvcc_command] if nvcc_command else []
    compiles += [[
        compiler,
        *FACTS["CXX_FLAGS"],
        *gpu_flags,
        f"-I{ROOT}",
        *tf.sysconfig.get_compile_flags(),
        "-c",
        os.path.join(ROOT, source),
        "-o",
        target,
    ] for source, target in objects.items()]
    run_all(compiles)
    link = [
        compiler,
        "-shared",
        *objects.values(),
        "-o",
        output,
        *gpu_link_flags,
        *tf.sysconfig.get_link_flags(),
        # The XLA kernels and the GPU OpKernels use TensorFlow's own.
        "-l:libtensorflow_cc.so.2",
    ]
    print(" ".join(link))
    subprocess.check_call(link)


def up_to_date(output):
  """Whether `output` is newer than every source of the op library (as make
  would judge), so that a rebuild, a wheel's included, skips the compile."""
  sources = [
      *FACTS["OP_LIBRARY_SOURCES"], *FACTS["OP_LIBRARY_GPU_SOURCES"],
      FACTS["CUDA_SOURCE"], *FACTS["CUDA_HEADERS"], "bazel/build_facts.bzl"
  ]
  return os.path.exists(output) and os.path.getmtime(output) >= max(
      os.path.getmtime(os.path.join(ROOT, path)) for path in sources)


def refuse(reason):
  """Ends the build with one line: `reason`, and the command to use."""
  sys.exit(f"tf_adasamp: {reason}; install with: {INSTALL}")


def tensorflow_requirement():
  """TensorFlow at the minor version the op library is built against (the
  .so is ABI-bound to it), under the distribution name that is installed:
  a user of tensorflow-cpu must not get the full tensorflow beside it.

  Refuses a build without TensorFlow, with another minor version, or in
  pip's isolated build environment, whose TensorFlow is not the one the
  package will run with.
  """
  from importlib import metadata

  spec = importlib.util.find_spec("tensorflow")
  if spec is None:
    refuse("the build compiles against the installed TensorFlow, and there "
           f"is none: install tensorflow=={SUPPORTED_TENSORFLOW}.* (or "
           "tensorflow-cpu) first")
  environment = site.getsitepackages() + [site.getusersitepackages()]
  if not any(
      os.path.realpath(spec.origin).startswith(os.path.realpath(path) + os.sep)
      for path in environment):
    refuse("this is pip's isolated build environment, whose TensorFlow is "
           "not the one the package will run with")
  for name in ("tensorflow-cpu", "tensorflow", "tf-nightly"):
    try:
      version = metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
    major_minor = ".".join(version.split(".")[:2])
    if major_minor != SUPPORTED_TENSORFLOW and name != "tf-nightly":
      refuse(f"{name} {version} is installed, and this release builds "
             f"against TensorFlow {SUPPORTED_TENSORFLOW}")
    major, minor = (int(part) for part in version.split(".")[:2])
    return f"{name}>={major}.{minor},<{major}.{minor + 1}"
  refuse("TensorFlow is importable but not installed as a distribution "
         "(tensorflow, tensorflow-cpu or tf-nightly)")


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
    long_description=open(os.path.join(ROOT, "README.md"),
                          encoding="utf-8").read(),
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
    ext_modules=[
        Extension("tf_adasamp._sum_tree_ops",
                  sources=compiled(FACTS["OP_LIBRARY_SOURCES"]))
    ],
    cmdclass={"build_ext": BuildOpLibrary},
    python_requires=">=3.10",
    # ml_dtypes comes with TensorFlow; tf_adasamp.utilities imports it.
    install_requires=[tensorflow_requirement(), "numpy", "ml_dtypes"],
    extras_require={
        # The paper's experiment: tf_adasamp.experiment and its commands.
        "experiment":
            EXPERIMENT,
        # tf_adasamp.sources' ArrayRecord files, imported when one is opened.
        "data": ["array-record"],
        # ruff and mypy pinned: ruff's docstring rules for returns and
        # raised errors (DOC) are in preview, free to change between
        # releases, and a new mypy finds new faults.
        "test":
            EXPERIMENT + [
                "pytest", "pytest-xdist", "scipy", "hypothesis", "yapf", "pdoc",
                "ruff==0.17.6", "mypy==2.4.1"
            ],
    },
    entry_points={
        "console_scripts": [
            "tf-adasamp-train = tf_adasamp.experiment.train:run",
            "tf-adasamp-reproduce = tf_adasamp.experiment.reproduce:run",
            "tf-adasamp-bounds = tf_adasamp.experiment.bounds_table:run",
            "tf-adasamp-demo = tf_adasamp.experiment.demo:run",
            "tf-adasamp-noise-study = tf_adasamp.experiment.noise_study:run",
            "tf-adasamp-wall-time = tf_adasamp.experiment.wall_time:run",
            "tf-adasamp-budget-study = "
            "tf_adasamp.experiment.budget_study:run",
        ],
    },
    zip_safe=False,
)
