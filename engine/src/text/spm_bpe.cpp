// BPE segmentation: upstream's bpe::Model::SampleEncode without dropout
// (bpe_model.cc). The text starts as characters (user-defined symbols whole and
// frozen); the best-scoring adjacent pair that is a piece (normal, user-defined or
// unused) merges first, ties to the leftmost; stale candidates are recognised by their
// size. Unused pieces are split again into the pair that last proposed them, as
// upstream's rev_merge map does (the last proposal wins, whether it merged or not).
// The map keeps where that pair split (the left part's length), not the pair's bytes:
// equal strings split alike, and each occurrence is split where it is.
#include <algorithm>

#include "core/string_hash.h"
#include "text/sentencepiece.h"

namespace petrel::text {

void SentencePiece::encode_bpe(std::string_view normalized, Encoding& work) const {
  const size_t size = normalized.size();
  const auto* text = reinterpret_cast<const unsigned char*>(normalized.data());
  std::vector<Encoding::Symbol>& symbols = work.symbols_;
  std::vector<Encoding::Pair>& agenda = work.agenda_;
  symbols.clear();
  agenda.clear();
  auto bytes_of = [&](const Encoding::Symbol& s) { return normalized.substr(s.begin, s.size); };

  for (size_t at = 0; at < size;) {
    size_t length = has_user_defined_ ? longest_user_defined(normalized.substr(at)) : 0;
    const bool frozen = length > 0;
    if (!frozen) length = std::min(utf8::lead_length(text[at]), size - at);
    const auto index = static_cast<int32_t>(symbols.size());
    Encoding::Symbol s;
    s.begin = static_cast<uint32_t>(at);
    s.size = static_cast<uint32_t>(length);
    s.prev = index - 1;
    s.next = at + length < size ? index + 1 : -1;
    s.node = trie_.walk(PieceTrie::root(), normalized.substr(at, length));
    s.frozen = frozen;
    symbols.push_back(s);
    at += length;
  }

  // Larger score first; equal scores: the leftmost pair first.
  auto lower_priority = [](const Encoding::Pair& a, const Encoding::Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  // rev_merge: only models with unused pieces need it.
  detail::StringMap<std::string_view, uint32_t> left_size_of;

  auto propose = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Encoding::Symbol& l = symbols[static_cast<size_t>(left)];
    const Encoding::Symbol& r = symbols[static_cast<size_t>(right)];
    if (l.frozen || r.frozen || l.node == PieceTrie::kNone) return;
    const uint32_t node = trie_.walk(l.node, bytes_of(r));
    if (node == PieceTrie::kNone) return;
    const int32_t id = trie_.id(node);
    if (id < 0) return;
    const PieceType type = types_[static_cast<size_t>(id)];
    if (type != PieceType::kNormal && type != PieceType::kUserDefined && type != PieceType::kUnused) return;
    agenda.push_back(Encoding::Pair{scores_[static_cast<size_t>(id)], left, right, l.size + r.size, node});
    std::push_heap(agenda.begin(), agenda.end(), lower_priority);
    if (type == PieceType::kUnused)
      left_size_of[normalized.substr(l.begin, l.size + r.size)] = l.size;
  };

  for (size_t i = 1; i < symbols.size(); ++i) propose(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!agenda.empty()) {
    std::pop_heap(agenda.begin(), agenda.end(), lower_priority);
    const Encoding::Pair top = agenda.back();
    agenda.pop_back();
    Encoding::Symbol& l = symbols[static_cast<size_t>(top.left)];
    Encoding::Symbol& r = symbols[static_cast<size_t>(top.right)];
    if (l.size == 0 || r.size == 0 || l.size + r.size != top.size) continue;  // stale
    l.size += r.size;
    l.node = top.node;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    r.size = 0;
    propose(l.prev, top.left);
    propose(top.left, l.next);
  }

  // Emit the symbols, splitting unused pieces (depth first, left before right).
  std::vector<Encoding::Span>& stack = work.stack_;
  for (int32_t index = symbols.empty() ? -1 : 0; index >= 0; index = symbols[static_cast<size_t>(index)].next) {
    const Encoding::Symbol& s = symbols[static_cast<size_t>(index)];
    const int32_t id = s.node == PieceTrie::kNone || trie_.id(s.node) < 0 ? unk_id_ : trie_.id(s.node);
    if (!has_unused_ || types_[static_cast<size_t>(id)] != PieceType::kUnused) {
      work.spans_.push_back(Encoding::Span{s.begin, s.size, id});
      continue;
    }
    stack.clear();
    stack.push_back(Encoding::Span{s.begin, s.size, id});
    while (!stack.empty()) {
      const Encoding::Span span = stack.back();
      stack.pop_back();
      const auto found = types_[static_cast<size_t>(span.id)] == PieceType::kUnused
                             ? left_size_of.find(normalized.substr(span.begin, span.size))
                             : left_size_of.end();
      if (found == left_size_of.end()) {
        work.spans_.push_back(span);
        continue;
      }
      auto span_of = [&](uint32_t begin, uint32_t size) {
        return Encoding::Span{begin, size, piece_to_id(normalized.substr(begin, size))};
      };
      const Encoding::Span left = span_of(span.begin, found->second);
      const Encoding::Span right = span_of(span.begin + found->second, span.size - found->second);
      stack.push_back(right);
      stack.push_back(left);
    }
  }
}

}  // namespace petrel::text
