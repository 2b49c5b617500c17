// Fuzz target: a Marian model file (.bin or .npz, told apart by content) from untrusted
// bytes. The reader must refuse a bad file with ConvertError (naming it); of a file it
// accepts, every item must read as f32 (intgemm8 ones also as stored int8) or be
// refused the same way, and the options must answer typed questions or refuse by key.
// Any other exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "convert/marian_model_file.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& name) {
  std::fprintf(stderr, "fuzz_marian_model: %s ('%s')\n", what, name.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::convert::ConvertError;
  try {
    auto file = petrel::convert::open_marian_model_bytes(std::vector<uint8_t>(data, data + size), "fuzz.bin");
    for (const std::string& name : file->names()) {
      const petrel::convert::TensorInfo& info = file->info(name);
      uint64_t elements = 1;
      for (uint64_t d : info.shape) elements *= d;
      try {
        if (file->read_f32(name).size() != elements) broken("read_f32 size differs from the shape", name);
      } catch (const ConvertError&) {  // NaN/Inf, a bad multiplier, a CRC: refused by name
      }
      if (info.dtype == "INTGEMM8") {
        try {
          const petrel::convert::Intgemm8Matrix m = file->read_intgemm8(name);
          if (m.rows * m.cols != elements || m.values.size() != elements) broken("intgemm8 sizes differ", name);
        } catch (const ConvertError&) {
        }
      }
    }
    const petrel::convert::MarianOptions& o = file->options();
    for (const auto& [key, value] : o.scalars) {
      try {
        o.integer(key, 0, -1000, 1000);
      } catch (const ConvertError&) {
      }
      try {
        o.number(key, 0);
      } catch (const ConvertError&) {
      }
      try {
        o.flag(key, false);
      } catch (const ConvertError&) {
      }
      try {
        o.list(key);
        broken("list() of a scalar did not throw", key);
      } catch (const ConvertError&) {
      }
    }
    for (const auto& [key, items] : o.lists)
      if (o.list(key) != items) broken("list() differs", key);
  } catch (const ConvertError&) {
  }
  // The same bytes as a word vocabulary (vocab.yml: the YAML parser's other mode).
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string> vocab = petrel::convert::parse_marian_yaml_vocabulary(text, "fuzz.yml");
    if (vocab.empty()) broken("an empty vocabulary was accepted", "fuzz.yml");
    if (vocab.size() > 2 * size + 1024) broken("a vocabulary larger than its text allows", "fuzz.yml");
  } catch (const ConvertError&) {
  }
  return 0;
}
