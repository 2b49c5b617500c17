#include "text/spm_trie.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

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
template <class Pieces>
void sort_keys(const Pieces& pieces, std::vector<Key>& keys) {
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
template <class Pieces>
std::vector<int32_t> sorted_ids(const Pieces& pieces) {
  std::vector<Key> keys(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) keys[i] = key_at(pieces[i], 0, static_cast<int32_t>(i));
  sort_keys(pieces, keys);
  std::vector<int32_t> order(pieces.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].id;
  return order;
}

// `count` zeroed words of scratch. From a megabyte on, on Linux, they are mapped and
// offered transparent huge pages: NLLB's 2 MiB then costs one page fault instead of 512
// (0.5-0.9 ms of CPU in a 9 ms load, measured). Elsewhere, or if the mapping fails, a
// vector; where huge pages are off, the mapping faults 4 KiB pages as the vector would.
class ZeroedWords {
 public:
  explicit ZeroedWords(size_t count) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr size_t kHuge = size_t{2} << 20;
    if (count >= kHuge / 16 && count < (SIZE_MAX - 2 * kHuge) / 8) {
      const size_t bytes = (count * 8 + kHuge - 1) / kHuge * kHuge;
      void* base = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base != MAP_FAILED) {
        mapped_ = base;
        mapped_size_ = bytes + kHuge;
        const uintptr_t at = (reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge;  // huge-page aligned
        ::madvise(reinterpret_cast<void*>(at), bytes, MADV_HUGEPAGE);  // a hint: refused, 4 KiB pages
        data_ = reinterpret_cast<uint64_t*>(at);
        return;
      }
    }
#endif
    own_.assign(count, 0);
    data_ = own_.data();
  }
  ~ZeroedWords() {
#if defined(__linux__)
    if (mapped_ != nullptr) ::munmap(mapped_, mapped_size_);
#endif
  }
  ZeroedWords(const ZeroedWords&) = delete;
  ZeroedWords& operator=(const ZeroedWords&) = delete;
  uint64_t& operator[](size_t i) { return data_[i]; }

 private:
  std::vector<uint64_t> own_;
#if defined(__linux__)
  void* mapped_ = nullptr;
  size_t mapped_size_ = 0;
#endif
  uint64_t* data_ = nullptr;
};

}  // namespace

template <class Pieces>
PieceTrie::Duplicate PieceTrie::build(const Pieces& pieces) {
  own_nodes_.clear();
  own_labels_.clear();
  view_own_storage();
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
    if (k == length(i - 1) && k == length(i)) {
      view_own_storage();
      return Duplicate{order[i - 1], order[i]};
    }
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
  own_nodes_.reserve(total + 2);  // at most one node per byte, the root and the closing node
  own_labels_.reserve(total + 2);
  own_nodes_.push_back(Node{0, -1});
  own_labels_.push_back(0);
  size_t node = 0;  // the node of level[0]
  for (size_t depth = 0; !level.empty(); ++depth) {
    next.clear();
    // The level's ranges are ascending and disjoint, and so are its split positions.
    const uint32_t* split = splits.data() + (depth <= longest ? split_start[depth] : 0);
    const uint32_t* split_end = splits.data() + (depth <= longest ? split_start[depth + 1] : 0);
    for (size_t k = 0; k < level.size(); ++k, ++node) {
      Range r = level[k];
      if (r.lo < r.hi && length(r.lo) == depth) {  // a piece ends here (sorts first)
        own_nodes_[node].id = order[r.lo];
        ++r.lo;
      }
      own_nodes_[node].first_child = static_cast<uint32_t>(own_nodes_.size());
      while (split != split_end && *split <= r.lo) ++split;
      for (uint32_t lo = r.lo; lo < r.hi;) {
        uint32_t hi = r.hi;
        if (split != split_end && *split < r.hi) hi = *split++;
        next.push_back(Range{lo, hi});
        own_nodes_.push_back(Node{0, -1});
        own_labels_.push_back(static_cast<unsigned char>(bytes[begin[lo] + depth]));
        lo = hi;
      }
    }
    level.swap(next);
  }
  own_nodes_.push_back(Node{static_cast<uint32_t>(own_nodes_.size()), -1});  // closes the last node's children
  own_labels_.push_back(0);
  view_own_storage();
  return Duplicate{};
}

PieceTrie& PieceTrie::operator=(const PieceTrie& other) {
  if (this == &other) return *this;
  own_nodes_ = other.own_nodes_;
  own_labels_ = other.own_labels_;
  if (other.own_nodes_.empty()) {  // adopted: the same views of the file
    nodes_ = other.nodes_;
    labels_ = other.labels_;
    node_count_ = other.node_count_;
  } else {
    view_own_storage();
  }
  return *this;
}

PieceTrie& PieceTrie::operator=(PieceTrie&& other) noexcept {
  if (this == &other) return *this;
  own_nodes_ = std::move(other.own_nodes_);  // moving a vector keeps its data pointer
  own_labels_ = std::move(other.own_labels_);
  nodes_ = other.nodes_;
  labels_ = other.labels_;
  node_count_ = other.node_count_;
  other.own_nodes_.clear();
  other.own_labels_.clear();
  other.view_own_storage();
  return *this;
}

