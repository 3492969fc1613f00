// The sum-tree algorithm, shared by the CPU functors and the CUDA kernels.
// No TensorFlow framework here, only TSL's Philox header, which works on
// both devices: the CUDA sources include this file too. The CPU sample
// kernel runs Descend's step over 32 walks in lockstep, branch-free or in
// AVX-512 vectors (descend_cpu.h), pinned to Descend bit for bit by
// tests/test_fast_paths.py.
//
// Layout (implicit heap): a tree over `num_leaves` weights is an array of
// 2 * capacity values, capacity = NextPowerOfTwo(num_leaves). Node 1 is the
// root, node k has children 2k and 2k + 1, leaf i is node capacity + i, and
// leaves past num_leaves (padding) hold 0. Node 0 holds num_leaves, as a T:
// the build writes it, and a set with another num_leaves is rejected (a tree
// that no build wrote, such as one restored from before this rule, holds 0
// there and is not checked).
//
// An entropy tree (below) has the same layout, and its node 0 holds the
// total of the tree it goes with: AdaptiveReweight copies the tree's root
// there at the end of every update, while it still holds the variables'
// locks, so that one read of the entropy tree's nodes 0 and 1 gives (W, H) of
// one state, whatever updates run beside it.
//
// Stored weights are 0 or normal numbers: build, set and the reweight store
// a subnormal weight as 0 (StoredWeight), which is how TensorFlow's CPU
// kernels, running with denormals flushed, would add it anyway; so every
// sum is that of the stored leaves on both devices, and a tree of only
// subnormal weights has total 0, which cannot be sampled.
//
// Every internal node of a tree holds a finite sum: ops that would make one
// inf are rejected. As the weights are >= 0, a node past the range makes the
// root inf, so checking the root of the new tree checks them all.
//
// Adaptive sampling (London 2017, Algorithm 1) keeps the exact state in log
// space, l_i = log w_i, and the tree caches s_i = exp(l_i - c) for a shared
// log-scale c, so the cached values never overflow or underflow together.

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_ALGORITHM_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_ALGORITHM_H_

#include <cmath>
#include <cstdint>

#include "xla/tsl/lib/random/philox_random.h"
#include "xla/tsl/lib/random/random_distributions_utils.h"

#if defined(__CUDACC__)
#define ADASAMP_HOST_DEVICE __host__ __device__
#else
#define ADASAMP_HOST_DEVICE
#endif

