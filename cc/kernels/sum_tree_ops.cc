// OpKernels of the sum-tree ops and their CPU functors.
//
// Every kernel reads the tree in place from its resource variable: mutating
// ops hold the variables' exclusive locks (after switching them to
// copy-on-read, so the update never copies the tree), sampling holds a shared
// lock. Shapes are checked here, values by the functors, all before anything
// is written.

#define EIGEN_USE_THREADS

#include "cc/kernels/sum_tree_ops.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/numeric/bits.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cc/kernels/descend_cpu.h"
#include "cc/kernels/sum_tree_algorithm.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/kernels/training_op_helpers.h"
#include "tensorflow/core/platform/threadpool.h"

namespace adasamp {

using ::tensorflow::DataTypeString;
using ::tensorflow::DataTypeToEnum;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::TTypes;
using ::tensorflow::Var;
using ::tensorflow::errors::InvalidArgument;
using CPUDevice = Eigen::ThreadPoolDevice;
using GPUDevice = Eigen::GpuDevice;

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
template absl::Status CheckReweightParameters(float, float);
template absl::Status CheckReweightParameters(double, double);

absl::Status CheckDrawBatchSize(int64_t batch_size) {
  constexpr int64_t kMaxBatchSize = std::numeric_limits<int32_t>::max();
  if (!(batch_size >= 0 && batch_size <= kMaxBatchSize)) {
    return InvalidArgument("batch_size = ", batch_size, " must be in [0, ",
                           kMaxBatchSize, "]");
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

namespace functor {
namespace {

// Batches of up to this many updates find their distinct indices in a hash
// table on the stack (SmallUpdates); larger ones sort (SortedUpdates).
constexpr int kSmallBatch = 128;

// A batch goes to the intra-op pool only with at least this many draws (about
// 20 us with AVX-512 walks in a cached tree, longer in a large one) per
// thread: for less, waking a pool thread costs much of what it saves. At
// B = 4096 two threads draw 1.4x as fast as one on a quiet 2-core machine; on
// a busy one, a helper preempted while holding a chunk delays the op by up to
// a chunk's draws.
constexpr int64_t kMinDrawsPerShard = 2048;

// Draws that a thread of a shared batch takes at a time.
constexpr int64_t kDrawsPerChunk = 1024;

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

// Node 0 records the num_leaves a tree was built with (sum_tree_algorithm.h).
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
absl::Status OverflowError() {
  return InvalidArgument("the weights sum to inf in the tree: a node's sum ",
                         "would be past the range of ",
                         DataTypeString(DataTypeToEnum<T>::v()));
}

// The root of the tree over leaves leaf(0), ..., leaf(n - 1) and zero padding,
// bit for bit as RebuildInternalNodes sums it, without a tree: a binary
// counter of the complete subtrees so far (a node is the sum of its left and
// right child; x + 0 is x, so padding leaves a partial subtree as it is).
template <typename T, typename Leaf>
T PairwiseTotal(int64_t n, Leaf leaf) {
  T sums[64];
  int64_t sizes[64];
  int top = 0;
  for (int64_t i = 0; i < n; ++i) {
    T sum = leaf(i);
    int64_t size = 1;
    while (top > 0 && sizes[top - 1] == size) {
      sum = sums[--top] + sum;
      size *= 2;
    }
    sums[top] = sum;
    sizes[top++] = size;
  }
  T total = sums[--top];
  while (top > 0) total = sums[--top] + total;
  return total;
}

// A type that sums any batch of T weights without overflow, to bound a new
// total cheaply (x86's 80-bit long double for double; where long double is
// double, a sum that overflows makes MayOverflow true, and the exact check
// decides).
template <typename T>
struct Wider;
template <>
struct Wider<float> {
  using Type = double;
};
template <>
struct Wider<double> {
  using Type = long double;
};

// Runs work(begin, end) over [0, total) in chunks of `chunk` that the calling
// thread and `num_helpers` tasks on `pool` take in turn. The caller waits
// only for chunks already taken, never for a task still queued behind other
// work (on a busy machine a pool thread can start late); a task that starts
// after the last chunk is taken returns at once, touching only `progress`.
void ShareWork(tensorflow::thread::ThreadPool* pool, int num_helpers,
               int64_t total, int64_t chunk,
               const std::function<void(int64_t, int64_t)>& work) {
  struct Progress {
    explicit Progress(int64_t total) : total(total) {}
    bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return done == total;
    }
    const int64_t total;
    std::atomic<int64_t> next{0};
    absl::Mutex mu;
    int64_t done ABSL_GUARDED_BY(mu) = 0;
  };
  auto progress = std::make_shared<Progress>(total);
  // `work` is only called for a chunk taken before the last, while the
  // caller still waits, so the reference to it stays valid.
  auto take_chunks = [progress, chunk, &work] {
    for (;;) {
      const int64_t begin = progress->next.fetch_add(chunk);
      if (begin >= progress->total) return;
      const int64_t end = std::min(progress->total, begin + chunk);
      work(begin, end);
      absl::MutexLock lock(&progress->mu);
      progress->done += end - begin;
    }
  };
  for (int i = 0; i < num_helpers; ++i) pool->Schedule(take_chunks);
  take_chunks();
  absl::MutexLock lock(&progress->mu);
  progress->mu.Await(absl::Condition(progress.get(), &Progress::Finished));
}

// Sets every internal node to the sum of its children, bottom up.
template <typename T>
void RebuildInternalNodes(int64_t capacity, T* tree) {
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
}

// Recomputes every ancestor of the leaf nodes `nodes` of each tree in
// `trees` from its two children, one leaf's path at a time: a path's nodes
// are still in cache from one level to the next, where a pass per level
// fetches each node again (at B = 128, sets and reweights ran 1.2x to 1.5x as
// fast; benchmarks/RESULTS.md). A path stops below the node where the next
// leaf's path meets it, so the last path through a node computes it, after
// both its children are final: sorted nodes compute each ancestor once,
// others some again, to the same value. Each tree's sum climbs the path in a
// register, each level adding the sibling read from memory: reloading the
// node just stored would wait on that store at every level. Addition
// commutes, so the sums are those of left + right, bit for bit.
template <typename T, size_t kTrees>
void RecomputeAncestors(absl::Span<const int64_t> nodes,
                        T* const (&trees)[kTrees]) {
  for (size_t k = 0; k < nodes.size(); ++k) {
    int64_t node = nodes[k];
    // Where the paths meet: above the highest bit in which the nodes differ.
    const int64_t meet =
        k + 1 < nodes.size()
            ? node >>
                  absl::bit_width(static_cast<uint64_t>(node ^ nodes[k + 1]))
            : 0;
    T sums[kTrees];
    for (size_t t = 0; t < kTrees; ++t) sums[t] = trees[t][node];
    for (; (node >> 1) > meet; node >>= 1) {
      for (size_t t = 0; t < kTrees; ++t) {
        sums[t] += trees[t][node ^ 1];
        trees[t][node >> 1] = sums[t];
      }
    }
  }
}

// Starts fetching, for writing, element indices(i) of each of `arrays` (a
// tree's leaves, the log weights): the cache misses then overlap with finding
// the distinct indices, where the writes would wait on them one by one.
template <typename T, size_t kArrays>
void PrefetchForWriting(TTypes<int64_t>::ConstFlat indices,
                        T* const (&arrays)[kArrays]) {
  for (int64_t i = 0; i < indices.size(); ++i) {
    for (size_t a = 0; a < kArrays; ++a) {
      __builtin_prefetch(arrays[a] + indices(i), /*rw=*/1);
    }
  }
}

// The (index, position) pairs of a batch of updates, sorted by index and, for
// equal indices, by position: the first and last occurrence of an index start
// and end its run.
class SortedUpdates {
 public:
  // `indices` in [0, num_leaves). A stable LSD radix sort on the index bytes
  // that num_leaves - 1 needs: O(B) per byte, where comparison sorts of
  // thousands of random keys lose most of their time to mispredictions.
  SortedUpdates(TTypes<int64_t>::ConstFlat indices, int64_t num_leaves)
      : size_(indices.size()), storage_(2 * size_) {
    sorted_ = storage_.data();
    Update* buffer = sorted_ + size_;
    for (int64_t i = 0; i < size_; ++i) sorted_[i] = {indices(i), i};
    for (int shift = 0; shift < 64 && ((num_leaves - 1) >> shift) > 0;
         shift += 8) {
      int64_t starts[257] = {0};
      for (int64_t i = 0; i < size_; ++i) {
        ++starts[((sorted_[i].first >> shift) & 255) + 1];
      }
      std::partial_sum(starts, starts + 257, starts);
      for (int64_t i = 0; i < size_; ++i) {
        buffer[starts[(sorted_[i].first >> shift) & 255]++] = sorted_[i];
      }
      std::swap(sorted_, buffer);
    }
  }

  // Calls visit(index, first_position, last_position) per distinct index, in
  // increasing index order.
  template <typename Visit>
  void ForEachIndex(Visit visit) const {
    for (int64_t begin = 0, end; begin < size_; begin = end) {
      end = begin + 1;
      while (end < size_ && sorted_[end].first == sorted_[begin].first) ++end;
      visit(sorted_[begin].first, sorted_[begin].second,
            sorted_[end - 1].second);
    }
  }

 private:
  using Update = std::pair<int64_t, int64_t>;
  const int64_t size_;
  // The pairs and a buffer for the sort's passes.
  absl::InlinedVector<Update, 2 * kSmallBatch> storage_;
  Update* sorted_;
};

// The distinct indices of a batch of at most kSmallBatch updates, in the
// order of their first occurrence, with their first and last positions:
// an open-addressing hash table on the stack, O(B), where sorting would cost
// more than the rest of the update.
class SmallUpdates {
 public:
  explicit SmallUpdates(TTypes<int64_t>::ConstFlat indices)
      : size_(indices.size()) {
    std::fill_n(keys_, kSlots, int64_t{-1});
    for (int64_t i = 0; i < size_; ++i) {
      const int64_t index = indices(i);
      uint64_t slot = (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15u) >>
                      (64 - kSlotBits);
      while (keys_[slot] != -1 && keys_[slot] != index) {
        slot = (slot + 1) % kSlots;
      }
      if (keys_[slot] == -1) {
        keys_[slot] = index;
        first_[slot] = static_cast<int32_t>(i);
      }
      last_[slot] = static_cast<int32_t>(i);
      slots_[i] = static_cast<uint16_t>(slot);
    }
  }

  // Calls visit(index, first_position, last_position) per distinct index, in
  // the order of first positions.
  template <typename Visit>
  void ForEachIndex(Visit visit) const {
    for (int64_t i = 0; i < size_; ++i) {
      const int slot = slots_[i];
      if (first_[slot] == i) visit(keys_[slot], first_[slot], last_[slot]);
    }
  }

 private:
  static constexpr int kSlotBits = 8;
  static constexpr int kSlots = 1 << kSlotBits;  // >= 2 * kSmallBatch
  const int64_t size_;
  int64_t keys_[kSlots];
  int32_t first_[kSlots];
  int32_t last_[kSlots];
  uint16_t slots_[kSmallBatch];
};

// The root `tree` would have after setting each leaf `index` of `updates` to
// new_leaf(index, last position), without writing: the sums
// RecomputeAncestors would write, computed level by level over the sorted,
// distinct leaves, reading untouched siblings from the tree. O(B log n).
template <typename T, typename NewLeaf>
T NewRoot(const SortedUpdates& updates, const T* tree, int64_t capacity,
          NewLeaf new_leaf) {
  std::vector<std::pair<int64_t, T>> nodes;
  updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
    nodes.emplace_back(capacity + index, new_leaf(last));
  });
  while (nodes[0].first > 1) {
    size_t num_parents = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
      const auto [node, value] = nodes[k];
      T sum;
      if (node % 2 == 1) {
        sum = tree[node - 1] + value;
      } else if (k + 1 < nodes.size() && nodes[k + 1].first == node + 1) {
        sum = value + nodes[++k].second;
      } else {
        sum = value + tree[node + 1];
      }
      nodes[num_parents++] = {node / 2, sum};
    }
    nodes.resize(num_parents);
  }
  return nodes[0].second;
}

}  // namespace

