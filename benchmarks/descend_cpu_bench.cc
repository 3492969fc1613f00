// The CPU sample kernel's walks alone (cc/kernels/descend_cpu.h), one thread,
// no TensorFlow: draws/s of the scalar and the AVX-512 form over trees of
// gamma weights, B = 4096 uniforms per batch, float64. On a machine whose
// cores other jobs share this still measures the code rather than the share
// of the machine the op got, as long as the thread is not preempted often.
//
//   g++ -std=c++17 -O3 -ffp-contract=off -I. -I"$TF_INCLUDE"
//       -o build/descend_cpu_bench benchmarks/descend_cpu_bench.cc
//   build/descend_cpu_bench
//
// TF_INCLUDE: tf.sysconfig.get_include(), for TSL's Philox.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cc/kernels/descend_cpu.h"
#include "cc/kernels/sum_tree_algorithm.h"

namespace {

constexpr int kBatch = 4096;
constexpr int kBatches = 16;
constexpr int kRuns = 15;

// Seconds of the fastest of kRuns runs of kBatches batches.
template <typename Draw>
double BestSeconds(Draw draw) {
  double best = 1e30;
  for (int run = 0; run < kRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int batch = 0; batch < kBatches; ++batch) draw(batch);
    const std::chrono::duration<double> seconds =
        std::chrono::steady_clock::now() - start;
    best = std::min(best, seconds.count());
  }
  return best;
}

}  // namespace

int main() {
  using adasamp::cpu::Walks;
  std::printf("| n | scalar M draws/s | AVX-512 M draws/s |\n|---|---|---|\n");
  for (const int64_t n : {10000, 50000, 1000000, 10000000}) {
    const int64_t capacity = adasamp::TreeCapacity(n);
    const int depth = adasamp::Log2(capacity);
    double* tree = static_cast<double*>(
        std::aligned_alloc(64, sizeof(double) * 2 * capacity));
    std::fill_n(tree, 2 * capacity, 0.0);
    std::mt19937_64 random(n);
    std::gamma_distribution<double> gamma(0.5);
    for (int64_t i = 0; i < n; ++i) tree[capacity + i] = gamma(random) + 1e-3;
    for (int64_t node = capacity - 1; node >= 1; --node) {
      tree[node] = tree[2 * node] + tree[2 * node + 1];
    }
    std::uniform_real_distribution<double> uniform;
    std::vector<double> uniforms(kBatch * kBatches);
    for (double& u : uniforms) u = uniform(random);
    std::vector<int64_t> indices(kBatch), avx_indices(kBatch);
    std::vector<double> probabilities(kBatch), avx_probabilities(kBatch);
    const Walks<double> walks = adasamp::cpu::MakeWalks(tree, depth);

    auto scalar = [&](int batch) {
      for (int i = 0; i < kBatch; i += adasamp::cpu::kWalks) {
        adasamp::cpu::DescendScalar(walks, &uniforms[batch * kBatch + i],
                                    adasamp::cpu::kWalks, &indices[i],
                                    &probabilities[i]);
      }
    };
    const double scalar_rate = kBatch * kBatches / BestSeconds(scalar) / 1e6;
    char avx[32] = "no AVX-512 here";
#if defined(__x86_64__)
    if (adasamp::cpu::UseAvx512()) {
      auto vector = [&](int batch) {
        for (int i = 0; i < kBatch; i += adasamp::cpu::kWalks) {
          adasamp::cpu::DescendAvx512(walks, &uniforms[batch * kBatch + i],
                                      &avx_indices[i], &avx_probabilities[i]);
        }
      };
      std::snprintf(avx, sizeof(avx), "%.1f",
                    kBatch * kBatches / BestSeconds(vector) / 1e6);
      // Both ran the last batch last: they must agree bit for bit.
      if (indices != avx_indices ||
          std::memcmp(probabilities.data(), avx_probabilities.data(),
                      sizeof(double) * kBatch)) {
        std::printf("the two forms disagree at n = %lld\n",
                    static_cast<long long>(n));
        return 1;
      }
    }
#endif
    std::printf("| %lld | %.1f | %s |\n", static_cast<long long>(n),
                scalar_rate, avx);
    std::free(tree);
  }
  return 0;
}
