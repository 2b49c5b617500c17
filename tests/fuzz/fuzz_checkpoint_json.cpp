// Fuzz target: a checkpoint's JSON inputs — config.json, generation_config.json and
// vocab.json — through the converter's own parsing and checks
// (convert::check_checkpoint_json). The input is the three files' texts separated by
// NUL bytes (which JSON text never holds); a missing part is a missing file. Each is
// read with the converter's default options and with the options that state a
// structure (--norm pre, --positions learned), which change what config keys may
// say. A bad input must be refused with ConvertError; any other exception (such as
// nlohmann::json's type errors), a crash or a sanitizer report is a finding.
#include <cstdint>
#include <optional>
#include <string>

#include "convert/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel::convert;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::optional<std::string> parts[3];
  size_t at = 0;
  for (auto& part : parts) {
    if (at > input.size()) break;
    const size_t end = std::min(input.find('\0', at), input.size());
    part = input.substr(at, end - at);
    at = end + 1;
  }
  ConvertOptions stated;
  stated.norm = petrel::NormPlacement::kPre;
  stated.positions = PositionChoice::kLearned;
  for (ConvertOptions options : {ConvertOptions{}, stated}) {
    options.checkpoint_dir = "fuzz";
    try {
      check_checkpoint_json(*parts[0], parts[1], parts[2], options);
    } catch (const ConvertError&) {
    }
  }
  return 0;
}
