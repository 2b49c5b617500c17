#include "text/grapheme.h"

#include "core/grapheme_tables.h"
#include "core/utf8.h"

namespace petrel::text {
namespace {

using detail::grapheme_tables::GraphemeBreak;

GraphemeBreak break_property(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return GraphemeBreak::kOther;
  const auto& table = detail::grapheme_tables::kGraphemeBreak;
  size_t lo = 0, hi = sizeof table / sizeof table[0];  // the first range whose last >= c
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid].last < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < sizeof table / sizeof table[0] && table[lo].first <= c ? table[lo].value : GraphemeBreak::kOther;
}

bool is_pictographic(char32_t c) {
  if (c < 0xA9) return false;
  const auto& table = detail::grapheme_tables::kExtendedPictographic;
  size_t lo = 0, hi = sizeof table / sizeof table[0];
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (table[mid].last < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < sizeof table / sizeof table[0] && table[lo].first <= c;
}

bool is_control(GraphemeBreak p) {
  return p == GraphemeBreak::kControl || p == GraphemeBreak::kCR || p == GraphemeBreak::kLF;
}

// Whether no boundary lies between a character of property `prev` and one of `p`.
bool joins(GraphemeBreak prev, GraphemeBreak p, bool pict, int emoji, size_t regional) {
  using G = GraphemeBreak;
  if (prev == G::kCR && p == G::kLF) return true;                                              // GB3
  if (is_control(prev) || is_control(p)) return false;                                         // GB4, GB5
  if (prev == G::kL && (p == G::kL || p == G::kV || p == G::kLV || p == G::kLVT)) return true;  // GB6
  if ((prev == G::kLV || prev == G::kV) && (p == G::kV || p == G::kT)) return true;             // GB7
  if ((prev == G::kLVT || prev == G::kT) && p == G::kT) return true;                            // GB8
  if (p == G::kExtend || p == G::kZWJ || p == G::kSpacingMark) return true;                     // GB9, GB9a
  if (prev == G::kPrepend) return true;                                                         // GB9b
  if (emoji == 2 && pict) return true;                                                          // GB11
  if (prev == G::kRegionalIndicator && p == G::kRegionalIndicator) return regional % 2 == 1;    // GB12, GB13
  return false;                                                                                 // GB999
}

}  // namespace

size_t grapheme_cluster_end(std::string_view text, size_t start) {
  detail::CodePoint c = detail::utf8_decode(text, start);
  size_t at = start + (c.length > 0 ? c.length : 1);
  GraphemeBreak prev = break_property(c.value);
  // GB11: 0 no emoji sequence, 1 ExtPict Extend*, 2 ExtPict Extend* ZWJ.
  int emoji = is_pictographic(c.value) ? 1 : 0;
  size_t regional = prev == GraphemeBreak::kRegionalIndicator ? 1 : 0;  // GB12/13: the run's length
  while (at < text.size()) {
    c = detail::utf8_decode(text, at);
    const GraphemeBreak p = break_property(c.value);
    const bool pict = is_pictographic(c.value);
    const bool join = joins(prev, p, pict, emoji, regional);
    if (!join) break;
    if (pict) emoji = 1;
    else if (emoji == 1 && p == GraphemeBreak::kExtend) emoji = 1;
    else if (emoji == 1 && p == GraphemeBreak::kZWJ) emoji = 2;
    else emoji = 0;
    regional = p == GraphemeBreak::kRegionalIndicator ? regional + 1 : 0;
    prev = p;
    at += c.length > 0 ? c.length : 1;
  }
  return at;
}

}  // namespace petrel::text
