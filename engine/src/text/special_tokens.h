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
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  PieceTrie trie_;
  std::vector<std::string_view> texts_;
  std::vector<int32_t> ids_;  // per trie id
};

}  // namespace petrel::text
