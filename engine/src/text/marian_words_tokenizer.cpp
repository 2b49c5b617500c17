#include "text/marian_words_tokenizer.h"

namespace petrel::text {

MarianWordsTokenizer::MarianWordsTokenizer(Parts parts) : parts_(std::move(parts)) {
  id_of_.reserve(parts_.vocab.size());
  for (size_t id = 0; id < parts_.vocab.size(); ++id)
    if (!parts_.vocab[id].empty()) id_of_.emplace(parts_.vocab[id], static_cast<int32_t>(id));
}

Result<TokenizedText> MarianWordsTokenizer::tokenize(std::string_view text) const {
  TokenizedText out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(' ', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(begin, end - begin);
    if (!word.empty()) {
      auto it = id_of_.find(word);
      out.ids.push_back(it == id_of_.end() ? parts_.unk_id : it->second);
      out.pieces.emplace_back(detail::to_valid_utf8(word));  // the input's bytes: UTF-8 for callers
    }
    begin = end + 1;
  }
  out.ids.push_back(parts_.eos_id);
  out.pieces.emplace_back(parts_.vocab[static_cast<size_t>(parts_.eos_id)]);
  return out;
}

Result<std::string> MarianWordsTokenizer::decode(const std::vector<int32_t>& ids) const {
  const StringTable& vocab = targets();
  std::string text;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab.size())
      return Error{ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                    " is outside the target vocabulary of " +
                                                    std::to_string(vocab.size())};
    if (id == parts_.eos_id) continue;
    if (!first) text += ' ';
    text.append(vocab[static_cast<size_t>(id)]);
    first = false;
  }
  return text;
}

std::optional<std::string_view> MarianWordsTokenizer::output_token(int32_t id) const {
  const StringTable& vocab = targets();
  if (id < 0 || static_cast<size_t>(id) >= vocab.size()) return std::nullopt;
  return vocab[static_cast<size_t>(id)];
}

}  // namespace petrel::text
