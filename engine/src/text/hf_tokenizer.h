// A tokenizer.json tokenizer (Hugging Face tokenizers' format: Gemma 3, Llama 3, Qwen)
// as transformers.js 3.7 runs it, the oracle its tests compare against: added tokens cut
// out first (leftmost, longest), each other section normalized, pre-tokenized into
// words, each word split by BPE merges (lowest rank first, leftmost among equals) or by
// WordPiece (greedy longest match, BERT), the post-processor's special tokens around the
// result; decoding runs the decoders over the ids' tokens. A Unigram model (T5, ALBERT,
// XLM-R) and the Precompiled normalizer follow Rust tokenizers instead (transformers.js
// approximates Precompiled by NFKC and reads no charsmap, so it is no oracle for them).
// Built from a model file's tables (format/tokenizer_tables.h), which it views in place:
// loading builds nothing proportional to the vocabulary (what matches text is built at
// the first encode: matchers()).
//
// Work per byte, whatever the lengths of the file's pieces (release build, Intel Xeon
// 2.3 GHz; bench/README.md, "Text passes on adversarial input", rows "limits:"). A call
// works on at most 17 bytes per input byte plus 4096 (kGrowthPerByte, kGrowthSlack;
// real tokenizers: at most 3), through at most 64 steps per list; per byte of the text a
// step runs on:
//  * added tokens: at most two transitions of an automaton per byte, each amortized
//    O(1) (PieceAutomaton): 0.004-0.03 us/B with a 4,095-byte added token (a trie walk
//    per position took 9 us/B);
//  * normalizers, decoders, pre-tokenizers but regexes: a constant per byte (a literal
//    pattern is found by Two-Way, never compared at each position);
//  * regexes: at most kRegexStepsPerByte = 128 steps per input byte, shared by the
//    call's regexes (bytes the steps added count up to kGrowthSlack): ~1 us/B for the costliest program
//    the loader accepts (1024 instructions, all alive; refused at the limit), 0.6 us/B
//    for Qwen3's pattern on its costliest repeat (whole encodes of prose: 0.05-0.3 us/B);
//  * the model: BPE O(log n) per symbol (a heap of merges; a lookup reads at most
//    kMaxHashProbe + 1 slots); WordPiece two transitions per byte and the longest token
//    once per word: 0.01-0.02 us/B with a 4,096-byte token (19-26 before); Unigram one
//    transition per character and its lattice's edges, at most kUnigramEdgesPerByte = 64
//    per byte of a word: 0.02-0.03 us/B with a 4,096-byte piece, 0.3 us/B to refuse
//    pieces nested 1,024 deep.
// So a call's regexes take at most 128 x (n + 4096) + 16384 steps for n input bytes
// (~1 us per input byte, whatever the file's normalizers add), and every other step a
// constant per byte of its text (at most 17 n + 4096 bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/tokenizer_tables.h"
#include "text/piece_automaton.h"
#include "text/special_tokens.h"
#include "text/spm_normalizer.h"
#include "text/split_regex.h"
#include "text/tokenizer.h"

namespace petrel::text {

class HfBudget;  // what one call may spend (hf_tokenizer.cpp)

class HfTokenizer : public Tokenizer {
 public:
  // Checks what the loader left to it (regex patterns compile, byte tokens) and names
  // `name` in its errors.
  static Result<std::unique_ptr<HfTokenizer>> create(detail::HfTokenizerTables tables, const std::string& name);

  // The ids of `text`, with the post-processor's special tokens (add_special_tokens).
  Result<TokenizedText> tokenize(std::string_view text) const override;
  Result<std::vector<int32_t>> encode_text(std::string_view text, bool add_special_tokens) const;
  // Ids as text; special tokens skipped (skip_special_tokens) unless asked for.
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  Result<std::string> decode_ids(const int32_t* ids, size_t count, bool skip_special_tokens) const;
  std::optional<std::string_view> output_token(int32_t id) const override;

  size_t vocab_size() const { return t_.vocab.size(); }
  // The id of a token's exact text (a vocabulary or added token), if any.
  std::optional<int32_t> token_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  const detail::HfTokenizerTables& tables() const { return t_; }

