// The sum-tree OpKernels and their registration. Each is a SumTreeOpKernel
// (sum_tree_op_kernel.h): it checks its plain inputs, names its variables
// and how it uses them, checks their shapes and calls its functor
// (sum_tree_ops.h), whose CPU specialisations are in sum_tree_ops_cpu.cc and
// GPU ones in sum_tree_ops_gpu.cc.

#define EIGEN_USE_THREADS

#include "cc/kernels/sum_tree_ops.h"

#include <cstdint>

#include "cc/kernels/sum_tree_checks.h"
#include "cc/kernels/sum_tree_op_kernel.h"
#include "cc/kernels/variable_locks.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace adasamp {
namespace {

using ::tensorflow::DataTypeToEnum;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::errors::InvalidArgument;
using CPUDevice = Eigen::ThreadPoolDevice;
using GPUDevice = Eigen::GpuDevice;

// Input 0 of every op: the tree, of dtype T.
template <typename T>
VariableInput TreeInput(VariableAccess access) {
  return {0, "tree", DataTypeToEnum<T>::v(), access};
}

// Outputs 0 and 1 of a sample or draw: indices and probabilities.
absl::Status AllocateDraws(OpKernelContext* ctx, const TensorShape& shape) {
  Tensor* unused;
  TF_RETURN_IF_ERROR(ctx->allocate_output(0, shape, &unused));
  return ctx->allocate_output(1, shape, &unused);
}

template <typename Device, typename T>
class SumTreeBuildOp : public SumTreeOpKernel<Device> {
 public:
  explicit SumTreeBuildOp(OpKernelConstruction* ctx)
      : SumTreeOpKernel<Device>(
            ctx, {TreeInput<T>(VariableAccess::kUpdateElements)}) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_leaves", &num_leaves_));
  }

  // A build is O(n): where the device hands kernels to other threads, this
  // one is worth it.
  bool IsExpensive() override { return tensorflow::OpKernel::IsExpensive(); }

 protected:
  bool ReadsScattered() const override { return false; }

 private:
  absl::Status Prepare(OpKernelContext* ctx, bool* has_work) override {
    const Tensor& weights = ctx->input(1);
    TF_RETURN_IF_ERROR(CheckVector(weights, "weights"));
    if (weights.NumElements() != num_leaves_) {
      return InvalidArgument("weights has ", weights.NumElements(),
                             " elements but the tree has ", num_leaves_,
                             " leaves");
    }
    return absl::OkStatus();
  }

  absl::Status Run(OpKernelContext* ctx, VariableLocks& variables) override {
    Tensor& tree = variables.tensor(0);
    TF_RETURN_IF_ERROR(CheckTreeShape(tree.shape(), "tree", num_leaves_));
    return functor::SumTreeBuild<Device, T>()(ctx, ctx->input(1).flat<T>(),
                                              tree.flat<T>());
  }

  int64_t num_leaves_;
};

template <typename Device, typename T>
class SumTreeSetOp : public SumTreeOpKernel<Device> {
 public:
  explicit SumTreeSetOp(OpKernelConstruction* ctx)
      : SumTreeOpKernel<Device>(
            ctx, {TreeInput<T>(VariableAccess::kUpdateElements)}) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_leaves", &num_leaves_));
  }

 private:
  absl::Status Prepare(OpKernelContext* ctx, bool* has_work) override {
    return CheckSameLength(ctx->input(1), "indices", ctx->input(2), "weights");
  }

  absl::Status Run(OpKernelContext* ctx, VariableLocks& variables) override {
    Tensor& tree = variables.tensor(0);
    TF_RETURN_IF_ERROR(CheckTreeShape(tree.shape(), "tree", num_leaves_));
    return functor::SumTreeSet<Device, T>()(
        ctx, num_leaves_, ctx->input(1).flat<int64_t>(),
        ctx->input(2).flat<T>(), tree.flat<T>());
  }

  int64_t num_leaves_;
};

