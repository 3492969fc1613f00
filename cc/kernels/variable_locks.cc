#define EIGEN_USE_THREADS

#include "cc/kernels/variable_locks.h"

#include <algorithm>
#include <cstdint>

#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/kernels/training_op_helpers.h"

namespace adasamp {
namespace {

using ::tensorflow::DataType;
using ::tensorflow::DataTypeString;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Var;
using ::tensorflow::errors::InvalidArgument;

// Looks up the variable behind `input` and checks that it is initialized and
// of the input's dtype, before any of the op's locks are taken.
absl::Status LookupVariable(OpKernelContext* ctx, const VariableInput& input,
                            tensorflow::core::RefCountPtr<Var>* var) {
  const absl::Status found = tensorflow::LookupResource(
      ctx, tensorflow::HandleFromInput(ctx, input.input), var);
  if (!found.ok()) {
    return InvalidArgument(
        input.name, " is not an initialized variable: ", found.message());
  }
  tensorflow::tf_shared_lock lock(*(*var)->mu());
  if (!(*var)->is_initialized) {
    return InvalidArgument(input.name, " is an uninitialized variable");
  }
  const DataType dtype = (*var)->tensor()->dtype();
  if (dtype != input.dtype) {
    return InvalidArgument(input.name, " has dtype ", DataTypeString(dtype),
                           ", expected ", DataTypeString(input.dtype));
  }
  return absl::OkStatus();
}

// Calls f(T()) for the T of `dtype`, one of the ops' variable dtypes.
template <typename F>
absl::Status ForDtype(DataType dtype, F f) {
  switch (dtype) {
    case tensorflow::DT_FLOAT:
      return f(float());
    case tensorflow::DT_DOUBLE:
      return f(double());
    case tensorflow::DT_INT64:
      return f(int64_t());
    default:
      return absl::InternalError(
          absl::StrCat("no variable of dtype ", DataTypeString(dtype)));
  }
}

}  // namespace

absl::Status VariableLocks::LookupAll(OpKernelContext* ctx,
                                      absl::Span<const VariableInput> inputs) {
  vars_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TF_RETURN_IF_ERROR(LookupVariable(ctx, inputs[i], &vars_[i]));
    for (size_t j = 0; j < i; ++j) {
      if (vars_[i].get() == vars_[j].get()) {
        return InvalidArgument(inputs[j].name, " and ", inputs[i].name,
                               " are the same variable");
      }
    }
  }
  return absl::OkStatus();
}

void VariableLocks::LockInAddressOrder(absl::Span<const VariableInput> inputs) {
  absl::InlinedVector<size_t, 4> order(inputs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return vars_[a]->mu() < vars_[b]->mu();
  });
  for (size_t i : order) {
    if (inputs[i].access == VariableAccess::kRead) {
      shared_.emplace_back(*vars_[i]->mu());
    } else {
      exclusive_.emplace_back(*vars_[i]->mu());
    }
  }
}

template <typename Device>
absl::Status VariableLocks::Acquire(OpKernelContext* ctx,
                                    absl::Span<const VariableInput> inputs) {
  TF_RETURN_IF_ERROR(LookupAll(ctx, inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].access != VariableAccess::kUpdateElements) continue;
    TF_RETURN_IF_ERROR(ForDtype(inputs[i].dtype, [&](auto t) {
      using T = decltype(t);
      return tensorflow::EnsureSparseVariableAccess<Device, T>(ctx,
                                                               vars_[i].get());
    }));
  }
  LockInAddressOrder(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].access != VariableAccess::kUpdateInPlace) continue;
    Var* var = vars_[i].get();
    const absl::Status prepared = ForDtype(inputs[i].dtype, [&](auto t) {
      using T = decltype(t);
      return tensorflow::PrepareToUpdateVariable<Device, T>(
          ctx, var->tensor(), var->copy_on_read_mode.load());
    });
    if (!prepared.ok()) {
      shared_.clear();
      exclusive_.clear();
      return prepared;
    }
  }
  return absl::OkStatus();
}

template absl::Status VariableLocks::Acquire<Eigen::ThreadPoolDevice>(
    OpKernelContext*, absl::Span<const VariableInput>);
#if GOOGLE_CUDA
template absl::Status VariableLocks::Acquire<Eigen::GpuDevice>(
    OpKernelContext*, absl::Span<const VariableInput>);
#endif

}  // namespace adasamp
