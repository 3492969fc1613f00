// Checks and benchmarks the sum-tree CUDA kernels through their C++ API
// (cc/kernels/gpu/sum_tree_gpu.h), with no TensorFlow: built and run by
// benchmarks/gpu_sum_tree.py, or by hand:
//
//   nvcc -std=c++17 -O3 --fmad=false -arch=native -I. \
//       benchmarks/gpu_sum_tree_driver.cu cc/kernels/gpu/sum_tree_gpu.cu -o
//       driver
//   ./driver check    # every op against a sequential CPU reference
//   ./driver bench    # throughput for n x B, and the per-step time
//
// The reference follows the CPU functors (cc/kernels/sum_tree_ops.cc) in
// their plainest form: the whole tree rebuilt after every change, which gives
// the same sums bit for bit as recomputing only the changed paths.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cc/kernels/gpu/sum_tree_gpu.h"
#include "cc/kernels/sum_tree_algorithm.h"

namespace {

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(2);
  }
}

void CheckKernel(int status, const char* what) {
  Check(static_cast<cudaError_t>(status), what);
}

template <typename U>
class DeviceArray {
 public:
  explicit DeviceArray(size_t size) : size_(size) {
    Check(cudaMalloc(&data_, std::max<size_t>(size, 1) * sizeof(U)),
          "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<U>& values)
      : DeviceArray(values.size()) {
    Upload(values);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  U* get() const { return data_; }
  void Upload(const std::vector<U>& values) {
    Check(cudaMemcpy(data_, values.data(), values.size() * sizeof(U),
                     cudaMemcpyHostToDevice),
          "upload");
  }
  std::vector<U> Download() const {
    std::vector<U> values(size_);
    Check(cudaMemcpy(values.data(), data_, size_ * sizeof(U),
                     cudaMemcpyDeviceToHost),
          "download");
    return values;
  }

 private:
  U* data_ = nullptr;
  size_t size_;
};

using Scratch = DeviceArray<char>;

// The dtype's name, for the reports.
template <typename T>
constexpr const char* kDtypeName =
    std::is_same_v<T, float> ? "float" : "double";

// ---------------------------------------------------------------------------
// The sum-tree on the device: a tree, and for the adaptive ops the entropy
// tree, log weights and log-scale, with scratch sized for batches up to
// `max_count`.

template <typename T>
struct DeviceState {
  int64_t num_leaves, capacity;
  DeviceArray<T> tree, entropy_tree, log_weights, log_scale;
  Scratch build_scratch, set_scratch, reweight_scratch;
  cudaStream_t stream;

  DeviceState(int64_t num_leaves, int64_t max_count, cudaStream_t stream)
      : num_leaves(num_leaves),
        capacity(adasamp::TreeCapacity(num_leaves)),
        tree(2 * capacity),
        entropy_tree(2 * capacity),
        log_weights(num_leaves),
        log_scale(1),
        build_scratch(adasamp::gpu::SumTreeBuildScratchBytes<T>(capacity)),
        set_scratch(
            adasamp::gpu::SumTreeSetScratchBytes<T>(max_count, num_leaves)),
        reweight_scratch(adasamp::gpu::AdaptiveReweightScratchBytes<T>(
            max_count, num_leaves)),
        stream(stream) {}

  void Build(const DeviceArray<T>& weights) {
    CheckKernel(
        adasamp::gpu::SumTreeBuild(weights.get(), num_leaves, tree.get(),
                                   capacity, build_scratch.get(), stream),
        "build");
  }
  void Set(const DeviceArray<int64_t>& indices, const DeviceArray<T>& weights,
           int64_t count) {
    CheckKernel(adasamp::gpu::SumTreeSet(indices.get(), weights.get(), count,
                                         num_leaves, tree.get(), capacity,
                                         set_scratch.get(), stream),
                "set");
  }
  void Sample(const DeviceArray<T>& uniforms, int64_t count,
              DeviceArray<int64_t>& indices, DeviceArray<T>& probabilities) {
    CheckKernel(
        adasamp::gpu::SumTreeSample(tree.get(), capacity, uniforms.get(), count,
                                    indices.get(), probabilities.get(), stream),
        "sample");
  }
  void Reweight(T amplitude, T decay, const DeviceArray<int64_t>& indices,
                const DeviceArray<T>& utilities, int64_t count) {
    CheckKernel(
        adasamp::gpu::AdaptiveReweight(
            amplitude, decay, indices.get(), utilities.get(), count,
            log_weights.get(), num_leaves, log_scale.get(), tree.get(),
            entropy_tree.get(), capacity, reweight_scratch.get(), stream),
        "reweight");
  }
};

// ---------------------------------------------------------------------------
// The sequential reference.

template <typename T>
void SumUp(std::vector<T>& tree) {
  for (size_t node = tree.size() / 2 - 1; node >= 1; --node) {
    tree[node] = tree[2 * node] + tree[2 * node + 1];
  }
}

template <typename T>
std::vector<T> ReferenceTree(const std::vector<T>& leaves) {
  const int64_t capacity = adasamp::TreeCapacity(leaves.size());
  std::vector<T> tree(2 * capacity, T(0));
  std::copy(leaves.begin(), leaves.end(), tree.begin() + capacity);
  SumUp(tree);
  return tree;
}

// The tree the build and set ops write for `weights`: subnormal weights
// stored as 0, num_leaves in node 0 (cc/kernels/sum_tree_algorithm.h).
template <typename T>
std::vector<T> WeightTree(const std::vector<T>& weights) {
  std::vector<T> stored(weights.size());
  std::transform(weights.begin(), weights.end(), stored.begin(),
                 adasamp::StoredWeight<T>);
  std::vector<T> tree = ReferenceTree(stored);
  tree[adasamp::kNumLeavesNode] = static_cast<T>(weights.size());
  return tree;
}

template <typename T>
struct ReferenceState {
  std::vector<T> log_weights;
  T log_scale = 0;
  std::vector<T> tree, entropy_tree;

  explicit ReferenceState(std::vector<T> initial_log_weights)
      : log_weights(std::move(initial_log_weights)) {
    Cache();
  }

  // Both caches from the log weights and the log-scale.
  void Cache() {
    std::vector<T> leaves(log_weights.size()), entropy(log_weights.size());
    for (size_t i = 0; i < leaves.size(); ++i) {
      const T log_scaled = log_weights[i] - log_scale;
      leaves[i] = adasamp::StoredWeight(std::exp(log_scaled));
      entropy[i] = adasamp::EntropyTerm(leaves[i], log_scaled);
    }
    tree = ReferenceTree(leaves);
    entropy_tree = ReferenceTree(entropy);
    // The reweight keeps the tree's total there (sum_tree_algorithm.h).
    entropy_tree[adasamp::kTreeTotalNode] = tree[1];
  }

  void Reweight(T amplitude, T decay, const std::vector<int64_t>& indices,
                const std::vector<T>& utilities) {
    std::vector<bool> seen(log_weights.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      if (seen[indices[i]]) continue;
      seen[indices[i]] = true;
      log_weights[indices[i]] = adasamp::ReweightedLogWeight(
          log_weights[indices[i]], utilities[i], amplitude, decay);
    }
    Cache();
    if (adasamp::NeedsRescale(tree[1])) {
      const T max = *std::max_element(log_weights.begin(), log_weights.end());
      T sum = 0;
      for (const T l : log_weights) sum += std::exp(l - max);
      log_scale = max + std::log(sum);
      Cache();
    }
  }

  void Upload(DeviceState<T>& device) const {
    device.log_weights.Upload(log_weights);
    device.log_scale.Upload(std::vector<T>{log_scale});
    device.tree.Upload(tree);
    device.entropy_tree.Upload(entropy_tree);
  }
};

// ---------------------------------------------------------------------------
// Checks.

int failures = 0;

template <typename U>
bool Same(U a, U b) {
  return std::memcmp(&a, &b, sizeof(U)) == 0;
}

template <typename U>
void ExpectEqual(const std::string& what, const std::vector<U>& actual,
                 const std::vector<U>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!Same(actual[i], expected[i])) {
      std::printf("FAIL %s: [%zu] = %.17g, expected %.17g\n", what.c_str(), i,
                  static_cast<double>(actual[i]),
                  static_cast<double>(expected[i]));
      ++failures;
      return;
    }
  }
}

// |actual - expected| <= rtol * (|expected| + floor), elementwise.
template <typename T>
void ExpectClose(const std::string& what, const std::vector<T>& actual,
                 const std::vector<T>& expected, double rtol,
                 double floor = 0) {
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual[i], e = expected[i];
    if (!(std::abs(a - e) <= rtol * (std::abs(e) + floor))) {
      std::printf("FAIL %s: [%zu] = %.17g, expected %.17g (rtol %g)\n",
                  what.c_str(), i, a, e, rtol);
      ++failures;
      return;
    }
  }
}

