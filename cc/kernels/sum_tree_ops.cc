// OpKernels of the sum-tree ops and their CPU functors.
//
// Every kernel reads the tree in place from its resource variable: mutating
// ops hold the variables' exclusive locks (after switching them to
// copy-on-read, so the update never copies the tree), sampling holds a shared
// lock. Shapes are checked here, values by the functors, all before anything
// is written.

#define EIGEN_USE_THREADS

#include "cc/kernels/sum_tree.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "cc/kernels/sum_tree_algorithm.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/util/work_sharder.h"

namespace adasamp {

using ::tensorflow::DataTypeString;
using ::tensorflow::DataTypeToEnum;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::TTypes;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::Var;
using ::tensorflow::errors::InvalidArgument;
using CPUDevice = Eigen::ThreadPoolDevice;
using GPUDevice = Eigen::GpuDevice;

namespace functor {
namespace {

template <typename T>
absl::Status CheckWeights(typename TTypes<T>::ConstFlat weights) {
  for (int64_t i = 0; i < weights.size(); ++i) {
    if (!(std::isfinite(weights(i)) && weights(i) >= T(0))) {
      return InvalidArgument("weights[", i, "] = ", weights(i),
                             " is not a finite, nonnegative weight");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIndices(TTypes<int64_t>::ConstFlat indices,
                          int64_t num_leaves) {
  for (int64_t i = 0; i < indices.size(); ++i) {
    if (indices(i) < 0 || indices(i) >= num_leaves) {
      return InvalidArgument("indices[", i, "] = ", indices(i),
                             " is out of range [0, ", num_leaves, ")");
    }
  }
  return absl::OkStatus();
}

// Sets every internal node to the sum of its children, bottom up.
template <typename T>
void RebuildInternalNodes(int64_t capacity, T* tree) {
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
}

// Recomputes every ancestor of the sorted, distinct leaf nodes `nodes` of each
// tree in `trees` from its two children, one level at a time so that a shared
// ancestor is computed once, after both its children are final.
template <typename T>
void RecomputeAncestors(std::vector<int64_t> nodes,
                        std::initializer_list<T*> trees) {
  while (!nodes.empty() && nodes.front() > 1) {
    size_t num_parents = 0;
    for (const int64_t node : nodes) {
      const int64_t parent = node / 2;
      if (num_parents == 0 || nodes[num_parents - 1] != parent) {
        nodes[num_parents++] = parent;
      }
    }
    nodes.resize(num_parents);
    for (const int64_t node : nodes) {
      for (T* tree : trees) tree[node] = tree[2 * node] + tree[2 * node + 1];
    }
  }
}

// Positions in `indices` of the first occurrence of each distinct index,
// ordered by index.
std::vector<int64_t> FirstOccurrences(TTypes<int64_t>::ConstFlat indices) {
  std::vector<int64_t> order(indices.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return indices(a) < indices(b);
  });
  order.erase(std::unique(order.begin(), order.end(),
                          [&](int64_t a, int64_t b) {
                            return indices(a) == indices(b);
                          }),
              order.end());
  return order;
}

}  // namespace

template <typename T>
struct SumTreeBuild<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    T total = 0;
    for (int64_t i = 0; i < weights.size(); ++i) total += weights(i);
    if (!std::isfinite(total)) {
      return InvalidArgument("the weights sum to ", total,
                             ", past the range of ",
                             DataTypeString(DataTypeToEnum<T>::v()));
    }
    const int64_t capacity = tree.size() / 2;
    std::fill_n(tree.data(), tree.size(), T(0));
    std::copy_n(weights.data(), weights.size(), tree.data() + capacity);
    RebuildInternalNodes(capacity, tree.data());
    return absl::OkStatus();
  }
};

template <typename T>
struct SumTreeSet<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, int64_t num_leaves,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckIndices(indices, num_leaves));
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    const int64_t capacity = tree.size() / 2;
    T* leaves = tree.data() + capacity;

