#include "bench/cache_eviction.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace petrel::bench {

#if defined(__x86_64__) || defined(__i386__)
namespace {

struct FlushSupport {
  bool clflush = false, clflushopt = false;
  size_t line_bytes = 64;
};

FlushSupport detect_flush_support() {
  FlushSupport s;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (edx & (1u << 19)) != 0) {  // CPUID.1:EDX.CLFSH
    s.clflush = true;
    const size_t line = ((ebx >> 8) & 0xff) * 8;  // CPUID.1:EBX[15:8], in 8-byte units
    if (line != 0) s.line_bytes = line;
  }
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 23)) != 0)  // CPUID.(7,0):EBX.CLFLUSHOPT
    s.clflushopt = true;
  return s;
}

const FlushSupport& flush_support() {
  static const FlushSupport support = detect_flush_support();
  return support;
}

// clflushopt lines are flushed in parallel (clflush ones one after another); the fence
// waits for all of them.
__attribute__((target("clflushopt"))) void flush_lines_opt(const char* p, const char* end, size_t line) {
  for (; p < end; p += line) _mm_clflushopt(const_cast<char*>(p));
  _mm_mfence();
}

void flush_lines(const char* p, const char* end, size_t line) {
  for (; p < end; p += line) _mm_clflush(p);
  _mm_mfence();
}

}  // namespace

std::string cache_eviction_unavailable() {
  return flush_support().clflush ? std::string() : "this CPU has no cache-line flush instruction (CLFLUSH)";
}

void evict_from_caches(const void* data, size_t size) {
  const FlushSupport& s = flush_support();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(uintptr_t{s.line_bytes} - 1);  // a power of two
  const char* p = reinterpret_cast<const char*>(begin);
  const char* end = static_cast<const char*>(data) + size;
  if (s.clflushopt) flush_lines_opt(p, end, s.line_bytes);
  else flush_lines(p, end, s.line_bytes);
}

#else

std::string cache_eviction_unavailable() {
  return "evicting the caches is implemented for x86 (CLFLUSH/CLFLUSHOPT) only";
}

void evict_from_caches(const void*, size_t) {}

#endif

}  // namespace petrel::bench