template <typename T>
struct SumTreeBuild<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    const int64_t num_leaves = weights.size();
    const T total = PairwiseTotal<T>(
        num_leaves, [&](int64_t i) { return StoredWeight(weights(i)); });
    if (!IsFinite(total)) return OverflowError<T>();
    const int64_t capacity = tree.size() / 2;
    std::fill_n(tree.data(), tree.size(), T(0));
    T* leaves = tree.data() + capacity;
    for (int64_t i = 0; i < num_leaves; ++i) {
      leaves[i] = StoredWeight(weights(i));
    }
    RebuildInternalNodes(capacity, tree.data());
    tree(kNumLeavesNode) = static_cast<T>(num_leaves);
    return absl::OkStatus();
  }
};

template <typename T>
struct SumTreeSet<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, int64_t num_leaves,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckNumLeaves(tree(kNumLeavesNode), num_leaves));
    TF_RETURN_IF_ERROR(CheckIndices(indices, num_leaves));
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    const int64_t capacity = tree.size() / 2;
    T* leaves = tree.data() + capacity;
    auto new_leaf = [&](int64_t position) {
      return StoredWeight(weights(position));
    };
    if (MayOverflow(tree(1), weights)) {
      const T root = NewRoot<T>(SortedUpdates(indices, num_leaves), tree.data(),
                                capacity, new_leaf);
      if (!IsFinite(root)) return OverflowError<T>();
    }

    PrefetchForWriting<T>(indices, {leaves});
    // The last weight of each index, then the ancestors.
    auto write = [&](const auto& updates) {
      absl::InlinedVector<int64_t, kSmallBatch> nodes;
      nodes.reserve(indices.size());
      updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
        leaves[index] = new_leaf(last);
        nodes.push_back(capacity + index);
      });
      RecomputeAncestors<T>(nodes, {tree.data()});
    };
    if (indices.size() <= kSmallBatch) {
      write(SmallUpdates(indices));
    } else {
      write(SortedUpdates(indices, num_leaves));
    }
    return absl::OkStatus();
  }

 private:
  // False where no sum of the new tree can overflow: its exact total is at
  // most the old one plus all new weights, and each of its sums is at most
  // that times (1 + eps) ** (2 * 64) for eps the unit round-off (the old
  // root's own round-off, then the new sums'); the bound is summed in a wider
  // type, which adds a relative error below 2 ** -32 for any batch. Where it
  // is true, NewRoot settles it exactly.
  static bool MayOverflow(T root, typename TTypes<T>::ConstFlat weights) {
    using Sum = typename Wider<T>::Type;
    Sum bound = root;
    for (int64_t i = 0; i < weights.size(); ++i) bound += weights(i);
    return !(bound <= Sum(std::numeric_limits<T>::max()) * (1 - 0x1p-16L));
  }
};

