#include "kernels/positions.h"

#include <cmath>

namespace petrel::kernels {

void sinusoidal_table(const PositionInfo& spec, size_t rows, size_t d, float* table) {
  const size_t half = d / 2;
  const bool interleaved = spec.kind == PositionKind::kSinusoidalInterleaved;
  for (size_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(r + spec.first_index);
    float* row = table + r * d;
    for (size_t i = 0; i < half; ++i) {
      double exponent = spec.frequency == FrequencyConvention::kPaper
                            ? 2.0 * static_cast<double>(i) / static_cast<double>(d)
                            : static_cast<double>(i) / (static_cast<double>(half) - 1.0);
      double angle = pos / std::pow(10000.0, exponent);
      float s = static_cast<float>(std::sin(angle)), c = static_cast<float>(std::cos(angle));
      if (interleaved) {
        row[2 * i] = s;
        row[2 * i + 1] = c;
      } else {
        row[i] = s;
        row[half + i] = c;
      }
    }
  }
}

}  // namespace petrel::kernels