namespace adasamp {

// The capacity of a tree over `num_leaves` weights: the smallest power of two
// >= num_leaves.
ADASAMP_HOST_DEVICE inline int64_t TreeCapacity(int64_t num_leaves) {
  int64_t capacity = 1;
  while (capacity < num_leaves) capacity <<= 1;
  return capacity;
}

// log2 of a power of two, such as a capacity: the levels below the root.
ADASAMP_HOST_DEVICE inline int Log2(int64_t power_of_two) {
  int log = 0;
  while ((int64_t{1} << log) < power_of_two) ++log;
  return log;
}

// Math that host and device code share: the std:: functions on the host,
// CUDA's on the device.
template <typename T>
ADASAMP_HOST_DEVICE inline bool IsFinite(T x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

template <typename T>
ADASAMP_HOST_DEVICE inline T Exp(T x) {
#if defined(__CUDA_ARCH__)
  return exp(x);
#else
  return std::exp(x);
#endif
}

template <typename T>
ADASAMP_HOST_DEVICE inline T Log(T x) {
#if defined(__CUDA_ARCH__)
  return log(x);
#else
  return std::log(x);
#endif
}

// A weight the tree may hold: finite and >= 0.
template <typename T>
ADASAMP_HOST_DEVICE inline bool IsValidWeight(T w) {
  return IsFinite(w) && w >= T(0);
}

// The node that records num_leaves (see the layout above).
constexpr int64_t kNumLeavesNode = 0;

// The node of an entropy tree that holds its tree's total (see the layout).
constexpr int64_t kTreeTotalNode = 0;

// Whether a tree whose node 0 holds `recorded` may be updated as a tree over
// `num_leaves` leaves: it must be the num_leaves it was built with, or
// unrecorded (0).
template <typename T>
ADASAMP_HOST_DEVICE inline bool MatchesNumLeaves(T recorded,
                                                 int64_t num_leaves) {
  return recorded == T(0) || recorded == static_cast<T>(num_leaves);
}

template <typename T>
struct SmallestNormal;
template <>
struct SmallestNormal<double> {
  static constexpr double kValue = 0x1p-1022;
};
template <>
struct SmallestNormal<float> {
  static constexpr float kValue = 0x1p-126f;
};

// The largest value below 1.
template <typename T>
struct BelowOne;
template <>
struct BelowOne<double> {
  static constexpr double kValue = 0x1.fffffffffffffp-1;
};
template <>
struct BelowOne<float> {
  static constexpr float kValue = 0x1.fffffep-1f;
};

// The value a tree stores for a valid weight `w` (>= 0): 0 for a subnormal.
template <typename T>
ADASAMP_HOST_DEVICE inline T StoredWeight(T w) {
  return w < SmallestNormal<T>::kValue ? T(0) : w;
}

// Walks from the root to the leaf whose cumulative-weight interval holds
// `target` (the smallest i with cumsum(w)[i] > target) and returns that leaf's
// index. The walk only ever enters nodes with a positive sum: it goes right
// only when the right sum is positive and the target is at least the left sum,
// and otherwise left, whose sum is then positive. So a target on or past the
// total (float round-off in u * total or in the subtractions) still ends on a
// positive-weight leaf, never on padding. Requires tree[1] > 0.
template <typename T>
ADASAMP_HOST_DEVICE inline int64_t Descend(const T* tree, int64_t capacity,
                                           T target) {
  int64_t node = 1;
  while (node < capacity) {
    const T left = tree[2 * node];
    const T right = tree[2 * node + 1];
    if (target < left || !(right > T(0))) {
      node = 2 * node;
    } else {
      target -= left;
      node = 2 * node + 1;
    }
  }
  return node - capacity;
}

// Algorithm 1, line 5 in log space: log(w ** decay * exp(amplitude * u)).
template <typename T>
ADASAMP_HOST_DEVICE inline T ReweightedLogWeight(T log_weight, T utility,
                                                 T amplitude, T decay) {
  return decay * log_weight + amplitude * utility;
}

// The entropy tree caches s * log(s) per leaf (0 for s = 0), so that
// KL(Q || uniform) = log n + H / W - log W reads two roots (W, H).
template <typename T>
ADASAMP_HOST_DEVICE inline T EntropyTerm(T scaled_weight, T log_scaled_weight) {
  return scaled_weight > T(0) ? scaled_weight * log_scaled_weight : T(0);
}

// The cached total stays in [1 / kRescaleBound, kRescaleBound]; past either
// end the whole cache is recomputed from the log weights with a fresh scale
// (total = 1), which is O(n) but rare: weights change by a factor of
// exp(amplitude * |u|) per update, and the bound leaves room for many.
template <typename T>
struct RescaleBound;
template <>
struct RescaleBound<double> {
  static constexpr double kValue = 0x1p256;
};
template <>
struct RescaleBound<float> {
  static constexpr float kValue = 0x1p32f;
};

template <typename T>
ADASAMP_HOST_DEVICE inline bool NeedsRescale(T total) {
  // Written so that NaN and inf totals also ask for a rescale.
  return !(total >= T(1) / RescaleBound<T>::kValue &&
           total <= RescaleBound<T>::kValue);
}

// Whether an update that went through recomputes the caches: where their
// total left its safe range, and after any update with decay 0, which forgets
// the past, the log-scale included.
template <typename T>
ADASAMP_HOST_DEVICE inline bool RescaleAfterUpdate(T total, T decay) {
  return decay == T(0) || NeedsRescale(total);
}

// The log-scale the caches are recomputed with, given the log-sum-exp L of
// the log weights: L, for a total of 1; after an update with decay 0, 0 where
// the total exp(L) is in its safe range, so that log weights of 0 (a reset)
// cache leaves of exactly 1, whatever the scale was before.
template <typename T>
ADASAMP_HOST_DEVICE inline T RescaledLogScale(T log_sum_exp, T decay) {
  return decay == T(0) && !NeedsRescale(Exp(log_sum_exp)) ? T(0) : log_sum_exp;
}

// ---------------------------------------------------------------------------
// The uniforms of a tf.random.Generator, for the fused draw (SumTreeDraw):
// from a generator's Philox state, uniform i of a call of B is element i of
// what `generator.uniform([B], dtype)` returns, and the call leaves the state
// where that call leaves it. The state is the generator's int64 [3]: a
// 128-bit counter (low word first) and a 64-bit key. Element i is TF's
// UniformDistribution over the Philox-4x32-10 stream from that counter: each
// 128-bit output gives four floats (23 random bits each) or two doubles (52),
// and a call advances the counter by 256 * B (TF's SkipPhiloxRandom). The
// generator and the conversions to floats are TSL's own, which TensorFlow's
// random kernels run on both devices; tests/sum_tree_cpu_test.cc pins them
// to the published Philox-4x32-10 answers.

using Philox = ::tsl::random::PhiloxRandom;

ADASAMP_HOST_DEVICE inline Philox PhiloxFromState(const int64_t* state) {
  Philox::ResultType counter;
  for (int word = 0; word < 2; ++word) {
    const uint64_t c = static_cast<uint64_t>(state[word]);
    counter[2 * word] = static_cast<uint32_t>(c);
    counter[2 * word + 1] = static_cast<uint32_t>(c >> 32);
  }
  const uint64_t k = static_cast<uint64_t>(state[2]);
  Philox::Key key;
  key[0] = static_cast<uint32_t>(k);
  key[1] = static_cast<uint32_t>(k >> 32);
  return Philox(counter, key);
}

// The state after a call that drew `count` uniforms: counter += 256 * count.
ADASAMP_HOST_DEVICE inline void AdvancePhiloxState(int64_t* state,
                                                   uint64_t count) {
  const uint64_t low = static_cast<uint64_t>(state[0]);
  const uint64_t delta = count * 256;
  const uint64_t new_low = low + delta;
  state[0] = static_cast<int64_t>(new_low);
  if (new_low < low) {  // carry; 256 * count wraps at 2 ** 64, as in TF
    state[1] = static_cast<int64_t>(static_cast<uint64_t>(state[1]) + 1);
  }
}

// The 128-bit output of block `block` of the stream: Philox-4x32-10 of
// counter + block under the key. Blocks stay below 2 ** 32 (a draw is at
// most 2 ** 31 - 1 uniforms), where Skip carries into the counter's upper
// words exactly.
ADASAMP_HOST_DEVICE inline Philox::ResultType PhiloxBlock(Philox philox,
                                                          uint64_t block) {
  philox.Skip(block);
  return philox();
}

template <typename T>
struct PhiloxUniforms;

// Four floats per block, from the low 23 bits of each word.
template <>
struct PhiloxUniforms<float> {
  static constexpr int kPerBlock = 4;
  ADASAMP_HOST_DEVICE static float FromBits(const Philox::ResultType& out,
                                            int k) {
    return ::tsl::random::Uint32ToFloat(out[k]);
  }
};

// Two doubles per block, each from 52 bits of two words.
template <>
struct PhiloxUniforms<double> {
  static constexpr int kPerBlock = 2;
  ADASAMP_HOST_DEVICE static double FromBits(const Philox::ResultType& out,
                                             int k) {
    return ::tsl::random::Uint64ToDouble(out[2 * k], out[2 * k + 1]);
  }
};

// Uniform i of a stratified batch of `count`: (i + u) / count, in stratum i
// of [0, 1), rounded down below 1 where the division rounds up to it, as
// AdaptiveSampler.uniforms computes it.
template <typename T>
ADASAMP_HOST_DEVICE inline T Stratified(T u, int64_t i, int64_t count) {
  const T below_one = BelowOne<T>::kValue;
  const T s = (static_cast<T>(i) + u) / static_cast<T>(count);
  return s < below_one ? s : below_one;
}

// Uniform i of a call of `count` draws, from `block`, the output of the
// Philox block it is in (PhiloxBlock of i / kPerBlock).
template <typename T>
ADASAMP_HOST_DEVICE inline T UniformFromBlock(const Philox::ResultType& block,
                                              int64_t i, int64_t count,
                                              bool stratified) {
  const T u = PhiloxUniforms<T>::FromBits(
      block, static_cast<int>(i % PhiloxUniforms<T>::kPerBlock));
  return stratified ? Stratified(u, i, count) : u;
}

// Uniform i of a call of `count` draws from the stream `philox`, computing
// the whole Philox block it is in: the GPU's form, a thread per draw (the CPU
// computes each block once for all of its uniforms).
template <typename T>
ADASAMP_HOST_DEVICE inline T DrawUniform(const Philox& philox, int64_t i,
                                         int64_t count, bool stratified) {
  const Philox::ResultType block = PhiloxBlock(
      philox, static_cast<uint64_t>(i / PhiloxUniforms<T>::kPerBlock));
  return UniformFromBlock<T>(block, i, count, stratified);
}

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_ALGORITHM_H_
