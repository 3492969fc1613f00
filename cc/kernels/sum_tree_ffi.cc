// The XLA FFI handlers of the custom calls that the XLA kernels
// (sum_tree_ops_xla.cc) emit: each runs when a compiled step does, on XLA's
// buffers, the op's CPU functor (sum_tree_ops.h; a draw shares a large batch
// with XLA's intra-op pool, as the op with TensorFlow's), or on the GPU its
// function of gpu/sum_tree_gpu.h on XLA's stream. A result that an operand
// aliases holds the operand's values when the handler starts, and is updated in
// place: the variables' own buffers, so an update stays O(B log n).

#define EIGEN_USE_THREADS

#include "cc/kernels/sum_tree_ffi.h"

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cc/kernels/intra_op_pool.h"
#include "cc/kernels/sum_tree_ops.h"
#if GOOGLE_CUDA
#include "cc/kernels/gpu/sum_tree_gpu.h"
#endif
#include "tensorflow/core/framework/tensor_types.h"
#include "xla/ffi/api/ffi.h"

namespace adasamp {
namespace {

namespace ffi = ::xla::ffi;
using ::tensorflow::TTypes;
using CPUDevice = Eigen::ThreadPoolDevice;

template <typename T>
constexpr ffi::DataType kFfiType =
    std::is_same_v<T, float> ? ffi::DataType::F32 : ffi::DataType::F64;

template <typename T>
using Vector = ffi::Buffer<kFfiType<T>, 1>;
template <typename T>
using Scalar = ffi::BufferR0<kFfiType<T>>;
using Indices = ffi::Buffer<ffi::DataType::S64, 1>;
using Bytes = ffi::Buffer<ffi::DataType::U8, 1>;

ffi::Error ToFfi(const absl::Status& status) {
  if (status.ok()) return ffi::Error::Success();
  return ffi::Error(static_cast<ffi::ErrorCode>(status.code()),
                    std::string(status.message()));
}

// A rank-1 buffer as the functors take it.
template <ffi::DataType kType>
auto Flat(const ffi::Buffer<kType, 1>& buffer) {
  using T = ffi::NativeType<kType>;
  return typename TTypes<T>::ConstFlat(buffer.typed_data(),
                                       buffer.element_count());
}
template <ffi::DataType kType>
auto Flat(ffi::Result<ffi::Buffer<kType, 1>>& buffer) {
  using T = ffi::NativeType<kType>;
  return
      typename TTypes<T>::Flat(buffer->typed_data(), buffer->element_count());
}

// XLA's intra-op pool, as the handler of a custom call receives it; valid
// while the handler runs.
class XlaThreadPool : public IntraOpPool {
 public:
  explicit XlaThreadPool(ffi::ThreadPool& pool) : pool_(pool) {}

  int64_t NumThreads() const override { return pool_.num_threads(); }
  void Schedule(std::function<void()> task) const override {
    pool_.Schedule(std::move(task));
  }

