"""Builds tf_adasamp and its op library against the installed TensorFlow.

TensorFlow must be importable at build time, so install with
`pip install --no-build-isolation .` into an environment that has it (a plain
`pip install .` works too, but first installs TensorFlow into pip's isolated
build environment).
"""

import os
import shutil
import subprocess

from setuptools import Extension
from setuptools import find_packages
from setuptools import setup
from setuptools.command.build_ext import build_ext

CPU_SOURCES = [
    "cc/ops/sum_tree_ops.cc",
    "cc/kernels/sum_tree_ops.cc",
]


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
    command = [
        compiler, "-O3", "-fPIC", "-shared", "-Wno-deprecated-declarations",
        "-Wno-interference-size",
        f"-I{root}", *tf.sysconfig.get_compile_flags(),
        *[os.path.join(root, source) for source in ext.sources],
        "-o", output, *tf.sysconfig.get_link_flags(),
    ]
    print(" ".join(command))
    subprocess.check_call(command)


setup(
    name="tf_adasamp",
    version="0.1.0",
    description=("Adaptive sampling SGD (London, NIPS 2017) as graph-native "
                 "TensorFlow ops"),
    packages=find_packages(include=["tf_adasamp", "tf_adasamp.*"]),
    ext_modules=[Extension("tf_adasamp._sum_tree_ops", sources=CPU_SOURCES)],
    cmdclass={"build_ext": BuildOpLibrary},
    python_requires=">=3.10",
    install_requires=[
        "tensorflow>=2.21",
        "tensorflow-datasets",
        "importlib_resources",  # imported, not declared, by tfds 4.9.10
        "numpy",
        "absl-py",
        "matplotlib",
        "scikit-learn",  # ships the digits dataset used for offline runs
    ],
    extras_require={"test": ["pytest", "scipy"]},
    entry_points={
        "console_scripts": [
            "tf-adasamp-train = tf_adasamp.train:run",
            "tf-adasamp-reproduce = tf_adasamp.reproduce:run",
        ],
    },
    zip_safe=False,
)
