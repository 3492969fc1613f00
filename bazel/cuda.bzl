"""The GPU kernels in the Bazel build, as setup.py builds them (docs/cuda.md).

Where nvcc is found and the installed TensorFlow is a CUDA build, the CUDA
kernels are compiled by nvcc and linked into //tf_adasamp:_sum_tree_ops.so
with the GPU OpKernels and CUDA's static runtime; elsewhere the library is
CPU-only. TF_ADASAMP_CUDA=0 forces CPU-only, TF_ADASAMP_CUDA=1 makes a missing
nvcc or a CPU-only TensorFlow an error, TF_ADASAMP_CUDA_ARCHITECTURES (e.g.
"90") narrows the architectures (default 75,80,86,89,90, plus PTX for the
last).

Two parts:
  configure_cuda(repository_ctx, python, library_dir): called from
      tf_configure's implementation (CUDA_ENVIRON joins its `environ`); writes
      the package @local_config_tf//cuda: defs.bzl (CUDA_ENABLED, NVCC,
      CUDA_ARCHITECTURES) and, when enabled, the cc_libraries cudart_static
      and tensorflow_cc (the GPU OpKernels need TensorFlow's GPU functors).
  cuda_object(name, src, hdrs, nvcc, architectures): nvcc compiles `src` into
      a PIC object, wrapped as a cc_library to link into the op library;
      nothing where nvcc is None (CUDA_ENABLED is False).
"""

CUDA_ENVIRON = [
    "TF_ADASAMP_CUDA",
    "TF_ADASAMP_CUDA_ARCHITECTURES",
    "CUDA_HOME",
    "PATH",
]

_DEFAULT_ARCHITECTURES = "75,80,86,89,90"

def _find_nvcc(repository_ctx, python):
    """(nvcc's path, "") if the kernels are to be built, else (None, why)."""
    environ = repository_ctx.os.environ
    setting = environ.get("TF_ADASAMP_CUDA", "")
    nvcc = repository_ctx.which("nvcc")
    if not nvcc:
        in_cuda_home = repository_ctx.path(
            environ.get("CUDA_HOME", "/usr/local/cuda") + "/bin/nvcc",
        )
        nvcc = in_cuda_home if in_cuda_home.exists else None
    if setting == "0":
        return None, "TF_ADASAMP_CUDA=0"
    if not nvcc:
        return None, "no nvcc on PATH or in $CUDA_HOME/bin"
    built_with_cuda = repository_ctx.execute([
        python,
        "-c",
        "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'; " +
        "import tensorflow as tf; print(tf.test.is_built_with_cuda())",
    ]).stdout.strip().splitlines()
    if not built_with_cuda or built_with_cuda[-1] != "True":
        return None, "this TensorFlow is not built with CUDA"
    return str(nvcc), ""

def _cudart_static(repository_ctx, nvcc):
    """libcudart_static.a, where nvcc's own link step finds it."""
    dryrun = repository_ctx.execute(
        [nvcc, "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"],
    ).stderr
    for line in dryrun.splitlines():
        if line.startswith("#$ LIBRARIES="):
            for flag in line[len("#$ LIBRARIES="):].split(" "):
                library = repository_ctx.path(flag.strip('"')[2:] + "/libcudart_static.a")
                if library.exists:
                    return library
    fail("cuda: %s links no libcudart_static.a" % nvcc)

def configure_cuda(repository_ctx, python, library_dir):
    """Writes @<this repository>//cuda for the TensorFlow in `library_dir`."""
    nvcc, reason = _find_nvcc(repository_ctx, python)
    if not nvcc:
        if repository_ctx.os.environ.get("TF_ADASAMP_CUDA", "") == "1":
            fail("TF_ADASAMP_CUDA=1, but " + reason)
        print("tf_adasamp: CPU kernels only (%s)" % reason)
        repository_ctx.file("cuda/BUILD", "")
        repository_ctx.file("cuda/defs.bzl", "\n".join([
            "CUDA_ENABLED = False",
            "NVCC = None",
            "CUDA_ARCHITECTURES = []",
            "",
        ]))
        return
    print("tf_adasamp: building the CUDA kernels with " + nvcc)
    architectures = repository_ctx.os.environ.get(
        "TF_ADASAMP_CUDA_ARCHITECTURES",
        _DEFAULT_ARCHITECTURES,
    ).split(",")
    repository_ctx.symlink(_cudart_static(repository_ctx, nvcc), "cuda/libcudart_static.a")
    repository_ctx.symlink(
        library_dir + "/libtensorflow_cc.so.2",
        "cuda/libtensorflow_cc.so.2",
    )
    repository_ctx.file("cuda/BUILD", "\n".join([
        'package(default_visibility = ["//visibility:public"])',
        "",
        "# CUDA's runtime, private to the op library (docs/cuda.md).",
        "cc_library(",
        '    name = "cudart_static",',
        '    srcs = ["libcudart_static.a"],',
        '    linkopts = ["-ldl", "-lrt", "-lpthread", "-Wl,--exclude-libs,ALL"],',
        ")",
        "",
        "cc_library(",
        '    name = "tensorflow_cc",',
        '    srcs = ["libtensorflow_cc.so.2"],',
        ")",
        "",
    ]))
    repository_ctx.file("cuda/defs.bzl", "\n".join([
        "CUDA_ENABLED = True",
        'NVCC = "%s"' % nvcc,
        "CUDA_ARCHITECTURES = %s" % architectures,
        "",
    ]))

def cuda_object(name, src, hdrs, nvcc, architectures):
    """`src` compiled by nvcc with setup.py's flags, as a cc_library."""
    if not nvcc:
        return
    gencode = [
        "-gencode=arch=compute_%s,code=sm_%s" % (a, a)
        for a in architectures
    ] + ["-gencode=arch=compute_%s,code=compute_%s" % (architectures[-1], architectures[-1])]
    native.genrule(
        name = name + "_nvcc",
        srcs = [src] + hdrs,
        outs = [name + ".pic.o"],
        cmd = " ".join([
            nvcc,
            "-std=c++17",
            "-O3",
            "--fmad=false",
            "-Xcompiler=-fPIC",
            "-Xcompiler=-fvisibility=hidden",
            "-I.",
        ] + gencode + ["-c", "$(location %s)" % src, "-o", "$@"]),
    )
    native.cc_library(
        name = name,
        srcs = [name + ".pic.o"],
        alwayslink = True,
    )
