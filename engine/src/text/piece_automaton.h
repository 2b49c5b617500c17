// The pieces of a set (special texts, WordPiece tokens, Unigram pieces) that start at
// each position of a text, in time per position that does not depend on how long the
// pieces are: an Aho-Corasick automaton over the REVERSED pieces, run over the text from
// right to left. After it has read text[i..] backwards its state is the longest string
// that is both a prefix of text[i..] and of some piece (reversed, a suffix of what it
// read that is a path of its trie), so the pieces starting at i are that state and its
// chain of failure links that end a piece, longest first; the first one is kept per
// state, so the longest piece starting at i costs one read. A transition is amortized
// O(1) (each failure link taken shortens the state, each byte read lengthens it by one
// at most), a child lookup at most 8 label comparisons (PieceTrie::child).
//
// The state at i depends only on text[i, i + longest_piece()): a scan (PieceScan) works a
// block of positions at a time, reading the block and the longest piece's length after
// it, so its scratch memory is bounded and it never reads far past what it is asked.
//
// Building costs O(the pieces' bytes) time and about 17 bytes of memory per trie node
// (at most one node per byte); a failed allocation is an error (kOutOfMemory).
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"
#include "text/spm_trie.h"

namespace petrel::text {

class PieceAutomaton {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The automaton of `pieces` (non-empty, distinct), whose indexes are the ids it gives.
  // A duplicate, an empty piece or more bytes than 32-bit node numbers reach is
  // kInvalidArgument; memory that cannot be had is kOutOfMemory.
  static Result<PieceAutomaton> build(const std::vector<std::string_view>& pieces);

  bool empty() const { return lengths_.empty(); }
  size_t longest_piece() const { return longest_; }
  size_t piece_count() const { return lengths_.size(); }
  size_t length(int32_t piece) const { return lengths_[static_cast<size_t>(piece)]; }

  static constexpr uint32_t start() { return 0; }
  // The state after `state` reads `byte` (the byte before those it has read).
  uint32_t next(uint32_t state, unsigned char byte) const {
    while (state != 0) {
      const uint32_t child = trie_.child(state, byte);
      if (child != PieceTrie::kNone) return child;
      state = fail_[state];
    }
    return root_next_[byte];
  }
  // The state at position `at` of `text` on its own: reads at most longest_piece() bytes.
  uint32_t state_at(std::string_view text, size_t at) const {
    uint32_t state = start();
    for (size_t i = std::min(text.size(), at + longest_); i-- > at;) state = next(state, static_cast<unsigned char>(text[i]));
    return state;
  }
  // The pieces starting where the scan is in `state`, longest first:
  //   for (uint32_t m = first_match(s); m != kNone; m = next_match(m)) ... piece(m) ...
  uint32_t first_match(uint32_t state) const { return match_[state]; }
  uint32_t next_match(uint32_t match) const { return match_[fail_[match]]; }
  int32_t piece(uint32_t match) const { return trie_.id(match); }
  // The longest piece starting there, or -1.
  int32_t longest(uint32_t state) const {
    const uint32_t m = match_[state];
    return m == kNone ? -1 : trie_.id(m);
  }

 private:
  // Default-constructed: the root alone, which matches nothing.
  PieceTrie trie_;                      // of the reversed pieces, breadth first
  std::vector<uint32_t> fail_{0};       // per node: its longest proper suffix that is a node (the root: itself)
  std::vector<uint32_t> match_{kNone};  // per node: the longest of it and its failure chain that ends a piece, or kNone
  uint32_t root_next_[256] = {};        // the root's transitions, total (0: stays at the root)
  std::vector<uint32_t> lengths_;       // per piece
  size_t longest_ = 0;
};

// The automaton's states at positions of one text, computed a block at a time as they
// are asked for. Asked for positions in increasing order (with any gaps), it makes at
// most two transitions per byte of the text plus two blocks' worth in all: a block
// starts where it is first needed, past the one before, and reads its own bytes and at
// most longest_piece() (no more than a block) after them.
class PieceScan {
 public:
  // `scratch` is reused between scans (one per call of the caller); it holds at most
  // max(kBlock, longest_piece()) states.
  PieceScan(const PieceAutomaton& automaton, std::string_view text, std::vector<uint32_t>& scratch)
      : a_(automaton), text_(text), states_(scratch), block_(std::max(kBlock, automaton.longest_piece())) {}

