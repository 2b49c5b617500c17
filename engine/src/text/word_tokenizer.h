// The tokenizer of models converted with a word/character vocabulary (the demo):
// whitespace-separated words found in the vocabulary, other words as characters.
#pragma once

#include <string_view>

#include "core/string_hash.h"
#include "petrel/types.h"
#include "text/tokenizer.h"

namespace petrel::text {

class WordTokenizer final : public Tokenizer {
 public:
  // Keeps a reference to info (its vocabulary and special ids): info must outlive it.
  explicit WordTokenizer(const ModelInfo& info);
  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  std::optional<std::string_view> output_token(int32_t id) const override;

 private:
  const ModelInfo& info_;
  detail::StringMap<std::string_view, int32_t> ids_;  // views of info_.vocab
};

}  // namespace petrel::text
