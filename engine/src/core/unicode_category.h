// General_Category and simple case folding from the Unicode Character Database
// (core/unicode_category_tables.h, made by tools/unicode/make_unicode_text_tables.py).
// Apart from core/unicode.h so that its includers do not parse these tables.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/unicode_category_tables.h"

namespace petrel::detail {

using unicode_tables::GeneralCategory;

// The General_Category of `c` (kCn for unassigned code points and anything above U+10FFFF).
inline GeneralCategory general_category(char32_t c) {
  if (c > 0x10ffff) return unicode_tables::kCn;
  const auto& table = unicode_tables::kCategoryStarts;
  const uint32_t key = static_cast<uint32_t>(c) << 5 | 31u;
  size_t lo = 0, hi = sizeof table / sizeof table[0];  // the first start above key
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid] <= key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return static_cast<GeneralCategory>(table[lo - 1] & 31u);  // table[0] starts at U+0000
}

// What a sorted table of (code point << 21 | mapped) entries maps `c` to: `c` itself
// when it has no entry.
template <size_t N>
char32_t mapped_code_point(const uint64_t (&table)[N], char32_t c) {
  const uint64_t key = static_cast<uint64_t>(c) << 21;
  size_t lo = 0, hi = N;  // the first entry >= key
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < N && (table[lo] >> 21) == c) return static_cast<char32_t>(table[lo] & 0x1fffff);
  return c;
}

// Simple case folding (CaseFolding.txt, statuses C and S): `c` itself when it has none.
inline char32_t simple_case_fold(char32_t c) { return mapped_code_point(unicode_tables::kCaseFolding, c); }

}  // namespace petrel::detail
