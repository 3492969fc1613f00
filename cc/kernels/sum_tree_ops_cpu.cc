// The CPU functors of the sum-tree ops (sum_tree_ops.h): each checks the
// values it reads, with the messages of sum_tree_checks.h, then runs the
// TF-free algorithm of sum_tree_cpu.h (descend_cpu.h and philox_cpu.h for
// draws), so bad input never leaves a tree half-written. A large draw is
// shared with an intra-op thread pool: the op's, or XLA's
// (SumTreeSampleOnCpu, SumTreeDrawOnCpu).

#define EIGEN_USE_THREADS

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "cc/kernels/descend_cpu.h"
#include "cc/kernels/intra_op_pool.h"
#include "cc/kernels/philox_cpu.h"
#include "cc/kernels/sum_tree_algorithm.h"
#include "cc/kernels/sum_tree_checks.h"
#include "cc/kernels/sum_tree_cpu.h"
#include "cc/kernels/sum_tree_ops.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/platform/threadpool.h"

namespace adasamp {
namespace functor {
namespace {

using ::tensorflow::errors::InvalidArgument;
using CPUDevice = Eigen::ThreadPoolDevice;

// A batch goes to the intra-op pool only with at least this many draws per
// thread: for fewer, waking a pool thread costs much of what it saves.
constexpr int64_t kMinDrawsPerShard = 2048;

// Draws that a thread of a shared batch takes at a time.
constexpr int64_t kDrawsPerChunk = 1024;

// TensorFlow's intra-op pool, that of the device the op runs on.
class OpThreadPool : public IntraOpPool {
 public:
  explicit OpThreadPool(OpKernelContext* ctx)
      : workers_(ctx->device()->tensorflow_cpu_worker_threads()) {}

  int64_t NumThreads() const override {
    return workers_ == nullptr ? 0 : workers_->num_threads;
  }
  void Schedule(std::function<void()> task) const override {
    workers_->workers->Schedule(std::move(task));
  }

