// Device functors of the sum-tree ops, declared device-neutral: the OpKernels
// (sum_tree_ops.cc) call them for any Device. The OpKernels check
// shapes and take the variables' locks; a functor checks the values it reads
// (indices in range, finite weights), then mutates, so bad input never leaves
// a tree half-written. Each functor has a CPU specialisation
// (sum_tree_ops_cpu.cc) and a GPU one (sum_tree_ops_gpu.cc, over the TF-free
// CUDA side in gpu/). The XLA handlers (sum_tree_ffi.cc) run the CPU ones
// with a null `ctx`, and the draws through SumTreeSampleOnCpu and
// SumTreeDrawOnCpu, which take XLA's intra-op pool instead of a context.

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_OPS_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_OPS_H_

#define EIGEN_USE_THREADS

#include "absl/status/status.h"
#include "cc/kernels/intra_op_pool.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_types.h"

namespace adasamp {

namespace functor {

using ::tensorflow::OpKernelContext;
using ::tensorflow::TTypes;

// Writes `weights` into the leaves, zeroes the padding and recomputes every
// internal node: the one O(n) operation.
template <typename Device, typename T>
struct SumTreeBuild {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree);
};

// Sets leaves `indices` to `weights` (the last of repeated indices wins) and
// recomputes their ancestors from their children, once per node.
template <typename Device, typename T>
struct SumTreeSet {
  absl::Status operator()(OpKernelContext* ctx, int64_t num_leaves,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree);
};

// One Descend (sum_tree_algorithm.h) per uniform.
template <typename Device, typename T>
struct SumTreeSample {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree,
                          typename TTypes<T>::ConstFlat uniforms,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities);
};

// As SumTreeSample on the uniforms that tf.random.Generator.uniform would
// draw from the Philox state `rng_state` (int64 [3]), which it advances as
// that call would (PhiloxFromState, sum_tree_algorithm.h): one op instead of
// the generator's and the sample's. Stratified, uniform i becomes
// (i + u_i) / B.
template <typename Device, typename T>
struct SumTreeDraw {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree, bool stratified,
                          typename TTypes<int64_t>::Flat rng_state,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities);
};

// The CPU functors of SumTreeSample and SumTreeDraw, sharing a large batch
// with `pool`: for callers without an OpKernelContext. Each draw's uniform
// depends only on its position in the batch, so the split never changes a
// result.
template <typename T>
absl::Status SumTreeSampleOnCpu(const IntraOpPool& pool,
                                typename TTypes<T>::ConstFlat tree,
                                typename TTypes<T>::ConstFlat uniforms,
                                typename TTypes<int64_t>::Flat indices,
                                typename TTypes<T>::Flat probabilities);
template <typename T>
absl::Status SumTreeDrawOnCpu(const IntraOpPool& pool,
                              typename TTypes<T>::ConstFlat tree,
                              bool stratified,
                              typename TTypes<int64_t>::Flat rng_state,
                              typename TTypes<int64_t>::Flat indices,
                              typename TTypes<T>::Flat probabilities);

// Algorithm 1, line 5, for the first occurrence of each index: updates the
// log weights, the cached leaves of `tree` and `entropy_tree` and their
// ancestors, and rescales all caches if the total leaves its safe range or
// decay is 0 (RescaleAfterUpdate); then copies the tree's total into node 0
// of `entropy_tree`.
template <typename Device, typename T>
struct AdaptiveReweight {
  absl::Status operator()(OpKernelContext* ctx, T amplitude, T decay,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat utilities,
                          typename TTypes<T>::Flat log_weights,
                          typename TTypes<T>::Scalar log_scale,
                          typename TTypes<T>::Flat tree,
                          typename TTypes<T>::Flat entropy_tree);
};

}  // namespace functor
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_OPS_H_
