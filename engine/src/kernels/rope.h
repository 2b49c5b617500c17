// Rotary position embeddings' angles (the rotation itself is KernelTable::rope).
#pragma once

#include <cstddef>

namespace petrel::kernels {

// cos[i], sin[i] of position x inv_freq[i] for i < half, computed in f32 as
// transformers' rotary embeddings compute them. Once per position and layer type, so
// scalar code is enough.
void rope_angles(const float* inv_freq, size_t half, size_t position, float* cos, float* sin);

}  // namespace petrel::kernels