    // The new total, from the last weight of each index, must stay finite.
    std::vector<int64_t> nodes(indices.size());
    std::vector<T> last_weight(indices.size());
    for (int64_t i = 0; i < indices.size(); ++i) {
      nodes[i] = capacity + indices(i);
    }
    T total = tree(1);
    {
      std::vector<int64_t> last(indices.size());
      std::iota(last.begin(), last.end(), 0);
      std::stable_sort(last.begin(), last.end(), [&](int64_t a, int64_t b) {
        return indices(a) > indices(b);
      });
      for (size_t k = 0; k < last.size(); ++k) {
        const int64_t i = last[k];
        const bool is_last_of_index =
            k + 1 == last.size() || indices(last[k + 1]) != indices(i);
        if (is_last_of_index) total += weights(i) - leaves[indices(i)];
      }
    }
    if (!std::isfinite(total)) {
      return InvalidArgument("the new weights sum to ", total,
                             ", past the range of ",
                             DataTypeString(DataTypeToEnum<T>::v()));
    }

    for (int64_t i = 0; i < indices.size(); ++i) {
      leaves[indices(i)] = weights(i);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    RecomputeAncestors<T>(std::move(nodes), {tree.data()});
    return absl::OkStatus();
  }
};

template <typename T>
struct SumTreeSample<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree,
                          typename TTypes<T>::ConstFlat uniforms,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    const T total = tree(1);
    if (!(total > T(0))) {
      return InvalidArgument("cannot sample: the tree's total weight is ",
                             total);
    }
    for (int64_t i = 0; i < uniforms.size(); ++i) {
      if (!(uniforms(i) >= T(0) && uniforms(i) < T(1))) {
        return InvalidArgument("uniforms[", i, "] = ", uniforms(i),
                               " is outside [0, 1)");
      }
    }
    const int64_t capacity = tree.size() / 2;
    const int64_t depth = static_cast<int64_t>(std::log2(capacity)) + 1;
    auto draw = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t leaf = Descend(tree.data(), capacity, uniforms(i) * total);
        indices(i) = leaf;
        probabilities(i) = tree(capacity + leaf) / total;
      }
    };
    const auto& workers = *ctx->device()->tensorflow_cpu_worker_threads();
    tensorflow::Shard(workers.num_threads, workers.workers, uniforms.size(),
                      /*cost_per_unit=*/100 * depth, draw);
    return absl::OkStatus();
  }
};

template <typename T>
struct AdaptiveReweight<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, T amplitude, T decay,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat utilities,
                          typename TTypes<T>::Flat log_weights,
                          typename TTypes<T>::Scalar log_scale,
                          typename TTypes<T>::Flat tree,
                          typename TTypes<T>::Flat entropy_tree) {
    const int64_t num_leaves = log_weights.size();
    TF_RETURN_IF_ERROR(CheckIndices(indices, num_leaves));
    const std::vector<int64_t> firsts = FirstOccurrences(indices);
    std::vector<T> new_log_weights(firsts.size());
    for (size_t k = 0; k < firsts.size(); ++k) {
      const int64_t i = firsts[k];
      if (!std::isfinite(utilities(i))) {
        return InvalidArgument("utilities[", i, "] = ", utilities(i),
                               " is not finite");
      }
      new_log_weights[k] = ReweightedLogWeight(
          log_weights(indices(i)), utilities(i), amplitude, decay);
      if (!std::isfinite(new_log_weights[k])) {
        return InvalidArgument("amplitude * utilities[", i, "] = ", amplitude,
                               " * ", utilities(i), " overflows");
      }
    }

    const int64_t capacity = tree.size() / 2;
    T* leaves = tree.data() + capacity;
    T* entropy_leaves = entropy_tree.data() + capacity;
    const T scale = log_scale();
    std::vector<int64_t> nodes(firsts.size());
    for (size_t k = 0; k < firsts.size(); ++k) {
      const int64_t index = indices(firsts[k]);
      const T log_scaled = new_log_weights[k] - scale;
      log_weights(index) = new_log_weights[k];
      leaves[index] = std::exp(log_scaled);
      entropy_leaves[index] = EntropyTerm(leaves[index], log_scaled);
      nodes[k] = capacity + index;
    }
    RecomputeAncestors<T>(std::move(nodes), {tree.data(), entropy_tree.data()});
    if (NeedsRescale(tree(1))) Rescale(log_weights, log_scale, tree, entropy_tree);
    return absl::OkStatus();
  }

 private:
  // Recomputes both caches from the exact log weights with the log-sum-exp
  // as the new scale, so the total becomes 1.
  static void Rescale(typename TTypes<T>::Flat log_weights,
                      typename TTypes<T>::Scalar log_scale,
                      typename TTypes<T>::Flat tree,
                      typename TTypes<T>::Flat entropy_tree) {
    const int64_t num_leaves = log_weights.size();
    const T* log_w = log_weights.data();
    const T max_log_weight = *std::max_element(log_w, log_w + num_leaves);
    T sum = 0;
    for (int64_t i = 0; i < num_leaves; ++i) {
      sum += std::exp(log_w[i] - max_log_weight);
    }
    const T scale = max_log_weight + std::log(sum);
    const int64_t capacity = tree.size() / 2;
    for (int64_t i = 0; i < num_leaves; ++i) {
      const T log_scaled = log_w[i] - scale;
      tree(capacity + i) = std::exp(log_scaled);
      entropy_tree(capacity + i) = EntropyTerm(tree(capacity + i), log_scaled);
    }
    RebuildInternalNodes(capacity, tree.data());
    RebuildInternalNodes(capacity, entropy_tree.data());
    log_scale() = scale;
  }
};

}  // namespace functor

