// XLA kernels of the ops a training step calls (SumTreeSample, SumTreeDraw,
// AdaptiveReweight), so that a step compiled with `jit_compile=True` runs the
// sampler inside the compiled step. Each emits, when the step compiles, an
// XLA custom call (typed FFI) whose handler (sum_tree_ffi.cc) runs the op
// when the step runs. The variables an op updates are results aliased to
// their operands, so XLA hands the handler the variables' own buffers (as
// long as no other tensor shares them), with no copy. The GPU reweight's
// scratch is one more result, sized here: XLA's FFI scratch allocator hands
// out nothing under TensorFlow's XLA launch.
//
// Shapes are checked here, values by the handlers, with the same checks as
// the OpKernels' and their messages (on the GPU, bad values leave the state
// untouched instead, as there outside XLA); a refused call writes nothing.
// TensorFlow's XLA launch holds the variables' locks for the whole compiled
// step.

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cc/kernels/sum_tree_algorithm.h"
#include "cc/kernels/sum_tree_checks.h"
#include "cc/kernels/sum_tree_ffi.h"
#if GOOGLE_CUDA
#include "cc/kernels/gpu/sum_tree_gpu.h"
#endif
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "tensorflow/compiler/tf2xla/xla_resource.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace adasamp {
namespace {

using ::tensorflow::DataTypeToEnum;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::XlaOpKernel;
using ::tensorflow::XlaOpKernelContext;
using ::tensorflow::errors::InvalidArgument;

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
        CallHandler(ctx->builder(), CustomCallTarget<T>("sum_tree_sample"),
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
        ctx->builder(), CustomCallTarget<T>("sum_tree_draw"), {tree, rng_state},
        shape, {-1, -1, 1},
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
    State state;
    OP_REQUIRES_OK(ctx, ReadState(ctx, &state));
    const int64_t num_leaves = state.num_leaves;

    const int64_t capacity = TreeCapacity(num_leaves);
    const xla::Shape shape = xla::ShapeUtil::MakeTupleShape(
        {VectorShape<T>(num_leaves),
         xla::ShapeUtil::MakeShape(
             xla::primitive_util::NativeToPrimitiveType<T>(), {}),
         VectorShape<T>(2 * capacity), VectorShape<T>(2 * capacity),
         VectorShape<uint8_t>(
             ScratchBytes(indices.num_elements(), num_leaves))});
    const xla::XlaOp updated =
        CallHandler(ctx->builder(), CustomCallTarget<T>("adaptive_reweight"),
                    {ctx->Input(4), ctx->Input(5), state.log_weights,
                     state.log_scale, state.tree, state.entropy_tree},
                    shape, {2, 3, 4, 5, -1},
                    absl::StrCat("{amplitude = ", FloatAttribute<T>(amplitude),
                                 ", decay = ", FloatAttribute<T>(decay), "}"));
    const int variables[] = {2, 3, 0, 1};
    for (int result = 0; result < 4; ++result) {
      OP_REQUIRES_OK(
          ctx, ctx->AssignVariable(variables[result], DataTypeToEnum<T>::v(),
                                   xla::GetTupleElement(updated, result)));
    }
  }

 private:
  // The sampler's variables, read with their shapes checked.
  struct State {
    xla::XlaOp log_weights, log_scale, tree, entropy_tree;
    int64_t num_leaves;
  };

  static absl::Status ReadState(XlaOpKernelContext* ctx, State* state) {
    const tensorflow::DataType dtype = DataTypeToEnum<T>::v();
    TensorShape log_weights, log_scale;
    TF_RETURN_IF_ERROR(
        ctx->ReadVariableInput(2, dtype, &log_weights, &state->log_weights));
    if (!(TensorShapeUtils::IsVector(log_weights) &&
          log_weights.num_elements() >= 1)) {
      return InvalidArgument("log_weights must be a nonempty vector, got ",
                             "shape ", log_weights.DebugString());
    }
    state->num_leaves = log_weights.num_elements();
    TF_RETURN_IF_ERROR(
        ctx->ReadVariableInput(3, dtype, &log_scale, &state->log_scale));
    if (!TensorShapeUtils::IsScalar(log_scale)) {
      return InvalidArgument("log_scale must be a scalar, got shape ",
                             log_scale.DebugString());
    }
    TF_RETURN_IF_ERROR(
        ReadTree<T>(ctx, 0, "tree", state->num_leaves, &state->tree));
    return ReadTree<T>(ctx, 1, "entropy_tree", state->num_leaves,
                       &state->entropy_tree);
  }

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

  // As VariableLocks's check: one variable given for two inputs would be read
  // as two arrays while it is written.
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
