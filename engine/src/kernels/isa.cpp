#include "kernels/isa.h"

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#ifndef HWCAP2_I8MM  // Linux 5.10's bit; older sysroots' headers lack it
#define HWCAP2_I8MM (1 << 13)
#endif
#endif
#if defined(PETREL_X86_KERNELS)
#include <cpuid.h>
#endif

namespace petrel::kernels {

#if defined(PETREL_X86_KERNELS)
namespace {
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not
// know "f16c". The AVX paths checked beside it cover the OS's register support.
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
// AVX-VNNI from CPUID leaf 7, sub-leaf 1 (EAX bit 4), for the same reason.
bool cpu_has_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
}
}  // namespace
#endif

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
    case Isa::kDotprod: return "dotprod";
    case Isa::kI8mm: return "i8mm";
    case Isa::kSimd128: return "simd128";
  }
  return "?";
}

bool parse_isa(const std::string& text, Isa* isa) {
  for (Isa candidate : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kNeon, Isa::kDotprod, Isa::kI8mm, Isa::kSimd128}) {
    if (text == isa_name(candidate)) {
      *isa = candidate;
      return true;
    }
  }
  return false;
}

std::vector<Isa> runnable_isas() {
  std::vector<Isa> out{Isa::kScalar};
#if defined(PETREL_X86_KERNELS)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  if (avx2) out.push_back(Isa::kAvx2);
  if (avx2 && cpu_has_avx_vnni()) out.push_back(Isa::kAvxVnni);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && cpu_has_f16c())
    out.push_back(Isa::kAvx512);
#endif
#if defined(PETREL_ARM_KERNELS)
  out.push_back(Isa::kNeon);  // NEON is part of the armv7 hard-float and aarch64 baselines we build for
#if defined(__aarch64__)
  // i8mm's file also has dotprod's code (its single rows): it needs both.
  const bool dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  if (dotprod) out.push_back(Isa::kDotprod);
  if (dotprod && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0) out.push_back(Isa::kI8mm);
#endif
#endif
#if defined(PETREL_WASM_KERNELS)
  // A runtime without SIMD128 refuses the whole module when it compiles it.
  out.push_back(Isa::kSimd128);
#endif
  return out;
}

Isa best_isa() { return runnable_isas().back(); }

const KernelTable* table_for(Isa isa) {
  for (Isa runnable : runnable_isas()) {
    if (runnable != isa) continue;
    switch (isa) {
      case Isa::kScalar: return &reference_table();
#if defined(PETREL_X86_KERNELS)
      case Isa::kAvx2: return &avx2_table();
      case Isa::kAvxVnni: return &avx_vnni_table();
      case Isa::kAvx512: return &avx512_table();
#endif
#if defined(PETREL_ARM_KERNELS)
      case Isa::kNeon: return &neon_table();
#if defined(__aarch64__)
      case Isa::kDotprod: return &dotprod_table();
      case Isa::kI8mm: return &i8mm_table();
#endif
#endif
#if defined(PETREL_WASM_KERNELS)
      case Isa::kSimd128: return &simd128_table();
#endif
      default: return nullptr;
    }
  }
  return nullptr;
}

}  // namespace petrel::kernels