  // Texts longer than this are refused, and so is a normalizer that would make one (the
  // work per byte is bounded, so this bounds a call's time and scratch memory).
  static constexpr size_t kMaxTextBytes = size_t{64} << 20;

  // What one call (encoding a text, decoding ids, normalizing the added tokens at load)
  // may spend per byte of its input, plus a constant; beyond it the call is an error
  // naming the step: bytes its steps add to the text, and its regexes' steps, in all.
  //
  // A step that writes the file's strings (Replace, Prepend, Precompiled's rules,
  // Metaspace's replacement, up to 4096 bytes each, 64 steps) could otherwise multiply
  // the text by 4096 per step, so these steps check the size of their output before they
  // build it. Measured over the 100k-line corpus of the tests: real tokenizers make a
  // text at most 3 times longer (Gemma 3's U+2581 for a space, BERT uncased), 4 times a
  // 1-byte one (T5's prepended U+2581), and decoding at most 1.95 times (BERT's WordPiece
  // spaces); Unicode's worst step, NFKC of U+FDFA, adds 10 bytes per byte. The slack lets
  // a short text take a Prepend of the longest string a file may hold.
  static constexpr uint64_t kGrowthPerByte = 16, kGrowthSlack = 4096;
  //
  // Regex steps (SplitRegex::find_all_within's, counted as they cost: every thread
  // list entry and every state followed, registers by size): the allowance is per byte
  // of the input and of the first kGrowthSlack bytes the steps add (HfBudget::grow), so
  // that a 3,000-byte Prepend does not starve the regex after it while normalizers that
  // multiply the text cannot multiply the regexes' work per input byte (real tokenizers
  // run their regexes on text their normalizers barely grow: NFC, or none). Measured over the corpus of the tests, Qwen3's, Llama 3's, GPT-2's and o200k's
  // patterns take 19-26 steps per byte on average, at most 72 on a line of 16 bytes or
  // more and 1121 in all on a shorter one; texts repeating any one to three characters
  // at most 99 (" \t'"). 128 per byte covers those; at ~7 ns a step (a program at the
  // 1024-instruction limit with every thread alive, the costliest step there is) it
  // bounds any pattern the loader accepts to ~1 us per byte of text. The slack lets a
  // short text run a program of that size over some ten characters.
  static constexpr uint64_t kRegexStepsPerByte = 128, kRegexStepsSlack = 16384;
  // A Unigram word's lattice edges (pieces starting at its characters) per byte of it:
  // T5's take 0.7 on average, 1.8 at most on a line of the corpus (encode_unigram).
  static constexpr uint64_t kUnigramEdgesPerByte = 64;

 private:
  explicit HfTokenizer(detail::HfTokenizerTables tables) : t_(std::move(tables)) {}
  Status normalize(std::string_view text, std::string& out, HfBudget& budget) const;
  Status pre_tokenize(std::string_view text, size_t section_index, std::vector<std::string>& words,
                      bool& byte_level, HfBudget& budget) const;
  struct Matchers;
  // `scratch`: the automata's states, reused over a call's words (PieceScan).
  Status encode_word(std::string_view word, bool byte_level, const Matchers& m, std::vector<int32_t>& ids,
                     std::vector<uint32_t>& scratch) const;
  Status encode_wordpiece(std::string_view word, const Matchers& m, std::vector<int32_t>& ids,
                          std::vector<uint32_t>& scratch) const;
  // Unigram (Rust tokenizers' models/unigram/model.rs, encode_optimized + tokenize): the
  // best-scoring segmentation of the word (unknown characters min_score - 10, runs of
  // them fused, then byte tokens if byte_fallback), in time linear in its length.
  Status encode_unigram(std::string_view word, const Matchers& m, std::vector<int32_t>& ids,
                        std::vector<uint32_t>& scratch) const;
  double piece_score(int32_t id) const;
  Status apply_precompiled(const CharsMap& map, size_t step, const std::string& in, std::string& out,
                           HfBudget& budget) const;
  int32_t merge_of(int32_t left, int32_t right) const;  // merge index, or -1