template <typename T>
double Tolerance() {
  return std::is_same<T, double>::value ? 1e-13 : 2e-5;
}

template <typename T>
std::vector<T> RandomWeights(int64_t count, std::mt19937_64& random) {
  std::gamma_distribution<double> gamma(0.5);
  std::uniform_real_distribution<double> uniform;
  std::vector<T> weights(count);
  for (T& w : weights) w = uniform(random) < 0.2 ? T(0) : T(gamma(random));
  weights[random() % count] = 1;
  return weights;
}

template <typename T>
std::vector<T> Uniforms(int64_t count, std::mt19937_64& random) {
  std::uniform_real_distribution<T> uniform;
  std::vector<T> uniforms(count);
  // uniform_real_distribution may round up to 1.
  const T below_one = std::nextafter(T(1), T(0));
  for (T& u : uniforms) u = std::min(uniform(random), below_one);
  return uniforms;
}

std::vector<int64_t> RandomIndices(int64_t count, int64_t num_leaves,
                                   std::mt19937_64& random) {
  std::vector<int64_t> indices(count);
  for (int64_t& i : indices) i = random() % num_leaves;
  return indices;
}

template <typename T>
std::vector<T> ReferenceDraws(const std::vector<T>& tree,
                              const std::vector<T>& uniforms,
                              std::vector<int64_t>* indices) {
  const int64_t capacity = tree.size() / 2;
  std::vector<T> probabilities(uniforms.size());
  indices->resize(uniforms.size());
  for (size_t i = 0; i < uniforms.size(); ++i) {
    (*indices)[i] =
        adasamp::Descend(tree.data(), capacity, uniforms[i] * tree[1]);
    probabilities[i] = tree[capacity + (*indices)[i]] / tree[1];
  }
  return probabilities;
}

