// XLA kernels of the ops a training step calls (SumTreeSample, SumTreeDraw,
// AdaptiveReweight), so that a step compiled with `jit_compile=True` runs the
// sampler inside the compiled step. Each emits an XLA custom call (typed FFI)
// whose handler runs the op's CPU functor on XLA's buffers, or on the GPU its
// function of gpu/sum_tree_gpu.h on XLA's stream. The variables an op updates
// are results aliased to their operands, so XLA hands the handler the
// variables' own buffers (as long as no other tensor shares them): the update
// stays O(B log n), with no copy. The GPU reweight's scratch is one more
// result, sized when the step compiles: XLA's FFI scratch allocator hands out
// nothing under TensorFlow's XLA launch.
//
// Shapes are checked when the step compiles, values when it runs, by the
// same checks as the OpKernels' and with their messages (on the GPU, bad
// values leave the state untouched instead, as there outside XLA); a refused
// call writes nothing. TensorFlow's XLA launch holds the variables' locks for
// the whole compiled step.

#define EIGEN_USE_THREADS

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cc/kernels/sum_tree_algorithm.h"
#include "cc/kernels/sum_tree_ops.h"
#if GOOGLE_CUDA
#include "cc/kernels/gpu/sum_tree_gpu.h"
#endif
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/compiler/tf2xla/xla_resource.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "xla/ffi/api/ffi.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace adasamp {
namespace {

namespace ffi = ::xla::ffi;
using ::tensorflow::DataTypeToEnum;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::TTypes;
using ::tensorflow::XlaOpKernel;
using ::tensorflow::XlaOpKernelContext;
using ::tensorflow::errors::InvalidArgument;
using CPUDevice = Eigen::ThreadPoolDevice;

// The custom calls' names: one handler per op and dtype.
template <typename T>
std::string Target(absl::string_view op) {
  return absl::StrCat("adasamp_", op,
                      std::is_same_v<T, float> ? "_f32" : "_f64");
}

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

// The handlers. A result that an operand aliases holds the operand's values
// when the handler starts, and is updated in place. The signatures (operands,
// then results, then attributes) are each op's on both platforms; a GPU
// handler also takes the stream.

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
                       ffi::Result<Vector<T>> probabilities) {
  return ToFfi(functor::SumTreeSample<CPUDevice, T>()(
      nullptr, Flat(tree), Flat(uniforms), Flat(indices), Flat(probabilities)));
}

