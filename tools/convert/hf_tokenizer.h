// A language model's tokenizer.json (Hugging Face tokenizers' format) and
// tokenizer_config.json, read, checked and written as the model file's Tokenizer
// (format 1.8, kind HuggingFace) with the hash tables the engine probes, so loading
// builds nothing. Every error is a ConvertError naming the file and the JSON path.
#pragma once

#include <cstdint>
#include <flatbuffers/flatbuffers.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "petrel_generated.h"

namespace petrel::convert {

struct HfTokenizerSummary {
  uint32_t tokens = 0;          // ids with a token, of vocab_size
  uint32_t merges = 0;
  uint32_t added_tokens = 0;    // kept (ids below vocab_size)
  uint32_t dropped_added = 0;   // added tokens at ids >= vocab_size (a multimodal model's image tokens)
  std::string pipeline;         // "NFC | Split(regex) ByteLevel | BPE | ByteLevel", for the log
  // Each regex pattern the file gives (Replace normalizers, Split pre-tokenizers): its
  // JSON path ("pre_tokenizer.pretokenizers[1].pattern.Regex") and text.
  std::vector<std::pair<std::string, std::string>> regexes;
};

// A checkpoint directory's tokenizer files, as text.
struct HfTokenizerFiles {
  std::string dir;                              // names them in errors
  std::string tokenizer_json;
  std::optional<std::string> tokenizer_config;  // tokenizer_config.json, when present
};
HfTokenizerFiles read_hf_tokenizer_files(const std::string& dir);

// The Tokenizer table of a model of `vocab_size` ids, written into `fbb`.
flatbuffers::Offset<fb::Tokenizer> write_hf_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const HfTokenizerFiles& files,
                                                      uint32_t vocab_size, HfTokenizerSummary* summary = nullptr);

// Compiles each regex of `summary` (write_hf_tokenizer's) as the engine compiles them
// when the model loads: a pattern it would refuse is a ConvertError naming tokenizer.json
// and the pattern's JSON path. (write_hf_tokenizer itself stores what it reads, so that
// tests and fuzz targets reach the loader's own checks with any pattern.)
void check_hf_regexes(const HfTokenizerFiles& files, const HfTokenizerSummary& summary);

// The same as a finished FlatBuffer whose root is the Tokenizer table, for tests, fuzz
// targets and tools that want the tokenizer alone; vocab_size 0: the tokenizer's own
// (largest id + 1).
std::vector<uint8_t> hf_tokenizer_buffer(const HfTokenizerFiles& files, uint32_t vocab_size = 0,
                                         HfTokenizerSummary* summary = nullptr);

}  // namespace petrel::convert
