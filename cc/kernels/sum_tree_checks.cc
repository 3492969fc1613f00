#include "cc/kernels/sum_tree_checks.h"

#include <cstdint>
#include <limits>

#include "cc/kernels/sum_tree_algorithm.h"
#include "tensorflow/core/framework/types.h"

namespace adasamp {

using ::tensorflow::DataTypeString;
using ::tensorflow::DataTypeToEnum;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::TTypes;
using ::tensorflow::errors::InvalidArgument;

absl::Status CheckTreeShape(const TensorShape& tree, absl::string_view name,
                            int64_t num_leaves) {
  const int64_t size = tree.num_elements();
  const bool is_tree = TensorShapeUtils::IsVector(tree) && size >= 2 &&
                       TreeCapacity(size / 2) == size / 2 && size % 2 == 0;
  if (!is_tree) {
    return InvalidArgument(name, " must be a vector of 2 * capacity values, ",
                           "capacity a power of two; got shape ",
                           tree.DebugString());
  }
  if (num_leaves >= 0 && size != 2 * TreeCapacity(num_leaves)) {
    return InvalidArgument(
        name, " has shape ", tree.DebugString(), " but a tree over ",
        num_leaves, " leaves has shape [", 2 * TreeCapacity(num_leaves), "]");
  }
  return absl::OkStatus();
}

absl::Status CheckPhiloxStateShape(const TensorShape& rng_state) {
  if (!(TensorShapeUtils::IsVector(rng_state) &&
        rng_state.num_elements() == kPhiloxStateSize)) {
    return InvalidArgument(
        "rng_state must be a Philox generator's state of shape [",
        kPhiloxStateSize, "], got shape ", rng_state.DebugString());
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

template <typename T>
absl::Status CheckReweightParameters(T amplitude, T decay) {
  if (!(IsFinite(amplitude) && amplitude >= T(0))) {
    return InvalidArgument("amplitude = ", amplitude,
                           " must be finite and >= 0");
  }
  if (!(decay >= T(0) && decay < T(1))) {
    return InvalidArgument("decay = ", decay, " must be in [0, 1)");
  }
  return absl::OkStatus();
}

absl::Status CheckDrawBatchSize(int64_t batch_size) {
  constexpr int64_t kMaxBatchSize = std::numeric_limits<int32_t>::max();
  if (!(batch_size >= 0 && batch_size <= kMaxBatchSize)) {
    return InvalidArgument("batch_size = ", batch_size, " must be in [0, ",
                           kMaxBatchSize, "]");
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckWeights(typename TTypes<T>::ConstFlat weights) {
  for (int64_t i = 0; i < weights.size(); ++i) {
    if (!IsValidWeight(weights(i))) {
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

template <typename T>
absl::Status CheckNumLeaves(T recorded, int64_t num_leaves) {
  if (!MatchesNumLeaves(recorded, num_leaves)) {
    return InvalidArgument("num_leaves = ", num_leaves,
                           " but the tree was built over ", recorded,
                           " leaves");
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckSampleableTotal(T total) {
  if (!(total > T(0) && IsFinite(total))) {
    return InvalidArgument("cannot sample: the tree's total weight is ", total);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status OverflowError() {
  return InvalidArgument("the weights sum to inf in the tree: a node's sum ",
                         "would be past the range of ",
                         DataTypeString(DataTypeToEnum<T>::v()));
}

#define INSTANTIATE_CHECKS(T)                                             \
  template absl::Status ReadScalar(const Tensor&, absl::string_view, T*); \
  template absl::Status CheckReweightParameters(T, T);                    \
  template absl::Status CheckWeights<T>(TTypes<T>::ConstFlat);            \
  template absl::Status CheckNumLeaves(T, int64_t);                       \
  template absl::Status CheckSampleableTotal(T);                          \
  template absl::Status OverflowError<T>();
INSTANTIATE_CHECKS(float);
INSTANTIATE_CHECKS(double);
#undef INSTANTIATE_CHECKS
template absl::Status ReadScalar(const Tensor&, absl::string_view, int64_t*);

}  // namespace adasamp
