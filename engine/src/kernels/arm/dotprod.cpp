// ARMv8.2 dot product (sdot): built with +dotprod in this file only and chosen at
// run time where the OS reports it (getauxval), so a Cortex-A53 never runs it.
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "kernels/kernels.h"

namespace petrel::kernels::dotprod {
namespace {

namespace vec = xsimd;

using Arch = xsimd::neon64;
constexpr size_t kGemmRows = 4, kGemmPanels = 1, kGemvPanels = 2, kFloatGemvPanels = 2;
constexpr size_t kInt4GemmRows = 4, kInt4GemmPanels = 1, kInt4GemvPanels = 2, kInt4OneStreamGemvPanels = 2;

#include "kernels/arm/neon_loads.inc"
#include "kernels/arm/sdot_ops.inc"

using Int8Ops = SdotInt8Ops;
using Int4Ops = SdotInt4Ops;

}  // namespace
}  // namespace petrel::kernels::dotprod

#define PETREL_SIMD_NAMESPACE dotprod
#define PETREL_SIMD_NAME "dotprod"
#include "kernels/simd/simd_kernels.inc"

namespace petrel::kernels {
const KernelTable& dotprod_table() { return dotprod::table(); }
}  // namespace petrel::kernels
