// Sinusoidal position tables, computed once per model load.
#pragma once

#include <cstddef>

#include "petrel/types.h"

namespace petrel::kernels {

// Fills table[rows][d] for positions first_index .. first_index+rows-1, computed in
// double precision and rounded to f32 as Hugging Face and the paper do.
void sinusoidal_table(const PositionInfo& spec, size_t rows, size_t d, float* table);

}  // namespace petrel::kernels
