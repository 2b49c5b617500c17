#include "text/spm_trie.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/bytes.h"

namespace petrel::text {

namespace {

// A piece's 8 bytes from `depth` on, big-endian and zero-padded, and how many bytes it
// has from there (capped at 9: "more than 8"). Ordering by (chunk, rest) orders pieces
// by those bytes with a prefix first; equal pairs with rest 9 need the next chunk.
struct Key {
  uint64_t chunk;
  uint32_t rest;
  int32_t id;
};

Key key_at(std::string_view piece, size_t depth, int32_t id) {
  const size_t size = piece.size() > depth ? piece.size() - depth : 0;
  if (size >= 8) return Key{detail::load_be64(piece.data() + depth), size > 8 ? 9u : 8u, id};
  uint64_t chunk = 0;
  for (size_t i = 0; i < size; ++i)
    chunk |= static_cast<uint64_t>(static_cast<unsigned char>(piece[depth + i])) << (56 - 8 * i);
  return Key{chunk, static_cast<uint32_t>(size), id};
}

// Equal pieces keep id order (so a duplicate is reported as the later id).
bool key_less(const Key& a, const Key& b) {
  if (a.chunk != b.chunk) return a.chunk < b.chunk;
  return a.rest != b.rest ? a.rest < b.rest : a.id < b.id;
}

// Sorts keys[lo, hi) by their chunks alone.
void sort_chunks(std::vector<Key>& keys, size_t lo, size_t hi, std::vector<Key>& spare) {
  const size_t n = hi - lo;
  if (n <= 64) {
    std::sort(keys.begin() + static_cast<long>(lo), keys.begin() + static_cast<long>(hi), key_less);
    return;
  }
  // Least-significant-digit radix sort, 11 bits at a time. It reads no piece bytes,
  // which are scattered through a model file.
  spare.resize(n);
  Key* data = keys.data() + lo;
  std::vector<uint32_t> count;
  for (int shift = 0; shift < 64; shift += 11) {
    auto digit = [shift](const Key& k) { return static_cast<size_t>((k.chunk >> shift) & 0x7ff); };
    count.assign(0x801, 0);
    for (size_t i = 0; i < n; ++i) ++count[digit(data[i]) + 1];
    if (count[digit(data[0]) + 1] == n) continue;  // one value: nothing to do
    for (size_t b = 0; b < 0x800; ++b) count[b + 1] += count[b];
    for (size_t i = 0; i < n; ++i) spare[count[digit(data[i])]++] = data[i];
    std::copy(spare.begin(), spare.begin() + static_cast<long>(n), data);
  }
}

// Sorts `keys` (made at depth 0) into byte order of the pieces. A range of keys whose
// chunks are equal and whose pieces go on is re-keyed by the next chunk and sorted
// again; the ranges wait on an explicit list, so pieces sharing a long prefix cost
// heap space, not stack (the stack would overflow on a hostile model's pieces).
void sort_keys(const std::vector<std::string_view>& pieces, std::vector<Key>& keys) {
  struct Pending {
    size_t lo, hi, depth;
  };
  std::vector<Pending> pending{Pending{0, keys.size(), 0}};
  std::vector<Key> spare;
  while (!pending.empty()) {
    const Pending range = pending.back();
    pending.pop_back();
    sort_chunks(keys, range.lo, range.hi, spare);
    // Runs of equal chunks: ordered by how many bytes follow (a prefix first), and
    // those that go on by the next chunk.
    for (size_t i = range.lo; i < range.hi;) {
      size_t j = i + 1;
      while (j < range.hi && keys[j].chunk == keys[i].chunk) ++j;
      if (j - i > 1) {
        std::sort(keys.begin() + static_cast<long>(i), keys.begin() + static_cast<long>(j), key_less);
        size_t longer = i;
        while (longer < j && keys[longer].rest < 9) ++longer;
        if (j - longer > 1) {
          const size_t depth = range.depth + 8;
          for (size_t k = longer; k < j; ++k)
            keys[k] = key_at(pieces[static_cast<size_t>(keys[k].id)], depth, keys[k].id);
          pending.push_back(Pending{longer, j, depth});
        }
      }
      i = j;
    }
  }
}

// The ids of `pieces` in byte order of the pieces.
std::vector<int32_t> sorted_ids(const std::vector<std::string_view>& pieces) {
  std::vector<Key> keys(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) keys[i] = key_at(pieces[i], 0, static_cast<int32_t>(i));
  sort_keys(pieces, keys);
  std::vector<int32_t> order(pieces.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].id;
  return order;
}

}  // namespace

PieceTrie::Duplicate PieceTrie::build(const std::vector<std::string_view>& pieces) {
  nodes_.clear();
  labels_.clear();
  const std::vector<int32_t> order = sorted_ids(pieces);
  const size_t n = order.size();
  // The sorted pieces' bytes, contiguous, and lcp[i]: the bytes pieces i - 1 and i share.
  std::vector<size_t> begin(n + 1);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    begin[i] = total;
    total += pieces[static_cast<size_t>(order[i])].size();
  }
  begin[n] = total;
  std::string bytes;
  bytes.reserve(total + 8);
  for (int32_t id : order) bytes += pieces[static_cast<size_t>(id)];
  bytes.append(8, '\0');  // word loads may run past the last piece
  auto length = [&](size_t i) { return begin[i + 1] - begin[i]; };
  std::vector<uint32_t> lcp(n, 0);
  size_t longest = 0;
  for (size_t i = 0; i < n; ++i) {
    longest = std::max(longest, length(i));
    if (i == 0) continue;
    const size_t limit = std::min(length(i - 1), length(i));
    const char* a = bytes.data() + begin[i - 1];
    const char* b = bytes.data() + begin[i];
    size_t k = 0;
    while (k < limit) {  // a word at a time: the first differing byte is the highest of the XOR
      const uint64_t diff = detail::load_be64(a + k) ^ detail::load_be64(b + k);
      if (diff != 0) {
        k += static_cast<size_t>(__builtin_clzll(diff) / 8);
        break;
      }
      k += 8;
    }
    k = std::min(k, limit);
    if (k == length(i - 1) && k == length(i)) return Duplicate{order[i - 1], order[i]};
    lcp[i] = static_cast<uint32_t>(k);
  }
  // Where the sorted list splits at each depth: the positions i with lcp[i] == depth,
  // ascending (a counting sort of the positions by lcp).
  std::vector<uint32_t> split_start(longest + 2, 0), splits(n > 0 ? n - 1 : 0);
  for (size_t i = 1; i < n; ++i) ++split_start[lcp[i] + 1];
  for (size_t d = 0; d <= longest; ++d) split_start[d + 1] += split_start[d];
  {
    std::vector<uint32_t> fill(split_start.begin(), split_start.end() - 1);
    for (size_t i = 1; i < n; ++i) splits[fill[lcp[i]]++] = static_cast<uint32_t>(i);
  }

