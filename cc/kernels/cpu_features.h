// Which vector forms of the CPU kernels (descend_cpu.h, philox_cpu.h) run
// here: chosen once, at run time, so that one build serves every x86-64 CPU.
// No TensorFlow here.

#ifndef ADASAMP_CC_KERNELS_CPU_FEATURES_H_
#define ADASAMP_CC_KERNELS_CPU_FEATURES_H_

#include <cstdlib>
#include <cstring>

namespace adasamp {
namespace cpu {

#if defined(__x86_64__)

// Whether the AVX-512 forms run here: the CPU has AVX-512 F and VL, unless
// TF_ADASAMP_CPU_SIMD=0 (which tests use to check the scalar forms).
inline bool UseAvx512() {
  static const bool use = [] {
    const char* setting = std::getenv("TF_ADASAMP_CPU_SIMD");
    if (setting != nullptr && std::strcmp(setting, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return use;
}

#endif  // defined(__x86_64__)

}  // namespace cpu
}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_CPU_FEATURES_H_
