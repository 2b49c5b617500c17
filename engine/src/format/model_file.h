// Verifies a Petrel model file held in memory and binds its tensors.
// Format only: no math happens here (position tables are made by the model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <optional>

#include "format/tokenizer_tables.h"
#include "format/weights.h"
#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel::fb {
struct Tokenizer;
}

namespace petrel::detail {

struct BoundModel {
  ModelInfo info;
  ModelWeights weights;  // weights.info is left null; the owner points it at its info
  // A Marian tokenizer section, checked for sizes and ids, as views into the file;
  // the owner builds the tokenizer from it.
  std::optional<MarianTokenizerTables> marian_tokenizer;
  std::optional<FairseqTokenizerTables> fairseq_tokenizer;  // the same for NLLB, M2M100, mBART-50
  std::optional<SentencePieceIdsTables> spm_ids_tokenizer;  // and for Marian C++ models (bergamot's)
  std::optional<MarianWordsTables> marian_words_tokenizer;  // Marian C++ models with word vocabularies
  std::optional<HfTokenizerTables> hf_tokenizer;            // language models' tokenizer.json
};

// `bytes` must stay alive and unchanged while the result is used, and be 64-byte
// aligned (mmap gives page alignment). `name` (a path) prefixes every error.
Result<BoundModel> bind_model_file(const uint8_t* bytes, size_t size, const std::string& name);

// A Fairseq tokenizer table checked and bound as bind_model_file does it, for a model
// of `vocab_size` ids (tests bind a converter-written table alone with it).
// A tokenizer.json tokenizer stored alone (a FlatBuffer whose root is a Tokenizer,
// verified by the caller), for tests and tools; `name` prefixes errors.
Result<HfTokenizerTables> bind_hf_tokenizer(const fb::Tokenizer& tok, uint32_t vocab_size, const std::string& name);

Result<FairseqTokenizerTables> bind_fairseq_tokenizer(const fb::Tokenizer& tok, uint32_t vocab_size,
                                                             const std::string& name);

// The first byte of the data section for a FlatBuffer of `flatbuffer_size` bytes
// (without its 4-byte size prefix). Shared by the writer and the reader.
constexpr uint64_t kDataAlignment = 64;
inline uint64_t data_section_start(uint64_t flatbuffer_size) {
  return (4 + flatbuffer_size + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
}

}  // namespace petrel::detail
