// GPU functors of the sum-tree ops: each runs its CUDA function
// (gpu/sum_tree_gpu.h) on the op's stream, with scratch memory from
// TensorFlow's allocator, and returns without waiting for the device. Values
// are checked on the device, not here: a bad index or value leaves the state
// untouched instead of raising (docs/cuda.md); the OpKernels still check
// shapes.

#if GOOGLE_CUDA

#include <cstdint>

#include "cc/kernels/gpu/sum_tree_gpu.h"
#include "cc/kernels/sum_tree_ops.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "xla/stream_executor/stream.h"

namespace adasamp {
namespace functor {
namespace {

using ::tensorflow::Tensor;
using GPUDevice = Eigen::GpuDevice;

absl::Status GetStream(OpKernelContext* ctx, gpu::Stream* stream) {
  const tensorflow::DeviceContext* context = ctx->op_device_context();
  if (context == nullptr || context->stream() == nullptr) {
    return absl::InternalError("the GPU op has no stream");
  }
  *stream = static_cast<gpu::Stream>(
      context->stream()->platform_specific_handle().stream);
  return absl::OkStatus();
}

absl::Status CudaStatus(int error, absl::string_view op) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(op, " failed on the GPU: ", gpu::ErrorString(error)));
}

// A device buffer of `bytes` bytes for the op's scratch memory.
absl::Status AllocateScratch(OpKernelContext* ctx, size_t bytes,
                             Tensor* scratch) {
  return ctx->allocate_temp(
      tensorflow::DT_INT8,
      tensorflow::TensorShape({static_cast<int64_t>(bytes)}), scratch);
}

void* ScratchData(Tensor& scratch) { return scratch.flat<int8_t>().data(); }

}  // namespace

template <typename T>
struct SumTreeBuild<GPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    gpu::Stream stream = nullptr;
    TF_RETURN_IF_ERROR(GetStream(ctx, &stream));
    const int64_t capacity = tree.size() / 2;
    Tensor scratch;
    TF_RETURN_IF_ERROR(AllocateScratch(
        ctx, gpu::SumTreeBuildScratchBytes<T>(capacity), &scratch));
    return CudaStatus(
        gpu::SumTreeBuild(weights.data(), weights.size(), tree.data(), capacity,
                          ScratchData(scratch), stream),
        "SumTreeBuild");
  }
};

template <typename T>
struct SumTreeSet<GPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, int64_t num_leaves,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    if (indices.size() == 0) return absl::OkStatus();
    gpu::Stream stream = nullptr;
    TF_RETURN_IF_ERROR(GetStream(ctx, &stream));
    Tensor scratch;
    TF_RETURN_IF_ERROR(AllocateScratch(
        ctx, gpu::SumTreeSetScratchBytes<T>(indices.size(), num_leaves),
        &scratch));
    return CudaStatus(
        gpu::SumTreeSet(indices.data(), weights.data(), indices.size(),
                        num_leaves, tree.data(), tree.size() / 2,
                        ScratchData(scratch), stream),
        "SumTreeSet");
  }
};

template <typename T>
struct SumTreeSample<GPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree,
                          typename TTypes<T>::ConstFlat uniforms,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    gpu::Stream stream = nullptr;
    TF_RETURN_IF_ERROR(GetStream(ctx, &stream));
    return CudaStatus(
        gpu::SumTreeSample(tree.data(), tree.size() / 2, uniforms.data(),
                           uniforms.size(), indices.data(),
                           probabilities.data(), stream),
        "SumTreeSample");
  }
};

template <typename T>
struct SumTreeDraw<GPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree, bool stratified,
                          typename TTypes<int64_t>::Flat rng_state,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    gpu::Stream stream = nullptr;
    TF_RETURN_IF_ERROR(GetStream(ctx, &stream));
    return CudaStatus(
        gpu::SumTreeDraw(tree.data(), tree.size() / 2, rng_state.data(),
                         indices.size(), stratified, indices.data(),
                         probabilities.data(), stream),
        "SumTreeDraw");
  }
};

template <typename T>
struct AdaptiveReweight<GPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, T amplitude, T decay,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat utilities,
                          typename TTypes<T>::Flat log_weights,
                          typename TTypes<T>::Scalar log_scale,
                          typename TTypes<T>::Flat tree,
                          typename TTypes<T>::Flat entropy_tree) {
    gpu::Stream stream = nullptr;
    TF_RETURN_IF_ERROR(GetStream(ctx, &stream));
    Tensor scratch;
    TF_RETURN_IF_ERROR(AllocateScratch(ctx,
                                       gpu::AdaptiveReweightScratchBytes<T>(
                                           indices.size(), log_weights.size()),
                                       &scratch));
    return CudaStatus(
        gpu::AdaptiveReweight(
            amplitude, decay, indices.data(), utilities.data(), indices.size(),
            log_weights.data(), log_weights.size(), log_scale.data(),
            tree.data(), entropy_tree.data(), tree.size() / 2,
            ScratchData(scratch), stream),
        "AdaptiveReweight");
  }
};

#define ADASAMP_DEFINE_GPU_FUNCTORS(T)         \
  template struct SumTreeBuild<GPUDevice, T>;  \
  template struct SumTreeSet<GPUDevice, T>;    \
  template struct SumTreeSample<GPUDevice, T>; \
  template struct SumTreeDraw<GPUDevice, T>;   \
  template struct AdaptiveReweight<GPUDevice, T>;
ADASAMP_DEFINE_GPU_FUNCTORS(float)
ADASAMP_DEFINE_GPU_FUNCTORS(double)
#undef ADASAMP_DEFINE_GPU_FUNCTORS

}  // namespace functor
}  // namespace adasamp

#endif  // GOOGLE_CUDA
