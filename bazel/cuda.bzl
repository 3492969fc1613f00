"""The GPU kernels in the Bazel build, as setup.py builds them (docs/cuda.md).

Where nvcc is found and the installed TensorFlow is a CUDA build, the CUDA
kernels are compiled by nvcc and linked into //tf_adasamp:_sum_tree_ops.so
with the GPU OpKernels and CUDA's static runtime; elsewhere the library is
CPU-only. TF_ADASAMP_CUDA=0 forces CPU-only, TF_ADASAMP_CUDA=1 makes a missing
nvcc or a CPU-only TensorFlow an error, TF_ADASAMP_CUDA_ARCHITECTURES (e.g.
"90") narrows the architectures (default: build_facts.bzl's
CUDA_ARCHITECTURES, plus PTX for the last).

The discovery (nvcc, CUDA's static runtime, the architectures) is
bazel/cuda_config.py, the same code setup.py runs; the flags and lists are
bazel/build_facts.bzl's.

Two parts:
  configure_cuda(repository_ctx, python, library_dir): called from
      tf_configure's implementation (CUDA_ENVIRON joins its `environ`); writes
      the package @local_config_tf//cuda: defs.bzl (CUDA_ENABLED, NVCC,
      NVCC_GENCODE) and, when enabled, the cc_library cudart_static.
  cuda_object(name, src, hdrs, nvcc, gencode): nvcc compiles `src` (which
      may include TSL's Philox header from TensorFlow's) into a PIC object,
      wrapped as a cc_library to link into the op library; nothing where
      nvcc is None (CUDA_ENABLED is False).
"""

load(
    "//bazel:build_facts.bzl",
    "CUDART_LINK_FLAGS",
    "CUDA_ARCHITECTURES",
    "NVCC_FLAGS",
    _CUDA_ENVIRON = "CUDA_ENVIRON",
)

CUDA_ENVIRON = _CUDA_ENVIRON

def _cuda_config(repository_ctx, python):
    """bazel/cuda_config.py's answer, as a dict."""
    result = repository_ctx.execute([
        python,
        repository_ctx.path(Label("//bazel:cuda_config.py")),
        ",".join(CUDA_ARCHITECTURES),
    ])
    if result.return_code != 0:
        fail("cuda: bazel/cuda_config.py failed:\n" + result.stderr)
    config = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition("=")
        config[key] = value
    return config

def configure_cuda(repository_ctx, python, library_dir):
    """Writes @<this repository>//cuda for the TensorFlow in `library_dir`."""
    config = _cuda_config(repository_ctx, python)
    if config.get("enabled") != "1":
        print("tf_adasamp: CPU kernels only (%s)" % config.get("reason"))
        repository_ctx.file("cuda/BUILD", "")
        repository_ctx.file("cuda/defs.bzl", "\n".join([
            "CUDA_ENABLED = False",
            "NVCC = None",
            "NVCC_GENCODE = []",
            "",
        ]))
        return
    nvcc = config["nvcc"]
    print("tf_adasamp: building the CUDA kernels with " + nvcc)
    repository_ctx.symlink(
        config["cudart_static_dir"] + "/libcudart_static.a",
        "cuda/libcudart_static.a",
    )
    repository_ctx.file("cuda/BUILD", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        "",
        "# CUDA's runtime, private to the op library (docs/cuda.md).",
        "cc_library(",
        '    name = "cudart_static",',
        '    srcs = ["libcudart_static.a"],',
        "    linkopts = %s," % CUDART_LINK_FLAGS,
        ")",
        "",
    ]))
    repository_ctx.file("cuda/defs.bzl", "\n".join([
        "CUDA_ENABLED = True",
        'NVCC = "%s"' % nvcc,
        "NVCC_GENCODE = %s" % config["gencode"].split(" "),
        "",
    ]))

def cuda_object(name, src, hdrs, nvcc, gencode):
    """`src` compiled by nvcc with build_facts.bzl's flags, as a cc_library."""
    if not nvcc:
        return
    tsl_headers = "@local_config_tf//:tsl_philox_headers"
    native.genrule(
        name = name + "_nvcc",
        srcs = [src, tsl_headers] + hdrs,
        outs = [name + ".pic.o"],
        cmd = " ".join([nvcc] + NVCC_FLAGS + [
            "-I.",
            # Where tf_configure puts TensorFlow's headers: TSL's Philox.
            "-Iexternal/local_config_tf/include",
        ] + gencode + ["-c", "$(location %s)" % src, "-o", "$@"]),
    )
    native.cc_library(
        name = name,
        srcs = [name + ".pic.o"],
        alwayslink = True,
    )
