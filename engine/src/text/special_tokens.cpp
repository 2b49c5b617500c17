#include "text/special_tokens.h"

#include <unordered_set>

namespace petrel::text {

SpecialTokenSplitter::SpecialTokenSplitter(const std::vector<std::pair<std::string_view, int32_t>>& specials) {
  std::unordered_set<std::string_view> seen;  // Gemma 3 has 6,414 added tokens
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

void SpecialTokenSplitter::split(std::string_view text, std::vector<TextSegment>& out) const {
  out.clear();
  size_t start = 0;
  for (size_t at = 0; at < text.size();) {
    // The longest special text starting at `at`.
    size_t length = 0;
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
    if (found < 0) {
      ++at;
      continue;
    }
    out.push_back(TextSegment{text.substr(start, at - start), -1});
    out.push_back(TextSegment{text.substr(at, length), ids_[static_cast<size_t>(found)]});
    at += length;
    start = at;
  }
  out.push_back(TextSegment{text.substr(start), -1});
}

}  // namespace petrel::text
