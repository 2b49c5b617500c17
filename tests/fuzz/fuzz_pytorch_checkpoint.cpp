// Fuzz target: a pytorch_model.bin (zip or legacy format) from untrusted bytes,
// through the restricted pickle machine, the zip reader and every tensor's read.
// A bad file must be refused with ConvertError; any other exception, a crash or a
// sanitizer report is a finding.
#include <cstdint>

#include "convert/pytorch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    petrel::convert::parse_pytorch_checkpoint(data, size, "fuzz.bin");
  } catch (const petrel::convert::ConvertError&) {
  }
  return 0;
}
