// The sum-tree ops' data-parallel steps: the per-element functors that
// ex.ForEach runs and the block ops (phase functions) that ex.Blocks runs, for
// the op drivers of sum_tree_parallel.h. Written without CUDA or TensorFlow,
// host+device, so that the same steps also run on the host
// (tests/sum_tree_parallel_host.cc).
//
// A mutating step that writes is gated by a flag word (Skipped, `invalid`):
// the check steps raise it on any bad value, so a rejected call writes
// nothing. Values are identical to the CPU functors' where the arithmetic is
// the same (sums of children, Descend, the reweighted log weight), given no
// fused multiply-add.

#ifndef ADASAMP_CC_KERNELS_GPU_SUM_TREE_STEPS_H_
#define ADASAMP_CC_KERNELS_GPU_SUM_TREE_STEPS_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cc/kernels/sum_tree_algorithm.h"

namespace adasamp {
namespace parallel {

// The largest batch the one-block paths take: one thread per element.
// Larger batches sort, in scratch sized for them.
constexpr int kBlockThreads = 1024;

// The thread a phase runs on.
struct BlockThread {
  int thread;   // in [0, threads)
  int threads;  // Op::kThreads
  int64_t block;
  int64_t blocks;
};

// A nonzero flag word tells the steps it gates to do nothing.
ADASAMP_HOST_DEVICE inline bool Skipped(const int* skip) {
  return skip != nullptr && *skip != 0;
}

// Sets a flag word, as a step does on invalid input: the steps the word gates
// then do nothing (Skipped).
ADASAMP_HOST_DEVICE inline void SetFlag(int* flag) { *flag = 1; }

template <typename T>
ADASAMP_HOST_DEVICE inline void SumChildren(T* tree, int64_t node) {
  tree[node] = tree[2 * node] + tree[2 * node + 1];
}

// Runs of equal keys in a sorted array of leaf indices. Ancestors `shift`
// levels up of leaves a and b coincide iff a >> shift == b >> shift, as the
// capacity is a multiple of 2 ** shift; each run's first element speaks for
// it, so every distinct ancestor is computed once.
ADASAMP_HOST_DEVICE inline bool StartsRun(const int64_t* sorted, int64_t j,
                                          int shift) {
  return j == 0 || (sorted[j] >> shift) != (sorted[j - 1] >> shift);
}

ADASAMP_HOST_DEVICE inline bool EndsRun(const int64_t* sorted, int64_t j,
                                        int64_t count) {
  return j + 1 == count || sorted[j + 1] != sorted[j];
}

// The rank of keys[j] in a stable sort of keys[0, count).
ADASAMP_HOST_DEVICE inline int64_t StableRank(const int64_t* keys,
                                              int64_t count, int64_t j) {
  int64_t rank = 0;
  for (int64_t k = 0; k < count; ++k) {
    rank += keys[k] < keys[j] || (keys[k] == keys[j] && k < j);
  }
  return rank;
}

// ---------------------------------------------------------------------------
// Per-element steps.

struct Iota {
  int32_t* values;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    values[i] = static_cast<int32_t>(i);
  }
};

// Recomputes, in each tree, the ancestor `shift` levels above the leaves of
// each run of sorted[0, count) from its two children.
template <typename T>
struct RecomputeLevel {
  const int64_t* sorted;
  int64_t capacity;
  int shift;
  T* tree;
  T* second_tree;  // or nullptr
  const int* skip;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    if (Skipped(skip) || !StartsRun(sorted, j, shift)) return;
    const int64_t node = (capacity + sorted[j]) >> shift;
    SumChildren(tree, node);
    if (second_tree != nullptr) SumChildren(second_tree, node);
  }
};

// One draw: Descend on u * total (sum_tree_algorithm.h). A uniform outside
// [0, 1), or a tree whose total is not positive, draws index -1 with
// probability NaN (the CPU op's InvalidArgument cases).
template <typename T>
ADASAMP_HOST_DEVICE inline void DrawLeaf(const T* tree, int64_t capacity, T u,
                                         int64_t* index, T* probability) {
  const T total = tree[1];
  if (!(total > T(0)) || !(u >= T(0) && u < T(1))) {
    *index = -1;
    *probability = static_cast<T>(NAN);
    return;
  }
  const int64_t leaf = Descend(tree, capacity, u * total);
  *index = leaf;
  *probability = tree[capacity + leaf] / total;
}

