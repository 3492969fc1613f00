// Asks Linux to back a large buffer with 2 MiB pages: each level of a walk
// down a tree reads a random node, and past the caches each such read would
// otherwise also miss the TLB (benchmarks/RESULTS.md has the effect). Only
// advice: the contents stay, and a kernel that declines (no transparent huge
// pages, before Linux 6.1) changes nothing. No TensorFlow here.

#ifndef ADASAMP_CC_KERNELS_HUGE_PAGES_H_
#define ADASAMP_CC_KERNELS_HUGE_PAGES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace adasamp {

inline void AdviseHugePages(const void* data, size_t bytes) {
#if defined(__linux__)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  constexpr int kCollapse = 25;  // MADV_COLLAPSE, which some headers lack
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (address + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (address + bytes) & ~(kHugePage - 1);
  if (end < begin + 4 * kHugePage) return;  // within the TLB's reach anyway
  void* range = reinterpret_cast<void*>(begin);
  madvise(range, end - begin, MADV_HUGEPAGE);
  madvise(range, end - begin, kCollapse);
#endif
}

// AdviseHugePages once per buffer: a variable keeps its buffer from step to
// step, so an OpKernel advises each of its variables' buffers when it first
// sees it.
class HugePages {
 public:
  void Advise(const void* data, size_t bytes) {
    if (advised_.exchange(data) != data) AdviseHugePages(data, bytes);
  }

 private:
  std::atomic<const void*> advised_{nullptr};
};

}  // namespace adasamp

#endif  // ADASAMP_CC_KERNELS_HUGE_PAGES_H_
