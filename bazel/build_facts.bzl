"""What the op library is built from and how: the one list of each.

Read by both build systems: the BUILD files `load` these names, and setup.py
reads each assignment with `ast.literal_eval` (so keep every value a plain
list or string literal, nothing computed). tests/test_build_facts.py checks
that every C++/CUDA file under cc/ is listed here and that both builds use
these lists. Paths are relative to the repository root.
"""

# The CPU op library: op registrations, OpKernels, CPU functors, the XLA
# kernels and their FFI handlers. Headers are listed for Bazel (and for setup.py's rebuild
# check); only the .cc files are compiled.
OP_LIBRARY_SOURCES = [
    "cc/ops/draw_permits_ops.cc",
    "cc/ops/sum_tree_ops.cc",
    "cc/kernels/cpu_features.h",
    "cc/kernels/descend_cpu.h",
    "cc/kernels/draw_permits.cc",
    "cc/kernels/huge_pages.h",
    "cc/kernels/intra_op_pool.h",
    "cc/kernels/philox_cpu.h",
    "cc/kernels/sum_tree_algorithm.h",
    "cc/kernels/sum_tree_checks.cc",
    "cc/kernels/sum_tree_checks.h",
    "cc/kernels/sum_tree_cpu.h",
    "cc/kernels/sum_tree_ffi.cc",
    "cc/kernels/sum_tree_ffi.h",
    "cc/kernels/sum_tree_op_kernel.h",
    "cc/kernels/sum_tree_ops.cc",
    "cc/kernels/sum_tree_ops.h",
    "cc/kernels/sum_tree_ops_cpu.cc",
    "cc/kernels/sum_tree_ops_xla.cc",
    "cc/kernels/variable_locks.cc",
    "cc/kernels/variable_locks.h",
]

# The TF-free CPU algorithms, which the C++ unit tests (tests/BUILD) build
# without TensorFlow's framework: only TSL's Philox header.
CPU_ALGORITHM_HEADERS = [
    "cc/kernels/cpu_features.h",
    "cc/kernels/descend_cpu.h",
    "cc/kernels/philox_cpu.h",
    "cc/kernels/sum_tree_algorithm.h",
    "cc/kernels/sum_tree_cpu.h",
]

# The units over TensorFlow's framework that the C++ unit tests (tests/BUILD)
# build alone, linked against the installed TensorFlow's libraries: the input
# checks, and the variables' look-up and locks.
SUM_TREE_CHECKS_SOURCES = [
    "cc/kernels/sum_tree_algorithm.h",
    "cc/kernels/sum_tree_checks.cc",
    "cc/kernels/sum_tree_checks.h",
]
VARIABLE_LOCKS_SOURCES = [
    "cc/kernels/variable_locks.cc",
    "cc/kernels/variable_locks.h",
]

# Joins the op library where the CUDA kernels are built (docs/cuda.md): the
# GPU functors, compiled by the C++ compiler against gpu/sum_tree_gpu.h.
OP_LIBRARY_GPU_SOURCES = [
    "cc/kernels/gpu/sum_tree_gpu.h",
    "cc/kernels/sum_tree_ops_gpu.cc",
]

# The TF-free CUDA side: the one source nvcc compiles, and what it includes.
CUDA_SOURCE = "cc/kernels/gpu/sum_tree_gpu.cu"
CUDA_HEADERS = [
    "cc/kernels/gpu/sum_tree_gpu.h",
    "cc/kernels/gpu/sum_tree_parallel.h",
    "cc/kernels/gpu/sum_tree_steps.h",
    "cc/kernels/sum_tree_algorithm.h",
]

# C++ flags of the op library, beside TensorFlow's own compile flags.
# -ffp-contract=off: no fused multiply-add in code built for FMA-capable
# CPUs (the AVX-512 functions), so that the CPU rounds as nvcc's
# --fmad=false kernels do and draws stay bit for bit the same.
CXX_FLAGS = [
    "-std=c++17",
    "-O3",
    "-fPIC",
    "-ffp-contract=off",
    "-Wno-deprecated-declarations",
    "-Wno-interference-size",
]

# The C++ flag that turns on the GPU kernels' registration.
GPU_CXX_FLAGS = ["-DGOOGLE_CUDA=1"]

# nvcc's flags: no fused multiply-add, so that sums and products round as on
# the CPU and draws match the CPU op's draw for draw; CUDA's runtime and
# kernels private to the library.
NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--fmad=false",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-fvisibility=hidden",
]

# CUDA's static runtime (libcudart_static.a) needs these, and stays private
# to the op library.
CUDART_LINK_FLAGS = [
    "-ldl",
    "-lrt",
    "-lpthread",
    "-Wl,--exclude-libs,ALL",
]

# Compiled to machine code for each, plus PTX for the last;
# TF_ADASAMP_CUDA_ARCHITECTURES (e.g. "90") narrows them.
CUDA_ARCHITECTURES = ["75", "80", "86", "89", "90"]

# The environment the CUDA discovery (bazel/cuda_config.py) reads.
CUDA_ENVIRON = [
    "TF_ADASAMP_CUDA",
    "TF_ADASAMP_CUDA_ARCHITECTURES",
    "CUDA_HOME",
    "PATH",
]