template <typename T>
struct SampleOne {
  const T* tree;
  int64_t capacity;
  const T* uniforms;
  int64_t* indices;
  T* probabilities;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    DrawLeaf(tree, capacity, uniforms[i], &indices[i], &probabilities[i]);
  }
};

// Draw i of `count` on its uniform from the generator's state (DrawUniform),
// which AdvanceRngState moves on once every draw has read it.
template <typename T>
struct DrawOne {
  const T* tree;
  int64_t capacity;
  int64_t* rng_state;  // read here, written by AdvanceRngState
  int64_t count;
  bool stratified;
  int64_t* indices;
  T* probabilities;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    const T u =
        DrawUniform<T>(PhiloxFromState(rng_state), i, count, stratified);
    DrawLeaf(tree, capacity, u, &indices[i], &probabilities[i]);
  }
};

struct AdvanceRngState {
  int64_t* rng_state;
  int64_t count;
  ADASAMP_HOST_DEVICE void operator()(int64_t) const {
    AdvancePhiloxState(rng_state, static_cast<uint64_t>(count));
  }
};

// Build: leaves and padding into a scratch tree, flagging bad weights, and
// num_leaves into node 0.
template <typename T>
struct WriteLeaves {
  const T* weights;
  int64_t num_leaves;
  int64_t capacity;
  T* tree;
  int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    const T w = i < num_leaves ? weights[i] : T(0);
    if (!IsValidWeight(w)) SetFlag(invalid);
    tree[capacity + i] = StoredWeight(w);
    if (i == 0) tree[kNumLeavesNode] = static_cast<T>(num_leaves);
  }
};

// Build: the scratch tree replaces the tree if it is valid and its total
// finite.
template <typename T>
struct CommitTree {
  const T* scratch;
  T* tree;
  const int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    if (*invalid || !IsFinite(scratch[1])) return;
    tree[i] = scratch[i];
  }
};

// Set: flags bad indices and weights, and a num_leaves other than the one
// node 0 records; the last entry of each run (the last occurrence of its
// index, which writes it) keeps the leaf's old value, for RestoreSetLeaves.
template <typename T>
struct CheckSet {
  const int64_t* sorted;
  const int32_t* positions;
  int64_t count;
  const T* weights;
  const T* tree;
  int64_t capacity;
  int64_t num_leaves;
  T* old_leaves;
  int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    const int64_t index = sorted[j];
    if (j == 0 && !MatchesNumLeaves(tree[kNumLeavesNode], num_leaves)) {
      SetFlag(invalid);
    }
    if (index < 0 || index >= num_leaves ||
        !IsValidWeight(weights[positions[j]])) {
      SetFlag(invalid);
    } else if (EndsRun(sorted, j, count)) {
      old_leaves[j] = tree[capacity + index];
    }
  }
};

template <typename T>
struct WriteSetLeaves {
  const int64_t* sorted;
  const int32_t* positions;
  int64_t count;
  const T* weights;
  T* leaves;
  const int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    if (*invalid || !EndsRun(sorted, j, count)) return;
    leaves[sorted[j]] = StoredWeight(weights[positions[j]]);
  }
};

// Set, after the new ancestors: a root past the range means a sum of the new
// tree overflowed (sum_tree_algorithm.h), and the set must be undone. `keep`
// is 1 unless it must (a set that was skipped wrote nothing to undo).
template <typename T>
struct CheckSetRoot {
  const T* tree;
  const int* invalid;
  int* keep;
  ADASAMP_HOST_DEVICE void operator()(int64_t) const {
    *keep = *invalid || IsFinite(tree[1]) ? 1 : 0;
  }
};

// Undo: the old leaves back, unless `keep`; then the ancestors again, which
// gives the old tree bit for bit, each of its nodes being the sum of its
// children.
template <typename T>
struct RestoreSetLeaves {
  const int64_t* sorted;
  int64_t count;
  const T* old_leaves;
  T* leaves;
  const int* keep;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    if (Skipped(keep) || !EndsRun(sorted, j, count)) return;
    leaves[sorted[j]] = old_leaves[j];
  }
};