 private:
  const tensorflow::DeviceBase::CpuWorkerThreads* workers_;
};

// Runs work(begin, end) over [0, total) in chunks of `chunk` that the calling
// thread and `num_helpers` tasks on `pool` take in turn. The caller waits
// only for chunks already taken, never for a task still queued behind other
// work (a pool thread can start late); a task that starts after the last
// chunk is taken returns at once, touching only `progress`.
void ShareWork(const IntraOpPool& pool, int64_t num_helpers, int64_t total,
               int64_t chunk,
               const std::function<void(int64_t, int64_t)>& work) {
  struct Progress {
    explicit Progress(int64_t total) : total(total) {}
    bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return done == total;
    }
    const int64_t total;
    std::atomic<int64_t> next{0};
    absl::Mutex mu;
    int64_t done ABSL_GUARDED_BY(mu) = 0;
  };
  auto progress = std::make_shared<Progress>(total);
  // `work` is only called for a chunk taken before the last, while the
  // caller still waits, so the reference to it stays valid.
  auto take_chunks = [progress, chunk, &work] {
    for (;;) {
      const int64_t begin = progress->next.fetch_add(chunk);
      if (begin >= progress->total) return;
      const int64_t end = std::min(progress->total, begin + chunk);
      work(begin, end);
      absl::MutexLock lock(&progress->mu);
      progress->done += end - begin;
    }
  };
  for (int64_t i = 0; i < num_helpers; ++i) pool.Schedule(take_chunks);
  take_chunks();
  absl::MutexLock lock(&progress->mu);
  progress->mu.Await(absl::Condition(progress.get(), &Progress::Finished));
}

// The threads to draw `num_draws` with: the caller's, and helpers from
// `pool` for a large batch.
int64_t DrawThreads(const IntraOpPool& pool, int64_t num_draws) {
  return std::max<int64_t>(
      1, std::min<int64_t>(pool.NumThreads(), num_draws / kMinDrawsPerShard));
}

// Draws leaves for `num_draws` uniforms: uniforms(begin, end, buffer) returns
// the uniforms of draws [begin, end), at most kDrawsPerChunk of them, in
// `buffer` or elsewhere. Refuses a tree that cannot be sampled: a total not
// finite and positive, or a draw that ends where a tree of valid weights
// cannot (cpu::FirstImpossibleDraw).
template <typename T, typename Uniforms>
absl::Status DrawLeaves(const IntraOpPool& pool,
                        typename TTypes<T>::ConstFlat tree, int64_t num_draws,
                        const Uniforms& uniforms,
                        typename TTypes<int64_t>::Flat indices,
                        typename TTypes<T>::Flat probabilities) {
  TF_RETURN_IF_ERROR(CheckSampleableTotal(tree(1)));
  const int64_t capacity = tree.size() / 2;
  const cpu::Walks<T> walks = cpu::MakeWalks(tree.data(), Log2(capacity));
  auto draw = [&](int64_t begin, int64_t end) {
    T buffer[kDrawsPerChunk];
    for (int64_t chunk = begin; chunk < end; chunk += kDrawsPerChunk) {
      const int64_t chunk_end = std::min(end, chunk + kDrawsPerChunk);
      cpu::Descend(walks, uniforms(chunk, chunk_end, buffer), chunk_end - chunk,
                   indices.data() + chunk, probabilities.data() + chunk);
    }
  };
  const int64_t num_threads = DrawThreads(pool, num_draws);
  if (num_threads == 1) {
    draw(0, num_draws);
  } else {
    ShareWork(pool, num_threads - 1, num_draws, kDrawsPerChunk, draw);
  }
  const int64_t bad = cpu::FirstImpossibleDraw(tree.data(), capacity,
                                               indices.data(), num_draws);
  if (bad >= 0) {
    return InvalidArgument(
        "cannot sample: the tree is not a sum tree of nonnegative weights (",
        "draw ", bad, " ended on leaf ", indices(bad), " of weight ",
        tree(capacity + indices(bad)), " with the total ", tree(1), ")");
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
struct SumTreeBuild<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    if (!cpu::BuildTree(weights.data(), weights.size(), tree.data(),
                        tree.size() / 2)) {
      return OverflowError<T>();
    }
    return absl::OkStatus();
  }
};

template <typename T>
struct SumTreeSet<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, int64_t num_leaves,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat weights,
                          typename TTypes<T>::Flat tree) {
    TF_RETURN_IF_ERROR(CheckNumLeaves(tree(kNumLeavesNode), num_leaves));
    TF_RETURN_IF_ERROR(CheckIndices(indices, num_leaves));
    TF_RETURN_IF_ERROR(CheckWeights<T>(weights));
    if (!cpu::SetLeaves(indices.data(), weights.data(), indices.size(),
                        num_leaves, tree.data(), tree.size() / 2)) {
      return OverflowError<T>();
    }
    return absl::OkStatus();
  }
};

template <typename T>
absl::Status SumTreeSampleOnCpu(const IntraOpPool& pool,
                                typename TTypes<T>::ConstFlat tree,
                                typename TTypes<T>::ConstFlat uniforms,
                                typename TTypes<int64_t>::Flat indices,
                                typename TTypes<T>::Flat probabilities) {
  const int64_t num_draws = uniforms.size();
  for (int64_t i = 0; i < num_draws; ++i) {
    if (!(uniforms(i) >= T(0) && uniforms(i) < T(1))) {
      return InvalidArgument("uniforms[", i, "] = ", uniforms(i),
                             " is outside [0, 1)");
    }
  }
  auto given = [&](int64_t begin, int64_t, T*) {
    return uniforms.data() + begin;
  };
  return DrawLeaves<T>(pool, tree, num_draws, given, indices, probabilities);
}

