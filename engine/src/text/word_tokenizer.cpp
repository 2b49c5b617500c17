#include "text/word_tokenizer.h"

namespace petrel::text {

WordTokenizer::WordTokenizer(const ModelInfo& info) : info_(info) {
  ids_.reserve(info.vocab.size());
  for (size_t i = 0; i < info.vocab.size(); ++i) ids_.emplace(info.vocab[i], static_cast<int32_t>(i));
}

Result<TokenizedText> WordTokenizer::tokenize(std::string_view text) const {
  std::vector<int32_t> out;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  for (size_t at = 0; at < text.size();) {
    while (at < text.size() && is_space(text[at])) ++at;
    size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    if (end == at) break;
    const std::string_view word = text.substr(at, end - at);
    at = end;
    if (auto it = ids_.find(word); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (size_t i = 0; i < word.size();) {  // UTF-8 characters
      size_t len = 1;
      auto lead = static_cast<unsigned char>(word[i]);
      if (lead >= 0xf0) len = 4;
      else if (lead >= 0xe0) len = 3;
      else if (lead >= 0xc0) len = 2;
      const std::string_view ch = word.substr(i, len);
      auto it = ids_.find(ch);
      if (it == ids_.end())
        return Error{ErrorCode::kInvalidArgument, "cannot encode '" + std::string(ch) + "' in word '" +
                                                      std::string(word) + "': not in the model's vocabulary"};
      out.push_back(it->second);
      i += len;
    }
  }
  out.push_back(info_.eos_id);
  TokenizedText t;
  for (int32_t id : out) t.pieces.emplace_back(info_.vocab[static_cast<size_t>(id)]);
  t.ids = std::move(out);
  return t;
}

Result<std::string> WordTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= info_.vocab.size())
      return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(id) + " is out of range"};
    if (id == info_.eos_id || id == info_.pad_id || id == info_.decoder_start_id) continue;
    if (!out.empty()) out += ' ';
    out += info_.vocab[static_cast<size_t>(id)];
  }
  return out;
}

std::optional<std::string_view> WordTokenizer::output_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= info_.vocab.size()) return std::nullopt;
  return info_.vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