// The state AdaptiveReweight reads and writes.
template <typename T>
struct ReweightState {
  T amplitude;
  T decay;
  const T* utilities;
  T* log_weights;
  int64_t num_leaves;
  T* log_scale;  // one value
  T* tree;
  T* entropy_tree;
  int64_t capacity;
};

// The cached leaf of `index` in both trees, from its scaled log weight.
template <typename T>
ADASAMP_HOST_DEVICE inline void SetScaledLeaf(const ReweightState<T>& state,
                                              int64_t index, T log_scaled) {
  const T scaled = StoredWeight(Exp(log_scaled));
  state.tree[state.capacity + index] = scaled;
  state.entropy_tree[state.capacity + index] = EntropyTerm(scaled, log_scaled);
}

// Reweight: flags bad indices and non-finite utilities (a repeated index's
// too); the first entry of each run (the first occurrence of its index)
// computes the new log weight and flags a non-finite one.
template <typename T>
struct CheckReweight {
  const int64_t* sorted;
  const int32_t* positions;
  ReweightState<T> state;
  T* new_log_weights;
  int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    const int64_t index = sorted[j];
    if (index < 0 || index >= state.num_leaves) {
      SetFlag(invalid);
      return;
    }
    const T utility = state.utilities[positions[j]];
    if (!IsFinite(utility)) SetFlag(invalid);
    if (!StartsRun(sorted, j, 0)) return;
    const T log_weight = ReweightedLogWeight(state.log_weights[index], utility,
                                             state.amplitude, state.decay);
    if (!IsFinite(log_weight)) SetFlag(invalid);
    new_log_weights[j] = log_weight;
  }
};

template <typename T>
struct WriteReweightLeaves {
  const int64_t* sorted;
  ReweightState<T> state;
  const T* new_log_weights;
  const int* invalid;
  ADASAMP_HOST_DEVICE void operator()(int64_t j) const {
    if (*invalid || !StartsRun(sorted, j, 0)) return;
    const int64_t index = sorted[j];
    state.log_weights[index] = new_log_weights[j];
    SetScaledLeaf(state, index, new_log_weights[j] - *state.log_scale);
  }
};

// Reweight, last: the tree's total into node 0 of the entropy tree
// (sum_tree_algorithm.h). Unconditional: a rejected or skipped update left
// the total as it was.
template <typename T>
struct CopyTotal {
  const T* tree;
  T* entropy_tree;
  ADASAMP_HOST_DEVICE void operator()(int64_t) const {
    entropy_tree[kTreeTotalNode] = tree[1];
  }
};

// Rescale: every leaf from its log weight and the new log-scale.
template <typename T>
struct RescaleLeaf {
  ReweightState<T> state;
  const int* skip;
  ADASAMP_HOST_DEVICE void operator()(int64_t i) const {
    if (Skipped(skip)) return;
    SetScaledLeaf(state, i, state.log_weights[i] - *state.log_scale);
  }
};

// ---------------------------------------------------------------------------
// Block steps.

// Phases 0 and 1 of the one-block ops: thread j loads entry j of the batch
// into shared memory, then stores it at its rank in a stable sort, with its
// position in the batch.
template <class Shared>
ADASAMP_HOST_DEVICE inline void LoadSorted(int phase, int64_t j,
                                           const int64_t* indices,
                                           int64_t count, Shared& s) {
  if (phase == 0) {
    if (j == 0) s.invalid = 0;
    if (j < count) s.indices[j] = indices[j];
  } else if (j < count) {
    const int64_t rank = StableRank(s.indices, count, j);
    s.sorted[rank] = s.indices[j];
    s.positions[rank] = static_cast<int32_t>(j);
  }
}

// A reweight of at most kBlockThreads entries in one block: the indices are
// sorted in shared memory by rank, then the per-element steps above run
// phase by phase, one level per phase. One launch instead of a dozen plus a
// sort: this is the per-training-step path.
template <typename T>
struct SmallReweightOp {
  static constexpr int kThreads = kBlockThreads;
  struct Shared {
    int64_t indices[kThreads];
    int64_t sorted[kThreads];
    int32_t positions[kThreads];
    T new_log_weights[kThreads];
    int invalid;
  };

  const int64_t* indices;
  int64_t count;  // <= kThreads
  ReweightState<T> state;
  int* invalid_out;  // for the rescale steps that follow

