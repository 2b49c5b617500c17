// UTF-8 well-formedness (RFC 3629 / Unicode table 3-7: no overlong forms, no
// surrogates, nothing above U+10FFFF). Every string the engine hands out — names,
// vocabulary, notes — is checked with it at load, so callers and the tools' JSON
// never meet a byte string that is not text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace petrel::detail {

// The length of the well-formed sequence starting at text[at], or 0 when it is
// ill-formed; *prefix is then how many of its bytes were a valid beginning (at
// least 1: the maximal subpart that one U+FFFD replaces).
inline size_t utf8_sequence(std::string_view text, size_t at, size_t* prefix) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  *prefix = 1;
  if (lead < 0x80) return 1;
  size_t length;
  uint8_t low = 0x80, high = 0xbf;  // the second byte's range (table 3-7)
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead >= 0xe0 && lead <= 0xef) length = 3, low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
  else if (lead >= 0xf0 && lead <= 0xf4) length = 4, low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  for (size_t i = 1; i < length; ++i) {
    if (at + i >= text.size()) return 0;
    const uint8_t b = byte(at + i);
    if (b < (i == 1 ? low : 0x80) || b > (i == 1 ? high : 0xbf)) return 0;
    *prefix = i + 1;
  }
  return length;
}

// The length of the well-formed sequence starting at text[at], or 0.
inline size_t utf8_sequence(std::string_view text, size_t at) {
  size_t prefix = 0;
  return utf8_sequence(text, at, &prefix);
}

// The code point of the well-formed sequence at text[at] and its length in bytes;
// an ill-formed sequence decodes as U+FFFD over its maximal subpart (length >= 1).
struct CodePoint {
  char32_t value;
  size_t length;
};
inline CodePoint utf8_decode(std::string_view text, size_t at) {
  size_t prefix = 0;
  const size_t length = utf8_sequence(text, at, &prefix);
  if (length == 0) return {0xfffd, prefix};
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(text[at + i])); };
  static constexpr uint8_t kLeadMask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  char32_t c = byte(0) & kLeadMask[length];
  for (size_t i = 1; i < length; ++i) c = c << 6 | (byte(i) & 0x3f);
  return {c, length};
}

// The offset of the first byte that is not part of a well-formed sequence, or
// text.size() when `text` is valid UTF-8. ASCII is checked 8 bytes at a time, and the
// ASCII bytes before a multi-byte sequence skipped at once (a tokenizer's strings: "▁"
// every few letters).
inline size_t utf8_invalid_at(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    if (at + 8 <= text.size()) {
      uint64_t eight;
      std::memcpy(&eight, text.data() + at, 8);
      const uint64_t high = eight & 0x8080808080808080ull;
      if (high == 0) {
        at += 8;
        continue;
      }
      // The lowest set bit is the first non-ASCII byte's on a little-endian host.
      if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) at += static_cast<size_t>(__builtin_ctzll(high) / 8);
    }
    if (static_cast<unsigned char>(text[at]) < 0x80) {  // short strings (tokens) are mostly ASCII
      ++at;
      continue;
    }
    size_t prefix = 0;
    const size_t length = utf8_sequence(text, at, &prefix);
    if (length == 0) return at;
    at += length;
  }
  return at;
}

inline bool is_valid_utf8(std::string_view text) { return utf8_invalid_at(text) == text.size(); }

// `text` with each maximal ill-formed subpart replaced by U+FFFD (the Unicode
// standard's recommended practice, as Python's errors="replace" does).
inline std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    size_t prefix = 0;
    const size_t length = utf8_sequence(text, at, &prefix);
    if (length == 0) {
      out += "\xef\xbf\xbd";
      at += prefix;
    } else {
      out.append(text.data() + at, length);
      at += length;
    }
  }
  return out;
}

// Appends code point `c` (below 0x110000) as UTF-8.
inline void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace petrel::detail
