// The sum-tree ops as sequences of data-parallel steps: what the CUDA kernels
// run, written without CUDA or TensorFlow so that the same steps also run on
// the host.
//
// Each op is a fixed sequence of steps against an executor:
//   ex.ForEach(n, f)         calls f(i) for every i in [0, n), in any order;
//   ex.Blocks(g, op)         runs g blocks of Op::kThreads threads; each
//                            thread calls op.Phase(p, thread, shared) for
//                            p = 0, 1, ..., op.NumPhases() - 1, and no thread
//                            of a block starts phase p + 1 before all of its
//                            block finished phase p (CUDA's __syncthreads);
//                            NumPhases() is read on the device as the blocks
//                            start, so an op gated off by a flag word returns
//                            0 there and its blocks end at once;
//   ex.SortPairs(...)        a stable sort of (key, value) pairs by key;
//   ex.Zero(...)             zeroes memory.
// Steps run in order: a step sees everything its predecessors wrote.
// sum_tree_gpu.cu supplies the CUDA executor; tests/sum_tree_parallel_host.cc
// a serial one, which lets the host check these steps against the CPU ops.
//
// Semantics are those of the CPU functors (cc/kernels/sum_tree_ops.cc), but
// errors cannot reach the host without a round-trip, so a mutating op validates
// on the device and, if any value is bad, skips all of its writes: a flag word
// in scratch memory gates every step that writes. Values come out identical to
// the CPU's where the arithmetic is the same (sums of children, Descend, the
// reweighted log weight), given no fused multiply-add; exp and the rescale's
// log-sum-exp (a tree reduction here) agree to round-off.
//
// The steps themselves are in sum_tree_steps.h; this file sizes the scratch
// memory and sequences the steps of each op.

#ifndef ADASAMP_CC_KERNELS_GPU_SUM_TREE_PARALLEL_H_
#define ADASAMP_CC_KERNELS_GPU_SUM_TREE_PARALLEL_H_

#include <cstddef>
#include <cstdint>

#include "cc/kernels/gpu/sum_tree_steps.h"
#include "cc/kernels/sum_tree_algorithm.h"

namespace adasamp {
namespace parallel {

inline bool TakesOneBlock(int64_t count) { return count <= kBlockThreads; }

// The batch size the sorting paths take, 0 for one block.
inline int64_t SortedCount(int64_t count) {
  return TakesOneBlock(count) ? 0 : count;
}

// The number of low bits that hold every index below `num_leaves`, >= 1:
// the sorts compare only these.
inline int IndexBits(int64_t num_leaves) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < num_leaves) ++bits;
  return bits;
}

// ---------------------------------------------------------------------------
// Scratch memory: one buffer per call, carved into aligned arrays. Laid out
// once without a base to size it, then again over the allocated buffer.

class Scratch {
 public:
  explicit Scratch(void* base) : base_(static_cast<char*>(base)) {}

  template <typename U>
  U* Take(int64_t count) {
    return static_cast<U*>(TakeBytes(sizeof(U) * static_cast<size_t>(count)));
  }

  void* TakeBytes(size_t bytes) {
    offset_ = (offset_ + kAlignment - 1) / kAlignment * kAlignment;
    void* taken = base_ == nullptr ? nullptr : base_ + offset_;
    offset_ += bytes;
    return taken;
  }

  size_t size() const { return offset_; }

 private:
  static constexpr size_t kAlignment = 256;
  char* base_;
  size_t offset_ = 0;
};

// The sorted (index, position) pairs of a batch, and the sort's own scratch.
struct SortedBatch {
  int64_t* sorted;
  int32_t* positions_in;
  int32_t* positions;
  void* sort_temp;
  size_t sort_temp_bytes;

  template <class Executor>
  SortedBatch(Executor& ex, Scratch& scratch, int64_t count, int bits)
      : sorted(scratch.Take<int64_t>(count)),
        positions_in(scratch.Take<int32_t>(count)),
        positions(scratch.Take<int32_t>(count)),
        sort_temp_bytes(count > 0 ? ex.SortPairsTempBytes(count, bits) : 0) {
    sort_temp = scratch.TakeBytes(sort_temp_bytes);
  }

  template <class Executor>
  void Sort(Executor& ex, const int64_t* indices, int64_t count, int bits) {
    ex.ForEach(count, Iota{positions_in});
    ex.SortPairs(indices, sorted, positions_in, positions, count, bits,
                 sort_temp, sort_temp_bytes);
  }
};

// ---------------------------------------------------------------------------
// The ops. Each takes device pointers and a scratch buffer of the size its
// ...ScratchBytes function gives, enqueues its steps and returns.

// Recomputes every internal node of one or two trees, a few launches of
// SumSubtreesOp, each summing up to nine levels.
template <class Executor, typename T>
void Rebuild(Executor& ex, T* tree, T* second_tree, int64_t capacity,
             const int* skip) {
  for (int64_t level = capacity; level > 1;) {
    int levels = Log2(level);
    if (levels > SumSubtreesOp<T>::kMaxLevels) {
      levels = SumSubtreesOp<T>::kMaxLevels;
    }
    ex.Blocks(level >> levels,
              SumSubtreesOp<T>{{tree, second_tree}, level, levels, skip});
    level >>= levels;
  }
}

