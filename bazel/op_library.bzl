"""Macros for the op library and its pytest suites."""

load("//bazel:build_facts.bzl", "CXX_FLAGS")

def source_labels(paths):
    """Labels of build_facts.bzl's root-relative paths: "cc/a/b.cc" is
    //cc:a/b.cc, the package being the first folder."""
    return ["//%s:%s" % tuple(path.split("/", 1)) for path in paths]

def tf_custom_op_library(name, srcs = [], deps = [], copts = [], **kwargs):
    """A shared library of TensorFlow ops, loadable with tf.load_op_library.

    Links against the installed TensorFlow's framework and C++ libraries,
    with the compile flags that `tf.sysconfig.get_compile_flags()` gives (the
    tf_header_lib target) and build_facts.bzl's CXX_FLAGS.
    """
    native.cc_binary(
        name = name,
        srcs = srcs,
        copts = copts + CXX_FLAGS,
        linkshared = 1,
        deps = deps + [
            "@local_config_tf//:libtensorflow_cc",
            "@local_config_tf//:libtensorflow_framework",
            "@local_config_tf//:tf_header_lib",
        ],
        **kwargs
    )

def pytest_suite(srcs, deps = [], data = [], size = "large", **kwargs):
    """One py_test per test file, each run by pytest.

    Large (15 minutes) by default: files that start subprocesses (the CLI
    fuzz, the layering checks) take minutes on a loaded 2-core machine.
    """
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
