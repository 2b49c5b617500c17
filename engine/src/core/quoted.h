// A name or piece from an untrusted file, made safe for an error message: single
// quotes around at most `max_bytes` bytes, printable ASCII as is, every other byte
// (and the quote and backslash) as \xNN, "..." when cut.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace petrel::detail {

inline std::string quoted(std::string_view s, size_t max_bytes = 200) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out + "'";
}

}  // namespace petrel::detail
