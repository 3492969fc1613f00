// The sum-tree's CUDA kernels (sum_tree_gpu.cu) as plain C++ functions over
// device pointers and a stream: no TensorFlow here, and no CUDA header either,
// so g++ compiles the GPU functors (../sum_tree_ops_gpu.cc) against this file
// alone, and the standalone driver (benchmarks/gpu_sum_tree_driver.cu) calls
// it too. The steps are those of sum_tree_parallel.h. The CUDA source
// compiles with hidden visibility: these functions are for the code linked
// with it, not exported from the op library.
//
// Every function enqueues its work on `stream` and returns at once, without
// waiting for the device; it returns 0 or the CUDA error (cudaError_t) of a
// failed launch, which ErrorString names. Values are checked on the device,
// where an error cannot be raised: a mutating call with a bad index or value
// leaves all its state untouched, and a bad draw returns index -1 with
// probability NaN (see docs/cuda.md).
//
// The trees are heap-layout arrays of 2 * capacity values
// (sum_tree_algorithm.h). Functions that take `scratch` need a device buffer of
// the size the matching ...ScratchBytes function gives, 256-byte aligned.
// Each template is defined, for float and double, in sum_tree_gpu.cu.

#ifndef ADASAMP_CC_KERNELS_GPU_SUM_TREE_GPU_H_
#define ADASAMP_CC_KERNELS_GPU_SUM_TREE_GPU_H_

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*.

namespace adasamp {
namespace gpu {

using Stream = CUstream_st*;

// Sets all leaves to `weights` and rebuilds the tree, O(n). Untouched if a
// weight is negative or not finite, or the total overflows.
template <typename T>
size_t SumTreeBuildScratchBytes(int64_t capacity);
template <typename T>
int SumTreeBuild(const T* weights, int64_t num_leaves, T* tree,
                 int64_t capacity, void* scratch, Stream stream);

// Sets leaves `indices` to `weights` (the last of repeated indices wins) and
// recomputes their distinct ancestors, level by level. Untouched if an index is
// out of range, a weight negative or not finite, or the new total overflows.
template <typename T>
size_t SumTreeSetScratchBytes(int64_t count, int64_t num_leaves);
template <typename T>
int SumTreeSet(const int64_t* indices, const T* weights, int64_t count,
               int64_t num_leaves, T* tree, int64_t capacity, void* scratch,
               Stream stream);

// One draw per uniform: the smallest i with cumsum(w)[i] > u * total, and
// w_i / total.
template <typename T>
int SumTreeSample(const T* tree, int64_t capacity, const T* uniforms,
                  int64_t count, int64_t* indices, T* probabilities,
                  Stream stream);

// As SumTreeSample, on the uniforms tf.random.Generator.uniform([count], T)
// would draw from the Philox state `rng_state` (device int64 [3]), which it
// advances as that call would; stratified, uniform i becomes (i + u) / count.
template <typename T>
int SumTreeDraw(const T* tree, int64_t capacity, int64_t* rng_state,
                int64_t count, bool stratified, int64_t* indices,
                T* probabilities, Stream stream);

// Algorithm 1, line 5, for the first occurrence of each index, on the log
// weights, both caches and the log-scale; rescales the caches on the device
// when their total leaves its safe range. Untouched if an index is out of
// range, or a utility or new log weight not finite.
template <typename T>
size_t AdaptiveReweightScratchBytes(int64_t count, int64_t num_leaves);
template <typename T>
int AdaptiveReweight(T amplitude, T decay, const int64_t* indices,
                     const T* utilities, int64_t count, T* log_weights,
                     int64_t num_leaves, T* log_scale, T* tree, T* entropy_tree,
                     int64_t capacity, void* scratch, Stream stream);

const char* ErrorString(int error);

}  // namespace gpu
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_GPU_SUM_TREE_GPU_H_
