// The threads a CPU kernel may share a large batch with, beside its own:
// TensorFlow's intra-op pool when an op runs (sum_tree_ops_cpu.cc), XLA's
// when a compiled step's custom call does (sum_tree_ffi.cc). One interface,
// so that both run the same code and split a batch the same way. No
// TensorFlow here.

#ifndef ADASAMP_CC_KERNELS_INTRA_OP_POOL_H_
#define ADASAMP_CC_KERNELS_INTRA_OP_POOL_H_

#include <cstdint>
#include <functional>

namespace adasamp {

class IntraOpPool {
 public:
  virtual ~IntraOpPool() = default;

  // The pool's threads; 0 where there is no pool.
  virtual int64_t NumThreads() const = 0;

  // Runs `task` on a thread of the pool, now or later.
  virtual void Schedule(std::function<void()> task) const = 0;
};

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_INTRA_OP_POOL_H_