  ADASAMP_HOST_DEVICE int NumPhases() const { return 4 + Log2(state.capacity); }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared& s) const {
    const int64_t j = t.thread;
    if (phase < 2) {
      LoadSorted(phase, j, indices, count, s);
    } else if (phase == 2) {
      if (j < count) {
        CheckReweight<T>{s.sorted, s.positions, state, s.new_log_weights,
                         &s.invalid}(j);
      }
    } else if (phase == 3) {
      if (j == 0) *invalid_out = s.invalid;
      if (j < count) {
        WriteReweightLeaves<T>{s.sorted, state, s.new_log_weights,
                               &s.invalid}(j);
      }
    } else if (j < count) {
      RecomputeLevel<T>{s.sorted,   state.capacity,     phase - 3,
                        state.tree, state.entropy_tree, &s.invalid}(j);
    }
  }
};

// A draw of at most kBlockThreads in one block and one launch: the draws,
// then the state moved on (only after every thread of the block read it).
template <typename T>
struct SmallDrawOp {
  static constexpr int kThreads = kBlockThreads;
  struct Shared {};

  DrawOne<T> draw;

  ADASAMP_HOST_DEVICE int NumPhases() const { return 2; }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared&) const {
    if (phase == 0) {
      if (t.thread < draw.count) draw(t.thread);
    } else if (t.thread == 0) {
      AdvanceRngState{draw.rng_state, draw.count}(0);
    }
  }
};

// A set of at most kBlockThreads entries in one block, as SmallReweightOp:
// sort by rank, check, write the leaves, one level per phase, then check the
// root and, if a sum overflowed, undo: the old leaves back and one level per
// phase again. The undo phases do nothing on the usual path.
template <typename T>
struct SmallSetOp {
  static constexpr int kThreads = kBlockThreads;
  struct Shared {
    int64_t indices[kThreads];
    int64_t sorted[kThreads];
    int32_t positions[kThreads];
    T old_leaves[kThreads];
    int invalid;
    int keep;
  };

  const int64_t* indices;
  const T* weights;
  int64_t count;  // <= kThreads
  int64_t num_leaves;
  T* tree;
  int64_t capacity;

  ADASAMP_HOST_DEVICE int NumPhases() const { return 6 + 2 * Log2(capacity); }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared& s) const {
    const int64_t j = t.thread;
    const int levels = Log2(capacity);
    const int check_root = 4 + levels;
    const int restore = check_root + 1;
    if (phase < 2) {
      LoadSorted(phase, j, indices, count, s);
    } else if (j >= count) {
      return;
    } else if (phase == 2) {
      CheckSet<T>{s.sorted, s.positions, count,        weights,   tree,
                  capacity, num_leaves,  s.old_leaves, &s.invalid}(j);
    } else if (phase == 3) {
      WriteSetLeaves<T>{s.sorted, s.positions,     count,
                        weights,  tree + capacity, &s.invalid}(j);
    } else if (phase < check_root) {
      RecomputeLevel<T>{s.sorted, capacity, phase - 3,
                        tree,     nullptr,  &s.invalid}(j);
    } else if (phase == check_root) {
      if (j == 0) CheckSetRoot<T>{tree, &s.invalid, &s.keep}(0);
    } else if (phase == restore) {
      RestoreSetLeaves<T>{s.sorted, count, s.old_leaves, tree + capacity,
                          &s.keep}(j);
    } else {
      RecomputeLevel<T>{s.sorted, capacity, phase - restore,
                        tree,     nullptr,  &s.keep}(j);
    }
  }
};

// The undo of a large set, in one block whose threads stride over the batch:
// the old leaves back, then one level per phase. Gated by `keep`, read as the
// block starts: on the usual path it ends at once.
template <typename T>
struct RestoreSetOp {
  static constexpr int kThreads = kBlockThreads;
  struct Shared {};

  const int64_t* sorted;
  int64_t count;
  const T* old_leaves;
  T* tree;
  int64_t capacity;
  const int* keep;

  ADASAMP_HOST_DEVICE int NumPhases() const {
    return Skipped(keep) ? 0 : 1 + Log2(capacity);
  }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared&) const {
    for (int64_t j = t.thread; j < count; j += t.threads) {
      if (phase == 0) {
        RestoreSetLeaves<T>{sorted, count, old_leaves, tree + capacity,
                            nullptr}(j);
      } else {
        RecomputeLevel<T>{sorted, capacity, phase, tree, nullptr, nullptr}(j);
      }
    }
  }
};

