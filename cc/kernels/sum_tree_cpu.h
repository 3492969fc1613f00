// The CPU algorithms of the sum-tree ops over plain arrays: what the CPU
// functors (sum_tree_ops_cpu.cc) run once they have checked their inputs'
// values, and what sum_tree_cpu_test.cc tests. No TensorFlow here.
//
// Each mutating function either refuses its batch before writing anything
// (and says why in its return value) or writes all of it: callers check the
// inputs first (weights valid, indices in range), and the functions check
// what needs the tree to tell (a sum that would overflow).

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_CPU_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_CPU_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "cc/kernels/sum_tree_algorithm.h"

namespace adasamp {
namespace cpu {

// Batches of up to this many updates find their distinct indices in a hash
// table on the stack (SmallUpdates); larger ones sort (SortedUpdates).
constexpr int kSmallBatch = 128;

// The root of the tree over leaves leaf(0), ..., leaf(n - 1) and zero padding,
// bit for bit as RebuildInternalNodes sums it, without a tree: a binary
// counter of the complete subtrees so far (a node is the sum of its left and
// right child; x + 0 is x, so padding leaves a partial subtree as it is).
// Requires n >= 1.
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

// Sets every internal node to the sum of its children, bottom up.
template <typename T>
void RebuildInternalNodes(int64_t capacity, T* tree) {
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
}

// The number of bits `x` needs: 0 for 0.
inline int BitWidth(uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

// Leaf nodes of a batch, on the stack for up to kSmallBatch of them.
class NodeList {
 public:
  explicit NodeList(int64_t max_size)
      : heap_(max_size > kSmallBatch ? max_size : 0),
        data_(heap_.empty() ? stack_ : heap_.data()) {}
  NodeList(const NodeList&) = delete;
  NodeList& operator=(const NodeList&) = delete;

  void Add(int64_t node) { data_[size_++] = node; }
  const int64_t* begin() const { return data_; }
  size_t size() const { return size_; }

 private:
  int64_t stack_[kSmallBatch];
  std::vector<int64_t> heap_;
  int64_t* const data_;
  size_t size_ = 0;
};

// Recomputes every ancestor of the leaf nodes `nodes` of each tree in `trees`
// from its two children, one leaf's path at a time: a path's nodes are still
// in cache from one level to the next, where a pass per level fetches each
// node again. A path stops below the node where the next leaf's path meets
// it, so the last path through a node computes it, after both its children
// are final: sorted nodes compute each ancestor once, others some again, to
// the same value. Each tree's sum climbs the path in a register, each level
// adding the sibling read from memory: reloading the node just stored would
// wait on that store at every level. Addition commutes, so the sums are those
// of left + right, bit for bit.
template <typename T, size_t kTrees>
void RecomputeAncestors(const NodeList& nodes, T* const (&trees)[kTrees]) {
  const int64_t* node_of = nodes.begin();
  for (size_t k = 0; k < nodes.size(); ++k) {
    int64_t node = node_of[k];
    // Where the paths meet: above the highest bit in which the nodes differ.
    const int64_t meet =
        k + 1 < nodes.size()
            ? node >> BitWidth(static_cast<uint64_t>(node ^ node_of[k + 1]))
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

// Starts fetching, for writing, element indices[i] of each of `arrays` (a
// tree's leaves, the log weights): the cache misses then overlap with finding
// the distinct indices, where the writes would wait on them one by one.
template <typename T, size_t kArrays>
void PrefetchForWriting(const int64_t* indices, int64_t count,
                        T* const (&arrays)[kArrays]) {
  for (int64_t i = 0; i < count; ++i) {
    for (size_t a = 0; a < kArrays; ++a) {
      __builtin_prefetch(arrays[a] + indices[i], /*rw=*/1);
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
  SortedUpdates(const int64_t* indices, int64_t count, int64_t num_leaves)
      : size_(count), storage_(2 * count) {
    sorted_ = storage_.data();
    Update* buffer = sorted_ + size_;
    for (int64_t i = 0; i < size_; ++i) sorted_[i] = {indices[i], i};
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

  int64_t size() const { return size_; }

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
  std::vector<Update> storage_;
  Update* sorted_;
};

// The distinct indices of a batch of at most kSmallBatch updates, in the
// order of their first occurrence, with their first and last positions:
// an open-addressing hash table on the stack, O(B), where sorting would cost
// more than the rest of the update.
class SmallUpdates {
 public:
  SmallUpdates(const int64_t* indices, int64_t count) : size_(count) {
    std::fill_n(keys_, kSlots, int64_t{-1});
    for (int64_t i = 0; i < size_; ++i) {
      const int64_t index = indices[i];
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

  int64_t size() const { return size_; }

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

// Calls run(updates) with the distinct indices of `indices`, found the way
// that suits the batch's size.
template <typename Run>
auto WithUpdates(const int64_t* indices, int64_t count, int64_t num_leaves,
                 Run run) {
  if (count <= kSmallBatch) return run(SmallUpdates(indices, count));
  return run(SortedUpdates(indices, count, num_leaves));
}

// The root `tree` would have after setting each leaf `index` of `updates` to
// new_leaf(index, last position), without writing: the sums
// RecomputeAncestors would write, computed level by level over the sorted,
// distinct leaves, reading untouched siblings from the tree. O(B log n).
// Requires a nonempty batch.
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

// A type that sums any batch of T weights without overflow, to bound a new
// total cheaply (x86's 80-bit long double for double; where long double is
// double, a sum that overflows makes SetMayOverflow true, and the exact check
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

// False where no sum of a tree with root `root` can overflow after setting
// `count` leaves to `weights`: its exact total is at most the old one plus
// all new weights, and each of its sums is at most that times
// (1 + eps) ** (2 * 64) for eps the unit round-off (the old root's own
// round-off, then the new sums'); the bound is summed in a wider type, which
// adds a relative error below 2 ** -32 for any batch. Where it is true,
// NewRoot settles it exactly.
template <typename T>
bool SetMayOverflow(T root, const T* weights, int64_t count) {
  using Sum = typename Wider<T>::Type;
  Sum bound = root;
  for (int64_t i = 0; i < count; ++i) bound += weights[i];
  return !(bound <= Sum(std::numeric_limits<T>::max()) * (1 - 0x1p-16L));
}

// Writes the tree over `weights` (valid weights: IsValidWeight) into `tree`,
// of 2 * capacity values: the stored leaves (StoredWeight), zero padding, the
// sums, and num_leaves in node 0. Returns false, writing nothing, where a sum
// would be inf.
template <typename T>
bool BuildTree(const T* weights, int64_t num_leaves, T* tree,
               int64_t capacity) {
  const T total = PairwiseTotal<T>(
      num_leaves, [&](int64_t i) { return StoredWeight(weights[i]); });
  if (!IsFinite(total)) return false;
  std::fill_n(tree, 2 * capacity, T(0));
  T* leaves = tree + capacity;
  for (int64_t i = 0; i < num_leaves; ++i) leaves[i] = StoredWeight(weights[i]);
  RebuildInternalNodes(capacity, tree);
  tree[kNumLeavesNode] = static_cast<T>(num_leaves);
  return true;
}

// Sets leaves `indices` (in [0, num_leaves)) to `weights` (valid), the last
// of repeated indices winning, and recomputes their ancestors. Returns false,
// writing nothing, where a sum of the new tree would be inf.
template <typename T>
bool SetLeaves(const int64_t* indices, const T* weights, int64_t count,
               int64_t num_leaves, T* tree, int64_t capacity) {
  T* leaves = tree + capacity;
  auto new_leaf = [&](int64_t position) {
    return StoredWeight(weights[position]);
  };
  if (count > 0 && SetMayOverflow(tree[1], weights, count)) {
    const T root = NewRoot<T>(SortedUpdates(indices, count, num_leaves), tree,
                              capacity, new_leaf);
    if (!IsFinite(root)) return false;
  }
  PrefetchForWriting<T>(indices, count, {leaves});
  WithUpdates(indices, count, num_leaves, [&](const auto& updates) {
    NodeList nodes(count);
    updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
      leaves[index] = new_leaf(last);
      nodes.Add(capacity + index);
    });
    RecomputeAncestors<T>(nodes, {tree});
  });
  return true;
}

// The state of an adaptive sampler (sum_tree_algorithm.h): the exact log
// weights, and the caches over them, exp(log_weight - log_scale) in `tree`
// and its entropy terms in `entropy_tree`, both of 2 * capacity values.
template <typename T>
struct SamplerState {
  T* log_weights;
  int64_t num_leaves;
  T* log_scale;
  T* tree;
  T* entropy_tree;
  int64_t capacity;
};

// Why a reweight refused its batch: in `position`, a utility that is not
// finite (the first such one, a repeated index's included), or, at the first
// occurrence of an index, a utility whose new log weight is not.
struct RefusedUpdate {
  enum Reason { kNone, kUtilityNotFinite, kLogWeightNotFinite };
  Reason reason = kNone;
  int64_t position = -1;
};

// What Reweight would refuse, or kNone: every utility must be finite, though
// only first occurrences reweight (a NaN anywhere says the batch's utilities
// are not what the caller meant), and so must each first occurrence's new log
// weight.
template <typename T, typename Updates>
RefusedUpdate CheckReweight(const Updates& updates, T amplitude, T decay,
                            const T* utilities, int64_t count,
                            const SamplerState<T>& state) {
  for (int64_t i = 0; i < count; ++i) {
    if (!IsFinite(utilities[i])) return {RefusedUpdate::kUtilityNotFinite, i};
  }
  RefusedUpdate refused;
  updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
    if (refused.reason == RefusedUpdate::kNone &&
        !IsFinite(ReweightedLogWeight(state.log_weights[index],
                                      utilities[first], amplitude, decay))) {
      refused = {RefusedUpdate::kLogWeightNotFinite, first};
    }
  });
  return refused;
}

// The first occurrence of each index of `updates`, applied to the log
// weights, both caches and their ancestors.
template <typename T, typename Updates>
void ApplyReweight(const Updates& updates, T amplitude, T decay,
                   const T* utilities, const SamplerState<T>& state) {
  T* leaves = state.tree + state.capacity;
  T* entropy_leaves = state.entropy_tree + state.capacity;
  const T scale = *state.log_scale;
  NodeList nodes(updates.size());
  updates.ForEachIndex([&](int64_t index, int64_t first, int64_t last) {
    T& log_weight = state.log_weights[index];
    log_weight =
        ReweightedLogWeight(log_weight, utilities[first], amplitude, decay);
    const T log_scaled = log_weight - scale;
    leaves[index] = StoredWeight(std::exp(log_scaled));
    entropy_leaves[index] = EntropyTerm(leaves[index], log_scaled);
    nodes.Add(state.capacity + index);
  });
  RecomputeAncestors<T>(nodes, {state.tree, state.entropy_tree});
}

// Recomputes both caches from the exact log weights with a fresh scale
// (RescaledLogScale: the log-sum-exp, so that the total becomes 1, or 0
// after an update with decay 0).
template <typename T>
void Rescale(T decay, const SamplerState<T>& state) {
  const T* log_w = state.log_weights;
  const int64_t n = state.num_leaves;
  const T max_log_weight = *std::max_element(log_w, log_w + n);
  T sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(log_w[i] - max_log_weight);
  const T scale = RescaledLogScale(max_log_weight + std::log(sum), decay);
  T* leaves = state.tree + state.capacity;
  T* entropy_leaves = state.entropy_tree + state.capacity;
  for (int64_t i = 0; i < n; ++i) {
    const T log_scaled = log_w[i] - scale;
    leaves[i] = StoredWeight(std::exp(log_scaled));
    entropy_leaves[i] = EntropyTerm(leaves[i], log_scaled);
  }
  RebuildInternalNodes(state.capacity, state.tree);
  RebuildInternalNodes(state.capacity, state.entropy_tree);
  *state.log_scale = scale;
}

// Algorithm 1, line 5, for the first occurrence of each of `indices` (in
// [0, num_leaves)), then a rescale where RescaleAfterUpdate asks for one, and
// the tree's total copied into node 0 of the entropy tree. Refuses the whole
// batch, writing nothing, as CheckReweight says.
template <typename T>
RefusedUpdate Reweight(T amplitude, T decay, const int64_t* indices,
                       const T* utilities, int64_t count,
                       const SamplerState<T>& state) {
  PrefetchForWriting<T>(indices, count,
                        {state.log_weights, state.tree + state.capacity,
                         state.entropy_tree + state.capacity});
  const RefusedUpdate refused =
      WithUpdates(indices, count, state.num_leaves, [&](const auto& updates) {
        const RefusedUpdate check =
            CheckReweight(updates, amplitude, decay, utilities, count, state);
        if (check.reason == RefusedUpdate::kNone) {
          ApplyReweight(updates, amplitude, decay, utilities, state);
        }
        return check;
      });
  if (refused.reason != RefusedUpdate::kNone) return refused;
  if (RescaleAfterUpdate(state.tree[1], decay)) Rescale(decay, state);
  state.entropy_tree[kTreeTotalNode] = state.tree[1];
  return refused;
}

// The first of `count` draws that ended on a leaf that a tree of valid weights
// cannot give, or -1: a leaf of weight <= 0, or above the total. Descend only
// enters nodes of positive sum, and in a tree of weights >= 0 no leaf is above
// the root; a tree that breaks this (a negative leaf written into the variable
// by other means) would otherwise give probabilities past 1.
template <typename T>
int64_t FirstImpossibleDraw(const T* tree, int64_t capacity,
                            const int64_t* indices, int64_t count) {
  const T total = tree[1];
  for (int64_t i = 0; i < count; ++i) {
    const T leaf = tree[capacity + indices[i]];
    if (!(leaf > T(0) && leaf <= total)) return i;
  }
  return -1;
}

}  // namespace cpu
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_CPU_H_
