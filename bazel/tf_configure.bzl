"""Repository rule exposing the installed TensorFlow (headers, framework and
C++ libraries) and the Python interpreter that has it, as @local_config_tf.

The interpreter is $PYTHON_BIN_PATH if set, else the workspace's .venv, else
python3 on the PATH; TensorFlow's own `tf.sysconfig` says where the headers and
the library are, so the build always matches the TensorFlow the tests import.
The package @local_config_tf//cuda says whether the CUDA kernels are built
(bazel/cuda.bzl).
"""

load("//bazel:cuda.bzl", "CUDA_ENVIRON", "configure_cuda")

def _python(repository_ctx):
    path = repository_ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if path:
        return path
    venv = repository_ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv")
    if venv.get_child("bin").get_child("python").exists:
        return str(venv.get_child("bin").get_child("python"))
    found = repository_ctx.which("python3")
    if not found:
        fail("tf_configure: no Python found; set PYTHON_BIN_PATH")
    return str(found)

def _ask_tensorflow(repository_ctx, python, expression):
    result = repository_ctx.execute([
        python,
        "-c",
        "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'; " +
        "import tensorflow as tf; print(%s)" % expression,
    ])
    if result.return_code != 0:
        fail("tf_configure: %s cannot import tensorflow:\n%s" % (python, result.stderr))
    return result.stdout.strip().splitlines()[-1]

def _tf_configure_impl(repository_ctx):
    python = _python(repository_ctx)
    include_dir = _ask_tensorflow(repository_ctx, python, "tf.sysconfig.get_include()")
    library_dir = _ask_tensorflow(repository_ctx, python, "tf.sysconfig.get_lib()")
    cxx11_abi = _ask_tensorflow(repository_ctx, python, "tf.sysconfig.CXX11_ABI_FLAG")
    repository_ctx.symlink(include_dir, "include")
    for library in ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2"):
        repository_ctx.symlink(library_dir + "/" + library, library)
    repository_ctx.template("BUILD", Label("//bazel:tf_configure.BUILD.tpl"), {
        "%{CXX11_ABI}": cxx11_abi,
        "%{PYTHON}": python,
    })
    configure_cuda(repository_ctx, python, library_dir)

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = ["PYTHON_BIN_PATH"] + CUDA_ENVIRON,
    local = True,
)
