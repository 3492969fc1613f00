// Draw permits: how far an adaptive tf.data pipeline may draw ahead of the
// training step (tf_adasamp/data.py, `max_lag`). A count in a resource: the
// step releases one permit per update, and DrawPermitDataset takes one before
// it passes on each element, waiting while there is none.
//
// The wait belongs to the dataset, not to an op inside a map function, so
// that tearing down the pipeline above it ends it. tf.data cancels an
// iterator's inputs through the cancellation manager it gave them at
// initialization (an async iterator such as prefetch or a parallel map
// cancels its own when it is destroyed, as `Dataset.take` does to its input
// once done); an op in a map function sees only the manager of the caller's
// GetNext, cancelled when the whole iterator is deleted. A blocking op there
// (this library once used a FIFOQueue dequeue) hangs `take`'s teardown.

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/mutex.h"

namespace adasamp {
namespace {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::CancellationManager;
using ::tensorflow::CancellationToken;
using ::tensorflow::DataTypeVector;
using ::tensorflow::FunctionLibraryRuntime;
using ::tensorflow::HandleFromInput;
using ::tensorflow::LookupOrCreateResource;
using ::tensorflow::mutex;
using ::tensorflow::mutex_lock;
using ::tensorflow::Node;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Tensor;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::DatasetIterator;
using ::tensorflow::data::IteratorBase;
using ::tensorflow::data::IteratorContext;
using ::tensorflow::data::IteratorStateReader;
using ::tensorflow::data::IteratorStateWriter;
using ::tensorflow::data::SerializationContext;
using ::tensorflow::errors::InvalidArgument;

class DrawPermits : public ::tensorflow::ResourceBase {
 public:
  // Waits this long or longer have no limit: a deadline further away would
  // overflow the clock's range (about 292 years).
  static constexpr double kUnlimitedSeconds = 1e9;

  std::string DebugString() const override {
    mutex_lock lock(mu_);
    return absl::StrCat("DrawPermits(", available_, ")");
  }

  // Adds `count` >= 0 permits, unless the count would pass int64's range.
  absl::Status Release(int64_t count) {
    {
      mutex_lock lock(mu_);
      if (count > std::numeric_limits<int64_t>::max() - available_) {
        return InvalidArgument("count = ", count,
                               " would take the permits past 2**63 - 1: ",
                               available_, " are available");
      }
      available_ += count;
    }
    changed_.notify_all();
    return absl::OkStatus();
  }

  // Sets `count` permits for a new iterator, and returns its generation.
  // The permits are the newest iterator's alone: an older one that went on
  // drawing (left alive by a failed `fit`'s traceback, or read in turn with
  // the new one) would take the permits that the new one's updates release,
  // and the new one would wait for updates already reported.
  int64_t Reset(int64_t count) {
    int64_t generation;
    {
      mutex_lock lock(mu_);
      available_ = count;
      generation = ++generation_;
    }
    changed_.notify_all();
    return generation;
  }

