// A byte trie over a SentencePiece vocabulary: which pieces start at a position of a
// text (unigram), is this string a piece (BPE merges, decoding from pieces).
// Built once per model from the piece strings (views into the caller's bytes): sorted,
// then laid out breadth first with each node's children contiguous, so building costs
// one sort and one linear pass.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace petrel::text {

class PieceTrie {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  struct Duplicate {
    int32_t first = -1, second = -1;  // ids of two equal pieces, first < second; first < 0: none
  };
  // Pieces must be non-empty. Returns the first duplicate pair found (the trie is then
  // unusable) or {-1, -1}.
  Duplicate build(const std::vector<std::string_view>& pieces);

  static constexpr uint32_t root() { return 0; }
  // The node reached from `node` by `byte`, or kNone.
  uint32_t child(uint32_t node, unsigned char byte) const {
    const uint32_t first = nodes_[node].first_child;
    const uint32_t count = nodes_[node + 1].first_child - first;
    const unsigned char* labels = labels_.data() + first;
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
  // Nodes are numbered breadth first, so the children of node n are the nodes
  // [nodes_[n].first_child, nodes_[n + 1].first_child); a last node closes the list.
  struct Node {
    uint32_t first_child;
    int32_t id;  // the piece ending here, or -1
  };
  std::vector<Node> nodes_;
  std::vector<unsigned char> labels_;  // labels_[n]: the byte leading to node n
};

}  // namespace petrel::text
