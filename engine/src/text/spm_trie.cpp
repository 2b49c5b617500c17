#include "text/spm_trie.h"

#include <algorithm>
#include <numeric>

namespace petrel::text {

PieceTrie::Duplicate PieceTrie::build(const std::vector<std::string_view>& pieces) {
  nodes_.clear();
  labels_.clear();
  std::vector<int32_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&pieces](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
  });
  auto piece = [&](size_t i) { return pieces[static_cast<size_t>(order[i])]; };

  // Breadth first: node `node` stands for the common prefix (of length `depth`) of the
  // sorted pieces [lo, hi).
  struct Range {
    uint32_t node;
    size_t lo, hi, depth;
  };
  std::vector<Range> queue;
  queue.reserve(pieces.size() + 1);
  nodes_.reserve(pieces.size() * 3 + 1);
  labels_.reserve(pieces.size() * 3 + 1);
  nodes_.push_back(Node{});
  labels_.push_back(0);
  queue.push_back(Range{0, 0, pieces.size(), 0});
  for (size_t head = 0; head < queue.size(); ++head) {
    Range r = queue[head];
    if (r.lo < r.hi && piece(r.lo).size() == r.depth) {  // a piece ends here (sorts first)
      nodes_[r.node].id = order[r.lo];
      ++r.lo;
      if (r.lo < r.hi && piece(r.lo).size() == r.depth) return Duplicate{order[r.lo - 1], order[r.lo]};
    }
    const auto first = static_cast<uint32_t>(nodes_.size());
    for (size_t i = r.lo; i < r.hi;) {
      const char byte = piece(i)[r.depth];
      size_t j = i + 1;
      while (j < r.hi && piece(j)[r.depth] == byte) ++j;
      queue.push_back(Range{static_cast<uint32_t>(nodes_.size()), i, j, r.depth + 1});
      nodes_.push_back(Node{});
      labels_.push_back(static_cast<unsigned char>(byte));
      i = j;
    }
    nodes_[r.node].first_child = first;
    nodes_[r.node].child_count = static_cast<uint32_t>(nodes_.size()) - first;
  }
  return Duplicate{};
}

}  // namespace petrel::text