namespace {

// Looks up the variable behind resource input `input` and checks that it is
// initialized and of dtype T, before any of the op's locks are taken.
template <typename T>
absl::Status LookupVariable(OpKernelContext* ctx, int input,
                            absl::string_view name,
                            tensorflow::core::RefCountPtr<Var>* var) {
  const absl::Status found = tensorflow::LookupResource(
      ctx, tensorflow::HandleFromInput(ctx, input), var);
  if (!found.ok()) {
    return InvalidArgument(name, " is not an initialized variable: ",
                           found.message());
  }
  tensorflow::tf_shared_lock lock(*(*var)->mu());
  if (!(*var)->is_initialized) {
    return InvalidArgument(name, " is an uninitialized variable");
  }
  const tensorflow::DataType dtype = (*var)->tensor()->dtype();
  if (dtype != DataTypeToEnum<T>::v()) {
    return InvalidArgument(name, " has dtype ", DataTypeString(dtype),
                           ", expected ",
                           DataTypeString(DataTypeToEnum<T>::v()));
  }
  return absl::OkStatus();
}

// A tree is a vector of 2 * capacity values, capacity a power of two; if
// `num_leaves` is given, the one that pads it.
absl::Status CheckTreeShape(const Tensor& tree, absl::string_view name,
                            int64_t num_leaves = -1) {
  const int64_t size = tree.NumElements();
  const bool is_tree = TensorShapeUtils::IsVector(tree.shape()) && size >= 2 &&
                       TreeCapacity(size / 2) == size / 2 && size % 2 == 0;
  if (!is_tree) {
    return InvalidArgument(name, " must be a vector of 2 * capacity values, ",
                           "capacity a power of two; got shape ",
                           tree.shape().DebugString());
  }
  if (num_leaves >= 0 && size != 2 * TreeCapacity(num_leaves)) {
    return InvalidArgument(name, " has shape ", tree.shape().DebugString(),
                           " but a tree over ", num_leaves,
                           " leaves has shape [", 2 * TreeCapacity(num_leaves),
                           "]");
  }
  return absl::OkStatus();
}

absl::Status CheckVector(const Tensor& tensor, absl::string_view name) {
  if (!TensorShapeUtils::IsVector(tensor.shape())) {
    return InvalidArgument(name, " must be a vector, got shape ",
                           tensor.shape().DebugString());
  }
  return absl::OkStatus();
}

absl::Status CheckSameLength(const Tensor& a, absl::string_view a_name,
                             const Tensor& b, absl::string_view b_name) {
  TF_RETURN_IF_ERROR(CheckVector(a, a_name));
  TF_RETURN_IF_ERROR(CheckVector(b, b_name));
  if (a.NumElements() != b.NumElements()) {
    return InvalidArgument(a_name, " has ", a.NumElements(), " elements but ",
                           b_name, " has ", b.NumElements());
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ReadScalar(const Tensor& tensor, absl::string_view name, T* out) {
  if (!TensorShapeUtils::IsScalar(tensor.shape())) {
    return InvalidArgument(name, " must be a scalar, got shape ",
                           tensor.shape().DebugString());
  }
  *out = tensor.scalar<T>()();
  return absl::OkStatus();
}

}  // namespace

template <typename Device, typename T>
class SumTreeBuildOp : public OpKernel {
 public:
  explicit SumTreeBuildOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_leaves", &num_leaves_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& weights = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckVector(weights, "weights"));
    OP_REQUIRES(ctx, weights.NumElements() == num_leaves_,
                InvalidArgument("weights has ", weights.NumElements(),
                                " elements but the tree has ", num_leaves_,
                                " leaves"));
    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    auto lock = tensorflow::MaybeLockVariableInputMutexesInOrder<Device, T>(
        ctx, /*do_lock=*/true, /*sparse=*/true, {0});
    OP_REQUIRES_OK(ctx, CheckTreeShape(*tree->tensor(), "tree", num_leaves_));
    OP_REQUIRES_OK(ctx, functor::SumTreeBuild<Device, T>()(
                            ctx, weights.flat<T>(), tree->tensor()->flat<T>()));
  }

 private:
  int64_t num_leaves_;
};

template <typename Device, typename T>
class SumTreeSetOp : public OpKernel {
 public:
  explicit SumTreeSetOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_leaves", &num_leaves_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(1);
    const Tensor& weights = ctx->input(2);
    OP_REQUIRES_OK(ctx, CheckSameLength(indices, "indices", weights, "weights"));
    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    auto lock = tensorflow::MaybeLockVariableInputMutexesInOrder<Device, T>(
        ctx, /*do_lock=*/true, /*sparse=*/true, {0});
    OP_REQUIRES_OK(ctx, CheckTreeShape(*tree->tensor(), "tree", num_leaves_));
    OP_REQUIRES_OK(ctx, functor::SumTreeSet<Device, T>()(
                            ctx, num_leaves_, indices.flat<int64_t>(),
                            weights.flat<T>(), tree->tensor()->flat<T>()));
  }

