// The checks of the sum-tree ops' inputs, each returning InvalidArgument with
// a message that names the argument (and, for a value, its index and the
// range it breaks). The OpKernels, the CPU functors and the XLA kernels share
// them, so each refusal reads the same on every path.

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_CHECKS_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/tensor_types.h"

namespace adasamp {

// Shapes.

// A tree is a vector of 2 * capacity values, capacity a power of two; if
// `num_leaves` is given, the one that pads it.
absl::Status CheckTreeShape(const tensorflow::TensorShape& tree,
                            absl::string_view name, int64_t num_leaves = -1);

// A tf.random.Generator's Philox state: two counter words and a key.
constexpr int64_t kPhiloxStateSize = 3;
absl::Status CheckPhiloxStateShape(const tensorflow::TensorShape& rng_state);

absl::Status CheckVector(const tensorflow::Tensor& tensor,
                         absl::string_view name);

// Two vectors of one length.
absl::Status CheckSameLength(const tensorflow::Tensor& a,
                             absl::string_view a_name,
                             const tensorflow::Tensor& b,
                             absl::string_view b_name);

// Reads `tensor`, which must be a scalar, into `out`.
template <typename T>
absl::Status ReadScalar(const tensorflow::Tensor& tensor,
                        absl::string_view name, T* out);

// Values.

// Algorithm 1's amplitude (finite, >= 0) and decay (in [0, 1)).
template <typename T>
absl::Status CheckReweightParameters(T amplitude, T decay);

// A draw's batch size, in [0, TensorFlow's int32 shape limit] as for a
// generator's draw.
absl::Status CheckDrawBatchSize(int64_t batch_size);

// Every weight finite and >= 0.
template <typename T>
absl::Status CheckWeights(typename tensorflow::TTypes<T>::ConstFlat weights);

// Every index in [0, num_leaves).
absl::Status CheckIndices(tensorflow::TTypes<int64_t>::ConstFlat indices,
                          int64_t num_leaves);

// A tree whose node 0 holds `recorded` may be updated as a tree over
// `num_leaves` leaves (MatchesNumLeaves, sum_tree_algorithm.h).
template <typename T>
absl::Status CheckNumLeaves(T recorded, int64_t num_leaves);

// A tree to draw from: its total finite and > 0.
template <typename T>
absl::Status CheckSampleableTotal(T total);

// The refusal of an update whose tree would hold an inf sum.
template <typename T>
absl::Status OverflowError();

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_CHECKS_H_
