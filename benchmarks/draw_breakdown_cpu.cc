// Where a CPU draw's time goes, one thread, no TensorFlow: per draw of a
// batch, the Philox uniforms as SumTreeDraw makes them (a block per
// PhiloxUniforms<T>::kPerBlock draws), the walk alone on given uniforms
// (cpu::Descend, the form the op picks here), and the walk down the top k
// levels only, for every k: the heap's top k levels are themselves a tree of
// capacity 2^k in the same array, so walking them costs what those levels
// cost in the whole walk. The last column is the probabilities' gather
// (tree[leaf] / total, done at the end of the walk) timed alone. Trees of
// gamma(0.5) + 1e-3 weights on 2 MiB pages where the kernel grants them, as
// the ops ask for large variables' (MADV_HUGEPAGE here); float64, and float32
// (as flashbax's tree); the fastest of kRuns runs.
//
//   g++ -std=c++17 -O3 -ffp-contract=off -I. -I"$TF_INCLUDE"
//       -o build/draw_breakdown_cpu benchmarks/draw_breakdown_cpu.cc
//   build/draw_breakdown_cpu [BATCH ...]   (default 4096 128)
//
// TF_INCLUDE: tf.sysconfig.get_include(), for TSL's Philox.

#include <sys/mman.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "cc/kernels/descend_cpu.h"
#include "cc/kernels/sum_tree_algorithm.h"

namespace {

using adasamp::cpu::Walks;

constexpr int kRuns = 21;
// Batches a run draws, over which the timer's own cost spreads.
constexpr int64_t kDrawsPerRun = 1 << 17;

// Nanoseconds per draw of the fastest of kRuns runs of draw(batch) over
// kDrawsPerRun / batch_size batches, each on the next slice of the inputs.
template <typename Draw>
double NanosecondsPerDraw(int64_t batch_size, Draw draw) {
  const int64_t batches = std::max<int64_t>(1, kDrawsPerRun / batch_size);
  double best = 1e30;
  for (int run = 0; run < kRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t batch = 0; batch < batches; ++batch) draw(batch);
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
  }
  return best / static_cast<double>(batches * batch_size);
}

constexpr size_t kHugePage = size_t{1} << 21;