template <typename T>
void CheckOps(int64_t num_leaves, cudaStream_t stream) {
  const std::string tag =
      std::string(kDtypeName<T>) + " n=" + std::to_string(num_leaves) + " ";
  std::mt19937_64 random(num_leaves);
  const int64_t max_count = 5000;
  DeviceState<T> state(num_leaves, max_count, stream);

  // Build, then draws.
  std::vector<T> weights = RandomWeights<T>(num_leaves, random);
  std::vector<T> expected_tree = WeightTree(weights);
  state.Build(DeviceArray<T>(weights));
  ExpectEqual(tag + "build", state.tree.Download(), expected_tree);

  std::vector<T> uniforms = Uniforms<T>(100000, random);
  uniforms[0] = 0;
  uniforms[1] = std::nextafter(T(1), T(0));
  DeviceArray<int64_t> drawn(uniforms.size());
  DeviceArray<T> probabilities(uniforms.size());
  state.Sample(DeviceArray<T>(uniforms), uniforms.size(), drawn, probabilities);
  std::vector<int64_t> expected_drawn;
  const std::vector<T> expected_probabilities =
      ReferenceDraws(expected_tree, uniforms, &expected_drawn);
  ExpectEqual(tag + "sample indices", drawn.Download(), expected_drawn);
  ExpectEqual(tag + "sample probabilities", probabilities.Download(),
              expected_probabilities);

  // Set, repeated indices included: the last weight wins. The one-block path
  // (B <= 1024) and the sorting path.
  for (const int64_t count :
       {int64_t{1}, int64_t{100}, int64_t{1024}, int64_t{1025}, max_count}) {
    const std::vector<int64_t> indices =
        RandomIndices(count, num_leaves, random);
    const std::vector<T> new_weights = RandomWeights<T>(count, random);
    for (int64_t i = 0; i < count; ++i) weights[indices[i]] = new_weights[i];
    state.Set(DeviceArray<int64_t>(indices), DeviceArray<T>(new_weights),
              count);
    expected_tree = WeightTree(weights);
    ExpectEqual(tag + "set B=" + std::to_string(count), state.tree.Download(),
                expected_tree);
  }

  // Bad input leaves the tree untouched, and draws -1.
  const std::vector<int64_t> bad_index = {0, num_leaves};
  state.Set(DeviceArray<int64_t>(bad_index),
            DeviceArray<T>(std::vector<T>{T(1), T(1)}), 2);
  state.Build(DeviceArray<T>(std::vector<T>(num_leaves, -T(1))));
  ExpectEqual(tag + "bad set or build", state.tree.Download(), expected_tree);
  const std::vector<T> bad_uniforms = {T(1), -T(0.5),
                                       std::numeric_limits<T>::quiet_NaN()};
  state.Sample(DeviceArray<T>(bad_uniforms), 3, drawn, probabilities);
  const std::vector<int64_t> bad_drawn = drawn.Download();
  if (bad_drawn[0] != -1 || bad_drawn[1] != -1 || bad_drawn[2] != -1) {
    std::printf("FAIL %sbad uniforms drew %lld\n", tag.c_str(),
                static_cast<long long>(bad_drawn[0]));
    ++failures;
  }

  // Reweight: the one-block path (B <= 1024) and the sorting path.
  std::normal_distribution<T> normal;
  std::vector<T> log_weights(num_leaves);
  for (T& l : log_weights) l = normal(random);
  ReferenceState<T> reference(log_weights);
  reference.Upload(state);
  for (const int64_t count :
       {int64_t{1}, int64_t{100}, int64_t{1024}, int64_t{1025}, max_count}) {
    const std::vector<int64_t> indices =
        RandomIndices(count, num_leaves, random);
    std::vector<T> utilities(count);
    for (T& u : utilities) u = normal(random);
    reference.Reweight(T(0.8), T(0.9), indices, utilities);
    state.Reweight(T(0.8), T(0.9), DeviceArray<int64_t>(indices),
                   DeviceArray<T>(utilities), count);
    const std::string what = tag + "reweight B=" + std::to_string(count);
    // No exp in the log weights: they match bit for bit.
    ExpectEqual(what + " log weights", state.log_weights.Download(),
                reference.log_weights);
    ExpectClose(what + " tree", state.tree.Download(), reference.tree,
                Tolerance<T>());
    // Its sums mix signs: the tolerance scales with the largest.
    double largest = 0;
    for (const T h : reference.entropy_tree) {
      largest = std::max(largest, std::abs(double{h}));
    }
    ExpectClose(what + " entropy tree", state.entropy_tree.Download(),
                reference.entropy_tree, Tolerance<T>(), largest);
  }

  // A bad utility leaves everything untouched.
  const std::vector<T> tree_before = state.tree.Download();
  state.Reweight(
      T(1), T(0.9), DeviceArray<int64_t>(std::vector<int64_t>{0}),
      DeviceArray<T>(std::vector<T>{std::numeric_limits<T>::infinity()}), 1);
  ExpectEqual(tag + "bad reweight", state.tree.Download(), tree_before);

  // Utilities of 300 push the total out of range: a rescale on the device.
  std::vector<int64_t> all(num_leaves);
  for (int64_t i = 0; i < num_leaves; ++i) all[i] = i;
  const int64_t count = std::min<int64_t>(num_leaves, max_count);
  const std::vector<int64_t> indices(all.begin(), all.begin() + count);
  const std::vector<T> utilities(count, T(300));
  reference.Reweight(T(1), T(0.5), indices, utilities);
  state.Reweight(T(1), T(0.5), DeviceArray<int64_t>(indices),
                 DeviceArray<T>(utilities), count);
  ExpectClose(tag + "rescale log-scale", state.log_scale.Download(),
              std::vector<T>{reference.log_scale}, Tolerance<T>());
  ExpectClose(tag + "rescale tree", state.tree.Download(), reference.tree,
              10 * Tolerance<T>());
}

