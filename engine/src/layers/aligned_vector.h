// A std::vector whose storage starts on a cache line. Rows of K/V caches and
// activations are whole cache lines (head widths of 64 floats or halves), so SIMD
// loads then never straddle two lines: a straddling 64-byte load reads two lines,
// which halved attention's speed from L2.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace petrel::layers {

constexpr size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine))); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace petrel::layers
