// Full Unicode lowercasing as JavaScript's String.prototype.toLowerCase does it (V8 calls
// ICU's root locale): the simple mappings of UnicodeData.txt, SpecialCasing.txt's
// unconditional ones (U+0130 -> "i\u0307") and U+03A3's Final_Sigma rule; no language
// rules (Turkish, Lithuanian). Tables: core/unicode_case_tables.h, made by
// tools/unicode/make_unicode_text_tables.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/unicode_case_tables.h"
#include "core/unicode_category.h"
#include "core/utf8.h"

namespace petrel::detail {

// The simple lowercase mapping of `c` (itself when it has none).
inline char32_t simple_lowercase(char32_t c) { return mapped_code_point(unicode_tables::kLowercase, c); }

// Cased (bit 0) and Case_Ignorable (bit 1) of `c`.
inline uint32_t case_context_bits(char32_t c) {
  if (c < 0x80) {  // letters are Cased; ' . : ^ ` are Case_Ignorable
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
    return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' ? 2 : 0;
  }
  if (c > 0x10ffff) return 0;
  const auto& table = unicode_tables::kCaseContextStarts;
  const uint32_t key = static_cast<uint32_t>(c) << 2 | 3u;
  size_t lo = 0, hi = sizeof table / sizeof table[0];  // the first start above key
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid] <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo == 0 ? 0 : table[lo - 1] & 3u;
}

// Appends the lowercase of UTF-8 `text` (valid UTF-8) to `out`. Final_Sigma as ICU
// decides it: U+03A3 becomes U+03C2 when, skipping Case_Ignorable code points (a code
// point that is both counts as ignorable), a Cased one precedes it and none follows.
// The look-ahead stops at the first code point that is not ignorable (a sigma is not),
// so it reads each ignorable run once: time linear in the text.
inline void append_lowercase(std::string_view text, std::string& out) {
  bool cased_before = false;  // a Cased code point precedes, ignorable ones skipped
  for (size_t at = 0; at < text.size();) {
    const CodePoint c = utf8_decode(text, at);
    const size_t next = at + c.length;
    const uint32_t bits = case_context_bits(c.value);
    if (c.value == 0x3a3) {
      bool followed = false;
      for (size_t k = next; k < text.size();) {
        const CodePoint d = utf8_decode(text, k);
        const uint32_t b = case_context_bits(d.value);
        if (!(b & 2u)) {
          followed = (b & 1u) != 0;
          break;
        }
        k += d.length;
      }
      append_utf8(out, cased_before && !followed ? char32_t{0x3c2} : char32_t{0x3c3});
    } else if (c.value < 0x80) {
      const char ch = text[at];
      out.push_back(ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch + 32) : ch);
    } else {
      bool special = false;
      const auto& sp = unicode_tables::kLowercaseSpecial;
      for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i += 4) {
        if (sp[i] != c.value) continue;
        for (size_t k = 1; k < 4 && sp[i + k] != 0; ++k) append_utf8(out, sp[i + k]);
        special = true;
        break;
      }
      if (!special) append_utf8(out, simple_lowercase(c.value));
    }
    if (!(bits & 2u)) cased_before = (bits & 1u) != 0;
    at = next;
  }
}

}  // namespace petrel::detail
