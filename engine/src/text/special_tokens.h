// Special-token texts cut out of an input before SentencePiece sees it: Hugging Face's
// slow tokenizers' no-split tokens (tools/reference/marian_tokenizer.py's
// split_on_specials, which the Marian and the family tokenizers share): leftmost
// first, the longest special text at that position. Each tokenizer applies its own
// whitespace rule to the plain segments around a special one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/spm_trie.h"

namespace petrel::text {

struct TextSegment {
  std::string_view text;
  int32_t special_id;  // the special token's id; -1: plain text (may be empty)
};

class SpecialTokenSplitter {
 public:
  SpecialTokenSplitter() = default;
  // Texts must be non-empty; a text given twice keeps its first id. The views must
  // outlive the splitter.
  explicit SpecialTokenSplitter(const std::vector<std::pair<std::string_view, int32_t>>& specials);
  // The splitter of `specials` (distinct texts) over their trie as a model file stores
  // it (a node's id indexing `specials`), viewed in place after PieceTrie::adopt's
  // check; returns what is wrong with it, or an empty string.
  std::string adopt(const std::vector<std::pair<std::string_view, int32_t>>& specials,
                    const detail::StoredPieceTrie& stored);

  // `text` as [plain, special, plain, ..., plain] (plain segments may be empty). Time:
  // at most the longest special text's length per byte of `text`.
  void split(std::string_view text, std::vector<TextSegment>& out) const {
    split(text, out, [](size_t, size_t, int32_t) { return true; });
  }
  // The same, where a match (`at`, `length`, id) that `accept` refuses is left in the
  // plain text and the search goes on after it (tokenizers' single_word rule).
  template <class Accept>
  void split(std::string_view text, std::vector<TextSegment>& out, Accept accept) const {
    out.clear();
    size_t start = 0;
    for (size_t at = 0; at < text.size();) {
      size_t length = 0;
      const int32_t found = longest_at(text, at, length);
      if (found < 0) {
        ++at;
        continue;
      }
      const int32_t id = ids_[static_cast<size_t>(found)];
      if (!accept(at, length, id)) {
        at += length;
        continue;
      }
      out.push_back(TextSegment{text.substr(start, at - start), -1});
      out.push_back(TextSegment{text.substr(at, length), id});
      at += length;
      start = at;
    }
    out.push_back(TextSegment{text.substr(start), -1});
  }
  bool empty() const { return texts_.empty(); }

 private:
  // The index of the longest special text starting at `at` (its length in `length`), or -1.
  int32_t longest_at(std::string_view text, size_t at, size_t& length) const;
  PieceTrie trie_;
  std::vector<std::string_view> texts_;
  std::vector<int32_t> ids_;  // per trie id
};

}  // namespace petrel::text
