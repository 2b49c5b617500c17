// A model's text tokenizer: text -> the model's input ids, output ids -> text.
// Built once when a model loads and owned by it (model_access.h); immutable, so
// shared by every thread translating with the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"
#include "petrel/translator.h"

namespace petrel::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The tokens the encoder reads for `text`, EOS included, with their ids.
  virtual Result<TokenizedText> tokenize(std::string_view text) const = 0;
  // Output ids (without start token and EOS) as text; special tokens are skipped.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // The token of output id `id`, or nothing when it is no target id.
  virtual std::optional<std::string_view> output_token(int32_t id) const = 0;

  Result<std::vector<int32_t>> encode(std::string_view text) const {
    auto t = tokenize(text);
    if (!t) return t.error();
    return std::move(t.value().ids);
  }
};

}  // namespace petrel::text
