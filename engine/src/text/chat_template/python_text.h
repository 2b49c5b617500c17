// What the lexer and the renderer share of Python's str on UTF-8 text: whitespace as
// str.strip() sees it, and code points counted and stepped over as a forward walk splits
// them (an ill-formed sequence is one code point, as core/utf8.h's utf8_decode reads it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/unicode.h"
#include "core/utf8.h"

namespace petrel::text::chat_template_detail {

inline bool is_python_space_at(std::string_view s, size_t at, size_t* length) {
  const detail::CodePoint cp = detail::utf8_decode(s, at);
  *length = cp.length;
  return detail::is_python_space(cp.value);
}

// Python's str.rstrip() / lstrip() with no argument.
inline std::string_view rstrip_space(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the start of the last code point
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xc0) == 0x80 && end - start < 4) --start;
    size_t length = 0;
    if (!is_python_space_at(s, start, &length) || start + length != end) break;
    end = start;
  }
  return s.substr(0, end);
}
inline std::string_view lstrip_space(std::string_view s) {
  size_t at = 0, length = 0;
  while (at < s.size() && is_python_space_at(s, at, &length)) at += length;
  return s.substr(at);
}

// The number of code points (an ill-formed sequence is one, as utf8_decode reads it).
inline size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (size_t at = 0; at < s.size(); ++n) at += static_cast<uint8_t>(s[at]) < 0x80 ? 1 : detail::utf8_decode(s, at).length;
  return n;
}
// The start of the code point that ends at `end` (> 0), as a forward walk splits it:
// a byte that is no continuation byte starts a code point, and a sequence that does not
// reach `end` leaves the continuation bytes after it one code point each.
inline size_t previous_code_point_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xc0) == 0x80) --start;
  return detail::utf8_decode(s, start).length == end - start ? start : end - 1;
}

}  // namespace petrel::text::chat_template_detail