 private:
  ffi::ThreadPool& pool_;
};

// The handlers' signatures (operands, then results, then attributes): each
// op's on both platforms; a GPU handler also takes the stream.

template <typename T>
auto SampleSignature() {
  return ffi::Ffi::Bind()
      .template Arg<Vector<T>>()  // tree
      .template Arg<Vector<T>>()  // uniforms
      .template Ret<Indices>()
      .template Ret<Vector<T>>();  // probabilities
}

template <typename T>
auto DrawSignature() {
  return ffi::Ffi::Bind()
      .template Arg<Vector<T>>()  // tree
      .template Arg<Indices>()    // rng_state
      .template Ret<Indices>()
      .template Ret<Vector<T>>()  // probabilities
      .template Ret<Indices>()    // rng_state, aliased
      .template Attr<bool>("stratified");
}

template <typename T>
auto ReweightSignature() {
  return ffi::Ffi::Bind()
      .template Arg<Indices>()
      .template Arg<Vector<T>>()  // utilities
      .template Arg<Vector<T>>()  // log_weights
      .template Arg<Scalar<T>>()  // log_scale
      .template Arg<Vector<T>>()  // tree
      .template Arg<Vector<T>>()  // entropy_tree
      .template Ret<Vector<T>>()  // the four, aliased
      .template Ret<Scalar<T>>()
      .template Ret<Vector<T>>()
      .template Ret<Vector<T>>()
      .template Ret<Bytes>()  // the GPU's scratch; empty on the CPU
      .template Attr<T>("amplitude")
      .template Attr<T>("decay");
}

template <typename T>
ffi::Error SampleOnCpu(Vector<T> tree, Vector<T> uniforms,
                       ffi::Result<Indices> indices,
                       ffi::Result<Vector<T>> probabilities,
                       ffi::ThreadPool pool) {
  return ToFfi(functor::SumTreeSampleOnCpu<T>(XlaThreadPool(pool), Flat(tree),
                                              Flat(uniforms), Flat(indices),
                                              Flat(probabilities)));
}

template <typename T>
ffi::Error DrawOnCpu(Vector<T> tree, Indices /*rng_state*/,
                     ffi::Result<Indices> indices,
                     ffi::Result<Vector<T>> probabilities,
                     ffi::Result<Indices> rng_state, bool stratified,
                     ffi::ThreadPool pool) {
  return ToFfi(functor::SumTreeDrawOnCpu<T>(
      XlaThreadPool(pool), Flat(tree), stratified, Flat(rng_state),
      Flat(indices), Flat(probabilities)));
}

template <typename T>
ffi::Error ReweightOnCpu(Indices indices, Vector<T> utilities,
                         Vector<T> /*log_weights*/, Scalar<T> /*log_scale*/,
                         Vector<T> /*tree*/, Vector<T> /*entropy_tree*/,
                         ffi::Result<Vector<T>> log_weights,
                         ffi::Result<Scalar<T>> log_scale,
                         ffi::Result<Vector<T>> tree,
                         ffi::Result<Vector<T>> entropy_tree,
                         ffi::Result<Bytes> /*scratch*/, T amplitude, T decay) {
  return ToFfi(functor::AdaptiveReweight<CPUDevice, T>()(
      nullptr, amplitude, decay, Flat(indices), Flat(utilities),
      Flat(log_weights), typename TTypes<T>::Scalar(log_scale->typed_data()),
      Flat(tree), Flat(entropy_tree)));
}

// Defines handler NAME and registers it as custom-call target TARGET (a
// CustomCallTarget) on PLATFORM ("Host" or "CUDA") with XLA_FFI_Handler_Traits
// TRAITS.
#define ADASAMP_REGISTER_HANDLER(TARGET, PLATFORM, NAME, IMPL, BINDING, \
                                 TRAITS)                                \
  XLA_FFI_DEFINE_HANDLER(NAME, IMPL, BINDING);                          \
  XLA_FFI_REGISTER_HANDLER(XLA_FFI_GetApi(), TARGET, PLATFORM, NAME, TRAITS)

#define ADASAMP_REGISTER_CPU_HANDLERS(T, SUFFIX)                             \
  ADASAMP_REGISTER_HANDLER(CustomCallTarget<T>("sum_tree_sample"), "Host",   \
                           kSampleOnCpu_##SUFFIX, SampleOnCpu<T>,            \
                           SampleSignature<T>().Ctx<ffi::ThreadPool>(), 0);  \
  ADASAMP_REGISTER_HANDLER(CustomCallTarget<T>("sum_tree_draw"), "Host",     \
                           kDrawOnCpu_##SUFFIX, DrawOnCpu<T>,                \
                           DrawSignature<T>().Ctx<ffi::ThreadPool>(), 0);    \
  ADASAMP_REGISTER_HANDLER(CustomCallTarget<T>("adaptive_reweight"), "Host", \
                           kReweightOnCpu_##SUFFIX, ReweightOnCpu<T>,        \
                           ReweightSignature<T>(), 0)
ADASAMP_REGISTER_CPU_HANDLERS(float, f32);
ADASAMP_REGISTER_CPU_HANDLERS(double, f64);
#undef ADASAMP_REGISTER_CPU_HANDLERS

#if GOOGLE_CUDA

ffi::Error CudaError(int error, absl::string_view op) {
  if (error == 0) return ffi::Error::Success();
  return ffi::Error::Internal(
      absl::StrCat(op, " failed on the GPU: ", gpu::ErrorString(error)));
}

template <typename T>
ffi::Error SampleOnGpu(Vector<T> tree, Vector<T> uniforms,
                       ffi::Result<Indices> indices,
                       ffi::Result<Vector<T>> probabilities,
                       gpu::Stream stream) {
  return CudaError(
      gpu::SumTreeSample(tree.typed_data(), tree.element_count() / 2,
                         uniforms.typed_data(), uniforms.element_count(),
                         indices->typed_data(), probabilities->typed_data(),
                         stream),
      "SumTreeSample");
}

template <typename T>
ffi::Error DrawOnGpu(Vector<T> tree, Indices /*rng_state*/,
                     ffi::Result<Indices> indices,
                     ffi::Result<Vector<T>> probabilities,
                     ffi::Result<Indices> rng_state, bool stratified,
                     gpu::Stream stream) {
  return CudaError(
      gpu::SumTreeDraw(tree.typed_data(), tree.element_count() / 2,
                       rng_state->typed_data(), indices->element_count(),
                       stratified, indices->typed_data(),
                       probabilities->typed_data(), stream),
      "SumTreeDraw");
}

template <typename T>
ffi::Error ReweightOnGpu(
    Indices indices, Vector<T> utilities, Vector<T> /*log_weights*/,
    Scalar<T> /*log_scale*/, Vector<T> /*tree*/, Vector<T> /*entropy_tree*/,
    ffi::Result<Vector<T>> log_weights, ffi::Result<Scalar<T>> log_scale,
    ffi::Result<Vector<T>> tree, ffi::Result<Vector<T>> entropy_tree,
    ffi::Result<Bytes> scratch, T amplitude, T decay, gpu::Stream stream) {
  const auto base = reinterpret_cast<uintptr_t>(scratch->untyped_data());
  void* aligned = reinterpret_cast<void*>((base + kScratchAlign - 1) /
                                          kScratchAlign * kScratchAlign);
  return CudaError(
      gpu::AdaptiveReweight(
          amplitude, decay, indices.typed_data(), utilities.typed_data(),
          indices.element_count(), log_weights->typed_data(),
          log_weights->element_count(), log_scale->typed_data(),
          tree->typed_data(), entropy_tree->typed_data(),
          tree->element_count() / 2, aligned, stream),
      "AdaptiveReweight");
}

// The GPU handlers only enqueue kernels and memsets on XLA's stream (no host
// synchronisation, allocation or read of device memory), so XLA may record
// them into the CUDA graphs (command buffers) of a compiled step rather than
// cut the graph around each one. TF_ADASAMP_FFI_COMMAND_BUFFERS=0 in the
// environment when the library loads registers them without that trait.
XLA_FFI_Handler_Traits GpuHandlerTraits() {
  const char* setting = std::getenv("TF_ADASAMP_FFI_COMMAND_BUFFERS");
  const bool off = setting != nullptr && std::string(setting) == "0";
  return off ? 0 : XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
}

#define ADASAMP_REGISTER_GPU_HANDLERS(T, SUFFIX)                             \
  ADASAMP_REGISTER_HANDLER(                                                  \
      CustomCallTarget<T>("sum_tree_sample"), "CUDA", kSampleOnGpu_##SUFFIX, \
      SampleOnGpu<T>,                                                        \
      SampleSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>(),          \
      GpuHandlerTraits());                                                   \
  ADASAMP_REGISTER_HANDLER(                                                  \
      CustomCallTarget<T>("sum_tree_draw"), "CUDA", kDrawOnGpu_##SUFFIX,     \
      DrawOnGpu<T>,                                                          \
      DrawSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>(),            \
      GpuHandlerTraits());                                                   \
  ADASAMP_REGISTER_HANDLER(                                                  \
      CustomCallTarget<T>("adaptive_reweight"), "CUDA",                      \
      kReweightOnGpu_##SUFFIX, ReweightOnGpu<T>,                             \
      ReweightSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>(),        \
      GpuHandlerTraits())
ADASAMP_REGISTER_GPU_HANDLERS(float, f32);
ADASAMP_REGISTER_GPU_HANDLERS(double, f64);
#undef ADASAMP_REGISTER_GPU_HANDLERS

#endif  // GOOGLE_CUDA

#undef ADASAMP_REGISTER_HANDLER

}  // namespace
}  // namespace adasamp