template <typename T>
ffi::Error DrawOnCpu(Vector<T> tree, Indices /*rng_state*/,
                     ffi::Result<Indices> indices,
                     ffi::Result<Vector<T>> probabilities,
                     ffi::Result<Indices> rng_state, bool stratified) {
  return ToFfi(functor::SumTreeDraw<CPUDevice, T>()(
      nullptr, Flat(tree), stratified, Flat(rng_state), Flat(indices),
      Flat(probabilities)));
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
// Target) on PLATFORM ("Host" or "CUDA").
#define ADASAMP_REGISTER_HANDLER(TARGET, PLATFORM, NAME, IMPL, BINDING) \
  XLA_FFI_DEFINE_HANDLER(NAME, IMPL, BINDING);                          \
  XLA_FFI_REGISTER_HANDLER(XLA_FFI_GetApi(), TARGET, PLATFORM, NAME)

#define ADASAMP_REGISTER_CPU_HANDLERS(T, SUFFIX)                      \
  ADASAMP_REGISTER_HANDLER(Target<T>("sum_tree_sample"), "Host",      \
                           kSampleOnCpu_##SUFFIX, SampleOnCpu<T>,     \
                           SampleSignature<T>());                     \
  ADASAMP_REGISTER_HANDLER(Target<T>("sum_tree_draw"), "Host",        \
                           kDrawOnCpu_##SUFFIX, DrawOnCpu<T>,         \
                           DrawSignature<T>());                       \
  ADASAMP_REGISTER_HANDLER(Target<T>("adaptive_reweight"), "Host",    \
                           kReweightOnCpu_##SUFFIX, ReweightOnCpu<T>, \
                           ReweightSignature<T>())
ADASAMP_REGISTER_CPU_HANDLERS(float, f32);
ADASAMP_REGISTER_CPU_HANDLERS(double, f64);
#undef ADASAMP_REGISTER_CPU_HANDLERS

#if GOOGLE_CUDA

// As gpu/sum_tree_gpu.h's scratch. XLA aligns its buffers less, so the
// scratch result has this much more room, to be aligned into.
constexpr int64_t kScratchAlign = 256;

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
#define ADASAMP_REGISTER_GPU_HANDLERS(T, SUFFIX)                             \
  ADASAMP_REGISTER_HANDLER(                                                  \
      Target<T>("sum_tree_sample"), "CUDA", kSampleOnGpu_##SUFFIX,           \
      SampleOnGpu<T>,                                                        \
      SampleSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>());         \
  ADASAMP_REGISTER_HANDLER(                                                  \
      Target<T>("sum_tree_draw"), "CUDA", kDrawOnGpu_##SUFFIX, DrawOnGpu<T>, \
      DrawSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>());           \
  ADASAMP_REGISTER_HANDLER(                                                  \
      Target<T>("adaptive_reweight"), "CUDA", kReweightOnGpu_##SUFFIX,       \
      ReweightOnGpu<T>,                                                      \
      ReweightSignature<T>().Ctx<ffi::PlatformStream<gpu::Stream>>())
ADASAMP_REGISTER_GPU_HANDLERS(float, f32);
ADASAMP_REGISTER_GPU_HANDLERS(double, f64);
#undef ADASAMP_REGISTER_GPU_HANDLERS

#endif  // GOOGLE_CUDA

#undef ADASAMP_REGISTER_HANDLER

// The XLA kernels.

template <typename T>
xla::Shape VectorShape(int64_t size) {
  return xla::ShapeUtil::MakeShape(
      xla::primitive_util::NativeToPrimitiveType<T>(), {size});
}

// A typed-FFI custom call to `target`, whose result {i} aliases operand
// `aliased[i]` where that is >= 0.
xla::XlaOp CallHandler(xla::XlaBuilder* builder, const std::string& target,
                       absl::Span<const xla::XlaOp> operands,
                       const xla::Shape& shape,
                       absl::Span<const int64_t> aliased,
                       const std::string& attributes = "") {
  std::vector<std::pair<xla::ShapeIndex, std::pair<int64_t, xla::ShapeIndex>>>
      aliasing;
  for (int64_t result = 0; result < static_cast<int64_t>(aliased.size());
       ++result) {
    if (aliased[result] < 0) continue;
    auto& [result_index, operand] = aliasing.emplace_back();
    result_index.push_back(result);
    operand.first = aliased[result];  // the whole operand: ShapeIndex {}
  }
  return xla::CustomCall(builder, target, operands, shape, attributes,
                         /*has_side_effect=*/false, aliasing,
                         /*literal=*/nullptr,
                         xla::CustomCallSchedule::SCHEDULE_NONE,
                         xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
}

// `value` as an XLA FFI attribute of type T, exactly.
template <typename T>
std::string FloatAttribute(double value) {
  return std::is_same_v<T, float>
             ? absl::StrFormat("%.9e : f32", static_cast<float>(value))
             : absl::StrFormat("%.17e : f64", value);
}

// Input `input`, a scalar that XLA must know when the step compiles.
template <typename Scalar>
absl::Status ConstantInput(XlaOpKernelContext* ctx, int input,
                           absl::string_view name, Scalar* value) {
  absl::Status status;
  if constexpr (std::is_integral_v<Scalar>) {
    status = ctx->ConstantInputAsIntScalar(input, value);
  } else {
    status = ctx->ConstantInputAsFloatScalar(input, value);
  }
  if (status.ok()) return status;
  return InvalidArgument(name,
                         " must be a constant when the step compiles with "
                         "XLA (jit_compile=True): ",
                         status.message());
}

// Outputs no indices and no probabilities, without a custom call: as the
// OpKernels, a draw of nothing checks no value and changes no state.
template <typename T>
void SetNoDraws(XlaOpKernelContext* ctx) {
  ctx->SetOutput(0, xla::ConstantR1<int64_t>(ctx->builder(), {}));
  ctx->SetOutput(1, xla::ConstantR1<T>(ctx->builder(), {}));
}

// Reads variable input `input`, a tree of dtype T.
template <typename T>
absl::Status ReadTree(XlaOpKernelContext* ctx, int input,
                      absl::string_view name, int64_t num_leaves,
                      xla::XlaOp* tree) {
  TensorShape shape;
  TF_RETURN_IF_ERROR(
      ctx->ReadVariableInput(input, DataTypeToEnum<T>::v(), &shape, tree));
  return CheckTreeShape(shape, name, num_leaves);
}

template <typename T>
class SumTreeSampleXlaOp : public XlaOpKernel {
 public:
  explicit SumTreeSampleXlaOp(OpKernelConstruction* ctx) : XlaOpKernel(ctx) {}

  void Compile(XlaOpKernelContext* ctx) override {
    const TensorShape uniforms = ctx->InputShape(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(uniforms),
                InvalidArgument("uniforms must be a vector, got shape ",
                                uniforms.DebugString()));
    const int64_t count = uniforms.num_elements();
    xla::XlaOp tree;
    OP_REQUIRES_OK(ctx, ReadTree<T>(ctx, 0, "tree", -1, &tree));
    if (count == 0) {  // no check of the tree's sum either
      SetNoDraws<T>(ctx);
      return;
    }
    const xla::Shape shape = xla::ShapeUtil::MakeTupleShape(
        {VectorShape<int64_t>(count), VectorShape<T>(count)});
    const xla::XlaOp draws =
        CallHandler(ctx->builder(), Target<T>("sum_tree_sample"),
                    {tree, ctx->Input(1)}, shape, {-1, -1});
    ctx->SetOutput(0, xla::GetTupleElement(draws, 0));
    ctx->SetOutput(1, xla::GetTupleElement(draws, 1));
  }
};

template <typename T>
class SumTreeDrawXlaOp : public XlaOpKernel {
 public:
  explicit SumTreeDrawXlaOp(OpKernelConstruction* ctx) : XlaOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stratified", &stratified_));
  }

  void Compile(XlaOpKernelContext* ctx) override {
    // XLA's shapes are static: the batch size is fixed when the step
    // compiles, as tf.random.Generator.uniform's shape is.
    int64_t batch_size;
    OP_REQUIRES_OK(ctx, ConstantInput(ctx, 2, "batch_size", &batch_size));
    OP_REQUIRES_OK(ctx, CheckDrawBatchSize(batch_size));
    xla::XlaOp tree, rng_state;
    OP_REQUIRES_OK(ctx, ReadTree<T>(ctx, 0, "tree", -1, &tree));
    TensorShape rng_shape;
    OP_REQUIRES_OK(ctx, ctx->ReadVariableInput(1, tensorflow::DT_INT64,
                                               &rng_shape, &rng_state));
    OP_REQUIRES_OK(ctx, CheckPhiloxStateShape(rng_shape));
    if (batch_size == 0) {  // the generator's state unmoved
      SetNoDraws<T>(ctx);
      return;
    }
    const xla::Shape shape = xla::ShapeUtil::MakeTupleShape(
        {VectorShape<int64_t>(batch_size), VectorShape<T>(batch_size),
         VectorShape<int64_t>(kPhiloxStateSize)});
    const xla::XlaOp draws = CallHandler(
        ctx->builder(), Target<T>("sum_tree_draw"), {tree, rng_state}, shape,
        {-1, -1, 1},
        absl::StrCat("{stratified = ", stratified_ ? "true" : "false", "}"));
    ctx->SetOutput(0, xla::GetTupleElement(draws, 0));
    ctx->SetOutput(1, xla::GetTupleElement(draws, 1));
    OP_REQUIRES_OK(ctx, ctx->AssignVariable(1, tensorflow::DT_INT64,
                                            xla::GetTupleElement(draws, 2)));
  }

 private:
  bool stratified_;
};

template <typename T>
class AdaptiveReweightXlaOp : public XlaOpKernel {
 public:
  explicit AdaptiveReweightXlaOp(OpKernelConstruction* ctx)
      : XlaOpKernel(ctx),
        on_gpu_(ctx->device_type() ==
                tensorflow::DeviceType(tensorflow::DEVICE_GPU_XLA_JIT)) {}

  void Compile(XlaOpKernelContext* ctx) override {
    const TensorShape indices = ctx->InputShape(4);
    const TensorShape utilities = ctx->InputShape(5);
    OP_REQUIRES(ctx,
                TensorShapeUtils::IsVector(indices) &&
                    TensorShapeUtils::IsVector(utilities) &&
                    indices.num_elements() == utilities.num_elements(),
                InvalidArgument("indices and utilities must be vectors of one "
                                "length, got shapes ",
                                indices.DebugString(), " and ",
                                utilities.DebugString()));
    // The GPU kernels take amplitude and decay on the host, so here they are
    // compile-time constants, checked now.
    double amplitude, decay;
    OP_REQUIRES_OK(ctx, ConstantInput(ctx, 6, "amplitude", &amplitude));
    OP_REQUIRES_OK(ctx, ConstantInput(ctx, 7, "decay", &decay));
    OP_REQUIRES_OK(ctx, CheckReweightParameters(static_cast<T>(amplitude),
                                                static_cast<T>(decay)));
    OP_REQUIRES_OK(ctx, CheckDistinctVariables(ctx));

    const tensorflow::DataType dtype = DataTypeToEnum<T>::v();
    TensorShape log_weights_shape, log_scale_shape;
    xla::XlaOp log_weights, log_scale, tree, entropy_tree;
    OP_REQUIRES_OK(ctx, ctx->ReadVariableInput(2, dtype, &log_weights_shape,
                                               &log_weights));
    OP_REQUIRES(ctx,
                TensorShapeUtils::IsVector(log_weights_shape) &&
                    log_weights_shape.num_elements() >= 1,
                InvalidArgument("log_weights must be a nonempty vector, got "
                                "shape ",
                                log_weights_shape.DebugString()));
    const int64_t num_leaves = log_weights_shape.num_elements();
    OP_REQUIRES_OK(
        ctx, ctx->ReadVariableInput(3, dtype, &log_scale_shape, &log_scale));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(log_scale_shape),
                InvalidArgument("log_scale must be a scalar, got shape ",
                                log_scale_shape.DebugString()));
    OP_REQUIRES_OK(ctx, ReadTree<T>(ctx, 0, "tree", num_leaves, &tree));
    OP_REQUIRES_OK(
        ctx, ReadTree<T>(ctx, 1, "entropy_tree", num_leaves, &entropy_tree));

    const int64_t capacity = TreeCapacity(num_leaves);
    const xla::Shape shape = xla::ShapeUtil::MakeTupleShape(
        {VectorShape<T>(num_leaves),
         xla::ShapeUtil::MakeShape(
             xla::primitive_util::NativeToPrimitiveType<T>(), {}),
         VectorShape<T>(2 * capacity), VectorShape<T>(2 * capacity),
         VectorShape<uint8_t>(
             ScratchBytes(indices.num_elements(), num_leaves))});
    const xla::XlaOp updated =
        CallHandler(ctx->builder(), Target<T>("adaptive_reweight"),
                    {ctx->Input(4), ctx->Input(5), log_weights, log_scale, tree,
                     entropy_tree},
                    shape, {2, 3, 4, 5, -1},
                    absl::StrCat("{amplitude = ", FloatAttribute<T>(amplitude),
                                 ", decay = ", FloatAttribute<T>(decay), "}"));
    const int variables[] = {2, 3, 0, 1};
    for (int result = 0; result < 4; ++result) {
      OP_REQUIRES_OK(
          ctx, ctx->AssignVariable(variables[result], dtype,
                                   xla::GetTupleElement(updated, result)));
    }
  }

 private:
  // The bytes of scratch the handler needs on the device compiled for.
  int64_t ScratchBytes(int64_t count, int64_t num_leaves) const {
#if GOOGLE_CUDA
    if (on_gpu_) {
      return gpu::AdaptiveReweightScratchBytes<T>(count, num_leaves) +
             kScratchAlign - 1;
    }
#endif
    return 0;
  }

  // As UpdateLocks's check: one variable given for two inputs would be read as
  // two arrays while it is written.
  static absl::Status CheckDistinctVariables(XlaOpKernelContext* ctx) {
    static constexpr const char* kNames[] = {"tree", "entropy_tree",
                                             "log_weights", "log_scale"};
    tensorflow::XlaResource* resources[4];
    for (int i = 0; i < 4; ++i) {
      TF_RETURN_IF_ERROR(ctx->GetResourceInput(i, &resources[i]));
      for (int j = 0; j < i; ++j) {
        if (resources[i] == resources[j]) {
          return InvalidArgument(kNames[j], " and ", kNames[i],
                                 " are the same variable");
        }
      }
    }
    return absl::OkStatus();
  }

  const bool on_gpu_;
};

