// Fuzz target: a model.safetensors from untrusted bytes. The reader must refuse a bad
// file with ConvertError (naming it); of a file it accepts, every tensor must read
// (widened to f32) or be refused the same way. Any other exception, a crash or a
// sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "convert/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::convert::ConvertError;
  try {
    petrel::convert::SafetensorsFile file(data, size, "fuzz.safetensors");
    for (const std::string& name : file.names()) {
      const petrel::convert::TensorInfo& info = file.info(name);
      uint64_t elements = 1;
      for (uint64_t d : info.shape) elements *= d;
      try {
        const std::vector<float> values = file.read_f32(name);
        if (values.size() != elements) {
          std::fprintf(stderr, "fuzz_safetensors: tensor '%s' read %zu values, its shape holds %llu\n", name.c_str(),
                       values.size(), static_cast<unsigned long long>(elements));
          std::abort();
        }
      } catch (const ConvertError&) {  // NaN/Inf: refused by name, the other tensors still read
      }
    }
  } catch (const ConvertError&) {
  }
  return 0;
}
