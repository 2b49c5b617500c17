// A language model's tokenizer.json (Hugging Face tokenizers' format) and
// tokenizer_config.json, read, checked and written as the model file's Tokenizer
// (format 1.8, kind HuggingFace) with the hash tables the engine probes, so loading
// builds nothing. Every error is a ConvertError naming the file and the JSON path.
#pragma once

#include <cstdint>
#include <flatbuffers/flatbuffers.h>
#include <optional>
#include <string>
#include <vector>

#include "petrel_generated.h"

namespace petrel::convert {

struct HfTokenizerSummary {
  uint32_t tokens = 0;          // ids with a token, of vocab_size
  uint32_t merges = 0;
  uint32_t added_tokens = 0;    // kept (ids below vocab_size)
  uint32_t dropped_added = 0;   // added tokens at ids >= vocab_size (a multimodal model's image tokens)
  std::string pipeline;         // "NFC | Split(regex) ByteLevel | BPE | ByteLevel", for the log
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

// The same as a finished FlatBuffer whose root is the Tokenizer table, for tests, fuzz
// targets and tools that want the tokenizer alone; vocab_size 0: the tokenizer's own
// (largest id + 1).
std::vector<uint8_t> hf_tokenizer_buffer(const HfTokenizerFiles& files, uint32_t vocab_size = 0,
                                         HfTokenizerSummary* summary = nullptr);

}  // namespace petrel::convert
