// Substring search in time linear in the text and the pattern, for patterns and texts
// that come from untrusted input (std::string::find compares the pattern at every
// candidate position: O(n * m) for 'aaa...ab' in 'aaaa...').
//
// Crochemore and Perrin's Two-Way algorithm ("Two-way string-matching", JACM 1991),
// as glibc's and musl's memmem implement it: the pattern is split at a critical
// factorization once (O(m), no memory), and a search compares at most 2n bytes of
// text. Finding every non-overlapping match left to right by calling find() again from
// the end of the last match costs O(n + m) in total: each call scans only the text from
// where it starts to the end of the match it returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

namespace petrel::detail {

// Finds one pattern (viewed: it must outlive the finder) in any number of texts.
class SubstringFinder {
 public:
  static constexpr size_t npos = std::string_view::npos;

  explicit SubstringFinder(std::string_view pattern) : pattern_(pattern) {
    if (pattern_.size() < 3) {  // a 1- or 2-byte pattern: any split is critical
      suffix_ = pattern_.empty() ? 0 : pattern_.size() - 1;
      period_ = 1;
    } else {
      size_t period_less = 1, period_greater = 1;
      const size_t less = maximal_suffix(false, &period_less);
      const size_t greater = maximal_suffix(true, &period_greater);
      // The later of the two maximal suffixes starts a critical factorization.
      if (less + 1 > greater + 1) {
        suffix_ = less + 1;
        period_ = period_less;
      } else {
        suffix_ = greater + 1;
        period_ = period_greater;
      }
    }
    // Periodic: the left half repeats at the right half's period (then a mismatch on
    // the left moves by that period only, remembering what the right half matched).
    periodic_ = suffix_ + period_ <= pattern_.size() &&
                std::memcmp(pattern_.data(), pattern_.data() + period_, suffix_) == 0;
    if (!periodic_) period_ = std::max(suffix_, pattern_.size() - suffix_) + 1;
  }

  // The offset of the first match starting at or after `from`, or npos.
  size_t find(std::string_view text, size_t from = 0) const {
    const size_t m = pattern_.size(), n = text.size();
    if (from > n || n - from < m) return npos;
    if (m == 0) return from;
    const unsigned char* needle = reinterpret_cast<const unsigned char*>(pattern_.data());
    const unsigned char* hay = reinterpret_cast<const unsigned char*>(text.data());
    size_t j = from;
    if (periodic_) {
      // A mismatch in the left half moves by the period; `memory` bytes of the right
      // half are then known to match and are not compared again.
      size_t memory = 0;
      while (j <= n - m) {
        size_t i = std::max(suffix_, memory);
        while (i < m && needle[i] == hay[i + j]) ++i;
        if (i < m) {
          j += i - suffix_ + 1;
          memory = 0;
          continue;
        }
        i = suffix_;
        while (i > memory && needle[i - 1] == hay[i - 1 + j]) --i;
        if (i <= memory) return j;
        j += period_;
        memory = m - period_;
      }
    } else {
      while (j <= n - m) {
        size_t i = suffix_;
        while (i < m && needle[i] == hay[i + j]) ++i;
        if (i < m) {
          j += i - suffix_ + 1;
          continue;
        }
        i = suffix_;
        while (i > 0 && needle[i - 1] == hay[i - 1 + j]) --i;
        if (i == 0) return j;
        j += period_;
      }
    }
    return npos;
  }

 private:
  // The start - 1 (npos for -1) of the pattern's maximal suffix in byte order, or in
  // reversed byte order when `reversed`; *period is that suffix's period.
  size_t maximal_suffix(bool reversed, size_t* period) const {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(pattern_.data());
    const size_t m = pattern_.size();
    size_t start = npos, j = 0, k = 1, q = 1;  // start + 1 is the candidate suffix's first byte
    while (j + k < m) {
      const unsigned char a = p[j + k], b = p[start + k];
      if (reversed ? b < a : a < b) {  // the suffix at j + 1 is smaller: the period is all so far
        j += k;
        k = 1;
        q = j - start;
      } else if (a == b) {
        if (k != q) {
          ++k;
        } else {
          j += q;
          k = 1;
        }
      } else {  // larger: a new candidate
        start = j++;
        k = q = 1;
      }
    }
    *period = q;
    return start;
  }

  std::string_view pattern_;
  size_t suffix_ = 0;  // the right half's first byte
  size_t period_ = 1;
  bool periodic_ = false;
};

// The first match of `pattern` in `text` at or after `from`, or npos.
inline size_t find_substring(std::string_view text, std::string_view pattern, size_t from = 0) {
  return SubstringFinder(pattern).find(text, from);
}

}  // namespace petrel::detail
