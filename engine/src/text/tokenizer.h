// A model's text tokenizer: text -> the model's input ids, output ids -> text.
// Built once when a model loads and owned by it (model_access.h); immutable, so
// shared by every thread translating with the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The tokens the encoder reads for `text`, EOS included, with their ids.
  virtual Result<TokenizedText> tokenize(std::string_view text) const = 0;
  // Output ids (without start token and EOS) as text; special tokens are skipped.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // decode() with each id's bytes of the text (ids as given: an EOS gets an empty range
  // where it stands). Tokenizers that cannot tell fail with kUnsupported.
  virtual Result<std::string> decode_with_ranges(const std::vector<int32_t>& ids, std::vector<TextRange>& ranges) const {
    (void)ids;
    ranges.clear();
    return Error{ErrorCode::kUnsupported, "this model's tokenizer does not give the byte ranges of its tokens"};
  }
  // The token of output id `id`, or nothing when it is no target id.
  virtual std::optional<std::string_view> output_token(int32_t id) const = 0;

  // Multilingual models (NLLB, M2M100, mBART-50) mark the source language with a token.
  // tokenize() with `source_language` (a code of languages()); empty: tokenize(text).
  // Models without language codes refuse any other value.
  virtual Result<TokenizedText> tokenize_in(std::string_view text, std::string_view source_language) const {
    if (source_language.empty()) return tokenize(text);
    return Error{ErrorCode::kInvalidArgument,
                 "source language '" + detail::to_valid_utf8(source_language) + "': this model has no language codes"};
  }
  // The model id of a language code's token (a forced first target token), if any.
  virtual std::optional<int32_t> language_id(std::string_view /*code*/) const { return std::nullopt; }
  // Every language code with its model id, in the tokenizer's order.
  virtual std::vector<std::pair<std::string, int32_t>> languages() const { return {}; }

  Result<std::vector<int32_t>> encode(std::string_view text) const {
    auto t = tokenize(text);
    if (!t) return t.error();
    return std::move(t.value().ids);
  }
};

}  // namespace petrel::text