  // Takes a permit for the iterator of `generation`, waiting while there is
  // none; CancelledError instead if one of `cancellations` (null ones
  // skipped) is cancelled first, FailedPreconditionError once a newer
  // iterator has begun, and DeadlineExceededError if none comes in
  // `timeout_seconds` (>= 0; inf or anything from kUnlimitedSeconds on: no
  // limit).
  absl::Status Acquire(int64_t generation,
                       absl::Span<CancellationManager* const> cancellations,
                       double timeout_seconds) {
    bool cancelled = false;
    const auto cancel = [this, &cancelled] {
      {
        mutex_lock lock(mu_);
        cancelled = true;
      }
      changed_.notify_all();
    };
    std::vector<std::pair<CancellationManager*, CancellationToken>> callbacks;
    for (CancellationManager* cancellation : cancellations) {
      if (cancellation == nullptr) continue;
      const CancellationToken token = cancellation->get_cancellation_token();
      if (!cancellation->RegisterCallback(token, cancel)) {
        cancel();  // Already cancelled.
        break;
      }
      callbacks.emplace_back(cancellation, token);
    }
    absl::Status status;
    {
      mutex_lock lock(mu_);
      // No limit is not 0 seconds: a subnormal timeout reads as 0 where
      // TensorFlow flushes denormals, and must still time out.
      const bool unlimited = timeout_seconds >= kUnlimitedSeconds;
      const auto deadline =
          std::chrono::steady_clock::now() +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
              std::chrono::duration<double>(unlimited ? 0 : timeout_seconds));
      bool timed_out = false;
      const auto superseded = [this, generation]() TF_EXCLUSIVE_LOCKS_REQUIRED(
                                  mu_) { return generation_ != generation; };
      while (available_ == 0 && !cancelled && !superseded() && !timed_out) {
        if (unlimited) {
          changed_.wait(lock);
          continue;
        }
        const auto left = deadline - std::chrono::steady_clock::now();
        timed_out = left <= left.zero() ||
                    (changed_.wait_for(lock, left) == std::cv_status::timeout &&
                     available_ == 0 && !cancelled && !superseded());
      }
      if (cancelled) {
        status = absl::CancelledError("a draw waiting for a permit");
      } else if (superseded()) {
        status = absl::FailedPreconditionError(
            "a newer iterator of this stage has begun, and a stage with a lag "
            "bound draws for one iterator at a time: its updates now release "
            "the newer iterator's draws; draw from the newest iterator");
      } else if (timed_out) {
        status = absl::DeadlineExceededError(absl::StrCat(
            "no update reported for ", timeout_seconds,
            " s: with a lag bound, call stage.update(indices, utilities) "
            "once per consumed batch, or make the stage with max_lag=None"));
      } else {
        --available_;
      }
    }
    // Without the lock: a callback in flight takes it, and deregistering
    // waits for it.
    for (const auto& [cancellation, token] : callbacks) {
      cancellation->DeregisterCallback(token);
    }
    return status;
  }

 private:
  mutable mutex mu_;
  ::tensorflow::condition_variable changed_;
  int64_t available_ TF_GUARDED_BY(mu_) = 0;
  // How many iterators have begun (Reset); the last one owns the permits.
  int64_t generation_ TF_GUARDED_BY(mu_) = 0;
};

absl::Status GetPermits(OpKernelContext* ctx, int input,
                        ::tensorflow::core::RefCountPtr<DrawPermits>* permits) {
  return LookupOrCreateResource<DrawPermits>(
      ctx, HandleFromInput(ctx, input), permits, [](DrawPermits** created) {
        *created = new DrawPermits;
        return absl::OkStatus();
      });
}

class ReleaseDrawPermitsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& count = ctx->input(1);
    OP_REQUIRES(ctx, ::tensorflow::TensorShapeUtils::IsScalar(count.shape()),
                InvalidArgument("count must be a scalar, got shape ",
                                count.shape().DebugString()));
    const int64_t value = count.scalar<int64_t>()();
    OP_REQUIRES(ctx, value >= 0,
                InvalidArgument("count must be >= 0, got ", value));
    ::tensorflow::core::RefCountPtr<DrawPermits> permits;
    OP_REQUIRES_OK(ctx, GetPermits(ctx, 0, &permits));
    OP_REQUIRES_OK(ctx, permits->Release(value));
  }
};