int RunChecks() {
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (const int64_t num_leaves : {int64_t{1}, int64_t{5}, int64_t{1000},
                                   int64_t{70000}, int64_t{(1 << 20) + 3}}) {
    CheckOps<double>(num_leaves, stream);
    CheckOps<float>(num_leaves, stream);
  }
  Check(cudaStreamSynchronize(stream), "kernels");
  std::printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}

// ---------------------------------------------------------------------------
// Benchmarks, float64 (the library's default dtype).

// Milliseconds per call of `run`, by CUDA events around `repeats` calls.
template <class F>
double Milliseconds(cudaStream_t stream, int repeats, F run) {
  run();  // warm-up
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "event");
  Check(cudaEventCreate(&stop), "event");
  Check(cudaEventRecord(start, stream), "event");
  for (int r = 0; r < repeats; ++r) run();
  Check(cudaEventRecord(stop, stream), "event");
  Check(cudaEventSynchronize(stop), "kernels");
  float milliseconds = 0;
  Check(cudaEventElapsedTime(&milliseconds, start, stop), "event");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return milliseconds / repeats;
}

// `count` indices in [0, num_leaves), distinct where count <= num_leaves.
std::vector<int64_t> BatchIndices(int64_t count, int64_t num_leaves,
                                  std::mt19937_64& random,
                                  int64_t* num_unique) {
  if (count > num_leaves) {
    std::vector<int64_t> indices = RandomIndices(count, num_leaves, random);
    std::vector<int64_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    *num_unique = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
    return indices;
  }
  std::vector<int64_t> all(num_leaves);
  for (int64_t i = 0; i < num_leaves; ++i) all[i] = i;
  for (int64_t i = 0; i < count; ++i) {
    std::swap(all[i], all[i + random() % (num_leaves - i)]);
  }
  *num_unique = count;
  return std::vector<int64_t>(all.begin(), all.begin() + count);
}

