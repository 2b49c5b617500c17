// Special-token texts cut out of an input before SentencePiece sees it: Hugging Face's
// slow tokenizers' no-split tokens (tools/reference/marian_tokenizer.py's
// split_on_specials, which the Marian and the family tokenizers share): leftmost
// first, the longest special text at that position. Each tokenizer applies its own
// whitespace rule to the plain segments around a special one. A walk of the texts' trie
// at each position costs up to the longest text's length per byte (9 us per byte for a
// 4,095-byte added token over 'aaa...'); the automaton reads each byte about twice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/status.h"
#include "text/piece_automaton.h"

namespace petrel::text {

struct TextSegment {
  std::string_view text;
  int32_t special_id;  // the special token's id; -1: plain text (may be empty)
};

class SpecialTokenSplitter {
 public:
  SpecialTokenSplitter() = default;
  // Texts must outlive the splitter; a text given twice keeps its first id, an empty one
  // matches nothing. Throws std::bad_alloc when memory runs out (assign returns it).
  explicit SpecialTokenSplitter(const std::vector<std::pair<std::string_view, int32_t>>& specials);
  Status assign(const std::vector<std::pair<std::string_view, int32_t>>& specials);
  // `text` as [plain, special, plain, ..., plain] (plain segments may be empty). Time:
  // O(1) amortized per byte of `text` (PieceAutomaton: the longest special text starting
  // at a position is one read of the automaton's state there), whatever the texts'
  // lengths; scratch memory at most max(4096, longest text) states.
  void split(std::string_view text, std::vector<TextSegment>& out) const {
    split(text, out, [](size_t, size_t, int32_t) { return true; });
  }
  // The same, where a match (`at`, `length`, id) that `accept` refuses is left in the
  // plain text and the search goes on after it (tokenizers' single_word rule).
  template <class Accept>
  void split(std::string_view text, std::vector<TextSegment>& out, Accept accept) const {
    out.clear();
    size_t start = 0;
    std::vector<uint32_t> scratch;
    PieceScan scan(automaton_, text, scratch);
    for (size_t at = 0; at < text.size() && !automaton_.empty();) {
      const int32_t found = scan.longest_at(at);
      if (found < 0) {
        ++at;
        continue;
      }
      const size_t length = automaton_.length(found);
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
  bool empty() const { return automaton_.empty(); }

 private:
  PieceAutomaton automaton_;  // of the texts; its piece i is ids_[i]'s text
  std::vector<int32_t> ids_;
};

}  // namespace petrel::text