// Registered as kernels of the XLA devices directly, not with
// REGISTER_XLA_OP: TensorFlow turns those into kernels once, at its first
// compilation, and this library may load after that.
#define ADASAMP_REGISTER_XLA_KERNELS(DEVICE, T)                               \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name("AdaSamp>SumTreeSample").Device(DEVICE).TypeConstraint<T>("T"),    \
      SumTreeSampleXlaOp<T>);                                                 \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name("AdaSamp>SumTreeDraw").Device(DEVICE).TypeConstraint<T>("T"),      \
      SumTreeDrawXlaOp<T>);                                                   \
  REGISTER_KERNEL_BUILDER(                                                    \
      Name("AdaSamp>AdaptiveReweight").Device(DEVICE).TypeConstraint<T>("T"), \
      AdaptiveReweightXlaOp<T>);
ADASAMP_REGISTER_XLA_KERNELS(tensorflow::DEVICE_CPU_XLA_JIT, float);
ADASAMP_REGISTER_XLA_KERNELS(tensorflow::DEVICE_CPU_XLA_JIT, double);
#if GOOGLE_CUDA
ADASAMP_REGISTER_XLA_KERNELS(tensorflow::DEVICE_GPU_XLA_JIT, float);
ADASAMP_REGISTER_XLA_KERNELS(tensorflow::DEVICE_GPU_XLA_JIT, double);
#endif
#undef ADASAMP_REGISTER_XLA_KERNELS

}  // namespace
}  // namespace adasamp
