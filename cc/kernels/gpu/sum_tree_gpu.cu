// The sum-tree's CUDA kernels: the steps of sum_tree_parallel.h launched on a
// stream, behind the plain API of sum_tree_gpu.h. No
// TensorFlow here; compile with --fmad=false, so that sums and products round
// as on the CPU and draws match the CPU op's draw for draw.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "cc/kernels/gpu/sum_tree_gpu.h"
#include "cc/kernels/gpu/sum_tree_parallel.h"

namespace adasamp {
namespace gpu {
namespace {

constexpr int kForEachThreads = 256;
// Grids stop at this many blocks and their threads stride over the rest, so
// that a step gated off by a flag (most of a rescale, on most calls) costs one
// short wave, not a grid sized to the tree.
constexpr int64_t kMaxGridBlocks = 1024;

int64_t GridBlocks(int64_t blocks) { return std::min(blocks, kMaxGridBlocks); }

template <class F>
__global__ void __launch_bounds__(kForEachThreads)
    ForEachKernel(int64_t count, F f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    f(i);
  }
}

// Runs the op's blocks [0, blocks), gridDim.x of them at a time. NumPhases()
// is read here, on the device: an op gated off by a flag word has none.
template <class Op>
__global__ void __launch_bounds__(Op::kThreads)
    BlockKernel(Op op, int64_t blocks) {
  __shared__ typename Op::Shared shared;
  const int num_phases = op.NumPhases();
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const parallel::BlockThread thread{static_cast<int>(threadIdx.x),
                                       Op::kThreads, block, blocks};
    for (int phase = 0; phase < num_phases; ++phase) {
      op.Phase(phase, thread, shared);
      __syncthreads();
    }
  }
}

// The executor of sum_tree_parallel.h on a CUDA stream. After a failed launch
// it enqueues nothing more, so no step runs on the output of one that did not.
class CudaExecutor {
 public:
  explicit CudaExecutor(cudaStream_t stream) : stream_(stream) {}

  template <class F>
  void ForEach(int64_t count, const F& f) {
    if (failed() || count <= 0) return;
    const int64_t blocks =
        GridBlocks((count + kForEachThreads - 1) / kForEachThreads);
    ForEachKernel<<<blocks, kForEachThreads, 0, stream_>>>(count, f);
    Record(cudaGetLastError());
  }

  template <class Op>
  void Blocks(int64_t blocks, const Op& op) {
    if (failed() || blocks <= 0) return;
    BlockKernel<<<GridBlocks(blocks), Op::kThreads, 0, stream_>>>(op, blocks);
    Record(cudaGetLastError());
  }

  size_t SortPairsTempBytes(int64_t count, int bits) {
    size_t bytes = 0;
    Record(cub::DeviceRadixSort::SortPairs(
        nullptr, bytes, static_cast<const int64_t*>(nullptr),
        static_cast<int64_t*>(nullptr), static_cast<const int32_t*>(nullptr),
        static_cast<int32_t*>(nullptr), count, 0, bits, stream_));
    return bytes;
  }

  void SortPairs(const int64_t* keys_in, int64_t* keys_out,
                 const int32_t* values_in, int32_t* values_out, int64_t count,
                 int bits, void* temp, size_t temp_bytes) {
    if (failed()) return;
    Record(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out,
                                           values_in, values_out, count, 0,
                                           bits, stream_));
  }

  void Zero(void* memory, size_t bytes) {
    if (failed()) return;
    Record(cudaMemsetAsync(memory, 0, bytes, stream_));
  }

  int status() const { return status_; }

 private:
  bool failed() const { return status_ != cudaSuccess; }
  void Record(cudaError_t status) {
    if (status_ == cudaSuccess) status_ = status;
  }

  cudaStream_t stream_;
  cudaError_t status_ = cudaSuccess;
};

// Batches carry their positions as int32.
bool FitsPositions(int64_t count) { return count <= INT32_MAX; }

}  // namespace

template <typename T>
size_t SumTreeBuildScratchBytes(int64_t capacity) {
  CudaExecutor ex(nullptr);
  return parallel::SumTreeBuildScratchBytes<T>(ex, capacity);
}