template <class Pieces>
std::string PieceTrie::adopt(const Pieces& pieces, const detail::StoredPieceTrie& stored) {
  own_nodes_.clear();
  own_labels_.clear();
  view_own_storage();
  const size_t count = stored.size;
  const Node* nodes = stored.nodes;
  const unsigned char* labels = stored.labels;
  auto node_problem = [](size_t n, const std::string& what) { return "trie_nodes[" + std::to_string(n) + "]: " + what; };
  // Sizes: at most one node per piece byte, the root and the closing node; node
  // numbers fit first_child's 32 bits.
  size_t piece_bytes = 0;
  for (size_t i = 0; i < pieces.size(); ++i) piece_bytes += pieces[i].size();
  if (count < 3 || count > piece_bytes + 2 || count > UINT32_MAX)
    return "trie_nodes: " + std::to_string(count) + " nodes for " + std::to_string(pieces.size()) + " pieces of " +
           std::to_string(piece_bytes) + " bytes (expected 3.." + std::to_string(piece_bytes + 2) + ")";
  // The child ranges tile nodes 1 .. count - 2 in order, each after its parent: every
  // node but the root has exactly one parent, numbered before it, so this is a tree
  // rooted at node 0 and numbered breadth first. Each id is in range and ends one node.
  const size_t last = count - 1;  // the closing node
  if (nodes[0].first_child != 1) return node_problem(0, "first_child " + std::to_string(nodes[0].first_child) + " is not 1");
  if (nodes[last].first_child != last || nodes[last].id != -1)
    return node_problem(last, "the closing node is not {first_child " + std::to_string(last) + ", id -1}");
  if (nodes[0].id != -1) return node_problem(0, "the root (the empty string) has id " + std::to_string(nodes[0].id));
  // Per node, as the loop meets it (children after their parent), one word `up`: for a
  // node at most 8 deep its path (big-endian, zero-padded), deeper its parent; so a node
  // ending a piece is checked against it with two reads instead of a chain of parents.
  // Its depth needs no table: the tiling numbers the nodes breadth first, so each level
  // is a run of nodes, and the next level starts at the children of a level's first node.
  // One pass: a node's word is set by its parent, met before it in a valid trie (where
  // one is not, the node's parent is met later and refused then, or its path check fails).
  ZeroedWords up(last);
  std::vector<bool> ended(pieces.size(), false);
  size_t ended_count = 0;
  size_t depth = 0, level_end = 1;  // node n is `depth` deep; the next level starts at level_end
  for (size_t n = 0; n < last; ++n) {
    if (n == level_end) {
      ++depth;
      level_end = nodes[n].first_child;
    }
    const uint32_t first = nodes[n].first_child, end = nodes[n + 1].first_child;
    const int32_t id = nodes[n].id;
    if (end < first)
      return node_problem(n + 1, "first_child " + std::to_string(end) + " is below the previous node's " + std::to_string(first));
    if (end > last)  // (later nodes' are not checked yet)
      return node_problem(n + 1, "first_child " + std::to_string(end) + " is past the closing node " + std::to_string(last));
    if (first < end && first <= n)
      return node_problem(n, "its children start at node " + std::to_string(first) + ", not after it");
    if (id >= 0) {
      const auto i = static_cast<size_t>(id);
      if (i >= pieces.size())
        return node_problem(n, "id " + std::to_string(id) + " is not a piece id (" + std::to_string(pieces.size()) + " pieces)");
      if (ended[i]) return node_problem(n, "id " + std::to_string(id) + " ends a second node");
      ended[i] = true;
      ++ended_count;
      // The node spells piece i: as deep as the piece is long, the same first 8 bytes,
      // and (longer pieces) the labels from the node up to depth 8 are the piece's bytes
      // from the last. The walks cost the pieces' bytes: linear, no recursion.
      const std::string_view piece = pieces[i];
      bool same = depth == piece.size();
      uint64_t piece_head = 0;
      for (size_t k = 0; k < piece.size() && k < 8; ++k)
        piece_head |= uint64_t{static_cast<unsigned char>(piece[k])} << (56 - 8 * k);
      size_t at = n;
      for (size_t k = piece.size(); same && k > 8; --k) {
        // (A parent is numbered below its child: the bound keeps a corrupt trie in range.)
        same = labels[at] == static_cast<unsigned char>(piece[k - 1]) && up[at] < at;
        at = static_cast<size_t>(up[at]);
      }
      if (!same || up[at] != piece_head)
        return node_problem(n, "id " + std::to_string(id) + " but its path is not pieces[" + std::to_string(id) + "]");
    } else if (id != -1) {
      return node_problem(n, "id " + std::to_string(id) + " is neither a piece id nor -1");
    }
    if (first == end) {
      if (id < 0 && n > 0) return node_problem(n, "a leaf without a piece");
      continue;
    }
    if (depth >= detail::kMaxPieceBytes) return node_problem(n, "has children deeper than the longest piece may be");
    for (uint32_t c = first; c < end; ++c) {
      if (c > first && labels[c] <= labels[c - 1])
        return "trie_labels[" + std::to_string(c) + "]: " + std::to_string(labels[c]) +
               " does not follow its previous sibling's " + std::to_string(labels[c - 1]) + " in order";
      up[c] = depth < 8 ? up[n] | uint64_t{labels[c]} << (56 - 8 * depth) : n;
    }
  }
  // Each node ending a piece ends a different one: all of them, or one is missing.
  if (ended_count != pieces.size())
    for (size_t i = 0; i < pieces.size(); ++i)
      if (!ended[i]) return "trie_nodes: no node ends pieces[" + std::to_string(i) + "]";
  nodes_ = nodes;
  labels_ = labels;
  node_count_ = count;
  return "";
}

template PieceTrie::Duplicate PieceTrie::build(const std::vector<std::string_view>&);
template PieceTrie::Duplicate PieceTrie::build(const StringTable&);
template std::string PieceTrie::adopt(const std::vector<std::string_view>&, const detail::StoredPieceTrie&);
template std::string PieceTrie::adopt(const StringTable&, const detail::StoredPieceTrie&);

}  // namespace petrel::text