template <class Executor, typename T>
struct BuildScratch {
  int* invalid;
  T* tree;
  BuildScratch(Executor&, Scratch& scratch, int64_t capacity)
      : invalid(scratch.Take<int>(1)), tree(scratch.Take<T>(2 * capacity)) {}
};

template <typename T, class Executor>
size_t SumTreeBuildScratchBytes(Executor& ex, int64_t capacity) {
  Scratch scratch(nullptr);
  BuildScratch<Executor, T>(ex, scratch, capacity);
  return scratch.size();
}

// All leaves, then every internal node, in scratch; copied over `tree` only
// if every weight is finite and >= 0 and the total finite.
template <typename T, class Executor>
void SumTreeBuild(Executor& ex, const T* weights, int64_t num_leaves, T* tree,
                  int64_t capacity, void* scratch_memory) {
  Scratch scratch(scratch_memory);
  const BuildScratch<Executor, T> s(ex, scratch, capacity);
  ex.Zero(s.invalid, sizeof(int));
  ex.ForEach(capacity,
             WriteLeaves<T>{weights, num_leaves, capacity, s.tree, s.invalid});
  Rebuild<Executor, T>(ex, s.tree, nullptr, capacity, nullptr);
  ex.ForEach(2 * capacity, CommitTree<T>{s.tree, tree, s.invalid});
}

template <class Executor, typename T>
struct SetScratch {
  int* invalid;
  int* keep;
  T* old_leaves;
  SortedBatch batch;
  SetScratch(Executor& ex, Scratch& scratch, int64_t count, int bits)
      : invalid(scratch.Take<int>(1)),
        keep(scratch.Take<int>(1)),
        old_leaves(scratch.Take<T>(SortedCount(count))),
        batch(ex, scratch, SortedCount(count), bits) {}
};

template <typename T, class Executor>
size_t SumTreeSetScratchBytes(Executor& ex, int64_t count, int64_t num_leaves) {
  Scratch scratch(nullptr);
  SetScratch<Executor, T>(ex, scratch, count, IndexBits(num_leaves));
  return scratch.size();
}

// Sorts the indices, checks every index and weight, writes the last weight of
// each index and recomputes the distinct ancestors level by level:
// O(B log B + B log n), never the whole tree. If the new root overflows, some
// sum did, and the set is undone (RestoreSetOp), so a rejected set leaves the
// tree as it was. Batches of up to kBlockThreads run as one SmallSetOp;
// larger ones sort and run a launch per step and level.
template <typename T, class Executor>
void SumTreeSet(Executor& ex, const int64_t* indices, const T* weights,
                int64_t count, int64_t num_leaves, T* tree, int64_t capacity,
                void* scratch_memory) {
  if (count == 0) return;
  if (TakesOneBlock(count)) {
    ex.Blocks(
        1, SmallSetOp<T>{indices, weights, count, num_leaves, tree, capacity});
    return;
  }
  const int bits = IndexBits(num_leaves);
  Scratch scratch(scratch_memory);
  SetScratch<Executor, T> s(ex, scratch, count, bits);
  ex.Zero(s.invalid, sizeof(int));
  s.batch.Sort(ex, indices, count, bits);
  const int64_t* sorted = s.batch.sorted;
  ex.ForEach(count, CheckSet<T>{sorted, s.batch.positions, count, weights, tree,
                                capacity, num_leaves, s.old_leaves, s.invalid});
  ex.ForEach(count, WriteSetLeaves<T>{sorted, s.batch.positions, count, weights,
                                      tree + capacity, s.invalid});
  for (int shift = 1; (int64_t{1} << shift) <= capacity; ++shift) {
    ex.ForEach(count, RecomputeLevel<T>{sorted, capacity, shift, tree, nullptr,
                                        s.invalid});
  }
  ex.ForEach(1, CheckSetRoot<T>{tree, s.invalid, s.keep});
  ex.Blocks(
      1, RestoreSetOp<T>{sorted, count, s.old_leaves, tree, capacity, s.keep});
}

template <typename T, class Executor>
void SumTreeSample(Executor& ex, const T* tree, int64_t capacity,
                   const T* uniforms, int64_t count, int64_t* indices,
                   T* probabilities) {
  ex.ForEach(count,
             SampleOne<T>{tree, capacity, uniforms, indices, probabilities});
}

// Draws on the generator's uniforms (DrawOne); a batch of up to
// kBlockThreads is one launch, a larger one a launch for the draws and one
// for the state.
template <typename T, class Executor>
void SumTreeDraw(Executor& ex, const T* tree, int64_t capacity,
                 int64_t* rng_state, int64_t count, bool stratified,
                 int64_t* indices, T* probabilities) {
  if (count == 0) return;
  const DrawOne<T> draw{tree,       capacity, rng_state,    count,
                        stratified, indices,  probabilities};
  if (TakesOneBlock(count)) {
    ex.Blocks(1, SmallDrawOp<T>{draw});
    return;
  }
  ex.ForEach(count, draw);
  ex.ForEach(1, AdvanceRngState{rng_state, count});
}