// Draws leaves for `num_draws` uniforms, sharing a large batch with the
// intra-op pool: uniforms(begin, end, buffer) returns the uniforms of draws
// [begin, end), at most kDrawsPerChunk of them, in `buffer` or elsewhere.
template <typename T, typename Uniforms>
absl::Status DrawLeaves(OpKernelContext* ctx,
                        typename TTypes<T>::ConstFlat tree, int64_t num_draws,
                        const Uniforms& uniforms,
                        typename TTypes<int64_t>::Flat indices,
                        typename TTypes<T>::Flat probabilities) {
  const T total = tree(1);
  if (!(total > T(0))) {
    return InvalidArgument("cannot sample: the tree's total weight is ", total);
  }
  const cpu::Walks<T> walks =
      cpu::MakeWalks(tree.data(), Log2(tree.size() / 2));
  auto draw = [&](int64_t begin, int64_t end) {
    T buffer[kDrawsPerChunk];
    for (int64_t chunk = begin; chunk < end; chunk += kDrawsPerChunk) {
      const int64_t chunk_end = std::min(end, chunk + kDrawsPerChunk);
      cpu::Descend(walks, uniforms(chunk, chunk_end, buffer), chunk_end - chunk,
                   indices.data() + chunk, probabilities.data() + chunk);
    }
  };
  const auto* workers =
      ctx == nullptr ? nullptr : ctx->device()->tensorflow_cpu_worker_threads();
  const int64_t num_threads =
      workers == nullptr ? 1
                         : std::min<int64_t>(workers->num_threads,
                                             num_draws / kMinDrawsPerShard);
  if (num_threads <= 1) {
    draw(0, num_draws);
  } else {
    ShareWork(workers->workers, num_threads - 1, num_draws, kDrawsPerChunk,
              draw);
  }
  return absl::OkStatus();
}