 private:
  int64_t num_leaves_;
};

template <typename Device, typename T>
class SumTreeSampleOp : public OpKernel {
 public:
  explicit SumTreeSampleOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& uniforms = ctx->input(1);
    OP_REQUIRES_OK(ctx, CheckVector(uniforms, "uniforms"));
    Tensor* indices = nullptr;
    Tensor* probabilities = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, uniforms.shape(), &indices));
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, uniforms.shape(), &probabilities));
    if (uniforms.NumElements() == 0) return;

    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    // Sampling only reads: a shared lock lets draws run beside each other.
    tensorflow::tf_shared_lock lock(*tree->mu());
    OP_REQUIRES_OK(ctx, CheckTreeShape(*tree->tensor(), "tree"));
    const Tensor& tree_values = *tree->tensor();
    OP_REQUIRES_OK(ctx, functor::SumTreeSample<Device, T>()(
                            ctx, tree_values.flat<T>(), uniforms.flat<T>(),
                            indices->flat<int64_t>(), probabilities->flat<T>()));
  }
};

template <typename Device, typename T>
class AdaptiveReweightOp : public OpKernel {
 public:
  explicit AdaptiveReweightOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(4);
    const Tensor& utilities = ctx->input(5);
    OP_REQUIRES_OK(ctx,
                   CheckSameLength(indices, "indices", utilities, "utilities"));
    T amplitude, decay;
    OP_REQUIRES_OK(ctx, ReadScalar(ctx->input(6), "amplitude", &amplitude));
    OP_REQUIRES_OK(ctx, ReadScalar(ctx->input(7), "decay", &decay));
    OP_REQUIRES(ctx, std::isfinite(amplitude) && amplitude >= T(0),
                InvalidArgument("amplitude = ", amplitude,
                                " must be finite and >= 0"));
    OP_REQUIRES(ctx, decay > T(0) && decay < T(1),
                InvalidArgument("decay = ", decay, " must be in (0, 1)"));