template <typename Device, typename T>
class SumTreeSampleOp : public SumTreeOpKernel<Device> {
 public:
  explicit SumTreeSampleOp(OpKernelConstruction* ctx)
      : SumTreeOpKernel<Device>(ctx, {TreeInput<T>(VariableAccess::kRead)}) {}

 private:
  absl::Status Prepare(OpKernelContext* ctx, bool* has_work) override {
    const Tensor& uniforms = ctx->input(1);
    TF_RETURN_IF_ERROR(CheckVector(uniforms, "uniforms"));
    TF_RETURN_IF_ERROR(AllocateDraws(ctx, uniforms.shape()));
    *has_work = uniforms.NumElements() > 0;
    return absl::OkStatus();
  }

  absl::Status Run(OpKernelContext* ctx, VariableLocks& variables) override {
    const Tensor& tree = variables.tensor(0);
    TF_RETURN_IF_ERROR(CheckTreeShape(tree.shape(), "tree"));
    return functor::SumTreeSample<Device, T>()(
        ctx, tree.flat<T>(), ctx->input(1).flat<T>(),
        ctx->mutable_output(0)->flat<int64_t>(),
        ctx->mutable_output(1)->flat<T>());
  }
};

template <typename Device, typename T>
class SumTreeDrawOp : public SumTreeOpKernel<Device> {
 public:
  // The generator's state is updated in place, as TF's random ops do it:
  // exclusively, on a buffer no tensor shares. The tree is only read.
  explicit SumTreeDrawOp(OpKernelConstruction* ctx)
      : SumTreeOpKernel<Device>(ctx, {TreeInput<T>(VariableAccess::kRead),
                                      {1, "rng_state", tensorflow::DT_INT64,
                                       VariableAccess::kUpdateInPlace}}) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stratified", &stratified_));
  }

 private:
  absl::Status Prepare(OpKernelContext* ctx, bool* has_work) override {
    int64_t batch_size;
    TF_RETURN_IF_ERROR(ReadScalar(ctx->input(2), "batch_size", &batch_size));
    TF_RETURN_IF_ERROR(CheckDrawBatchSize(batch_size));
    TF_RETURN_IF_ERROR(AllocateDraws(ctx, TensorShape({batch_size})));
    *has_work = batch_size > 0;
    return absl::OkStatus();
  }

  absl::Status Run(OpKernelContext* ctx, VariableLocks& variables) override {
    const Tensor& tree = variables.tensor(0);
    Tensor& rng_state = variables.tensor(1);
    TF_RETURN_IF_ERROR(CheckPhiloxStateShape(rng_state.shape()));
    TF_RETURN_IF_ERROR(CheckTreeShape(tree.shape(), "tree"));
    return functor::SumTreeDraw<Device, T>()(
        ctx, tree.flat<T>(), stratified_, rng_state.flat<int64_t>(),
        ctx->mutable_output(0)->flat<int64_t>(),
        ctx->mutable_output(1)->flat<T>());
  }

  bool stratified_;
};

template <typename Device, typename T>
class AdaptiveReweightOp : public SumTreeOpKernel<Device> {
 public:
  explicit AdaptiveReweightOp(OpKernelConstruction* ctx)
      : SumTreeOpKernel<Device>(
            ctx, {TreeInput<T>(kUpdate), Input(1, "entropy_tree"),
                  Input(2, "log_weights"), Input(3, "log_scale")}) {}

 private:
  static constexpr VariableAccess kUpdate = VariableAccess::kUpdateElements;
  static VariableInput Input(int input, absl::string_view name) {
    return {input, name, DataTypeToEnum<T>::v(), kUpdate};
  }