// A zeroed array of `count` T on 2 MiB pages where the kernel grants them.
template <typename T>
T* HugePageArray(int64_t count) {
  const size_t bytes =
      (sizeof(T) * count + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = std::aligned_alloc(kHugePage, bytes);
  if (memory == nullptr) std::abort();
  madvise(memory, bytes, MADV_HUGEPAGE);
  std::fill_n(static_cast<T*>(memory), bytes / sizeof(T), T(0));
  return static_cast<T*>(memory);
}

template <typename T>
T* GammaTree(int64_t num_leaves, int64_t capacity) {
  T* tree = HugePageArray<T>(2 * capacity);
  std::mt19937_64 random(num_leaves);
  std::gamma_distribution<double> gamma(0.5);
  for (int64_t i = 0; i < num_leaves; ++i) {
    tree[capacity + i] = gamma(random) + 1e-3;
  }
  for (int64_t node = capacity - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
  return tree;
}

// The uniforms of one batch as SumTreeDraw's CPU kernel makes them.
template <typename T>
void PhiloxUniforms(const adasamp::Philox& philox, int64_t batch_size, T* out) {
  constexpr int kPerBlock = adasamp::PhiloxUniforms<T>::kPerBlock;
  adasamp::Philox::ResultType block;
  for (int64_t i = 0; i < batch_size; ++i) {
    if (i % kPerBlock == 0) {
      block =
          adasamp::PhiloxBlock(philox, static_cast<uint64_t>(i / kPerBlock));
    }
    out[i] = adasamp::UniformFromBlock<T>(block, i, batch_size, false);
  }
}

#if defined(__x86_64__)
// PhiloxUniforms<double>::FromBits of eight blocks' word pairs.
__attribute__((target("avx512f"))) __m512d DoublesFromWords(__m512i high,
                                                            __m512i low) {
  const __m512i mantissa = _mm512_or_si512(
      _mm512_slli_epi64(_mm512_and_si512(high, _mm512_set1_epi64(0xfffffu)),
                        32),
      low);
  const __m512i bits =
      _mm512_or_si512(_mm512_set1_epi64(uint64_t{1023} << 52), mantissa);
  return _mm512_sub_pd(_mm512_castsi512_pd(bits), _mm512_set1_pd(1.0));
}

// The same double uniforms, eight Philox blocks per vector (counter-parallel
// Philox-4x32-10 with _mm512_mul_epu32): what SumTreeDraw's uniforms would
// cost made that way. Checked against PhiloxUniforms bit for bit.
__attribute__((target("avx512f"))) void PhiloxUniformsAvx512(
    const adasamp::Philox& philox, int64_t batch_size, double* out) {
  const __m512i low32 = _mm512_set1_epi64(0xffffffffu);
  const uint64_t base =
      uint64_t{philox.counter()[1]} << 32 | philox.counter()[0];
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  // Uniform 2b is block b's words 0-1, uniform 2b + 1 its words 2-3.
  const __m512i first_half = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second_half = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int64_t i = 0; i < batch_size; i += 16) {
    const __m512i block = _mm512_add_epi64(_mm512_set1_epi64(i / 2), lane);
    const __m512i low = _mm512_add_epi64(_mm512_set1_epi64(base), block);
    const __mmask8 carry = _mm512_cmplt_epu64_mask(low, block);
    __m512i c0 = _mm512_and_si512(low, low32);
    __m512i c1 = _mm512_srli_epi64(low, 32);
    __m512i c2 = _mm512_mask_add_epi64(
        _mm512_set1_epi64(philox.counter()[2]), carry,
        _mm512_set1_epi64(philox.counter()[2]), _mm512_set1_epi64(1));
    const __mmask8 wrap = _mm512_cmpgt_epu64_mask(c2, low32);
    __m512i c3 = _mm512_mask_add_epi64(
        _mm512_set1_epi64(philox.counter()[3]), wrap,
        _mm512_set1_epi64(philox.counter()[3]), _mm512_set1_epi64(1));
    c2 = _mm512_and_si512(c2, low32);
    c3 = _mm512_and_si512(c3, low32);
    uint32_t k0 = philox.key()[0], k1 = philox.key()[1];
    for (int round = 0; round < 10; ++round) {
      const __m512i p0 = _mm512_mul_epu32(c0, _mm512_set1_epi64(0xD2511F53u));
      const __m512i p1 = _mm512_mul_epu32(c2, _mm512_set1_epi64(0xCD9E8D57u));
      const __m512i next0 =
          _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p1, 32), c1),
                           _mm512_set1_epi64(k0));
      const __m512i next2 =
          _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p0, 32), c3),
                           _mm512_set1_epi64(k1));
      c1 = _mm512_and_si512(p1, low32);
      c3 = _mm512_and_si512(p0, low32);
      c0 = next0;
      c2 = next2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const __m512d a = DoublesFromWords(c0, c1), b = DoublesFromWords(c2, c3);
    const int64_t left = batch_size - i;
    const __mmask8 m0 =
        left >= 8 ? 0xff : static_cast<__mmask8>((1u << left) - 1);
    const __mmask8 m1 = left >= 16 ? 0xff
                        : left <= 8
                            ? 0
                            : static_cast<__mmask8>((1u << (left - 8)) - 1);
    _mm512_mask_storeu_pd(out + i, m0,
                          _mm512_permutex2var_pd(a, first_half, b));
    _mm512_mask_storeu_pd(out + i + 8, m1,
                          _mm512_permutex2var_pd(a, second_half, b));
  }
}
#endif