// Rebuilds the levels above the child level [child_level, 2 * child_level):
// each block sums 2 ** levels children and `levels` levels of their
// ancestors, in shared memory, writing each sum to the tree(s) as it goes.
template <typename T>
struct SumSubtreesOp {
  static constexpr int kThreads = 256;
  static constexpr int kMaxLevels = 9;  // 2 * kThreads children per block
  struct Shared {
    T sums[2][2][kThreads];  // [tree][phase parity][node]
  };

  T* trees[2];  // the second may be nullptr
  int64_t child_level;
  int levels;
  const int* skip;

  ADASAMP_HOST_DEVICE int NumPhases() const {
    return Skipped(skip) ? 0 : levels;
  }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared& s) const {
    const int64_t children = int64_t{1} << levels;
    const int64_t first_child = child_level + t.block * children;
    if (t.thread >= (children >> (phase + 1))) return;
    const int64_t node = (first_child >> (phase + 1)) + t.thread;
    for (int k = 0; k < 2; ++k) {
      T* tree = trees[k];
      if (tree == nullptr) continue;
      T sum;
      if (phase == 0) {
        sum = tree[2 * node] + tree[2 * node + 1];
      } else {
        const T* below = s.sums[k][(phase - 1) & 1];
        sum = below[2 * t.thread] + below[2 * t.thread + 1];
      }
      s.sums[k][phase & 1][t.thread] = sum;
      tree[node] = sum;
    }
  }
};

// log(sum exp(x)) as max + log(sum), so that no exp overflows.
template <typename T>
struct LogSumExp {
  T max;
  T sum;
};

template <typename T>
ADASAMP_HOST_DEVICE inline LogSumExp<T> EmptyLogSumExp() {
  return {static_cast<T>(-INFINITY), T(0)};
}

template <typename T>
ADASAMP_HOST_DEVICE inline LogSumExp<T> Combine(LogSumExp<T> a,
                                                LogSumExp<T> b) {
  if (a.sum == T(0)) return b;
  if (b.sum == T(0)) return a;
  if (a.max < b.max) {
    const LogSumExp<T> swap = a;
    a = b;
    b = swap;
  }
  return {a.max, a.sum + b.sum * Exp(b.max - a.max)};
}

// Step `step` (1, 2, ...) of a tree reduction of kThreads values in shared
// memory: each thread below kThreads >> step combines its value with the one
// that far above it, so that after log2(kThreads) steps values[0] holds all.
template <int kThreads, typename T>
ADASAMP_HOST_DEVICE inline void CombineHalves(LogSumExp<T>* values, int step,
                                              int thread) {
  const int half = kThreads >> step;
  if (thread < half) {
    values[thread] = Combine(values[thread], values[thread + half]);
  }
}

// Whether the caches need a rescale: only after an update that went through,
// and only if the cached total left its safe range or the decay is 0
// (RescaleAfterUpdate).
template <typename T>
ADASAMP_HOST_DEVICE inline bool RescaleNeeded(const int* invalid, const T* tree,
                                              T decay) {
  return !*invalid && RescaleAfterUpdate(tree[1], decay);
}

// The log-sum-exp of the log weights, for the new log-scale
// (RescaledLogScale). With `from_partials` false, block b of g reduces
// log_weights[i] for i = b * kThreads + thread (mod g * kThreads); with it
// true, the one block reduces partials[0, num_partials). A grid of one block
// finishes: writes the log-scale and the `skip_out` word that gates the rest
// of the rescale; a larger grid leaves its partials for a one-block pass over
// them.
template <typename T>
struct LogSumExpOp {
  static constexpr int kThreads = 256;
  static constexpr int kReducePhases = 8;  // log2(kThreads)
  static constexpr int kPhases = 3 + kReducePhases;
  struct Shared {
    LogSumExp<T> values[kThreads];
    int skip;
  };

  const T* log_weights;
  int64_t num_leaves;
  bool from_partials;
  LogSumExp<T>* partials;
  int64_t num_partials;
  const int* invalid;
  const T* tree;
  T decay;
  T* log_scale;
  int* skip_out;

