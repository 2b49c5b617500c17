// Unigram segmentation: upstream's EncodeOptimized (unigram_model.cc), a Viterbi pass
// over byte positions that keeps only the best path ending at each position.
//
// The arithmetic is upstream's to the bit: a user-defined piece scores
// float(length in bytes) * max_score - 0.1 computed in double, so candidate paths
// through pieces are summed and compared in double and stored as float; the unknown
// candidate (min_score - 10) is summed and compared in float. A candidate replaces the
// best only when strictly better, so ties keep the earlier start and the shorter piece.
#include <algorithm>

#include "text/sentencepiece.h"

namespace petrel::text {

void SentencePiece::encode_unigram(std::string_view normalized, Encoding& work) const {
  const size_t size = normalized.size();
  std::vector<Encoding::BestPath>& best = work.best_;
  best.assign(size + 1, Encoding::BestPath{0.0f, -1, -1});
  const float unk_score = min_score_ - 10.0f;
  const auto* text = reinterpret_cast<const unsigned char*>(normalized.data());

  for (size_t start = 0; start < size;) {
    const float score_here = best[start].score;
    const size_t char_length = std::min(utf8::lead_length(text[start]), size - start);
    bool has_single_character = false;
    uint32_t node = PieceTrie::root();
    for (size_t end = start; end < size;) {
      node = trie_.child(node, text[end]);
      if (node == PieceTrie::kNone) break;
      ++end;
      const int32_t id = trie_.id(node);
      if (id < 0) continue;
      const PieceType type = types_[static_cast<size_t>(id)];
      if (type != PieceType::kNormal && type != PieceType::kUserDefined) continue;  // unused, reserved
      const size_t length = end - start;
      const double score = type == PieceType::kUserDefined
                               ? static_cast<double>(static_cast<float>(length) * max_score_) - 0.1
                               : static_cast<double>(scores_[static_cast<size_t>(id)]);
      const double candidate = score + static_cast<double>(score_here);
      Encoding::BestPath& target = best[end];
      if (target.starts_at < 0 || candidate > static_cast<double>(target.score)) {
        target.score = static_cast<float>(candidate);
        target.starts_at = static_cast<int32_t>(start);
        target.id = id;
      }
      if (length == char_length) has_single_character = true;
    }
    if (!has_single_character) {  // an unknown node for this character
      Encoding::BestPath& target = best[start + char_length];
      const float candidate = unk_score + score_here;
      if (target.starts_at < 0 || candidate > target.score) {
        target.score = candidate;
        target.starts_at = static_cast<int32_t>(start);
        target.id = unk_id_;
      }
    }
    start += char_length;
  }

  for (size_t end = size; end > 0;) {  // every character boundary is reached, so this ends at 0
    const Encoding::BestPath& node = best[end];
    if (node.starts_at < 0) break;
    const auto begin = static_cast<size_t>(node.starts_at);
    work.spans_.push_back(
        Encoding::Span{static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin), node.id});
    end = begin;
  }
  std::reverse(work.spans_.begin(), work.spans_.end());
}

}  // namespace petrel::text
