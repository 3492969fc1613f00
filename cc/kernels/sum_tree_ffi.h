// What the XLA kernels (sum_tree_ops_xla.cc), which emit the custom calls
// when a step compiles, and the FFI handlers (sum_tree_ffi.cc), which run
// them, agree on: the calls' target names and the GPU scratch's alignment.

#ifndef ADASAMP_CC_KERNELS_SUM_TREE_FFI_H_
#define ADASAMP_CC_KERNELS_SUM_TREE_FFI_H_

#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace adasamp {

// The custom calls' names: one handler per op ("sum_tree_sample",
// "sum_tree_draw", "adaptive_reweight") and dtype.
template <typename T>
std::string CustomCallTarget(absl::string_view op) {
  return absl::StrCat("adasamp_", op,
                      std::is_same_v<T, float> ? "_f32" : "_f64");
}

// As gpu/sum_tree_gpu.h's scratch. XLA aligns its buffers less, so the
// reweight's scratch result has this much more room, to be aligned into.
constexpr int64_t kScratchAlign = 256;

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_SUM_TREE_FFI_H_