  // The state at `at` (< the text's size).
  uint32_t state_at(size_t at) {
    if (at < begin_ || at >= end_) fill(at);
    return states_[at - begin_];
  }
  int32_t longest_at(size_t at) { return a_.longest(state_at(at)); }

  static constexpr size_t kBlock = 4096;

 private:
  void fill(size_t at) {
    begin_ = at;
    end_ = std::min(text_.size(), at + block_);
    states_.resize(end_ - begin_);
    const size_t lookahead = std::min(text_.size(), end_ + a_.longest_piece());
    uint32_t state = PieceAutomaton::start();
    for (size_t i = lookahead; i-- > end_;) state = a_.next(state, static_cast<unsigned char>(text_[i]));
    for (size_t i = end_; i-- > begin_;) {
      state = a_.next(state, static_cast<unsigned char>(text_[i]));
      states_[i - begin_] = state;
    }
  }

  const PieceAutomaton& a_;
  std::string_view text_;
  std::vector<uint32_t>& states_;
  const size_t block_;
  size_t begin_ = 0, end_ = 0;  // the block held: states_[i - begin_] for i in [begin_, end_)
};

inline Result<PieceAutomaton> PieceAutomaton::build(const std::vector<std::string_view>& pieces) {
  PieceAutomaton a;
  try {
    // The reversed pieces, one buffer; node numbers (at most one per byte, the root and
    // the closing node) must fit 32 bits.
    uint64_t total = 0;
    for (const std::string_view p : pieces) {
      if (p.empty()) return Error{ErrorCode::kInvalidArgument, "an empty piece"};
      total += p.size();
      a.longest_ = std::max(a.longest_, p.size());
    }
    if (total + 3 >= PieceAutomaton::kNone || pieces.size() >= INT32_MAX)
      return Error{ErrorCode::kInvalidArgument, std::to_string(pieces.size()) + " pieces of " + std::to_string(total) +
                                                    " bytes: more than 32-bit node numbers reach"};
    std::string reversed;
    reversed.reserve(static_cast<size_t>(total));
    std::vector<std::string_view> views;
    views.reserve(pieces.size());
    a.lengths_.reserve(pieces.size());
    for (const std::string_view p : pieces) {
      const size_t at = reversed.size();
      reversed.append(p.rbegin(), p.rend());
      views.emplace_back(reversed.data() + at, p.size());  // (reserved: the data does not move)
      a.lengths_.push_back(static_cast<uint32_t>(p.size()));
    }
    const PieceTrie::Duplicate duplicate = a.trie_.build(views);
    if (duplicate.first >= 0)
      return Error{ErrorCode::kInvalidArgument, "pieces " + std::to_string(duplicate.first) + " and " +
                                                    std::to_string(duplicate.second) + " are the same"};
    // Failure links breadth first (the trie's numbering): a node's link is found from its
    // parent's, which is shallower and so numbered before it.
    const size_t nodes = a.trie_.node_count() - 1;  // (the last node only closes the list)
    a.fail_.assign(nodes, 0);
    a.match_.assign(nodes, kNone);
    const PieceTrie::Node* node = a.trie_.nodes();
    const unsigned char* label = a.trie_.labels();
    for (uint32_t c = node[0].first_child; c < node[1].first_child; ++c) a.root_next_[label[c]] = c;
    for (uint32_t n = 0; n < nodes; ++n) {
      if (n != 0 && a.trie_.id(n) < 0) a.match_[n] = a.match_[a.fail_[n]];
      if (a.trie_.id(n) >= 0) a.match_[n] = n;
      for (uint32_t c = node[n].first_child; c < node[n + 1].first_child; ++c)
        a.fail_[c] = n == 0 ? 0 : a.next(a.fail_[n], label[c]);
    }
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "out of memory for the automaton of " + std::to_string(pieces.size()) + " pieces"};
  }
  return a;
}

}  // namespace petrel::text