  // The added tokens of `text` (Matchers::added over the input, Matchers::normalized
  // over a normalized section) as sections: plain text, or an added token's id (lstrip /
  // rstrip trimmed the plain text beside it; single_word refused matches inside words).
  void split_added(const SpecialTokenSplitter& splitter, std::string_view text, std::vector<TextSegment>& segments,
                   std::vector<std::string_view>& sections, std::vector<int32_t>& section_ids) const;

  detail::HfTokenizerTables t_;
  std::vector<std::pair<std::string_view, int32_t>> added_texts_;       // the added tokens matched in the input
  std::vector<std::string> normalized_added_;                           // the `normalized` ones' contents, normalized,
  std::vector<std::pair<std::string_view, int32_t>> normalized_texts_;  //   matched in each normalized section
  std::vector<SplitRegex> normalizer_regex_, pre_tokenizer_regex_;  // per step (unused for literal patterns)
  std::vector<CharsMap> charsmaps_;  // per normalizer step (Precompiled's; empty for the others)
  std::optional<SplitRegex> byte_level_regex_;                       // GPT-2's pattern, when a ByteLevel step uses it
  int32_t byte_level_ids_[256];  // ByteLevel: the token of each byte's character (-1: none)
  int32_t byte_fallback_ids_[256];  // "<0xXX>" tokens (-1: none)
  std::vector<bool> special_;       // per id
  // Per id: kAdded for an added token (the ByteLevel decoder keeps its text), with its
  // lstrip / rstrip, looked up once per added token in a text (not by a search of the list).
  static constexpr uint8_t kAdded = 1, kLstrip = 2, kRstrip = 4, kSingleWord = 8;
  std::vector<uint8_t> added_;

  // What encoding matches text with, built from the tables at the first encode:
  // the added tokens' splitters (PieceAutomaton: the longest added token starting at a
  // position is one state) and WordPiece's and Unigram's automata over the vocabulary
  // (the tokens starting at each position of a word, in O(1) amortized per position
  // whatever their lengths). `first`: the tokens a word may start with (Unigram: every
  // piece); `rest`: WordPiece's continuing tokens without their prefix (empty when the
  // prefix is: `first` serves). Only tokens the token hash finds under their own id are
  // in them (so a corrupt table gives the tokens a lookup gives), only UTF-8 ones (a word
  // is UTF-8: another never matches at its character boundaries) and none longer than
  // kMaxPieceBytes (WordPiece) or max_piece_bytes (Unigram).
  struct VocabAutomaton {
    PieceAutomaton automaton;
    std::vector<int32_t> ids;  // per piece of the automaton: its token id
  };
  struct Matchers {
    SpecialTokenSplitter added, normalized;  // added_texts_, normalized_texts_
    VocabAutomaton first, rest;              // WordPiece, Unigram
  };
  // Built once (thread-safe), at the first encode, not at load: "loading builds nothing
  // proportional to the vocabulary" (ARCHITECTURE.md, text/) keeps a 262k-token model's
  // load under a millisecond and costs nothing to a model used for ids or decoding alone.
  // The build is O(the added tokens' and the vocabulary's bytes) in time and memory
  // (Gemma 3's 6,415 added tokens: 1.8 ms and 0.9 MB; a WordPiece vocabulary of 10,000
  // tokens: 2.6 ms and 1 MB; a vocabulary of Qwen3's 151,669 tokens: 37 ms and 9.7 MB).
  // Running out of memory is an error (kOutOfMemory; the next call tries again), not a
  // crash. (A mutex, not std::call_once: an exception out of call_once's function has
  // left the flag unusable in some libstdc++ versions, GCC bug 66146.)
  Result<const Matchers*> matchers() const;
  mutable std::atomic<const Matchers*> matchers_ready_{nullptr};  // set once built
  mutable std::mutex matchers_mutex_;                              // guards the build and:
  mutable std::unique_ptr<Matchers> matchers_;
  mutable std::optional<Error> matchers_error_;  // what keeps them from being built (not memory)
};

}  // namespace petrel::text
