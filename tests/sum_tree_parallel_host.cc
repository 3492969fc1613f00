// The GPU kernels' steps (cc/kernels/gpu/sum_tree_parallel.h) run on the host
// by a serial executor, behind a C ABI for ctypes (the functions of
// cc/kernels/gpu/sum_tree_gpu.h, minus the stream), so that
// tests/test_gpu_steps_on_host.py can check them against the CPU ops on a
// machine without a GPU. Built by that test with g++.
//
// To stand in for parallel threads, the executor runs the elements of a step,
// and the threads of a phase, in an order the test picks (forward, reverse or
// shuffled), so that a step whose result depends on the order shows up; and it
// fills shared memory with garbage, as uninitialized device memory would be.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "cc/kernels/gpu/sum_tree_parallel.h"

namespace adasamp {
namespace {

enum Order { kForward = 0, kReverse = 1, kShuffled = 2 };

class SerialExecutor {
 public:
  SerialExecutor(int order, uint64_t seed) : order_(order), random_(seed) {}

  template <class F>
  void ForEach(int64_t count, const F& f) {
    for (const int64_t i : Permutation(count)) f(i);
  }

  template <class Op>
  void Blocks(int64_t blocks, const Op& op) {
    auto shared = std::make_unique<typename Op::Shared>();
    for (int64_t block = 0; block < blocks; ++block) {
      std::memset(static_cast<void*>(shared.get()), 0xff, sizeof(*shared));
      for (int phase = 0; phase < op.NumPhases(); ++phase) {
        for (const int64_t thread : Permutation(Op::kThreads)) {
          op.Phase(phase,
                   parallel::BlockThread{static_cast<int>(thread), Op::kThreads,
                                         block, blocks},
                   *shared);
        }
      }
    }
  }

  size_t SortPairsTempBytes(int64_t, int) { return 0; }

  // As cub's radix sort: stable, by the low `bits` bits of the keys.
  void SortPairs(const int64_t* keys_in, int64_t* keys_out,
                 const int32_t* values_in, int32_t* values_out, int64_t count,
                 int bits, void*, size_t) {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    std::vector<int64_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return (static_cast<uint64_t>(keys_in[a]) & mask) <
             (static_cast<uint64_t>(keys_in[b]) & mask);
    });
    for (int64_t j = 0; j < count; ++j) {
      keys_out[j] = keys_in[order[j]];
      values_out[j] = values_in[order[j]];
    }
  }

  void Zero(void* memory, size_t bytes) { std::memset(memory, 0, bytes); }

 private:
  std::vector<int64_t> Permutation(int64_t count) {
    std::vector<int64_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    if (order_ == kReverse) std::reverse(order.begin(), order.end());
    if (order_ == kShuffled) std::shuffle(order.begin(), order.end(), random_);
    return order;
  }

  int order_;
  std::mt19937_64 random_;
};

int order = kForward;
uint64_t seed = 0;

// A fresh executor per call, so that a call's order depends only on its seed.
SerialExecutor Executor() { return SerialExecutor(order, seed); }

}  // namespace
}  // namespace adasamp

extern "C" {

void adasamp_host_set_order(int order, uint64_t seed) {
  adasamp::order = order;
  adasamp::seed = seed;
}

#define ADASAMP_DEFINE_HOST_FUNCTIONS(T, SUFFIX)                               \
  size_t adasamp_host_sum_tree_build_scratch_bytes_##SUFFIX(                   \
      int64_t capacity) {                                                      \
    auto ex = adasamp::Executor();                                             \
    return adasamp::parallel::SumTreeBuildScratchBytes<T>(ex, capacity);       \
  }                                                                            \
  void adasamp_host_sum_tree_build_##SUFFIX(const T* weights,                  \
                                            int64_t num_leaves, T* tree,       \
                                            int64_t capacity, void* scratch) { \
    auto ex = adasamp::Executor();                                             \
    adasamp::parallel::SumTreeBuild<T>(ex, weights, num_leaves, tree,          \
                                       capacity, scratch);                     \
  }                                                                            \
  size_t adasamp_host_sum_tree_set_scratch_bytes_##SUFFIX(                     \
      int64_t count, int64_t num_leaves) {                                     \
    auto ex = adasamp::Executor();                                             \
    return adasamp::parallel::SumTreeSetScratchBytes<T>(ex, count,             \
                                                        num_leaves);           \
  }                                                                            \
  void adasamp_host_sum_tree_set_##SUFFIX(                                     \
      const int64_t* indices, const T* weights, int64_t count,                 \
      int64_t num_leaves, T* tree, int64_t capacity, void* scratch) {          \
    auto ex = adasamp::Executor();                                             \
    adasamp::parallel::SumTreeSet<T>(ex, indices, weights, count, num_leaves,  \
                                     tree, capacity, scratch);                 \
  }                                                                            \
  void adasamp_host_sum_tree_sample_##SUFFIX(                                  \
      const T* tree, int64_t capacity, const T* uniforms, int64_t count,       \
      int64_t* indices, T* probabilities) {                                    \
    auto ex = adasamp::Executor();                                             \
    adasamp::parallel::SumTreeSample<T>(ex, tree, capacity, uniforms, count,   \
                                        indices, probabilities);               \
  }                                                                            \
  void adasamp_host_sum_tree_draw_##SUFFIX(                                    \
      const T* tree, int64_t capacity, int64_t* rng_state, int64_t count,      \
      int stratified, int64_t* indices, T* probabilities) {                    \
    auto ex = adasamp::Executor();                                             \
    adasamp::parallel::SumTreeDraw<T>(ex, tree, capacity, rng_state, count,    \
                                      stratified != 0, indices,                \
                                      probabilities);                          \
  }                                                                            \
  size_t adasamp_host_adaptive_reweight_scratch_bytes_##SUFFIX(                \
      int64_t count, int64_t num_leaves) {                                     \
    auto ex = adasamp::Executor();                                             \
    return adasamp::parallel::AdaptiveReweightScratchBytes<T>(ex, count,       \
                                                              num_leaves);     \
  }                                                                            \
  void adasamp_host_adaptive_reweight_##SUFFIX(                                \
      T amplitude, T decay, const int64_t* indices, const T* utilities,        \
      int64_t count, T* log_weights, int64_t num_leaves, T* log_scale,         \
      T* tree, T* entropy_tree, int64_t capacity, void* scratch) {             \
    auto ex = adasamp::Executor();                                             \
    const adasamp::parallel::ReweightState<T> state{                           \
        amplitude, decay, utilities,    log_weights, num_leaves,               \
        log_scale, tree,  entropy_tree, capacity};                             \
    adasamp::parallel::AdaptiveReweight<T>(ex, indices, count, state,          \
                                           scratch);                           \
  }
ADASAMP_DEFINE_HOST_FUNCTIONS(float, f32)
ADASAMP_DEFINE_HOST_FUNCTIONS(double, f64)
#undef ADASAMP_DEFINE_HOST_FUNCTIONS

}  // extern "C"
