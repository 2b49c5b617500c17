// Software prefetch for the x86 panel kernels: int4 (avx2.cpp, avx_vnni.cpp, avx512.cpp)
// and the AVX2 and AVX-VNNI int8 GEMVs.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace petrel::kernels::x86 {

// The panel kernels read NR panels side by side, the next call the NR panels that follow
// them in memory. A panel is 4-32 KB, and the hardware prefetchers stop at every 4 KB
// page and ramp up again, so alone they leave single-row GEMVs (decoder steps) well below
// the memory's bandwidth whether the weights come from L3 or DRAM (bench/README, "At the
// floor"). So while reading `lines` cache lines at `at` in each of the NR panels (the first
// at panel_bytes apart), the kernels ask for the same lines of the next NR panels: one call
// ahead, spread over the call's work, into L1 (kIntoL2 false) or only into L2. Into L2
// leaves L1's few miss buffers to the loads: on AMD Zen 4 the AVX2 int4 GEMV from memory
// ran 1.7x faster so (bench/README, "AVX2 on AMD"); on Intel, AVX-512's int4 GEMV ran the
// same within noise ("At the floor"). AVX2's int4 prefetches into L2; AVX-512's, AVX2's
// int8 (the side-by-side order, not AMD's) and AVX-VNNI's (Intel's; unmeasured) into L1
// as measured on Intel.
// The last call's requests fall past the matrix; prefetches never fault.
template <size_t NR, bool kIntoL2 = false>
inline void prefetch_next_panels(const void* at, size_t panel_bytes, size_t lines) {
  const char* next = static_cast<const char*>(at) + NR * panel_bytes;
  for (size_t p = 0; p < NR; ++p)
    for (size_t l = 0; l < lines; ++l) {
      if constexpr (kIntoL2) _mm_prefetch(next + p * panel_bytes + l * 64, _MM_HINT_T1);
      else _mm_prefetch(next + p * panel_bytes + l * 64, _MM_HINT_T0);
    }
}

}  // namespace petrel::kernels::x86