template <typename T>
struct SumTreeSample<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree,
                          typename TTypes<T>::ConstFlat uniforms,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    const int64_t num_draws = uniforms.size();
    for (int64_t i = 0; i < num_draws; ++i) {
      if (!(uniforms(i) >= T(0) && uniforms(i) < T(1))) {
        return InvalidArgument("uniforms[", i, "] = ", uniforms(i),
                               " is outside [0, 1)");
      }
    }
    auto given = [&](int64_t begin, int64_t, T*) {
      return uniforms.data() + begin;
    };
    return DrawLeaves<T>(ctx, tree, num_draws, given, indices, probabilities);
  }
};

template <typename T>
struct SumTreeDraw<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree, bool stratified,
                          typename TTypes<int64_t>::Flat rng_state,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    const int64_t num_draws = indices.size();
    const Philox philox = PhiloxFromState(rng_state.data());
    // Whole blocks of the stream at a time, each giving kPerBlock uniforms.
    auto generated = [&](int64_t begin, int64_t end, T* buffer) {
      constexpr int kPerBlock = PhiloxUniforms<T>::kPerBlock;
      uint32_t block[4];
      for (int64_t i = begin; i < end; ++i) {
        if (i == begin || i % kPerBlock == 0) {
          PhiloxBlock(philox, static_cast<uint64_t>(i / kPerBlock), block);
        }
        buffer[i - begin] =
            UniformFromBlock<T>(block, i, num_draws, stratified);
      }
      return buffer;
    };
    TF_RETURN_IF_ERROR(
        DrawLeaves<T>(ctx, tree, num_draws, generated, indices, probabilities));
    AdvancePhiloxState(rng_state.data(), num_draws);
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
    const int64_t capacity = tree.size() / 2;
    PrefetchForWriting<T>(indices, {log_weights.data(), tree.data() + capacity,
                                    entropy_tree.data() + capacity});
    if (indices.size() <= kSmallBatch) {
      TF_RETURN_IF_ERROR(Update(SmallUpdates(indices), amplitude, decay,
                                utilities, log_weights, log_scale, tree,
                                entropy_tree));
    } else {
      TF_RETURN_IF_ERROR(Update(SortedUpdates(indices, num_leaves), amplitude,
                                decay, utilities, log_weights, log_scale, tree,
                                entropy_tree));
    }
    if (RescaleAfterUpdate(tree(1), decay)) {
      Rescale(decay, log_weights, log_scale, tree, entropy_tree);
    }
    entropy_tree(kTreeTotalNode) = tree(1);
    return absl::OkStatus();
  }

 private:
  // The first occurrence of each index of `updates`: checked, then applied
  // to the log weights, both caches and their ancestors.
  template <class Updates>
  static absl::Status Update(const Updates& updates, T amplitude, T decay,
                             typename TTypes<T>::ConstFlat utilities,
                             typename TTypes<T>::Flat log_weights,
                             typename TTypes<T>::Scalar log_scale,
                             typename TTypes<T>::Flat tree,
                             typename TTypes<T>::Flat entropy_tree) {
    auto new_log_weight = [&](int64_t index, int64_t position) {
      return ReweightedLogWeight(log_weights(index), utilities(position),
                                 amplitude, decay);
    };
    absl::Status status;
    updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
      if (!status.ok()) return;
      if (!IsFinite(utilities(first))) {
        status = InvalidArgument("utilities[", first, "] = ", utilities(first),
                                 " is not finite");
      } else if (!IsFinite(new_log_weight(index, first))) {
        status =
            InvalidArgument("amplitude * utilities[", first, "] = ", amplitude,
                            " * ", utilities(first), " overflows");
      }
    });
    TF_RETURN_IF_ERROR(status);

    const int64_t capacity = tree.size() / 2;
    T* leaves = tree.data() + capacity;
    T* entropy_leaves = entropy_tree.data() + capacity;
    const T scale = log_scale();
    absl::InlinedVector<int64_t, kSmallBatch> nodes;
    updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
      log_weights(index) = new_log_weight(index, first);
      const T log_scaled = log_weights(index) - scale;
      leaves[index] = StoredWeight(std::exp(log_scaled));
      entropy_leaves[index] = EntropyTerm(leaves[index], log_scaled);
      nodes.push_back(capacity + index);
    });
    RecomputeAncestors<T>(nodes, {tree.data(), entropy_tree.data()});
    return absl::OkStatus();
  }

  // Recomputes both caches from the exact log weights with a fresh scale
  // (RescaledLogScale: the log-sum-exp, so that the total becomes 1, or 0
  // after an update with decay 0).
  static void Rescale(T decay, typename TTypes<T>::Flat log_weights,
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
    const T scale = RescaledLogScale(max_log_weight + std::log(sum), decay);
    const int64_t capacity = tree.size() / 2;
    for (int64_t i = 0; i < num_leaves; ++i) {
      const T log_scaled = log_w[i] - scale;
      tree(capacity + i) = StoredWeight(std::exp(log_scaled));
      entropy_tree(capacity + i) = EntropyTerm(tree(capacity + i), log_scaled);
    }
    RebuildInternalNodes(capacity, tree.data());
    RebuildInternalNodes(capacity, entropy_tree.data());
    log_scale() = scale;
  }
};

