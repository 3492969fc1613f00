// The CPU sample kernel's inner loop: Descend (sum_tree_algorithm.h) for a
// group of walks at once, one level of every walk before the next level of
// any, so that their cache and memory latencies overlap instead of adding up
// level by level. Two forms, equal to Descend bit for bit
// (tests/test_fast_paths.py):
//
//   DescendScalar   any x86-64 (or other) CPU: each walk's step without
//                   branches, as a mispredicted branch per level costs more
//                   than the step;
//   DescendAvx512   CPUs with AVX-512 (UseAvx512), chosen at run time: eight
//                   walks per vector, their children loaded by two gathers
//                   and the step done by one masked subtract and add.
//
// Both take the same arithmetic as Descend: go right iff
// !(target < left) && right > 0, and then subtract left. No TensorFlow here.

#ifndef ADASAMP_CC_KERNELS_DESCEND_CPU_H_
#define ADASAMP_CC_KERNELS_DESCEND_CPU_H_

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cc/kernels/cpu_features.h"

namespace adasamp {
namespace cpu {

// Walks a group advances in lockstep: enough loads in flight to hide an L2
// or memory latency, few enough that their state stays in registers and L1.
constexpr int kWalks = 32;

// Levels ahead whose nodes a walk prefetches: always in the scalar form
// (there it pays even where the tree fits in L2), in the AVX-512 form only
// where the tree is larger than kLargeTreeBytes (a smaller one stays in L2,
// and its prefetches cost more than they save). The nodes a walk at node k can
// read 3 levels down, 8k..8k + 7, are 8 aligned doubles: one cache line.
constexpr int kPrefetchLevels = 3;
constexpr int64_t kLargeTreeBytes = int64_t{1} << 20;

// A group of draws: uniforms in, leaf indices and w_i / total out.
template <typename T>
struct Walks {
  const T* tree;
  int depth;  // log2(capacity)
  T total;    // tree[1] > 0
  // Larger than kLargeTreeBytes: walks wait on memory, so the AVX-512 form
  // prefetches, and a batch is worth sharing between threads sooner.
  bool large;
};

template <typename T>
inline Walks<T> MakeWalks(const T* tree, int depth) {
  const int64_t bytes = int64_t{2} * sizeof(T) << depth;
  return {tree, depth, tree[1], bytes > kLargeTreeBytes};
}

// `count` <= kWalks draws.
template <typename T>
void DescendScalar(const Walks<T>& w, const T* uniforms, int count,
                   int64_t* indices, T* probabilities) {
  int64_t node[kWalks];
  T target[kWalks];
  for (int g = 0; g < count; ++g) {
    node[g] = 1;
    target[g] = uniforms[g] * w.total;
  }
  for (int level = 0; level < w.depth; ++level) {
    const bool prefetch = level + kPrefetchLevels + 1 <= w.depth;
    for (int g = 0; g < count; ++g) {
      const T* children = w.tree + 2 * node[g];
      const T left = children[0];
      const T right = children[1];
      const int64_t go_right =
          int64_t{!(target[g] < left)} & int64_t{right > T(0)};
      // Subtracting left * 0 instead of nothing can only turn a target of
      // -0 into +0, which no comparison tells apart.
      target[g] -= left * T(go_right);
      node[g] = 2 * node[g] + go_right;
      if (prefetch) __builtin_prefetch(w.tree + (node[g] << kPrefetchLevels));
    }
  }
  const int64_t capacity = int64_t{1} << w.depth;
  for (int g = 0; g < count; ++g) {
    indices[g] = node[g] - capacity;
    probabilities[g] = w.tree[node[g]] / w.total;
  }
}

#if defined(__x86_64__)

// Eight lanes of T with 64-bit node indices, for DescendAvx512.
template <typename T>
struct Lanes;

template <>
struct Lanes<double> {
  using Vector = __m512d;
  __attribute__((target("avx512f,avx512vl"))) static Vector Load(
      const double* p) {
    return _mm512_loadu_pd(p);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Broadcast(
      double x) {
    return _mm512_set1_pd(x);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Gather(
      __m512i nodes, const double* base) {
    // The masked form, as the plain one reads an uninitialized register,
    // which GCC warns about.
    return _mm512_mask_i64gather_pd(_mm512_setzero_pd(), 0xff, nodes, base,
                                    sizeof(double));
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Mul(Vector a,
                                                                Vector b) {
    return _mm512_mul_pd(a, b);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Div(Vector a,
                                                                Vector b) {
    return _mm512_div_pd(a, b);
  }
  // !(a < b) && c > 0
  __attribute__((target("avx512f,avx512vl"))) static __mmask8 GoRight(
      Vector target, Vector left, Vector right) {
    return _mm512_cmp_pd_mask(target, left, _CMP_NLT_UQ) &
           _mm512_cmp_pd_mask(right, _mm512_setzero_pd(), _CMP_GT_OQ);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector MaskSub(
      Vector a, __mmask8 mask, Vector b) {
    return _mm512_mask_sub_pd(a, mask, a, b);
  }
  __attribute__((target("avx512f,avx512vl"))) static void Store(double* p,
                                                                Vector v) {
    _mm512_storeu_pd(p, v);
  }
};

template <>
struct Lanes<float> {
  using Vector = __m256;
  __attribute__((target("avx512f,avx512vl"))) static Vector Load(
      const float* p) {
    return _mm256_loadu_ps(p);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Broadcast(float x) {
    return _mm256_set1_ps(x);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Gather(
      __m512i nodes, const float* base) {
    return _mm512_mask_i64gather_ps(_mm256_setzero_ps(), 0xff, nodes, base,
                                    sizeof(float));
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Mul(Vector a,
                                                                Vector b) {
    return _mm256_mul_ps(a, b);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector Div(Vector a,
                                                                Vector b) {
    return _mm256_div_ps(a, b);
  }
  __attribute__((target("avx512f,avx512vl"))) static __mmask8 GoRight(
      Vector target, Vector left, Vector right) {
    return _mm256_cmp_ps_mask(target, left, _CMP_NLT_UQ) &
           _mm256_cmp_ps_mask(right, _mm256_setzero_ps(), _CMP_GT_OQ);
  }
  __attribute__((target("avx512f,avx512vl"))) static Vector MaskSub(
      Vector a, __mmask8 mask, Vector b) {
    return _mm256_mask_sub_ps(a, mask, a, b);
  }
  __attribute__((target("avx512f,avx512vl"))) static void Store(float* p,
                                                                Vector v) {
    _mm256_storeu_ps(p, v);
  }
};

// Exactly kWalks draws, eight per vector.
template <typename T>
__attribute__((target("avx512f,avx512vl"))) void DescendAvx512(
    const Walks<T>& w, const T* uniforms, int64_t* indices, T* probabilities) {
  using L = Lanes<T>;
  constexpr int kVectors = kWalks / 8;
  __m512i node[kVectors];
  typename L::Vector target[kVectors];
  const typename L::Vector total = L::Broadcast(w.total);
  const __m512i one = _mm512_set1_epi64(1);
  for (int v = 0; v < kVectors; ++v) {
    node[v] = one;
    target[v] = L::Mul(L::Load(uniforms + 8 * v), total);
  }
  for (int level = 0; level < w.depth; ++level) {
    const bool prefetch = w.large && level + kPrefetchLevels + 1 <= w.depth;
    for (int v = 0; v < kVectors; ++v) {
      const __m512i left_node = _mm512_add_epi64(node[v], node[v]);
      const typename L::Vector left = L::Gather(left_node, w.tree);
      const typename L::Vector right = L::Gather(left_node, w.tree + 1);
      const __mmask8 go_right = L::GoRight(target[v], left, right);
      target[v] = L::MaskSub(target[v], go_right, left);
      node[v] = _mm512_mask_add_epi64(left_node, go_right, left_node, one);
      if (prefetch) {
        alignas(64) int64_t nodes[8];
        _mm512_store_si512(nodes, node[v]);
        for (int k = 0; k < 8; ++k) {
          __builtin_prefetch(w.tree + (nodes[k] << kPrefetchLevels));
        }
      }
    }
  }
  const __m512i capacity = _mm512_set1_epi64(int64_t{1} << w.depth);
  for (int v = 0; v < kVectors; ++v) {
    _mm512_storeu_si512(indices + 8 * v, _mm512_sub_epi64(node[v], capacity));
    L::Store(probabilities + 8 * v, L::Div(L::Gather(node[v], w.tree), total));
  }
}

#endif  // defined(__x86_64__)

// `count` draws, kWalks at a time.
template <typename T>
void Descend(const Walks<T>& w, const T* uniforms, int64_t count,
             int64_t* indices, T* probabilities) {
  int64_t i = 0;
#if defined(__x86_64__)
  if (UseAvx512()) {
    for (; i + kWalks <= count; i += kWalks) {
      DescendAvx512(w, uniforms + i, indices + i, probabilities + i);
    }
  }
#endif
  for (; i < count; i += kWalks) {
    const int group = count - i < kWalks ? static_cast<int>(count - i) : kWalks;
    DescendScalar(w, uniforms + i, group, indices + i, probabilities + i);
  }
}

}  // namespace cpu
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_DESCEND_CPU_H_
