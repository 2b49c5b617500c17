#include "kernels/half.h"
#include "kernels/kernels.h"

namespace petrel::kernels::reference {

void embed(const detail::Matrix& table, const int32_t* ids, const int32_t* pos, size_t m, const float* positions,
           float* out) {
  const size_t d = table.cols;
  for (size_t i = 0; i < m; ++i) {
    const size_t row = static_cast<size_t>(ids[i]);
    const float* pe = positions ? positions + static_cast<size_t>(pos[i]) * d : nullptr;
    float* o = out + i * d;
    for (size_t c = 0; c < d; ++c) {
      float v = 0;
      switch (table.dtype) {
        case DType::kF32: v = static_cast<const float*>(table.data)[table.index(row, c)]; break;
        case DType::kF16: v = half_to_float(static_cast<const uint16_t*>(table.data)[table.index(row, c)]); break;
        case DType::kInt8: v = static_cast<float>(table.quantized(row, c)) * table.scales[row]; break;
        case DType::kInt4: v = static_cast<float>(table.scaled_int4(row, c)) * table.scales[row]; break;
      }
      o[c] = pe ? v + pe[c] : v;
    }
  }
}

}  // namespace petrel::kernels::reference
