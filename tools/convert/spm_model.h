// Reads a SentencePiece model file (.spm: a serialized sentencepiece ModelProto,
// sentencepiece_model.proto) with a small, strict protobuf wire-format reader — no
// protobuf dependency. Absent fields take their proto2 defaults. Malformed input
// (truncated varints, lengths past the end, wrong wire types, unknown enum values,
// missing pieces) throws ConvertError naming the file, the field and the offset.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/sentencepiece.h"

namespace petrel::convert {

struct SpmModel {
  std::string path;                         // for messages
  std::shared_ptr<const std::string> data;  // the file's bytes; the views below point into it

  // ModelProto.pieces
  std::vector<std::string_view> pieces;
  std::vector<float> scores;
  std::vector<text::PieceType> types;
  // TrainerSpec
  text::SpmAlgorithm algorithm = text::SpmAlgorithm::kUnigram;  // model_type
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  std::string_view unk_surface = text::kDefaultUnkSurface;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // as trained (informational)
  std::string_view unk_piece = "<unk>", bos_piece = "<s>", eos_piece = "</s>", pad_piece = "<pad>";
  // NormalizerSpec
  std::string_view normalizer_name;  // "nmt_nfkc", "identity", ... (informational)
  std::string_view precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;

  // A spec viewing into this model (valid while `data` lives).
  text::SentencePieceSpec spec() const;
};

// Throws ConvertError when the file cannot be read or is malformed, and for what
// Petrel's SentencePiece does not implement (WORD/CHAR models, a denormalizer's rules).
SpmModel read_spm_model(const std::string& path);
// The same for bytes already in memory; `name` stands for the file in messages.
SpmModel parse_spm_model(std::string bytes, const std::string& name);

}  // namespace petrel::convert