// For the XLA kernels (sum_tree_ops_xla.cc).
#define DEFINE_CPU_FUNCTORS(T)                 \
  template struct SumTreeSample<CPUDevice, T>; \
  template struct SumTreeDraw<CPUDevice, T>;   \
  template struct AdaptiveReweight<CPUDevice, T>;
DEFINE_CPU_FUNCTORS(float);
DEFINE_CPU_FUNCTORS(double);
#undef DEFINE_CPU_FUNCTORS

}  // namespace functor

namespace {

// Asks the kernel to back a large variable with 2 MiB pages, now: each level
// of a walk reads a random node, and past the caches each read would
// otherwise also miss the TLB (at n = 10^7, twice as many draws per second).
// Only advice: the contents stay, and a kernel that declines (no transparent
// huge pages, before Linux 6.1) changes nothing.
void AdviseHugePages(const void* data, size_t bytes) {
#if defined(__linux__)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  constexpr int kCollapse = 25;  // MADV_COLLAPSE, which older headers lack
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (address + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (address + bytes) & ~(kHugePage - 1);
  if (end < begin + 4 * kHugePage) return;  // within the TLB's reach anyway
  void* range = reinterpret_cast<void*>(begin);
  madvise(range, end - begin, MADV_HUGEPAGE);
  madvise(range, end - begin, kCollapse);
#endif
}

// AdviseHugePages for each new buffer of a CPU variable that an OpKernel
// reads, once: a variable keeps its buffer from step to step.
template <typename Device>
class HugePages {
 public:
  void Advise(const Tensor& tensor) {
    if constexpr (std::is_same_v<Device, CPUDevice>) {
      const void* data = tensor.data();
      if (advised_.exchange(data) != data) {
        AdviseHugePages(data, tensor.TotalBytes());
      }
    }
  }

 private:
  std::atomic<const void*> advised_{nullptr};
};

// Looks up the variable behind resource input `input` and checks that it is
// initialized and of dtype T, before any of the op's locks are taken.
template <typename T>
absl::Status LookupVariable(OpKernelContext* ctx, int input,
                            absl::string_view name,
                            tensorflow::core::RefCountPtr<Var>* var) {
  const absl::Status found = tensorflow::LookupResource(
      ctx, tensorflow::HandleFromInput(ctx, input), var);
  if (!found.ok()) {
    return InvalidArgument(
        name, " is not an initialized variable: ", found.message());
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

// The exclusive locks of the variables an op updates, held while it lives:
// taken in address order, as every op that locks several variables must
// take them, after switching each to copy-on-read (which takes its lock).
template <size_t kVars>
class UpdateLocks {
 public:
  // `vars` as found by LookupVariable. Distinct: an op given one variable for
  // two of its inputs would read one array as two while it writes them.
  template <typename Device, typename T>
  absl::Status Acquire(OpKernelContext* ctx, Var* const (&vars)[kVars],
                       const absl::string_view (&names)[kVars]) {
    for (size_t i = 0; i < kVars; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (vars[i] == vars[j]) {
          return InvalidArgument(names[j], " and ", names[i],
                                 " are the same variable");
        }
      }
    }
    for (Var* var : vars) {
      TF_RETURN_IF_ERROR(
          tensorflow::EnsureSparseVariableAccess<Device, T>(ctx, var));
    }
    std::array<tensorflow::mutex*, kVars> order;
    for (size_t i = 0; i < kVars; ++i) order[i] = vars[i]->mu();
    std::sort(order.begin(), order.end());
    for (tensorflow::mutex* mu : order) locks_.emplace_back(*mu);
    return absl::OkStatus();
  }

 private:
  absl::InlinedVector<tensorflow::mutex_lock, kVars> locks_;
};

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
    OP_REQUIRES(
        ctx, weights.NumElements() == num_leaves_,
        InvalidArgument("weights has ", weights.NumElements(),
                        " elements but the tree has ", num_leaves_, " leaves"));
    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    UpdateLocks<1> lock;
    OP_REQUIRES_OK(ctx, (lock.Acquire<Device, T>(ctx, {tree.get()}, {"tree"})));
    OP_REQUIRES_OK(
        ctx, CheckTreeShape(tree->tensor()->shape(), "tree", num_leaves_));
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

  // A training step's batch takes microseconds here, on the step's critical
  // path: the executor runs the kernel inline, as it does ReadVariableOp,
  // instead of handing it to another thread, a hand-off that costs more than
  // the kernel (and far more on a busy machine). A large sample shares its
  // draws with the intra-op pool itself.
  bool IsExpensive() override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(1);
    const Tensor& weights = ctx->input(2);
    OP_REQUIRES_OK(ctx,
                   CheckSameLength(indices, "indices", weights, "weights"));
    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    UpdateLocks<1> lock;
    OP_REQUIRES_OK(ctx, (lock.Acquire<Device, T>(ctx, {tree.get()}, {"tree"})));
    OP_REQUIRES_OK(
        ctx, CheckTreeShape(tree->tensor()->shape(), "tree", num_leaves_));
    huge_pages_.Advise(*tree->tensor());
    OP_REQUIRES_OK(ctx, functor::SumTreeSet<Device, T>()(
                            ctx, num_leaves_, indices.flat<int64_t>(),
                            weights.flat<T>(), tree->tensor()->flat<T>()));
  }

 private:
  int64_t num_leaves_;
  HugePages<Device> huge_pages_;
};

template <typename Device, typename T>
class SumTreeSampleOp : public OpKernel {
 public:
  explicit SumTreeSampleOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  // A training step's batch takes microseconds here, on the step's critical
  // path: the executor runs the kernel inline, as it does ReadVariableOp,
  // instead of handing it to another thread, a hand-off that costs more than
  // the kernel (and far more on a busy machine). A large sample shares its
  // draws with the intra-op pool itself.
  bool IsExpensive() override { return false; }

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
    OP_REQUIRES_OK(ctx, CheckTreeShape(tree->tensor()->shape(), "tree"));
    const Tensor& tree_values = *tree->tensor();
    huge_pages_.Advise(tree_values);
    OP_REQUIRES_OK(ctx,
                   functor::SumTreeSample<Device, T>()(
                       ctx, tree_values.flat<T>(), uniforms.flat<T>(),
                       indices->flat<int64_t>(), probabilities->flat<T>()));
  }

