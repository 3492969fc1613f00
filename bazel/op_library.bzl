"""Macros for the op library and its pytest suites."""

def tf_custom_op_library(name, srcs = [], deps = [], copts = [], **kwargs):
    """A shared library of TensorFlow ops, loadable with tf.load_op_library.

    Links against the installed TensorFlow's framework library, with the
    compile flags that `tf.sysconfig.get_compile_flags()` gives.
    """
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = copts + [
            "-std=c++17",
            "-fPIC",
            "-O3",
            "-Wno-deprecated-declarations",
            "-Wno-interference-size",
        ],
        linkshared = 1,
        deps = deps + [
            "@local_config_tf//:libtensorflow_framework",
            "@local_config_tf//:tf_header_lib",
        ],
        **kwargs
    )

def pytest_suite(srcs, deps = [], data = [], size = "medium", **kwargs):
    """One py_test per test file, each run by pytest."""
    for src in srcs:
        native.py_test(
            name = src[:-len(".py")],
            srcs = [src, "//tests:pytest_main.py"],
            main = "//tests:pytest_main.py",
            args = ["$(location %s)" % src],
            data = data + [src],
            deps = deps,
            size = size,
            **kwargs
        )
