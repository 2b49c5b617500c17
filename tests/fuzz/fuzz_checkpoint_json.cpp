// Fuzz target: a checkpoint's JSON inputs — config.json, generation_config.json,
// vocab.json, target_vocab.json and tokenizer_config.json — through the converter's
// own parsing and checks (convert::check_checkpoint_json), and a sharded checkpoint's
// index (model.safetensors.index.json) through convert::parse_shard_index. The input is the files'
// texts in that order separated by NUL bytes (which JSON text never holds); a missing
// part is a missing file. Each is read with the converter's default options and with
// the options that state a structure (--norm pre, --positions learned), which change
// what config keys may say, and with and without source.spm/target.spm beside them
// (which decide whether the Marian tokenizer's files are read). Configs of the
// multilingual families (m2m_100, mbart) have their vocab.json and tokenizer_config.json
// read by the family tokenizer, beside each fixture's sentencepiece.bpe.model. Decoder-only
// configs (gemma3_text, gemma3, llama, qwen2, qwen3) are read with their generation config
// and tokenizer_config.json (token texts, the chat template parsed). A bad input must be
// refused with ConvertError; any other exception (such as nlohmann::json's type
// errors), a crash or a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "convert/checkpoint_file.h"
#include "convert/convert.h"
#include "exercise_model.h"
#include "marian_checkpoint.h"
#include "support/build_paths.h"

namespace {
// The family fixtures' SentencePiece models (NLLB's 200 pieces, M2M100's and mBART-50's 256).
const std::vector<std::string>& family_models() {
  static const std::vector<std::string> models = [] {
    std::vector<std::string> m;
    for (const char* f : {"nllb_d1024", "m2m100_tiny", "mbart50_tiny"})
      m.push_back(petrel::fuzz::read_file(petrel::test::fixture_dir() + "/oracle/" + f + "/sentencepiece.bpe.model"));
    return m;
  }();
  return models;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel::convert;
  using petrel::fuzz::require;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::optional<std::string> parts[6];
  size_t at = 0;
  for (auto& part : parts) {
    if (at > input.size()) break;
    const size_t end = std::min(input.find('\0', at), input.size());
    part = input.substr(at, end - at);
    at = end + 1;
  }
  if (parts[5]) {
    try {
      const auto weight_map = parse_shard_index("fuzz/model.safetensors.index.json", *parts[5]);
      require(!weight_map.empty(), "an index maps some tensor");
      for (const auto& [tensor, shard] : weight_map)
        require(!shard.empty() && shard.find('/') == std::string::npos && shard != "..",
                "a shard is a file name in the checkpoint's directory");
    } catch (const ConvertError&) {
    }
  }
  CheckpointJson files{*parts[0], parts[1], parts[2], parts[3], parts[4], false, std::nullopt};
  ConvertOptions stated;
  stated.norm = petrel::NormPlacement::kPre;
  stated.positions = PositionChoice::kLearned;
  for (ConvertOptions options : {ConvertOptions{}, stated}) {
    options.checkpoint_dir = "fuzz";
    for (size_t variant = 0; variant < 2 + family_models().size(); ++variant) {
      const bool sentencepiece = variant == 1;  // Marian's .spm files
      if (sentencepiece && !files.vocab) continue;  // they matter only with a vocabulary
      files.sentencepiece = sentencepiece;
      files.family_sentencepiece.reset();
      if (variant >= 2) files.family_sentencepiece = family_models()[variant - 2];
      try {
        const CheckedVocabulary v = check_checkpoint_json(files, options);
        if (v.model_type == "marian")
          require(v.vocab.empty() == !files.vocab, "a Marian checkpoint's vocabulary is returned when given");
        else
          require(v.vocab.empty() == !v.family_tokenizer, "a family tokenizer has a vocabulary");
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
