// The public text functions (translator.h) over the model's tokenizer.
#include "model_access.h"
#include "petrel/translator.h"

namespace petrel {

Result<std::vector<int32_t>> encode_text(const Model& model, const std::string& text) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr)
    return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer; pass token ids"};
  return detail::without_exceptions([&] { return tokenizer->encode(text); });
}

Result<TokenizedText> tokenize(const Model& model, const std::string& text, const std::string& source_language) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr)
    return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer; pass token ids"};
  return detail::without_exceptions([&] { return tokenizer->tokenize_in(text, source_language); });
}

Result<std::vector<std::string>> output_tokens(const Model& model, const std::vector<int32_t>& ids) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr) return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer"};
  return detail::without_exceptions([&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int32_t id : ids) {
      auto token = tokenizer->output_token(id);
      if (!token) return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " is out of range"};
      out.emplace_back(*token);
    }
    return out;
  });
}

Result<std::string> decode_text(const Model& model, const std::vector<int32_t>& ids) {
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(model);
  if (tokenizer == nullptr) return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer"};
  return detail::without_exceptions([&] { return tokenizer->decode(ids); });
}

namespace detail {
Result<TextHypothesis> text_hypothesis(const Model& model, Hypothesis&& h) {
  TextHypothesis t;
  auto text = decode_text(model, h.ids);
  if (!text) return text.error();
  auto pieces = output_tokens(model, h.ids);
  if (!pieces) return pieces.error();
  t.text = std::move(text.value());
  t.pieces = std::move(pieces.value());
  t.ids = std::move(h.ids);
  t.score = h.score;
  t.ended_on_eos = h.ended_on_eos;
  t.alignment = std::move(h.alignment);
  t.token_scores = std::move(h.token_scores);
  return t;
}
}  // namespace detail

}  // namespace petrel