int RunBenchmarks() {
  using T = double;
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  int device, driver, runtime;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties;
  Check(cudaGetDeviceProperties(&properties, device), "properties");
  Check(cudaDriverGetVersion(&driver), "driver");
  Check(cudaRuntimeGetVersion(&runtime), "runtime");
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  std::printf("device: %s (sm_%d%d), CUDA driver %d, runtime %d, %s\n\n",
              properties.name, properties.major, properties.minor, driver,
              runtime, date);
  std::printf(
      "| n | B | sample | draws/s | set | unique | set: unique updates/s "
      "| reweight | reweight: unique updates/s |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937_64 random(0);
  for (const int64_t num_leaves : {50000, 1000000, 10000000}) {
    const int64_t max_count = 1 << 20;
    DeviceState<T> state(num_leaves, max_count, stream);
    ReferenceState<T>(std::vector<T>(num_leaves, T(0))).Upload(state);
    for (const int64_t count : {int64_t{128}, int64_t{4096}, max_count}) {
      const DeviceArray<T> uniforms(Uniforms<T>(count, random));
      DeviceArray<int64_t> drawn(count);
      DeviceArray<T> probabilities(count);
      int64_t unique;
      const DeviceArray<int64_t> indices(
          BatchIndices(count, num_leaves, random, &unique));
      const DeviceArray<T> values(Uniforms<T>(count, random));
      const int repeats = count >= max_count ? 20 : 200;
      const double sample = Milliseconds(stream, repeats, [&] {
        state.Sample(uniforms, count, drawn, probabilities);
      });
      const double set = Milliseconds(
          stream, repeats, [&] { state.Set(indices, values, count); });
      const double reweight = Milliseconds(stream, repeats, [&] {
        state.Reweight(T(1), T(0.9), indices, values, count);
      });
      std::printf(
          "| %lld | %lld | %.1f us | %.3g | %.1f us | %lld | %.3g | %.1f us "
          "| %.3g |\n",
          static_cast<long long>(num_leaves), static_cast<long long>(count),
          1e3 * sample, count / (1e-3 * sample), 1e3 * set,
          static_cast<long long>(unique), unique / (1e-3 * set), 1e3 * reweight,
          unique / (1e-3 * reweight));
    }
  }

  // One training step's sampler work at n = 50000, B = 100: draw, then
  // reweight the drawn indices, back to back on the device.
  const int64_t num_leaves = 50000, count = 100;
  DeviceState<T> state(num_leaves, count, stream);
  ReferenceState<T>(std::vector<T>(num_leaves, T(0))).Upload(state);
  const DeviceArray<T> uniforms(Uniforms<T>(count, random));
  const DeviceArray<T> utilities(Uniforms<T>(count, random));
  DeviceArray<int64_t> drawn(count);
  DeviceArray<T> probabilities(count);
  const double step = Milliseconds(stream, 1000, [&] {
    state.Sample(uniforms, count, drawn, probabilities);
    state.Reweight(T(1), T(0.9), drawn, utilities, count);
  });
  std::printf("\nper step (n = %lld, B = %lld): sample + reweight = %.1f us\n",
              static_cast<long long>(num_leaves), static_cast<long long>(count),
              1e3 * step);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "check") return RunChecks();
  if (mode == "bench") return RunBenchmarks();
  std::fprintf(stderr, "usage: %s check|bench\n", argv[0]);
  return 2;
}
