// A byte trie over a SentencePiece vocabulary: which pieces start at a position of a
// text (unigram), is this string a piece (BPE merges, decoding from pieces).
// Laid out breadth first with each node's children contiguous and sorted by label.
// Either built from the piece strings (sorted, then one linear pass: the converter, and
// files from before format 1.5) or adopted as stored in a model file, viewed in place
// after a linear-time check that it is exactly the trie of the pieces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/tokenizer_tables.h"

namespace petrel::text {

class PieceTrie {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  using Node = detail::PieceTrieNode;

  PieceTrie() = default;
  // Copies keep their views valid: a built trie's views point into its own storage.
  PieceTrie(const PieceTrie& other) { *this = other; }
  PieceTrie& operator=(const PieceTrie& other);
  PieceTrie(PieceTrie&& other) noexcept { *this = std::move(other); }
  PieceTrie& operator=(PieceTrie&& other) noexcept;

  struct Duplicate {
    int32_t first = -1, second = -1;  // ids of two equal pieces, first < second; first < 0: none
  };
  // Pieces must be non-empty. Returns the first duplicate pair found (the trie is then
  // unusable) or {-1, -1}.
  // Pieces: std::vector<std::string_view> or StringTable.
  template <class Pieces>
  Duplicate build(const Pieces& pieces);

  // Views `stored` (a model file's trie_nodes and trie_labels; they must outlive this
  // trie) after checking it is the trie build() makes of `pieces` (non-empty, at most
  // kMaxPieceBytes each: checked before), in time linear in the pieces' bytes and
  // without recursion. Returns what is wrong, naming trie_nodes[i] or trie_labels[i],
  // or an empty string.
  template <class Pieces>
  std::string adopt(const Pieces& pieces, const detail::StoredPieceTrie& stored);

  // The layout (what the converter stores): node_count() nodes, the last one closing.
  size_t node_count() const { return node_count_; }
  const Node* nodes() const { return nodes_; }
  const unsigned char* labels() const { return labels_; }

  static constexpr uint32_t root() { return 0; }
  // The node reached from `node` by `byte`, or kNone.
  uint32_t child(uint32_t node, unsigned char byte) const {
    const uint32_t first = nodes_[node].first_child;
    const uint32_t count = nodes_[node + 1].first_child - first;
    const unsigned char* labels = labels_ + first;
    if (count <= 8) {
      for (uint32_t i = 0; i < count; ++i)
        if (labels[i] == byte) return first + i;
      return kNone;
    }
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (labels[mid] < byte)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < count && labels[lo] == byte ? first + lo : kNone;
  }
  // The piece ending at `node`, or -1.
  int32_t id(uint32_t node) const { return nodes_[node].id; }
  // The node reached from `node` by all bytes of `s`, or kNone.
  uint32_t walk(uint32_t node, std::string_view s) const {
    for (char c : s) {
      node = child(node, static_cast<unsigned char>(c));
      if (node == kNone) return kNone;
    }
    return node;
  }
  // The id of piece `s`, or -1.
  int32_t find(std::string_view s) const {
    const uint32_t node = walk(root(), s);
    return node == kNone ? -1 : id(node);
  }

 private:
  void view_own_storage() {
    nodes_ = own_nodes_.data();
    labels_ = own_labels_.data();
    node_count_ = own_nodes_.size();
  }

  // Nodes are numbered breadth first, so the children of node n are the nodes
  // [nodes_[n].first_child, nodes_[n + 1].first_child); a last node closes the list.
  const Node* nodes_ = nullptr;
  const unsigned char* labels_ = nullptr;  // labels_[n]: the byte leading to node n
  size_t node_count_ = 0;
  std::vector<Node> own_nodes_;  // a built trie's storage (empty for an adopted one)
  std::vector<unsigned char> own_labels_;
};

}  // namespace petrel::text