// Runs the function `f`, then releases one permit whatever `f`'s outcome,
// then passes that outcome on: a try/finally around a stage's update. In a
// graph an op that fails ends the run before any op ordered after it, so a
// release after a rejected update would never run, and the pipeline's next
// draw would wait for a permit that no update will release.
class CallThenReleaseDrawPermitOp : public AsyncOpKernel {
 public:
  explicit CallThenReleaseDrawPermitOp(OpKernelConstruction* ctx)
      : AsyncOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("f", &function_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    ::tensorflow::core::RefCountPtr<DrawPermits> permits;
    OP_REQUIRES_OK_ASYNC(ctx, GetPermits(ctx, 0, &permits), done);
    FunctionLibraryRuntime* library = ctx->function_library();
    FunctionLibraryRuntime::Handle handle;
    absl::Status instantiated =
        library == nullptr
            ? absl::InternalError("no function library to run f")
            : library->Instantiate(function_.name(),
                                   ::tensorflow::AttrSlice(&function_.attr()),
                                   &handle);
    if (!instantiated.ok()) {
      ReleaseOne(*permits, instantiated, ctx);
      done();
      return;
    }
    FunctionLibraryRuntime::Options options(ctx->step_id());
    options.rendezvous = ctx->rendezvous();
    options.cancellation_manager = ctx->cancellation_manager();
    options.collective_executor = ctx->collective_executor();
    options.step_container = ctx->step_container();
    options.runner = ctx->runner();
    options.run_all_kernels_inline = ctx->run_all_kernels_inline();
    std::vector<Tensor> args;
    for (int i = 1; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    auto* results = new std::vector<Tensor>;
    // The callback must be copyable: it holds the reference by hand.
    DrawPermits* held = permits.release();
    library->Run(options, handle, args, results,
                 [ctx, done, results, held](const absl::Status& status) {
                   ::tensorflow::core::ScopedUnref unref(held);
                   delete results;
                   ReleaseOne(*held, status, ctx);
                   done();
                 });
  }

 private:
  // Releases a permit and sets the op's status: `outcome`, or the release's
  // own error if `outcome` is OK.
  static void ReleaseOne(DrawPermits& permits, const absl::Status& outcome,
                         OpKernelContext* ctx) {
    const absl::Status released = permits.Release(1);
    ctx->SetStatus(outcome.ok() ? released : outcome);
  }

  ::tensorflow::NameAttrList function_;
};

class DrawPermitDatasetOp : public ::tensorflow::data::UnaryDatasetOpKernel {
 public:
  using UnaryDatasetOpKernel::UnaryDatasetOpKernel;

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase* input,
                   DatasetBase** output) override {
    int64_t initial_permits = 0;
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(
                            ctx, "initial_permits", &initial_permits));
    OP_REQUIRES(
        ctx, initial_permits >= 1,
        InvalidArgument("initial_permits must be >= 1, got ", initial_permits));
    double timeout_seconds = 0;
    OP_REQUIRES_OK(ctx, ::tensorflow::data::ParseScalarArgument(
                            ctx, "timeout_seconds", &timeout_seconds));
    OP_REQUIRES(
        ctx, timeout_seconds >= 0,
        InvalidArgument("timeout_seconds must be >= 0, got ", timeout_seconds));
    ::tensorflow::core::RefCountPtr<DrawPermits> permits;
    OP_REQUIRES_OK(ctx, GetPermits(ctx, 1, &permits));
    *output = new Dataset(ctx, input, ctx->input(1), std::move(permits),
                          initial_permits, timeout_seconds);
  }

 private:
  class Dataset : public DatasetBase {
   public:
    Dataset(OpKernelContext* ctx, const DatasetBase* input,
            const Tensor& permits_handle,
            ::tensorflow::core::RefCountPtr<DrawPermits> permits,
            int64_t initial_permits, double timeout_seconds)
        : DatasetBase(::tensorflow::data::DatasetContext(ctx)),
          input_(input),
          permits_handle_(permits_handle),
          permits_(std::move(permits)),
          initial_permits_(initial_permits),
          timeout_seconds_(timeout_seconds) {
      input_->Ref();
    }

    ~Dataset() override { input_->Unref(); }

    std::unique_ptr<IteratorBase> MakeIteratorInternal(
        const std::string& prefix) const override {
      return std::make_unique<Iterator>(
          Iterator::Params{this, absl::StrCat(prefix, "::DrawPermit")});
    }

    const DataTypeVector& output_dtypes() const override {
      return input_->output_dtypes();
    }
    const std::vector<PartialTensorShape>& output_shapes() const override {
      return input_->output_shapes();
    }
    std::string DebugString() const override {
      return "DrawPermitDatasetOp::Dataset";
    }
    int64_t CardinalityInternal(
        ::tensorflow::data::CardinalityOptions options) const override {
      return input_->Cardinality(options);
    }
    absl::Status InputDatasets(
        std::vector<const DatasetBase*>* inputs) const override {
      inputs->push_back(input_);
      return absl::OkStatus();
    }
    absl::Status CheckExternalState() const override {
      return absl::FailedPreconditionError(
          absl::StrCat(DebugString(),
                       " waits for permits that the training "
                       "step releases"));
    }

   protected:
    absl::Status AsGraphDefInternal(SerializationContext* ctx,
                                    DatasetGraphDefBuilder* b,
                                    Node** output) const override {
      Node* input;
      TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, input_, &input));
      Node* permits;
      TF_RETURN_IF_ERROR(b->AddDatasetOrTensor(ctx, permits_handle_, &permits));
      Node* initial_permits;
      TF_RETURN_IF_ERROR(b->AddScalar(initial_permits_, &initial_permits));
      Node* timeout_seconds;
      TF_RETURN_IF_ERROR(b->AddScalar(timeout_seconds_, &timeout_seconds));
      return b->AddDataset(
          this, {input, permits, initial_permits, timeout_seconds}, output);
    }

   private:
    class Iterator : public DatasetIterator<Dataset> {
     public:
      explicit Iterator(const Params& params)
          : DatasetIterator<Dataset>(params) {}

      absl::Status Initialize(IteratorContext* ctx) override {
        mutex_lock lock(mu_);
        // A new iterator: max_lag + 1 steps' draws may precede the first
        // update.
        generation_ = dataset()->permits_->Reset(dataset()->initial_permits_);
        teardown_ = ctx->cancellation_manager();
        return dataset()->input_->MakeIterator(ctx, this, prefix(),
                                               &input_impl_);
      }

      absl::Status GetNextInternal(IteratorContext* ctx,
                                   std::vector<Tensor>* out_tensors,
                                   bool* end_of_sequence) override {
        // Waiting is not work: autotuning should not count it.
        RecordStop(ctx);
        const absl::Status acquired = dataset()->permits_->Acquire(
            generation_.load(), {teardown_, ctx->cancellation_manager()},
            dataset()->timeout_seconds_);
        RecordStart(ctx);
        TF_RETURN_IF_ERROR(acquired);
        mutex_lock lock(mu_);
        return input_impl_->GetNext(ctx, out_tensors, end_of_sequence);
      }

     protected:
      std::shared_ptr<::tensorflow::data::model::Node> CreateNode(
          IteratorContext* ctx,
          ::tensorflow::data::model::Node::Args args) const override {
        return ::tensorflow::data::model::MakeKnownRatioNode(std::move(args),
                                                             /*ratio=*/1);
      }

      // The permits are not saved: a restored iterator starts afresh.
      absl::Status SaveInternal(SerializationContext* ctx,
                                IteratorStateWriter* writer) override {
        mutex_lock lock(mu_);
        return SaveInput(ctx, writer, input_impl_);
      }
      absl::Status RestoreInternal(IteratorContext* ctx,
                                   IteratorStateReader* reader) override {
        mutex_lock lock(mu_);
        generation_ = dataset()->permits_->Reset(dataset()->initial_permits_);
        return RestoreInput(ctx, reader, input_impl_);
      }

     private:
      // The manager tf.data gave this iterator at initialization: cancelled
      // when the iterator above it tears down, even if the whole pipeline
      // lives on. Set once, before any GetNext.
      CancellationManager* teardown_ = nullptr;
      // This iterator's generation of the permits (DrawPermits::Reset); read
      // by a draw without `mu_`, as it waits before taking it.
      std::atomic<int64_t> generation_{0};
      mutex mu_;
      std::unique_ptr<IteratorBase> input_impl_ TF_GUARDED_BY(mu_);
    };

    const DatasetBase* const input_;
    const Tensor permits_handle_;
    const ::tensorflow::core::RefCountPtr<DrawPermits> permits_;
    const int64_t initial_permits_;
    const double timeout_seconds_;
  };
};

using ::tensorflow::DEVICE_CPU;
REGISTER_KERNEL_BUILDER(Name("AdaSamp>DrawPermitsHandle").Device(DEVICE_CPU),
                        ::tensorflow::ResourceHandleOp<DrawPermits>);
REGISTER_KERNEL_BUILDER(Name("AdaSamp>ReleaseDrawPermits").Device(DEVICE_CPU),
                        ReleaseDrawPermitsOp);
REGISTER_KERNEL_BUILDER(
    Name("AdaSamp>CallThenReleaseDrawPermit").Device(DEVICE_CPU),
    CallThenReleaseDrawPermitOp);
REGISTER_KERNEL_BUILDER(Name("AdaSamp>DrawPermitDataset").Device(DEVICE_CPU),
                        DrawPermitDatasetOp);

}  // namespace
}  // namespace adasamp