  ADASAMP_HOST_DEVICE int NumPhases() const { return kPhases; }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared& s) const {
    if (phase == 0) {
      if (t.thread == 0) s.skip = !RescaleNeeded(invalid, tree, decay);
      return;
    }
    if (s.skip) {
      if (phase == kPhases - 1 && t.thread == 0 && t.blocks == 1) {
        *skip_out = 1;
      }
      return;
    }
    if (phase == 1) {
      LogSumExp<T> value = EmptyLogSumExp<T>();
      if (from_partials) {
        for (int64_t i = t.thread; i < num_partials; i += t.threads) {
          value = Combine(value, partials[i]);
        }
      } else {
        const int64_t stride = t.blocks * t.threads;
        for (int64_t i = t.block * t.threads + t.thread; i < num_leaves;
             i += stride) {
          value = Combine(value, LogSumExp<T>{log_weights[i], T(1)});
        }
      }
      s.values[t.thread] = value;
    } else if (phase < 2 + kReducePhases) {
      CombineHalves<kThreads>(s.values, phase - 1, t.thread);
    } else if (t.thread == 0) {
      if (t.blocks == 1) {
        *log_scale =
            RescaledLogScale(s.values[0].max + Log(s.values[0].sum), decay);
        *skip_out = 0;
      } else {
        partials[t.block] = s.values[0];
      }
    }
  }
};

// The rescale check and, where RescaleNeeded, the whole rescale, of a tree of
// up to kMaxCapacity leaves in one block, then the tree's total into node 0 of
// the entropy tree: one launch after a reweight instead of five (LogSumExpOp,
// RescaleLeaf, SumSubtreesOp twice and CopyTotal), as the per-step path. A
// rescale is O(n) on one block's threads, but it is rare. The same sums as the
// multi-block path: each node the sum of its two children.
template <typename T>
struct SmallRescaleOp {
  static constexpr int kThreads = 1024;
  static constexpr int kReducePhases = 10;  // log2(kThreads)
  static constexpr int64_t kMaxCapacity = int64_t{1} << 17;
  struct Shared {
    LogSumExp<T> values[kThreads];
    int skip;
  };

  ReweightState<T> state;
  const int* invalid;

  // Check, reduce, log-scale, leaves, one phase per level, total.
  ADASAMP_HOST_DEVICE int NumPhases() const {
    return kReducePhases + 5 + Log2(state.capacity);
  }

  ADASAMP_HOST_DEVICE void Phase(int phase, const BlockThread& t,
                                 Shared& s) const {
    const int last = NumPhases() - 1;
    if (phase == 0) {
      if (t.thread == 0) {
        s.skip = !RescaleNeeded(invalid, state.tree, state.decay);
      }
    } else if (phase == last) {
      if (t.thread == 0) CopyTotal<T>{state.tree, state.entropy_tree}(0);
    } else if (s.skip) {
      return;
    } else if (phase == 1) {
      LogSumExp<T> value = EmptyLogSumExp<T>();
      for (int64_t i = t.thread; i < state.num_leaves; i += t.threads) {
        value = Combine(value, LogSumExp<T>{state.log_weights[i], T(1)});
      }
      s.values[t.thread] = value;
    } else if (phase < 2 + kReducePhases) {
      CombineHalves<kThreads>(s.values, phase - 1, t.thread);
    } else if (phase == 2 + kReducePhases) {
      if (t.thread == 0) {
        *state.log_scale = RescaledLogScale(
            s.values[0].max + Log(s.values[0].sum), state.decay);
      }
    } else if (phase == 3 + kReducePhases) {
      for (int64_t i = t.thread; i < state.num_leaves; i += t.threads) {
        SetScaledLeaf(state, i, state.log_weights[i] - *state.log_scale);
      }
    } else {
      // The nodes `above` levels over the leaves, from capacity >> above.
      const int above = phase - (3 + kReducePhases);
      const int64_t end = state.capacity >> (above - 1);
      for (int64_t node = (state.capacity >> above) + t.thread; node < end;
           node += t.threads) {
        SumChildren(state.tree, node);
        SumChildren(state.entropy_tree, node);
      }
    }
  }
};

}  // namespace parallel
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_GPU_SUM_TREE_STEPS_H_
