#include "text/spm_normalizer.h"

#include <algorithm>
#include <cstring>

#include "core/bytes.h"
#include "core/utf8.h"

namespace petrel::text {

namespace {

// darts-clone's unit layout (darts.h, DoubleArrayUnit).
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t label(uint32_t unit) { return unit & ((1u << 31) | 0xff); }
size_t offset(uint32_t unit) { return static_cast<size_t>(unit >> 10) << ((unit & (1u << 9)) >> 6); }
uint32_t value(uint32_t unit) { return unit & ((1u << 31) - 1); }


}  // namespace

Result<CharsMap> CharsMap::parse(std::string_view blob, const std::string& where) {
  CharsMap map;
  if (blob.empty()) return map;
  if (blob.size() <= 4)
    return Error{ErrorCode::kFormat, where + ": precompiled_charsmap: " + std::to_string(blob.size()) +
                                         " bytes, too short for its 4-byte trie size"};
  const auto* bytes = reinterpret_cast<const unsigned char*>(blob.data());
  const uint32_t trie_size = detail::load_le32(bytes);
  if (trie_size > blob.size() - 4)
    return Error{ErrorCode::kFormat, where + ": precompiled_charsmap: its trie of " + std::to_string(trie_size) +
                                         " bytes runs past the end of the " + std::to_string(blob.size()) +
                                         "-byte map"};
  map.units_ = bytes + 4;
  map.unit_count_ = trie_size / 4;  // as upstream: a partial unit at the end is ignored
  map.replacements_ = blob.substr(4 + static_cast<size_t>(trie_size));
  return map;
}

uint32_t CharsMap::unit(size_t index) const { return detail::load_le32(units_ + 4 * index); }

size_t CharsMap::match(std::string_view text, std::string_view& replacement, bool shortest) const {
  if (unit_count_ == 0) return 0;
  size_t longest = 0;
  size_t node = offset(unit(0));
  const size_t limit = std::min(text.size(), kMaxRuleBytes);
  for (size_t i = 0; i < limit; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    node ^= byte;
    if (node >= unit_count_) break;
    const uint32_t u = unit(node);
    if (label(u) != byte) break;
    node ^= offset(u);
    if (!has_leaf(u)) continue;
    if (node >= unit_count_) break;
    const uint32_t at = value(unit(node));
    if (at >= replacements_.size()) continue;  // hostile offset: not a rule
    const char* begin = replacements_.data() + at;
    const size_t room = std::min(replacements_.size() - at, kMaxRuleBytes + 1);
    const void* nul = std::memchr(begin, '\0', room);
    const std::string_view rewritten(begin, nul ? static_cast<size_t>(static_cast<const char*>(nul) - begin) : room);
    if (rewritten.size() > kMaxRuleBytes) continue;  // no rule writes that much
    // Not text (no map spm_train writes has such a rule; an offset into the middle of a
    // character makes one): not a rule, so normalized text, hence every piece, stays UTF-8.
    if (!detail::is_valid_utf8(rewritten)) continue;
    replacement = rewritten;
    longest = i + 1;
    if (shortest) break;
  }
  return longest;
}

std::string_view Normalizer::normalize_prefix(std::string_view input, const SymbolMatcher* matcher,
                                              size_t& consumed) const {
  if (matcher != nullptr) {
    if (const size_t n = matcher->longest_user_defined(input); n > 0) {
      consumed = n;
      return input.substr(0, n);
    }
  }
  std::string_view replacement;
  if (const size_t n = map_.longest_match(input, replacement); n > 0) {
    consumed = n;
    return replacement;
  }
  const size_t n = detail::utf8_sequence(input, 0);
  if (n == 0) {  // malformed: one byte becomes U+FFFD
    consumed = 1;
    return kReplacementCharacter;
  }
  consumed = n;
  return input.substr(0, n);
}

Status Normalizer::normalize(std::string_view input, const SymbolMatcher* matcher, size_t max_output,
                             std::vector<char>& out, std::vector<uint32_t>* norm_to_orig) const {
  out.clear();
  if (norm_to_orig != nullptr) norm_to_orig->clear();
  size_t consumed = 0;
  uint32_t offset = 0;  // input bytes consumed so far (inputs are < 4 GiB: callers cap them)
  if (flags_.remove_extra_whitespaces) {  // leading spaces (after normalization) go
    while (!input.empty()) {
      if (normalize_prefix(input, matcher, consumed) != " ") break;
      input.remove_prefix(consumed);
      offset += static_cast<uint32_t>(consumed);
    }
  }
  if (input.empty()) {
    if (norm_to_orig != nullptr) norm_to_orig->push_back(offset);
    return Status::ok();
  }

  const std::string_view space = flags_.escape_whitespaces ? kSpaceSymbol : std::string_view(" ");
  auto append = [&](std::string_view s) {
    out.insert(out.end(), s.begin(), s.end());
    if (norm_to_orig != nullptr) norm_to_orig->insert(norm_to_orig->end(), s.size(), offset);
  };
  out.reserve(input.size() * 3);
  if (norm_to_orig != nullptr) norm_to_orig->reserve(input.size() * 3 + 1);
  if (!flags_.treat_whitespace_as_suffix && flags_.add_dummy_prefix) append(space);

  bool previous_is_space = flags_.remove_extra_whitespaces;
  while (!input.empty()) {
    std::string_view piece = normalize_prefix(input, matcher, consumed);
    while (previous_is_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    if (!piece.empty()) {
      for (char c : piece) {
        if (c == ' ' && flags_.escape_whitespaces)
          append(kSpaceSymbol);
        else
          append(std::string_view(&c, 1));
      }
      previous_is_space = piece.back() == ' ';
      if (out.size() > max_output)
        return Error{ErrorCode::kInvalidArgument,
                     "the normalized text exceeds " + std::to_string(max_output) + " bytes"};
    }
    input.remove_prefix(consumed);
    offset += static_cast<uint32_t>(consumed);
    if (!flags_.remove_extra_whitespaces) previous_is_space = false;
  }

  if (flags_.remove_extra_whitespaces) {  // trailing spaces go (and the input they came from)
    while (out.size() >= space.size() &&
           std::memcmp(out.data() + out.size() - space.size(), space.data(), space.size()) == 0) {
      out.resize(out.size() - space.size());
      if (norm_to_orig != nullptr) {
        offset = (*norm_to_orig)[out.size()];
        norm_to_orig->resize(out.size());
      }
    }
  }
  if (flags_.treat_whitespace_as_suffix && flags_.add_dummy_prefix) append(space);
  if (norm_to_orig != nullptr) norm_to_orig->push_back(offset);
  return Status::ok();
}

}  // namespace petrel::text