template <typename T>
void Row(int64_t num_leaves, int64_t batch_size, const char* type) {
  const int64_t capacity = adasamp::TreeCapacity(num_leaves);
  const int depth = adasamp::Log2(capacity);
  T* tree = GammaTree<T>(num_leaves, capacity);
  const int64_t batches = std::max<int64_t>(1, kDrawsPerRun / batch_size);
  std::mt19937_64 random(1);
  std::uniform_real_distribution<T> uniform;
  std::vector<T> uniforms(batches * batch_size);
  for (T& u : uniforms) u = uniform(random);
  std::vector<int64_t> indices(batch_size);
  std::vector<T> probabilities(batch_size);
  volatile T sink = 0;

  int64_t state[3] = {0, 0, 42};
  const double rng = NanosecondsPerDraw(batch_size, [&](int64_t batch) {
    state[0] = batch;
    PhiloxUniforms<T>(adasamp::PhiloxFromState(state), batch_size,
                      probabilities.data());
    sink = sink + probabilities[0];
  });
  char vector_rng[32] = "-";
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, double>) {
    if (adasamp::cpu::UseAvx512()) {
      std::vector<double> expected(batch_size);
      state[0] = 7;
      PhiloxUniforms<double>(adasamp::PhiloxFromState(state), batch_size,
                             expected.data());
      PhiloxUniformsAvx512(adasamp::PhiloxFromState(state), batch_size,
                           probabilities.data());
      if (expected != probabilities) {
        std::fprintf(stderr, "the vector Philox disagrees at B = %lld\n",
                     static_cast<long long>(batch_size));
        std::exit(1);
      }
      std::snprintf(vector_rng, sizeof(vector_rng), "%.2f",
                    NanosecondsPerDraw(batch_size, [&](int64_t batch) {
                      state[0] = batch;
                      PhiloxUniformsAvx512(adasamp::PhiloxFromState(state),
                                           batch_size, probabilities.data());
                      sink = sink + probabilities[0];
                    }));
    }
  }
#endif
  const Walks<T> whole = adasamp::cpu::MakeWalks<T>(tree, depth);
  auto walk = [&](const Walks<T>& walks) {
    return NanosecondsPerDraw(batch_size, [&](int64_t batch) {
      adasamp::cpu::Descend(walks, &uniforms[batch * batch_size], batch_size,
                            indices.data(), probabilities.data());
    });
  };
  std::printf("| %lld | %lld | %s | %.2f | %s | %.2f |",
              static_cast<long long>(num_leaves),
              static_cast<long long>(batch_size), type, rng, vector_rng,
              walk(whole));
  // Cumulative ns per draw after each level, top first.
  for (int levels = 1; levels <= depth; ++levels) {
    Walks<T> top = adasamp::cpu::MakeWalks<T>(tree, levels);
    top.large = whole.large;  // the whole walk's prefetching, not the top's
    std::printf(" %.2f", walk(top));
  }
  const double gather = NanosecondsPerDraw(batch_size, [&](int64_t) {
    const T total = tree[1];
    for (int64_t i = 0; i < batch_size; ++i) {
      probabilities[i] = tree[capacity + indices[i]] / total;
    }
    sink = sink + probabilities[0];
  });
  std::printf(" | %.2f |\n", gather);
  std::free(tree);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> batch_sizes;
  for (int i = 1; i < argc; ++i) {
    const long long value = std::strtoll(argv[i], nullptr, 10);
    if (value < 1) {
      std::fprintf(stderr, "batch sizes must be >= 1, got %s\n", argv[i]);
      return 1;
    }
    batch_sizes.push_back(value);
  }
  if (batch_sizes.empty()) batch_sizes = {4096, 128};
  std::printf(
      "ns per draw, one thread (%s walks):\n\n"
      "| n | B | type | Philox uniforms | the same, 8 blocks per AVX-512 "
      "vector | walk | walk down the top 1, 2, ... levels (cumulative) | "
      "probability gather alone |\n|---|---|---|---|---|---|---|---|\n",
#if defined(__x86_64__)
      adasamp::cpu::UseAvx512() ? "AVX-512" : "scalar"
#else
      "scalar"
#endif
  );
  for (const int64_t num_leaves : {50000, 1000000}) {
    for (const int64_t batch_size : batch_sizes) {
      Row<double>(num_leaves, batch_size, "float64");
      Row<float>(num_leaves, batch_size, "float32");
    }
  }
  return 0;
}