template <typename T>
absl::Status SumTreeDrawOnCpu(const IntraOpPool& pool,
                              typename TTypes<T>::ConstFlat tree,
                              bool stratified,
                              typename TTypes<int64_t>::Flat rng_state,
                              typename TTypes<int64_t>::Flat indices,
                              typename TTypes<T>::Flat probabilities) {
  const int64_t num_draws = indices.size();
  const Philox philox = PhiloxFromState(rng_state.data());
  auto generated = [&](int64_t begin, int64_t end, T* buffer) {
    cpu::DrawUniforms<T>(philox, begin, end, num_draws, stratified, buffer);
    return buffer;
  };
  TF_RETURN_IF_ERROR(
      DrawLeaves<T>(pool, tree, num_draws, generated, indices, probabilities));
  AdvancePhiloxState(rng_state.data(), num_draws);
  return absl::OkStatus();
}

template <typename T>
struct SumTreeSample<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree,
                          typename TTypes<T>::ConstFlat uniforms,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    return SumTreeSampleOnCpu<T>(OpThreadPool(ctx), tree, uniforms, indices,
                                 probabilities);
  }
};

template <typename T>
struct SumTreeDraw<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx,
                          typename TTypes<T>::ConstFlat tree, bool stratified,
                          typename TTypes<int64_t>::Flat rng_state,
                          typename TTypes<int64_t>::Flat indices,
                          typename TTypes<T>::Flat probabilities) {
    return SumTreeDrawOnCpu<T>(OpThreadPool(ctx), tree, stratified, rng_state,
                               indices, probabilities);
  }
};

template <typename T>
struct AdaptiveReweight<CPUDevice, T> {
  absl::Status operator()(OpKernelContext* ctx, T amplitude, T decay,
                          typename TTypes<int64_t>::ConstFlat indices,
                          typename TTypes<T>::ConstFlat utilities,
                          typename TTypes<T>::Flat log_weights,
                          typename TTypes<T>::Scalar log_scale,
                          typename TTypes<T>::Flat tree,
                          typename TTypes<T>::Flat entropy_tree) {
    const int64_t num_leaves = log_weights.size();
    TF_RETURN_IF_ERROR(CheckIndices(indices, num_leaves));
    const cpu::SamplerState<T> state = {log_weights.data(),  num_leaves,
                                        log_scale.data(),    tree.data(),
                                        entropy_tree.data(), tree.size() / 2};
    const cpu::RefusedUpdate refused =
        cpu::Reweight(amplitude, decay, indices.data(), utilities.data(),
                      indices.size(), state);
    const int64_t at = refused.position;
    switch (refused.reason) {
      case cpu::RefusedUpdate::kNone:
        return absl::OkStatus();
      case cpu::RefusedUpdate::kUtilityNotFinite:
        return InvalidArgument("utilities[", at, "] = ", utilities(at),
                               " is not finite");
      case cpu::RefusedUpdate::kLogWeightNotFinite:
        // The log weight, not the product alone: a finite product can still
        // take a large log weight past the dtype's range.
        return InvalidArgument("the new log weight of example ", indices(at),
                               ", decay * log_weight + amplitude * utilities[",
                               at, "] = ", decay, " * ",
                               log_weights(indices(at)), " + ", amplitude,
                               " * ", utilities(at), ", overflows");
    }
    return absl::InternalError("unknown refusal");
  }
};

#define DEFINE_CPU_FUNCTORS(T)                                               \
  template struct SumTreeBuild<CPUDevice, T>;                                \
  template struct SumTreeSet<CPUDevice, T>;                                  \
  template struct SumTreeSample<CPUDevice, T>;                               \
  template struct SumTreeDraw<CPUDevice, T>;                                 \
  template struct AdaptiveReweight<CPUDevice, T>;                            \
  template absl::Status SumTreeSampleOnCpu<T>(                               \
      const IntraOpPool&, TTypes<T>::ConstFlat, TTypes<T>::ConstFlat,        \
      TTypes<int64_t>::Flat, TTypes<T>::Flat);                               \
  template absl::Status SumTreeDrawOnCpu<T>(                                 \
      const IntraOpPool&, TTypes<T>::ConstFlat, bool, TTypes<int64_t>::Flat, \
      TTypes<int64_t>::Flat, TTypes<T>::Flat);
DEFINE_CPU_FUNCTORS(float);
DEFINE_CPU_FUNCTORS(double);
#undef DEFINE_CPU_FUNCTORS

}  // namespace functor
}  // namespace adasamp
