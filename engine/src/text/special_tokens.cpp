#include "text/special_tokens.h"

#include "core/string_hash.h"

namespace petrel::text {

SpecialTokenSplitter::SpecialTokenSplitter(const std::vector<std::pair<std::string_view, int32_t>>& specials) {
  detail::StringSet<std::string_view> seen;  // Gemma 3 has 6,414 added tokens
  for (const auto& [text, id] : specials) {
    if (!seen.insert(text).second) continue;
    texts_.push_back(text);
    ids_.push_back(id);
  }
  trie_.build(texts_);  // no duplicates left
}

std::string SpecialTokenSplitter::adopt(const std::vector<std::pair<std::string_view, int32_t>>& specials,
                                        const detail::StoredPieceTrie& stored) {
  texts_.clear();
  ids_.clear();
  for (const auto& special : specials) {
    texts_.push_back(special.first);
    ids_.push_back(special.second);
  }
  return trie_.adopt(texts_, stored);  // an exact trie of distinct texts (a duplicate fails its check)
}

int32_t SpecialTokenSplitter::longest_at(std::string_view text, size_t at, size_t& length) const {
  int32_t found = -1;
  uint32_t node = PieceTrie::root();
  for (size_t end = at; end < text.size() && !texts_.empty();) {
    node = trie_.child(node, static_cast<unsigned char>(text[end]));
    if (node == PieceTrie::kNone) break;
    ++end;
    if (trie_.id(node) >= 0) {
      found = trie_.id(node);
      length = end - at;
    }
  }
  return found;
}

}  // namespace petrel::text