// The log-sum-exp pass reads this many log weights per thread at least: one
// block, one launch, up to 65536 leaves (the per-step case of n = 50000).
constexpr int64_t kLogSumExpGrain = 256;

template <typename T>
int64_t LogSumExpBlocks(int64_t num_leaves) {
  const int64_t per_block = LogSumExpOp<T>::kThreads * kLogSumExpGrain;
  const int64_t blocks = (num_leaves + per_block - 1) / per_block;
  return blocks < LogSumExpOp<T>::kThreads ? blocks : LogSumExpOp<T>::kThreads;
}

template <class Executor, typename T>
struct ReweightScratch {
  int* invalid;
  int* skip_rescale;
  LogSumExp<T>* partials;
  T* new_log_weights;
  SortedBatch batch;
  ReweightScratch(Executor& ex, Scratch& scratch, int64_t count,
                  int64_t num_leaves)
      : invalid(scratch.Take<int>(1)),
        skip_rescale(scratch.Take<int>(1)),
        partials(scratch.Take<LogSumExp<T>>(LogSumExpBlocks<T>(num_leaves))),
        new_log_weights(scratch.Take<T>(SortedCount(count))),
        batch(ex, scratch, SortedCount(count), IndexBits(num_leaves)) {}
};

template <typename T, class Executor>
size_t AdaptiveReweightScratchBytes(Executor& ex, int64_t count,
                                    int64_t num_leaves) {
  Scratch scratch(nullptr);
  ReweightScratch<Executor, T>(ex, scratch, count, num_leaves);
  return scratch.size();
}

// Recomputes both caches from the log weights with a new log-scale
// (RescaledLogScale of their log-sum-exp), if RescaleNeeded; otherwise every
// step returns at once. Then the tree's total into node 0 of the entropy
// tree. A tree of up to SmallRescaleOp::kMaxCapacity leaves takes one launch.
template <typename T, class Executor>
void RescaleIfNeededAndCopyTotal(Executor& ex, const ReweightState<T>& state,
                                 const ReweightScratch<Executor, T>& s) {
  if (state.capacity <= SmallRescaleOp<T>::kMaxCapacity) {
    ex.Blocks(1, SmallRescaleOp<T>{state, s.invalid});
    return;
  }
  const int64_t blocks = LogSumExpBlocks<T>(state.num_leaves);
  LogSumExpOp<T> log_sum_exp{state.log_weights,
                             state.num_leaves,
                             /*from_partials=*/false,
                             s.partials,
                             blocks,
                             s.invalid,
                             state.tree,
                             state.decay,
                             state.log_scale,
                             s.skip_rescale};
  ex.Blocks(blocks, log_sum_exp);
  if (blocks > 1) {
    log_sum_exp.from_partials = true;
    ex.Blocks(1, log_sum_exp);
  }
  ex.ForEach(state.num_leaves, RescaleLeaf<T>{state, s.skip_rescale});
  Rebuild<Executor, T>(ex, state.tree, state.entropy_tree, state.capacity,
                       s.skip_rescale);
  ex.ForEach(1, CopyTotal<T>{state.tree, state.entropy_tree});
}

// Algorithm 1, line 5, for the first occurrence of each index (see the CPU
// functor). Batches of up to kBlockThreads run as one SmallReweightOp; larger
// ones sort and run a launch per step and level. Then the rescale check, on
// the device, and the tree's total into node 0 of the entropy tree, in the
// same stream, so that any op after this one reads (W, H) of one state: at
// n = 50000, B = 100, two launches in all.
template <typename T, class Executor>
void AdaptiveReweight(Executor& ex, const int64_t* indices, int64_t count,
                      const ReweightState<T>& state, void* scratch_memory) {
  Scratch scratch(scratch_memory);
  ReweightScratch<Executor, T> s(ex, scratch, count, state.num_leaves);
  if (count == 0) {
    ex.Zero(s.invalid, sizeof(int));
  } else if (TakesOneBlock(count)) {
    ex.Blocks(1, SmallReweightOp<T>{indices, count, state, s.invalid});
  } else {
    ex.Zero(s.invalid, sizeof(int));
    const int bits = IndexBits(state.num_leaves);
    s.batch.Sort(ex, indices, count, bits);
    ex.ForEach(count, CheckReweight<T>{s.batch.sorted, s.batch.positions, state,
                                       s.new_log_weights, s.invalid});
    ex.ForEach(count, WriteReweightLeaves<T>{s.batch.sorted, state,
                                             s.new_log_weights, s.invalid});
    for (int shift = 1; (int64_t{1} << shift) <= state.capacity; ++shift) {
      ex.ForEach(count,
                 RecomputeLevel<T>{s.batch.sorted, state.capacity, shift,
                                   state.tree, state.entropy_tree, s.invalid});
    }
  }
  RescaleIfNeededAndCopyTotal(ex, state, s);
}

}  // namespace parallel
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_GPU_SUM_TREE_PARALLEL_H_