  absl::Status Prepare(OpKernelContext* ctx, bool* has_work) override {
    TF_RETURN_IF_ERROR(
        CheckSameLength(ctx->input(4), "indices", ctx->input(5), "utilities"));
    T amplitude, decay;
    TF_RETURN_IF_ERROR(ReadScalar(ctx->input(6), "amplitude", &amplitude));
    TF_RETURN_IF_ERROR(ReadScalar(ctx->input(7), "decay", &decay));
    return CheckReweightParameters(amplitude, decay);
  }

  // The variables: tree, entropy_tree, log_weights, log_scale.
  absl::Status CheckShapes(VariableLocks& variables) {
    const Tensor& log_weights = variables.tensor(2);
    TF_RETURN_IF_ERROR(CheckVector(log_weights, "log_weights"));
    const int64_t num_leaves = log_weights.NumElements();
    if (num_leaves < 1) return InvalidArgument("log_weights must not be empty");
    TF_RETURN_IF_ERROR(
        CheckTreeShape(variables.tensor(0).shape(), "tree", num_leaves));
    TF_RETURN_IF_ERROR(CheckTreeShape(variables.tensor(1).shape(),
                                      "entropy_tree", num_leaves));
    const TensorShape& log_scale = variables.tensor(3).shape();
    if (!TensorShapeUtils::IsScalar(log_scale)) {
      return InvalidArgument("log_scale must be a scalar, got shape ",
                             log_scale.DebugString());
    }
    return absl::OkStatus();
  }

  absl::Status Run(OpKernelContext* ctx, VariableLocks& variables) override {
    TF_RETURN_IF_ERROR(CheckShapes(variables));
    return functor::AdaptiveReweight<Device, T>()(
        ctx, ctx->input(6).scalar<T>()(), ctx->input(7).scalar<T>()(),
        ctx->input(4).flat<int64_t>(), ctx->input(5).flat<T>(),
        variables.tensor(2).flat<T>(), variables.tensor(3).scalar<T>(),
        variables.tensor(0).flat<T>(), variables.tensor(1).flat<T>());
  }
};

#define REGISTER_KERNELS(DEVICE, D, T)                     \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeBuild")     \
                              .Device(DEVICE)              \
                              .HostMemory("tree")          \
                              .TypeConstraint<T>("T"),     \
                          SumTreeBuildOp<D, T>);           \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeSet")       \
                              .Device(DEVICE)              \
                              .HostMemory("tree")          \
                              .TypeConstraint<T>("T"),     \
                          SumTreeSetOp<D, T>);             \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeSample")    \
                              .Device(DEVICE)              \
                              .HostMemory("tree")          \
                              .TypeConstraint<T>("T"),     \
                          SumTreeSampleOp<D, T>);          \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeDraw")      \
                              .Device(DEVICE)              \
                              .HostMemory("tree")          \
                              .HostMemory("rng_state")     \
                              .HostMemory("batch_size")    \
                              .TypeConstraint<T>("T"),     \
                          SumTreeDrawOp<D, T>);            \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>AdaptiveReweight") \
                              .Device(DEVICE)              \
                              .HostMemory("tree")          \
                              .HostMemory("entropy_tree")  \
                              .HostMemory("log_weights")   \
                              .HostMemory("log_scale")     \
                              .HostMemory("amplitude")     \
                              .HostMemory("decay")         \
                              .TypeConstraint<T>("T"),     \
                          AdaptiveReweightOp<D, T>);

using ::tensorflow::DEVICE_CPU;
REGISTER_KERNELS(DEVICE_CPU, CPUDevice, float);
REGISTER_KERNELS(DEVICE_CPU, CPUDevice, double);

#if GOOGLE_CUDA
using ::tensorflow::DEVICE_GPU;
REGISTER_KERNELS(DEVICE_GPU, GPUDevice, float);
REGISTER_KERNELS(DEVICE_GPU, GPUDevice, double);
#endif  // GOOGLE_CUDA

#undef REGISTER_KERNELS

}  // namespace
}  // namespace adasamp