 private:
  HugePages<Device> huge_pages_;
};

template <typename Device, typename T>
class SumTreeDrawOp : public OpKernel {
 public:
  explicit SumTreeDrawOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stratified", &stratified_));
  }

  // As SumTreeSampleOp.
  bool IsExpensive() override { return false; }

  void Compute(OpKernelContext* ctx) override {
    int64_t batch_size;
    OP_REQUIRES_OK(ctx, ReadScalar(ctx->input(2), "batch_size", &batch_size));
    OP_REQUIRES_OK(ctx, CheckDrawBatchSize(batch_size));
    Tensor* indices = nullptr;
    Tensor* probabilities = nullptr;
    const TensorShape shape({batch_size});
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &indices));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, shape, &probabilities));
    if (batch_size == 0) return;

    tensorflow::core::RefCountPtr<Var> tree;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    tensorflow::core::RefCountPtr<Var> rng;
    OP_REQUIRES_OK(ctx, LookupVariable<int64_t>(ctx, 1, "rng_state", &rng));
    // The generator's state is updated in place, as TF's random ops do it:
    // exclusively, on a buffer no tensor shares. The tree is only read.
    tensorflow::mutex_lock rng_lock(*rng->mu());
    OP_REQUIRES_OK(ctx, tensorflow::PrepareToUpdateVariable<Device, int64_t>(
                            ctx, rng->tensor(), rng->copy_on_read_mode.load()));
    Tensor& rng_state = *rng->tensor();
    OP_REQUIRES_OK(ctx, CheckPhiloxStateShape(rng_state.shape()));
    tensorflow::tf_shared_lock tree_lock(*tree->mu());
    OP_REQUIRES_OK(ctx, CheckTreeShape(tree->tensor()->shape(), "tree"));
    const Tensor& tree_values = *tree->tensor();
    huge_pages_.Advise(tree_values);
    OP_REQUIRES_OK(ctx, functor::SumTreeDraw<Device, T>()(
                            ctx, tree_values.flat<T>(), stratified_,
                            rng_state.flat<int64_t>(), indices->flat<int64_t>(),
                            probabilities->flat<T>()));
  }

 private:
  bool stratified_;
  HugePages<Device> huge_pages_;
};

