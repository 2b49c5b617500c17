// The public text functions (translator.h) over the model's tokenizer.
#include "model_access.h"
#include "petrel/translator.h"

namespace petrel {

Result<std::vector<int32_t>> encode_text(const Model& model, const std::string& text) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr)
    return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer; pass token ids"};
  return tokenizer->encode(text);
}

Result<std::string> decode_text(const Model& model, const std::vector<int32_t>& ids) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr) return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer"};
  return tokenizer->decode(ids);
}

}  // namespace petrel
