// A tokenizer.json tokenizer (Hugging Face tokenizers' format: Gemma 3, Llama 3, Qwen)
// as transformers.js 3.7 runs it, the oracle its tests compare against: added tokens cut
// out first (leftmost, longest), each other section normalized, pre-tokenized into
// words, each word split by BPE merges (lowest rank first, leftmost among equals) or by
// WordPiece (greedy longest match, BERT), the post-processor's special tokens around the
// result; decoding runs the decoders over the ids' tokens. A Unigram model (T5, ALBERT,
// XLM-R) and the Precompiled normalizer follow Rust tokenizers instead (transformers.js
// approximates Precompiled by NFKC and reads no charsmap, so it is no oracle for them).
// Built from a model file's tables (format/tokenizer_tables.h), which it views in place:
// loading builds nothing proportional to the vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/tokenizer_tables.h"
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
  // Regex steps (SplitRegex::find_all_within's): a program of 1024 instructions may take
  // some 1500 per code point. Measured over the same corpus, Qwen3's and Llama 3's
  // patterns take 18.8 steps per byte on average, at most 68 on a line of 16 bytes or
  // more and 1121 in all on a shorter one; repeats of a few characters ("1 ", "'S") 88
  // per byte. 1024 per byte is 11 times that and still covers a text NFKC made 11 times
  // longer (11 x 68); the slack is 14 times the 1121 and lets a program of SplitRegex's
  // largest size, every thread alive, run over a few characters.
  static constexpr uint64_t kRegexStepsPerByte = 1024, kRegexStepsSlack = 16384;

 private:
  explicit HfTokenizer(detail::HfTokenizerTables tables) : t_(std::move(tables)) {}
  Status normalize(std::string_view text, std::string& out, HfBudget& budget) const;
  Status pre_tokenize(std::string_view text, size_t section_index, std::vector<std::string>& words,
                      bool& byte_level, HfBudget& budget) const;
  Status encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& ids) const;
  Status encode_wordpiece(std::string_view word, std::vector<int32_t>& ids) const;
  int64_t token_id_hashed(std::string_view token, uint32_t hash) const;  // -1: none
  // Unigram (Rust tokenizers' models/unigram/model.rs, encode_optimized + tokenize): the
  // best-scoring segmentation of the word (unknown characters min_score - 10, runs of
  // them fused, then byte tokens if byte_fallback), in time linear in its length.
  Status encode_unigram(std::string_view word, std::vector<int32_t>& ids) const;
  double piece_score(int32_t id) const;
  Status apply_precompiled(const CharsMap& map, size_t step, const std::string& in, std::string& out,
                           HfBudget& budget) const;
  int32_t merge_of(int32_t left, int32_t right) const;  // merge index, or -1

  // The added tokens of `text` (`added_splitter_` over the input, `normalized_splitter_`
  // over a normalized section) as sections: plain text, or an added token's id (lstrip /
  // rstrip trimmed the plain text beside it; single_word refused matches inside words).
  void split_added(const SpecialTokenSplitter& splitter, std::string_view text, std::vector<TextSegment>& segments,
                   std::vector<std::string_view>& sections, std::vector<int32_t>& section_ids) const;

  detail::HfTokenizerTables t_;
  SpecialTokenSplitter added_splitter_;       // the added tokens matched in the input
  std::vector<std::string> normalized_added_;  // the `normalized` ones' contents, normalized
  SpecialTokenSplitter normalized_splitter_;  //   and matched in each normalized section (views normalized_added_)
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
  size_t max_token_bytes_ = 0;  // WordPiece: the longest token, bounding the candidates tried
};

}  // namespace petrel::text
