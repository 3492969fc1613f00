// The resource variables of a sum-tree OpKernel, looked up and locked for
// the length of its Compute.
//
// The ops read and write their variables' buffers in place, so each holds
// the variables' locks while it runs: a shared lock on a variable it only
// reads, so that draws run beside each other, an exclusive one on a variable
// it updates. As in TensorFlow's own training ops
// (MaybeLockVariableInputMutexesInOrder), the locks are taken in address
// order, so that two ops locking the same variables can never wait on each
// other; and a variable updated a few elements at a time is first switched to
// copy-on-read mode (EnsureSparseVariableAccess, which takes the lock itself,
// so before ours): a read then copies the buffer instead of sharing it, and
// the update never has to copy the whole variable.

#ifndef ADASAMP_CC_KERNELS_VARIABLE_LOCKS_H_
#define ADASAMP_CC_KERNELS_VARIABLE_LOCKS_H_

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/mutex.h"

namespace adasamp {

// How an op uses one of its variables.
enum class VariableAccess {
  // Only read: a shared lock.
  kRead,
  // Updated a few elements at a time: copy-on-read, then an exclusive lock.
  kUpdateElements,
  // Rewritten whole in place, as TF's random ops update a generator's
  // state: an exclusive lock, then the buffer unshared
  // (PrepareToUpdateVariable).
  kUpdateInPlace,
};

// A resource-variable input of an op.
struct VariableInput {
  int input;               // the input's index
  absl::string_view name;  // the input's name, for messages
  tensorflow::DataType dtype;
  VariableAccess access;
};

class VariableLocks {
 public:
  // Looks up each of `inputs` (initialized, of its dtype, distinct: an op
  // given one variable for two inputs would read one array as two while it
  // writes them), then locks them all as the header says. On error, no lock
  // is held.
  template <typename Device>
  absl::Status Acquire(tensorflow::OpKernelContext* ctx,
                       absl::Span<const VariableInput> inputs);

  // The tensor of inputs[i], valid while the locks are held.
  tensorflow::Tensor& tensor(size_t i) { return *vars_[i]->tensor(); }

 private:
  absl::Status LookupAll(tensorflow::OpKernelContext* ctx,
                         absl::Span<const VariableInput> inputs);
  void LockInAddressOrder(absl::Span<const VariableInput> inputs);

  absl::InlinedVector<tensorflow::core::RefCountPtr<tensorflow::Var>, 4> vars_;
  absl::InlinedVector<tensorflow::mutex_lock, 4> exclusive_;
  absl::InlinedVector<tensorflow::tf_shared_lock, 4> shared_;
};

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_VARIABLE_LOCKS_H_
