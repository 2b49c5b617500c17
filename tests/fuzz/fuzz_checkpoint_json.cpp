// Fuzz target: a checkpoint's JSON inputs — config.json, generation_config.json,
// vocab.json, target_vocab.json and tokenizer_config.json — through the converter's
// own parsing and checks (convert::check_checkpoint_json). The input is the files'
// texts in that order separated by NUL bytes (which JSON text never holds); a missing
// part is a missing file. Each is read with the converter's default options and with
// the options that state a structure (--norm pre, --positions learned), which change
// what config keys may say, and with and without source.spm/target.spm beside them
// (which decide whether the Marian tokenizer's files are read). A bad input must be
// refused with ConvertError; any other exception (such as nlohmann::json's type
// errors), a crash or a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "convert/convert.h"
#include "exercise_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel::convert;
  using petrel::fuzz::require;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::optional<std::string> parts[5];
  size_t at = 0;
  for (auto& part : parts) {
    if (at > input.size()) break;
    const size_t end = std::min(input.find('\0', at), input.size());
    part = input.substr(at, end - at);
    at = end + 1;
  }
  CheckpointJson files{*parts[0], parts[1], parts[2], parts[3], parts[4]};
  ConvertOptions stated;
  stated.norm = petrel::NormPlacement::kPre;
  stated.positions = PositionChoice::kLearned;
  for (ConvertOptions options : {ConvertOptions{}, stated}) {
    options.checkpoint_dir = "fuzz";
    for (bool sentencepiece : {false, true}) {
      if (sentencepiece && !files.vocab) continue;  // the .spm files matter only with a vocabulary
      files.sentencepiece = sentencepiece;
      try {
        const CheckedVocabulary v = check_checkpoint_json(files, options);
        require(v.vocab.empty() == (!files.vocab || v.model_type != "marian"),
                "a Marian checkpoint's vocabulary is returned when given");
        require(!v.marian || sentencepiece, "a Marian tokenizer needs the .spm files");
        // JSON text is UTF-8 (nlohmann::json refuses other bytes), so tokens are too.
        for (const auto* tokens : {&v.vocab, &v.target_vocab})
          for (const std::string& token : *tokens) require(petrel::detail::is_valid_utf8(token), "tokens are UTF-8");
      } catch (const ConvertError&) {
      }
    }
  }
  return 0;
}
