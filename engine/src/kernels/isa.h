// Instruction-set paths: which this build has, which this CPU runs, and the
// kernel table of each. Chosen per Translator (option or PETREL_ISA), never global.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace petrel::kernels {

enum class Isa { kScalar, kAvx2, kAvxVnni, kAvx512, kNeon, kDotprod, kI8mm, kSimd128 };

const char* isa_name(Isa isa);
bool parse_isa(const std::string& text, Isa* isa);

// Paths this build contains and this CPU can execute, best last.
std::vector<Isa> runnable_isas();
Isa best_isa();
// The table of a runnable path (reference_table() for kScalar); nullptr otherwise.
const KernelTable* table_for(Isa isa);

// Per-ISA tables, defined in kernels/x86, kernels/arm and kernels/wasm when built.
const KernelTable& avx2_table();  // in the GEMV order this CPU's vendor reads fastest
const KernelTable& avx2_table(GemvOrder order);
const KernelTable& avx_vnni_table();
const KernelTable& avx512_table();  // as avx2_table()
const KernelTable& avx512_table(GemvOrder order);
const KernelTable& neon_table();
const KernelTable& dotprod_table();
const KernelTable& i8mm_table();
const KernelTable& simd128_table();

}  // namespace petrel::kernels
