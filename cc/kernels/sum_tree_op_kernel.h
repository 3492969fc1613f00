// The base of the sum-tree OpKernels: the sequence each runs, in the order
// TensorFlow's own kernels run it, validating everything before it mutates:
//
//   1. Prepare: check the inputs that are not variables, allocate the outputs;
//   2. look up and lock the variables (variable_locks.h);
//   3. Run: check the variables' shapes, then call the op's functor
//      (sum_tree_ops.h), which checks the values it reads before it writes.

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_OP_KERNEL_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_OP_KERNEL_H_

#define EIGEN_USE_THREADS

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cc/kernels/huge_pages.h"
#include "cc/kernels/variable_locks.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace adasamp {

template <typename Device>
class SumTreeOpKernel : public tensorflow::OpKernel {
 public:
  // `variables`: the op's resource-variable inputs and how it uses each.
  SumTreeOpKernel(tensorflow::OpKernelConstruction* ctx,
                  std::vector<VariableInput> variables)
      : OpKernel(ctx),
        variables_(std::move(variables)),
        huge_pages_(std::make_unique<HugePages[]>(variables_.size())) {}

  // A training step's sample, draw, set or reweight takes microseconds, on
  // the step's critical path: the executor runs the kernel inline, as it does
  // ReadVariableOp, instead of handing it to another thread, a hand-off that
  // costs more than the kernel.
  bool IsExpensive() override { return false; }

  void Compute(tensorflow::OpKernelContext* ctx) final {
    bool has_work = true;
    OP_REQUIRES_OK(ctx, Prepare(ctx, &has_work));
    if (!has_work) return;
    VariableLocks locks;
    OP_REQUIRES_OK(ctx, locks.Acquire<Device>(ctx, variables_));
    AdviseHugePages(locks);
    OP_REQUIRES_OK(ctx, Run(ctx, locks));
  }

 protected:
  // Checks the inputs that are not variables and allocates the outputs.
  // Clears `has_work` where the op has nothing to do (a draw of no samples),
  // which then reads no variable.
  virtual absl::Status Prepare(tensorflow::OpKernelContext* ctx,
                               bool* has_work) = 0;

  // With the variables locked (their tensors in the order of `variables`):
  // checks their shapes, then runs the functor.
  virtual absl::Status Run(tensorflow::OpKernelContext* ctx,
                           VariableLocks& variables) = 0;

  // Whether the op reads its variables at scattered places (walks down the
  // tree, updates of a batch's leaves), where huge pages spare TLB misses; a
  // build writes the tree in order.
  virtual bool ReadsScattered() const { return true; }

 private:
  // On the CPU, each variable's buffer once (huge_pages.h).
  void AdviseHugePages(VariableLocks& locks) {
    if constexpr (std::is_same_v<Device, Eigen::ThreadPoolDevice>) {
      if (!ReadsScattered()) return;
      for (size_t i = 0; i < variables_.size(); ++i) {
        const tensorflow::Tensor& tensor = locks.tensor(i);
        huge_pages_[i].Advise(tensor.data(), tensor.TotalBytes());
      }
    }
  }

  const std::vector<VariableInput> variables_;
  const std::unique_ptr<HugePages[]> huge_pages_;
};

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_OP_KERNEL_H_
