#include "text/unicode_normalize.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/unicode_normalization_tables.h"
#include "core/utf8.h"

namespace petrel::text {

namespace {

namespace tables = petrel::detail::unicode_tables;

// Hangul syllables (Unicode chapter 3.12): algorithmic.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

template <class T, size_t N>
constexpr size_t count_of(const T (&)[N]) {
  return N;
}

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const auto& table = tables::kCombiningClassStarts;
  const uint32_t key = static_cast<uint32_t>(c) << 8 | 0xffu;
  const auto it = std::upper_bound(table, table + count_of(table), key);  // table[0] starts at U+0000
  return static_cast<uint8_t>(*(it - 1) & 0xffu);
}

void decompose(char32_t c, bool compatibility, std::vector<char32_t>& out) {
  if (c < 0xC0) {  // nothing below U+00A0 decomposes; U+00A0..U+00BF only under compatibility
    if (c < 0xA0 || !compatibility) {
      out.push_back(c);
      return;
    }
  }
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto& keys = tables::kDecompositionKeys;
  const auto it = std::lower_bound(keys, keys + count_of(keys), static_cast<uint32_t>(c));
  if (it == keys + count_of(keys) || *it != c) {
    out.push_back(c);
    return;
  }
  uint32_t info = tables::kDecompositionInfo[it - keys];
  if ((info & 1u) != 0 && !compatibility) {  // a compatibility decomposition only
    out.push_back(c);
    return;
  }
  info >>= 1;
  if (compatibility) {
    const auto& differs = tables::kCompatibilityDiffers;
    const auto d = std::lower_bound(differs, differs + count_of(differs), static_cast<uint32_t>(c));
    if (d != differs + count_of(differs) && *d == c) info = tables::kCompatibilityDiffersInfo[d - differs];
  }
  const uint32_t* from = tables::kDecompositionPool + (info >> 5);
  out.insert(out.end(), from, from + (info & 31u));
}

// The primary composite of a pair, or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& keys = tables::kCompositionKeys;
  const uint64_t key = static_cast<uint64_t>(a) << 21 | b;
  const auto it = std::lower_bound(keys, keys + count_of(keys), key);
  if (it == keys + count_of(keys) || *it != key) return 0;
  return tables::kCompositionValues[it - keys];
}

}  // namespace

void normalize(std::string_view utf8, NormalizationForm form, std::string& out) {
  out.clear();
  if (std::all_of(utf8.begin(), utf8.end(), [](char b) { return static_cast<unsigned char>(b) < 0x80; })) {
    out.assign(utf8.data(), utf8.size());  // ASCII is in every form
    return;
  }
  const bool compatibility = form == NormalizationForm::kNFKC || form == NormalizationForm::kNFKD;
  const bool compose = form == NormalizationForm::kNFC || form == NormalizationForm::kNFKC;

  // Full decomposition.
  std::vector<char32_t> text;
  text.reserve(utf8.size());
  for (size_t at = 0; at < utf8.size();) {
    const petrel::detail::CodePoint cp = petrel::detail::utf8_decode(utf8, at);
    at += cp.length;
    decompose(cp.value, compatibility, text);
  }
  std::vector<uint8_t> classes(text.size());
  for (size_t i = 0; i < text.size(); ++i) classes[i] = combining_class(text[i]);

  // Canonical ordering: each run of non-starters stably sorted by combining class.
  std::vector<std::pair<uint8_t, char32_t>> run;
  for (size_t i = 0; i < text.size();) {
    if (classes[i] == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    bool sorted = true;
    while (end < text.size() && classes[end] != 0) {
      sorted = sorted && classes[end - 1] <= classes[end];
      ++end;
    }
    if (!sorted) {
      run.clear();
      for (size_t k = i; k < end; ++k) run.emplace_back(classes[k], text[k]);
      std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = i; k < end; ++k) classes[k] = run[k - i].first, text[k] = run[k - i].second;
    }
    i = end;
  }

  // Canonical composition (UAX #15's algorithm): a character joins the last starter
  // unless blocked by a mark of the same or a higher class since.
  size_t length = text.size();
  if (compose && !text.empty()) {
    size_t starter = 0, write = 1;
    int last_class = classes[0] == 0 ? 0 : 256;  // text starting with a mark: nothing composes with it
    for (size_t i = 1; i < text.size(); ++i) {
      const char32_t c = text[i];
      const int c_class = classes[i];
      const char32_t composite = last_class == 256 && classes[starter] != 0 ? 0 : compose_pair(text[starter], c);
      if (composite != 0 && (last_class < c_class || last_class == 0)) {
        text[starter] = composite;
        continue;
      }
      if (c_class == 0) starter = write;
      last_class = c_class;
      classes[write] = classes[i];
      text[write++] = c;
    }
    length = write;
  }
  out.reserve(utf8.size() + utf8.size() / 2);
  for (size_t i = 0; i < length; ++i) detail::append_utf8(out, text[i]);
}

}  // namespace petrel::text