template <typename Device, typename T>
class AdaptiveReweightOp : public OpKernel {
 public:
  explicit AdaptiveReweightOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  // A training step's batch takes microseconds here, on the step's critical
  // path: the executor runs the kernel inline, as it does ReadVariableOp,
  // instead of handing it to another thread, a hand-off that costs more than
  // the kernel (and far more on a busy machine). A large sample shares its
  // draws with the intra-op pool itself.
  bool IsExpensive() override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(4);
    const Tensor& utilities = ctx->input(5);
    OP_REQUIRES_OK(ctx,
                   CheckSameLength(indices, "indices", utilities, "utilities"));
    T amplitude, decay;
    OP_REQUIRES_OK(ctx, ReadScalar(ctx->input(6), "amplitude", &amplitude));
    OP_REQUIRES_OK(ctx, ReadScalar(ctx->input(7), "decay", &decay));
    OP_REQUIRES_OK(ctx, CheckReweightParameters(amplitude, decay));

    tensorflow::core::RefCountPtr<Var> tree, entropy_tree, log_weights,
        log_scale;
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 0, "tree", &tree));
    OP_REQUIRES_OK(ctx,
                   LookupVariable<T>(ctx, 1, "entropy_tree", &entropy_tree));
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 2, "log_weights", &log_weights));
    OP_REQUIRES_OK(ctx, LookupVariable<T>(ctx, 3, "log_scale", &log_scale));
    UpdateLocks<4> locks;
    OP_REQUIRES_OK(ctx,
                   (locks.Acquire<Device, T>(
                       ctx,
                       {tree.get(), entropy_tree.get(), log_weights.get(),
                        log_scale.get()},
                       {"tree", "entropy_tree", "log_weights", "log_scale"})));

    const Tensor& log_w = *log_weights->tensor();
    OP_REQUIRES_OK(ctx, CheckVector(log_w, "log_weights"));
    const int64_t num_leaves = log_w.NumElements();
    OP_REQUIRES(ctx, num_leaves >= 1,
                InvalidArgument("log_weights must not be empty"));
    OP_REQUIRES_OK(ctx,
                   CheckTreeShape(tree->tensor()->shape(), "tree", num_leaves));
    OP_REQUIRES_OK(ctx, CheckTreeShape(entropy_tree->tensor()->shape(),
                                       "entropy_tree", num_leaves));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(log_scale->tensor()->shape()),
                InvalidArgument("log_scale must be a scalar, got shape ",
                                log_scale->tensor()->shape().DebugString()));
    tree_pages_.Advise(*tree->tensor());
    entropy_tree_pages_.Advise(*entropy_tree->tensor());
    log_weight_pages_.Advise(log_w);
    OP_REQUIRES_OK(
        ctx,
        functor::AdaptiveReweight<Device, T>()(
            ctx, amplitude, decay, indices.flat<int64_t>(), utilities.flat<T>(),
            log_weights->tensor()->flat<T>(), log_scale->tensor()->scalar<T>(),
            tree->tensor()->flat<T>(), entropy_tree->tensor()->flat<T>()));
  }

 private:
  HugePages<Device> tree_pages_, entropy_tree_pages_, log_weight_pages_;
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
// The GPU functors are defined in sum_tree_ops_gpu.cc.
#define DECLARE_GPU_FUNCTORS(T)                                \
  extern template struct functor::SumTreeBuild<GPUDevice, T>;  \
  extern template struct functor::SumTreeSet<GPUDevice, T>;    \
  extern template struct functor::SumTreeSample<GPUDevice, T>; \
  extern template struct functor::SumTreeDraw<GPUDevice, T>;   \
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