template <typename T>
int SumTreeBuild(const T* weights, int64_t num_leaves, T* tree,
                 int64_t capacity, void* scratch, Stream stream) {
  CudaExecutor ex(stream);
  parallel::SumTreeBuild<T>(ex, weights, num_leaves, tree, capacity, scratch);
  return ex.status();
}

template <typename T>
size_t SumTreeSetScratchBytes(int64_t count, int64_t num_leaves) {
  CudaExecutor ex(nullptr);
  return parallel::SumTreeSetScratchBytes<T>(ex, count, num_leaves);
}

template <typename T>
int SumTreeSet(const int64_t* indices, const T* weights, int64_t count,
               int64_t num_leaves, T* tree, int64_t capacity, void* scratch,
               Stream stream) {
  if (!FitsPositions(count)) return cudaErrorInvalidValue;
  CudaExecutor ex(stream);
  parallel::SumTreeSet<T>(ex, indices, weights, count, num_leaves, tree,
                          capacity, scratch);
  return ex.status();
}

template <typename T>
int SumTreeSample(const T* tree, int64_t capacity, const T* uniforms,
                  int64_t count, int64_t* indices, T* probabilities,
                  Stream stream) {
  CudaExecutor ex(stream);
  parallel::SumTreeSample<T>(ex, tree, capacity, uniforms, count, indices,
                             probabilities);
  return ex.status();
}

template <typename T>
int SumTreeDraw(const T* tree, int64_t capacity, int64_t* rng_state,
                int64_t count, bool stratified, int64_t* indices,
                T* probabilities, Stream stream) {
  CudaExecutor ex(stream);
  parallel::SumTreeDraw<T>(ex, tree, capacity, rng_state, count, stratified,
                           indices, probabilities);
  return ex.status();
}

template <typename T>
size_t AdaptiveReweightScratchBytes(int64_t count, int64_t num_leaves) {
  CudaExecutor ex(nullptr);
  return parallel::AdaptiveReweightScratchBytes<T>(ex, count, num_leaves);
}

template <typename T>
int AdaptiveReweight(T amplitude, T decay, const int64_t* indices,
                     const T* utilities, int64_t count, T* log_weights,
                     int64_t num_leaves, T* log_scale, T* tree, T* entropy_tree,
                     int64_t capacity, void* scratch, Stream stream) {
  if (!FitsPositions(count)) return cudaErrorInvalidValue;
  CudaExecutor ex(stream);
  const parallel::ReweightState<T> state{amplitude,   decay,        utilities,
                                         log_weights, num_leaves,   log_scale,
                                         tree,        entropy_tree, capacity};
  parallel::AdaptiveReweight<T>(ex, indices, count, state, scratch);
  return ex.status();
}

const char* ErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

#define ADASAMP_INSTANTIATE(T)                                                 \
  template size_t SumTreeBuildScratchBytes<T>(int64_t);                        \
  template int SumTreeBuild<T>(const T*, int64_t, T*, int64_t, void*, Stream); \
  template size_t SumTreeSetScratchBytes<T>(int64_t, int64_t);                 \
  template int SumTreeSet<T>(const int64_t*, const T*, int64_t, int64_t, T*,   \
                             int64_t, void*, Stream);                          \
  template int SumTreeSample<T>(const T*, int64_t, const T*, int64_t,          \
                                int64_t*, T*, Stream);                         \
  template int SumTreeDraw<T>(const T*, int64_t, int64_t*, int64_t, bool,      \
                              int64_t*, T*, Stream);                           \
  template size_t AdaptiveReweightScratchBytes<T>(int64_t, int64_t);           \
  template int AdaptiveReweight<T>(T, T, const int64_t*, const T*, int64_t,    \
                                   T*, int64_t, T*, T*, T*, int64_t, void*,    \
                                   Stream);
ADASAMP_INSTANTIATE(float)
ADASAMP_INSTANTIATE(double)
#undef ADASAMP_INSTANTIATE

}  // namespace gpu
}  // namespace adasamp
