// How the x86 panel kernels read weights from memory: the single-row int8 GEMV's order
// (avx2.cpp, avx512.cpp) and software prefetch for int4 (avx2.cpp, avx_vnni.cpp,
// avx512.cpp) and the AVX2 and AVX-VNNI int8 GEMVs.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace petrel::kernels::x86 {

// A decoder step's int8 GEMVs read their weights from memory. Measured (bench/EXPERIMENTS.md,
// "Cold caches", "AVX2 on AMD", "AVX-512 on AMD"): on Intel several panels side by side
// (AVX2 two, with software prefetch; AVX-512 eight) reach the floor and one stream does not
// (a core draws ~1.3x more from DRAM with several); on an AMD Zen 4 one panel at a time
// without software prefetch reads at the probe's rate (AVX2 30 GB/s against 21 with two
// panels; AVX-512 28 against 23 with eight). Other AMD generations are unmeasured and take
// the Zen 4 order.
inline GemvOrder vendor_gemv_order() {
  static const bool amd = (__builtin_cpu_init(), __builtin_cpu_is("amd"));
  return amd ? GemvOrder::kOnePanelAtATime : GemvOrder::kPanelsSideBySide;
}

// The panel kernels read NR panels side by side, the next call the NR panels that follow
// them in memory. A panel is 4-32 KB, and the hardware prefetchers stop at every 4 KB
// page and ramp up again, so alone they leave single-row GEMVs (decoder steps) well below
// the memory's bandwidth whether the weights come from L3 or DRAM (bench/README, "At the
// floor"). So while reading `lines` cache lines at `at` in each of the NR panels (the first
// at panel_bytes apart), the kernels ask for the same lines of the next NR panels: one call
// ahead, spread over the call's work, into L1 (kIntoL2 false) or only into L2. Into L2
// leaves L1's few miss buffers to the loads: on AMD Zen 4 the int4 GEMVs from memory ran
// 1.6-1.7x faster so (bench/EXPERIMENTS.md, "AVX2 on AMD", "AVX-512 on AMD"); on Intel, AVX-512's
// int4 GEMV ran the same within noise ("At the floor"). So every int4 kernel that reads
// panels side by side prefetches into L2, AVX-VNNI's (Intel's; unmeasured) too; the int8
// GEMVs that prefetch (AVX2's side-by-side order, AVX-VNNI's) into L1, as measured on Intel.
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
