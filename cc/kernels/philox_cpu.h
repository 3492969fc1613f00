// The uniforms of the CPU's fused draw (SumTreeDraw): uniforms [begin, end)
// of a call of `count` draws, each UniformFromBlock of its PhiloxBlock
// (sum_tree_algorithm.h), the blocks made eight at a time. Two forms of the
// blocks, equal bit for bit (tests/sum_tree_cpu_test.cc):
//
//   PhiloxBlocksScalar   any CPU: one block after another, TSL's Philox;
//   PhiloxBlocksAvx512   CPUs with AVX-512 (UseAvx512), chosen at run time:
//                        each counter word of the eight blocks in a vector's
//                        64-bit lanes, where _mm512_mul_epu32 gives the full
//                        products that a Philox round takes the halves of.
//
// No TensorFlow here.

#ifndef ADASAMP_CC_KERNELS_PHILOX_CPU_H_
#define ADASAMP_CC_KERNELS_PHILOX_CPU_H_

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cc/kernels/cpu_features.h"
#include "cc/kernels/sum_tree_algorithm.h"

namespace adasamp {
namespace cpu {

constexpr int kPhiloxBlocks = 8;

// Blocks first, ..., first + num_blocks - 1 of the stream (num_blocks <=
// kPhiloxBlocks).
inline void PhiloxBlocksScalar(const Philox& philox, uint64_t first,
                               int num_blocks, Philox::ResultType* blocks) {
  for (int b = 0; b < num_blocks; ++b)
    blocks[b] = PhiloxBlock(philox, first + b);
}

#if defined(__x86_64__)

// The high words of eight 64-bit lanes, and the 64-bit products of their low
// words: the zero-masked forms with every lane on, the same instructions as
// the plain ones, which GCC warns read an uninitialized register.
__attribute__((target("avx512f"))) inline __m512i HighWords(__m512i x) {
  return _mm512_maskz_srli_epi64(0xff, x, 32);
}
__attribute__((target("avx512f"))) inline __m512i LowWordProducts(__m512i a,
                                                                  __m512i b) {
  return _mm512_maskz_mul_epu32(0xff, a, b);
}

// Blocks first, ..., first + kPhiloxBlocks - 1 of the stream: Philox-4x32-10
// of counter + block, the 128-bit sum carrying as Philox::Skip carries.
__attribute__((target("avx512f"))) inline void PhiloxBlocksAvx512(
    const Philox& philox, uint64_t first, Philox::ResultType* blocks) {
  const __m512i low32 = _mm512_set1_epi64(0xffffffffu);
  const __m512i one = _mm512_set1_epi64(1);
  const Philox::ResultType& counter = philox.counter();
  const __m512i block =
      _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(first)),
                       _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0));
  const __m512i low = _mm512_add_epi64(
      _mm512_set1_epi64(
          static_cast<int64_t>(uint64_t{counter[1]} << 32 | counter[0])),
      block);
  const __m512i word2 = _mm512_set1_epi64(counter[2]);
  __m512i c2 = _mm512_mask_add_epi64(word2, _mm512_cmplt_epu64_mask(low, block),
                                     word2, one);
  const __m512i word3 = _mm512_set1_epi64(counter[3]);
  __m512i c3 = _mm512_and_si512(
      _mm512_mask_add_epi64(word3, _mm512_cmpgt_epu64_mask(c2, low32), word3,
                            one),
      low32);
  c2 = _mm512_and_si512(c2, low32);
  __m512i c0 = _mm512_and_si512(low, low32);
  __m512i c1 = HighWords(low);
  uint32_t k0 = philox.key()[0];
  uint32_t k1 = philox.key()[1];
  for (int round = 0; round < 10; ++round) {
    const __m512i p0 = LowWordProducts(c0, _mm512_set1_epi64(0xD2511F53u));
    const __m512i p1 = LowWordProducts(c2, _mm512_set1_epi64(0xCD9E8D57u));
    c0 = _mm512_xor_si512(_mm512_xor_si512(HighWords(p1), c1),
                          _mm512_set1_epi64(k0));
    c2 = _mm512_xor_si512(_mm512_xor_si512(HighWords(p0), c3),
                          _mm512_set1_epi64(k1));
    c1 = _mm512_and_si512(p1, low32);
    c3 = _mm512_and_si512(p0, low32);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  alignas(64) uint64_t words[4][kPhiloxBlocks];
  _mm512_store_si512(words[0], c0);
  _mm512_store_si512(words[1], c1);
  _mm512_store_si512(words[2], c2);
  _mm512_store_si512(words[3], c3);
  for (int b = 0; b < kPhiloxBlocks; ++b) {
    for (int w = 0; w < 4; ++w)
      blocks[b][w] = static_cast<uint32_t>(words[w][b]);
  }
}

#endif  // defined(__x86_64__)

// Blocks first, ..., first + num_blocks - 1, and on AVX-512 CPUs up to
// first + kPhiloxBlocks - 1.
inline void PhiloxBlocks(const Philox& philox, uint64_t first, int num_blocks,
                         Philox::ResultType* blocks) {
#if defined(__x86_64__)
  if (UseAvx512()) return PhiloxBlocksAvx512(philox, first, blocks);
#endif
  PhiloxBlocksScalar(philox, first, num_blocks, blocks);
}

// Uniforms begin, ..., end - 1 of a call of `count` draws from `philox`
// (stratified or not, as UniformFromBlock), into out[0, end - begin).
template <typename T>
void DrawUniforms(const Philox& philox, int64_t begin, int64_t end,
                  int64_t count, bool stratified, T* out) {
  constexpr int kPerBlock = PhiloxUniforms<T>::kPerBlock;
  Philox::ResultType blocks[kPhiloxBlocks];
  for (int64_t i = begin; i < end;) {
    const int64_t first = i / kPerBlock;
    const int64_t stop = std::min(end, (first + kPhiloxBlocks) * kPerBlock);
    PhiloxBlocks(philox, static_cast<uint64_t>(first),
                 static_cast<int>((stop - 1) / kPerBlock - first + 1), blocks);
    for (; i < stop; ++i) {
      out[i - begin] = UniformFromBlock<T>(blocks[i / kPerBlock - first], i,
                                           count, stratified);
    }
  }
}

}  // namespace cpu
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_PHILOX_CPU_H_
