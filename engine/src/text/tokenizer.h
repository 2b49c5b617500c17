// A model's text tokenizer: text -> the model's input ids, output ids -> text.
// Built once when a model loads and owned by it (model_access.h); immutable, so
// shared by every thread translating with the model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The ids the encoder reads for `text`, EOS included.
  virtual Result<std::vector<int32_t>> encode(std::string_view text) const = 0;
  // Output ids (without start token and EOS) as text; special tokens are skipped.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
};

}  // namespace petrel::text