    tensorflow::core::RefCountPtr<Var> tree, entropy_tree, log_weights,
        log_scale;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    OP_REQUIRES_OK(ctx,
                   LookupVariable<T>(ctx, 1, "entropy_tree", &entropy_tree));
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 2, "log_weights", &log_weights));
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 3, "log_scale", &log_scale));
    auto lock = tensorflow::MaybeLockVariableInputMutexesInOrder<Device, T>(
        ctx, /*do_lock=*/true, /*sparse=*/true, {0, 1, 2, 3});

    const Tensor& log_w = *log_weights->tensor();
    OP_REQUIRES_OK(ctx, CheckVector(log_w, "log_weights"));
    const int64_t num_leaves = log_w.NumElements();
    OP_REQUIRES(ctx, num_leaves >= 1,
                InvalidArgument("log_weights must not be empty"));
    OP_REQUIRES_OK(ctx, CheckTreeShape(*tree->tensor(), "tree", num_leaves));
    OP_REQUIRES_OK(ctx, CheckTreeShape(*entropy_tree->tensor(), "entropy_tree",
                                       num_leaves));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(log_scale->tensor()->shape()),
                InvalidArgument("log_scale must be a scalar, got shape ",
                                log_scale->tensor()->shape().DebugString()));
    OP_REQUIRES_OK(ctx, functor::AdaptiveReweight<Device, T>()(
                            ctx, amplitude, decay, indices.flat<int64_t>(),
                            utilities.flat<T>(),
                            log_weights->tensor()->flat<T>(),
                            log_scale->tensor()->scalar<T>(),
                            tree->tensor()->flat<T>(),
                            entropy_tree->tensor()->flat<T>()));
  }
};

#define REGISTER_KERNELS(DEVICE, D, T)                             \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeBuild")                  \
                              .Device(DEVICE)                           \
                              .HostMemory("tree")                       \
                              .TypeConstraint<T>("T"),                  \
                          SumTreeBuildOp<D, T>);                   \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeSet")                    \
                              .Device(DEVICE)                           \
                              .HostMemory("tree")                       \
                              .TypeConstraint<T>("T"),                  \
                          SumTreeSetOp<D, T>);                     \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>SumTreeSample")                 \
                              .Device(DEVICE)                           \
                              .HostMemory("tree")                       \
                              .TypeConstraint<T>("T"),                  \
                          SumTreeSampleOp<D, T>);                  \
  REGISTER_KERNEL_BUILDER(Name("AdaSamp>AdaptiveReweight")              \
                              .Device(DEVICE)                           \
                              .HostMemory("tree")                       \
                              .HostMemory("entropy_tree")               \
                              .HostMemory("log_weights")                \
                              .HostMemory("log_scale")                  \
                              .HostMemory("amplitude")                  \
                              .HostMemory("decay")                      \
                              .TypeConstraint<T>("T"),                  \
                          AdaptiveReweightOp<D, T>);

using ::tensorflow::DEVICE_CPU;
REGISTER_KERNELS(DEVICE_CPU, CPUDevice, float);
REGISTER_KERNELS(DEVICE_CPU, CPUDevice, double);

#if GOOGLE_CUDA
// The GPU functors are defined in sum_tree_ops_gpu.cc.
#define DECLARE_GPU_FUNCTORS(T)                                   \
  extern template struct functor::SumTreeBuild<GPUDevice, T>;     \
  extern template struct functor::SumTreeSet<GPUDevice, T>;       \
  extern template struct functor::SumTreeSample<GPUDevice, T>;    \
  extern template struct functor::AdaptiveReweight<GPUDevice, T>;
DECLARE_GPU_FUNCTORS(float);
DECLARE_GPU_FUNCTORS(double);
#undef DECLARE_GPU_FUNCTORS

using ::tensorflow::DEVICE_GPU;
REGISTER_KERNELS(DEVICE_GPU, GPUDevice, float);
REGISTER_KERNELS(DEVICE_GPU, GPUDevice, double);
#endif  // GOOGLE_CUDA

#undef REGISTER_KERNELS

}  // namespace adasamp
