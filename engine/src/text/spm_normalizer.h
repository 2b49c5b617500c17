// SentencePiece's text normalizer: the precompiled character map (a darts-clone
// double-array trie of rules plus their NUL-terminated replacements), longest-match
// rewriting, and the whitespace rules (dummy prefix, extra-whitespace removal, ▁
// escaping). Semantics follow upstream's normalizer.cc (0.1.97) exactly; the map comes
// from an untrusted file, so every unit index and replacement offset is checked where
// it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
inline constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";
inline constexpr std::string_view kReplacementCharacter = "\xef\xbf\xbd";  // U+FFFD

namespace utf8 {

// Length of the character starting with byte `lead` as upstream's OneCharLen guesses it
// from the lead byte alone (1 for ASCII and stray continuation bytes, 2/3/4 otherwise).
inline size_t lead_length(unsigned char lead) {
  return static_cast<size_t>("\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[lead >> 4]);
}

// Upstream's DecodeUTF8 + IsValidDecodeUTF8 accept what detail::utf8_sequence
// (core/utf8.h) accepts; where it returns 0, upstream takes one byte as U+FFFD.

}  // namespace utf8

// The double-array trie of a precompiled charsmap: a view into the caller's bytes.
class CharsMap {
 public:
  CharsMap() = default;
  // Splits `blob` (<uint32 LE trie size><trie units><replacement strings>); an empty
  // blob is no map. Errors name `where`.
  static Result<CharsMap> parse(std::string_view blob, const std::string& where);

  bool empty() const { return unit_count_ == 0; }
  // The longest rule that is a prefix of `text` (0 if none) and its replacement.
  // A rule whose replacement offset lies outside the string block, whose replacement
  // is not valid UTF-8 or longer than kMaxRuleBytes, or whose text is longer than
  // kMaxRuleBytes, is ignored.
  //
  // A rule rewrites one unit of normalization: spm_train's nmt_nfkc rules match and
  // write a few code points (the longest replacement, U+FDFA, is 33 bytes). The limit
  // bounds the work per text position that a hostile map (a replacement with no NUL
  // running to the end of the blob, a chain of keys as deep as the blob) could make
  // proportional to the file's size.
  static constexpr size_t kMaxRuleBytes = 1024;
  size_t longest_match(std::string_view text, std::string_view& replacement) const {
    return match(text, replacement, false);
  }
  // The shortest rule that is a prefix of `text` instead, with the same rules ignored:
  // what Hugging Face's Precompiled normalizer (spm_precompiled's transform) applies.
  size_t shortest_match(std::string_view text, std::string_view& replacement) const {
    return match(text, replacement, true);
  }

 private:
  uint32_t unit(size_t index) const;
  size_t match(std::string_view text, std::string_view& replacement, bool shortest) const;
  const unsigned char* units_ = nullptr;
  size_t unit_count_ = 0;
  std::string_view replacements_;
};

// What Normalizer needs besides the map. Defaults are the proto2 defaults.
struct NormalizerFlags {
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  bool treat_whitespace_as_suffix = false;
};

class Normalizer {
 public:
  // Finds the longest user-defined symbol that is a prefix of a text (0: none).
  // User-defined symbols pass through normalization untouched.
  class SymbolMatcher {
   public:
    virtual ~SymbolMatcher() = default;
    virtual size_t longest_user_defined(std::string_view text) const = 0;
  };

  Normalizer() = default;
  Normalizer(CharsMap map, NormalizerFlags flags) : map_(map), flags_(flags) {}

  // Appends the normalized form of `input` to `out` (which is cleared first).
  // `matcher` may be null (no user-defined symbols). Fails only when the output would
  // exceed `max_output` bytes. `norm_to_orig` (if given) receives, for each byte of
  // `out` and one past its end, the offset in `input` it came from (upstream's
  // norm_to_orig: a rewritten unit's bytes all map to the unit's first input byte).
  Status normalize(std::string_view input, const SymbolMatcher* matcher, size_t max_output, std::vector<char>& out,
                   std::vector<uint32_t>* norm_to_orig = nullptr) const;

 private:
  // One step of the rewrite: the replacement of the prefix of `input` and how many
  // input bytes it consumes (>= 1).
  std::string_view normalize_prefix(std::string_view input, const SymbolMatcher* matcher,
                                    size_t& consumed) const;

  CharsMap map_;
  NormalizerFlags flags_;
};

}  // namespace petrel::text