  // Breadth first, one level at a time: a node of the level stands for the common
  // prefix (of length `depth`) of the sorted pieces [lo, hi); its children split that
  // range where lcp == depth. Nodes are numbered in the order they are made, so each
  // node's children are contiguous and follow those of the node before it.
  struct Range {
    uint32_t lo, hi;
  };
  std::vector<Range> level{Range{0, static_cast<uint32_t>(n)}}, next;
  nodes_.reserve(total + 2);  // at most one node per byte, the root and the closing node
  labels_.reserve(total + 2);
  nodes_.push_back(Node{0, -1});
  labels_.push_back(0);
  size_t node = 0;  // the node of level[0]
  for (size_t depth = 0; !level.empty(); ++depth) {
    next.clear();
    // The level's ranges are ascending and disjoint, and so are its split positions.
    const uint32_t* split = splits.data() + (depth <= longest ? split_start[depth] : 0);
    const uint32_t* split_end = splits.data() + (depth <= longest ? split_start[depth + 1] : 0);
    for (size_t k = 0; k < level.size(); ++k, ++node) {
      Range r = level[k];
      if (r.lo < r.hi && length(r.lo) == depth) {  // a piece ends here (sorts first)
        nodes_[node].id = order[r.lo];
        ++r.lo;
      }
      nodes_[node].first_child = static_cast<uint32_t>(nodes_.size());
      while (split != split_end && *split <= r.lo) ++split;
      for (uint32_t lo = r.lo; lo < r.hi;) {
        uint32_t hi = r.hi;
        if (split != split_end && *split < r.hi) hi = *split++;
        next.push_back(Range{lo, hi});
        nodes_.push_back(Node{0, -1});
        labels_.push_back(static_cast<unsigned char>(bytes[begin[lo] + depth]));
        lo = hi;
      }
    }
    level.swap(next);
  }
  nodes_.push_back(Node{static_cast<uint32_t>(nodes_.size()), -1});  // closes the last node's children
  labels_.push_back(0);
  return Duplicate{};
}

}  // namespace petrel::text
