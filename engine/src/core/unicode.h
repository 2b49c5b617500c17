// Character classes from the Unicode Character Database (core/unicode_tables.h, made
// by tools/unicode/make_unicode_tables.py): text code asks these instead of testing
// code point ranges or parities by hand.
#pragma once

#include <cstddef>

#include "core/unicode_tables.h"

namespace petrel::detail {

template <size_t N>
bool in_ranges(const unicode_tables::CodePointRange (&table)[N], char32_t c) {
  size_t lo = 0, hi = N;  // the first range whose last >= c
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid].last < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < N && table[lo].first <= c;
}

// Lu or Lt: may start a sentence of a cased script.
inline bool is_upper_or_title(char32_t c) { return in_ranges(unicode_tables::kUpperOrTitle, c); }
// Ll (Georgian Mkhedruli counts as caseless).
inline bool is_lower(char32_t c) { return in_ranges(unicode_tables::kLower, c); }
// Lo, Lm, Georgian Mkhedruli: a letter of a script without case.
inline bool is_caseless_letter(char32_t c) { return in_ranges(unicode_tables::kCaselessLetter, c); }
// Nd: a decimal digit of any script.
inline bool is_decimal_digit(char32_t c) { return in_ranges(unicode_tables::kDecimalDigit, c); }
// White_Space: the standard's whitespace.
inline bool is_white_space(char32_t c) { return c == ' ' || in_ranges(unicode_tables::kWhiteSpace, c); }
// Python's str.isspace() (what str.strip() removes): White_Space plus U+001C..U+001F.
inline bool is_python_space(char32_t c) { return c == ' ' || in_ranges(unicode_tables::kPythonSpace, c); }

}  // namespace petrel::detail
