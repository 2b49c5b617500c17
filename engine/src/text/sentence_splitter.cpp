#include "text/sentence_splitter.h"

#include <algorithm>
#include <iterator>
#include <cctype>
#include <string>

#include "text/spm_normalizer.h"

namespace petrel::text {
namespace {

// Words whose period does not end a sentence (compared without case, without the final
// period): English, German, French and Spanish abbreviations common in software text.
constexpr std::string_view kAbbreviations[] = {
    "e.g", "i.e", "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "no", "nos", "fig", "figs",
    "approx", "ca", "cf", "inc", "ltd", "co", "corp", "dept", "est", "vol", "p", "pp", "z.b", "d.h",
    "bzw", "usw", "u.a", "ggf", "vgl", "nr", "bzgl", "inkl", "evtl", "mme", "mlle", "env", "p.ex", "sra"};

struct Char {
  char32_t c;
  size_t begin, end;
};

// The code point at text[at] (a malformed byte counts as U+FFFD, one byte).
Char char_at(std::string_view text, size_t at) {
  const size_t n = utf8::valid_length(text.data() + at, text.size() - at);
  if (n == 0) return {0xfffd, at, at + 1};
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[at + i])); };
  char32_t c = n == 1 ? b(0) : n == 2 ? (b(0) & 0x1f) : n == 3 ? (b(0) & 0x0f) : (b(0) & 0x07);
  for (size_t i = 1; i < n; ++i) c = c << 6 | (b(i) & 0x3f);
  return {c, at, at + n};
}

bool is_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
         c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_digit(char32_t c) { return (c >= '0' && c <= '9') || (c >= 0xff10 && c <= 0xff19); }

// Cased alphabets: Latin, Greek, Cyrillic, Armenian (approximate but for these ranges exact
// enough: uppercase blocks, and the even/odd pairs of the extended Latin blocks).
bool is_upper(char32_t c) {
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= 0xc0 && c <= 0xde) return c != 0xd7;
  if ((c >= 0x100 && c <= 0x17f) || (c >= 0x1e00 && c <= 0x1eff)) return c % 2 == 0;
  if (c >= 0x391 && c <= 0x3ab) return true;
  if (c >= 0x400 && c <= 0x42f) return true;
  if (c >= 0x531 && c <= 0x556) return true;
  return c >= 0x1c90 && c <= 0x1cbf;  // Georgian Mtavruli
}
bool is_lower(char32_t c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 0xdf && c <= 0xff) return c != 0xf7;
  if ((c >= 0x100 && c <= 0x17f) || (c >= 0x1e00 && c <= 0x1eff)) return c % 2 == 1;
  if (c >= 0x3ac && c <= 0x3ce) return true;
  if (c >= 0x430 && c <= 0x45f) return true;
  return c >= 0x561 && c <= 0x587;
}
// Letters of scripts without case.
bool is_caseless_letter(char32_t c) {
  return (c >= 0x5d0 && c <= 0x5ea) ||                       // Hebrew
         (c >= 0x620 && c <= 0x6ff) ||                       // Arabic
         (c >= 0x900 && c <= 0xdff) ||                       // Indic scripts
         (c >= 0xe00 && c <= 0xeff) ||                       // Thai, Lao
         (c >= 0xf00 && c <= 0xfff) ||                       // Tibetan
         (c >= 0x1000 && c <= 0x109f) ||                     // Myanmar
         (c >= 0x10d0 && c <= 0x10ff) ||                     // Georgian
         (c >= 0x1100 && c <= 0x11ff) ||                     // Hangul Jamo
         (c >= 0x1200 && c <= 0x137f) ||                     // Ethiopic
         (c >= 0x1780 && c <= 0x17ff) ||                     // Khmer
         (c >= 0x3040 && c <= 0x30ff) ||                     // Kana
         (c >= 0x3400 && c <= 0x9fff) ||                     // CJK
         (c >= 0xac00 && c <= 0xd7af) ||                     // Hangul
         (c >= 0xf900 && c <= 0xfaff) || (c >= 0x20000 && c <= 0x2ffff);
}
bool is_opening(char32_t c) {
  return c == '"' || c == '\'' || c == '(' || c == '[' || c == 0xab || c == 0x201c || c == 0x2018 || c == 0x201e ||
         c == 0xbf || c == 0xa1;
}
bool is_closing(char32_t c) {
  return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}' || c == 0xbb || c == 0x201d || c == 0x2019 ||
         c == 0x203a || c == 0x300d || c == 0x300f || c == 0xff09 || c == 0x3011 || c == 0x3015 || c == 0x3009 ||
         c == 0x300b;
}
bool ends_sentence(char32_t c) {  // followed by whitespace and a sentence start
  return c == '.' || c == '!' || c == '?' || c == 0x2026 || c == 0x203c || c == 0x2047 || c == 0x2048 || c == 0x2049;
}
bool ends_sentence_cjk(char32_t c) { return c == 0x3002 || c == 0xff01 || c == 0xff1f || c == 0xff0e; }
bool ends_sentence_before_space(char32_t c) {
  return c == 0x964 || c == 0x965 || c == 0x61f || c == 0x6d4 || c == 0x589 || c == 0x1362 || c == 0x104b;
}

// Whether the period at `dot` follows an abbreviation or a single letter.
bool period_after_abbreviation(std::string_view text, size_t dot) {
  size_t start = dot;
  while (start > 0 && !is_space(static_cast<unsigned char>(text[start - 1])) && text[start - 1] != '(' &&
         text[start - 1] != '"')
    --start;
  std::string word(text.substr(start, dot - start));
  if (word.empty()) return false;
  for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (std::find(std::begin(kAbbreviations), std::end(kAbbreviations), word) != std::end(kAbbreviations)) return true;
  // A single letter, or letters with periods between ("u.s", "a.m"): initials.
  const Char last = char_at(text, start);
  if (last.end == dot && (is_upper(last.c) || is_lower(last.c))) return true;
  return word.size() >= 3 && word[word.size() - 2] == '.' && std::isalpha(static_cast<unsigned char>(word.back()));
}

}  // namespace

std::vector<SentenceSpan> split_sentences(std::string_view text) {
  std::vector<SentenceSpan> out;
  size_t at = 0;
  auto skip_space = [&](size_t from) {
    while (from < text.size()) {
      const Char c = char_at(text, from);
      if (!is_space(c.c)) break;
      from = c.end;
    }
    return from;
  };
  size_t begin = skip_space(0);
  at = begin;
  while (at < text.size()) {
    const Char c = char_at(text, at);
    at = c.end;
    const bool cjk = ends_sentence_cjk(c.c);
    const bool latin = ends_sentence(c.c);
    const bool spaced = ends_sentence_before_space(c.c);
    if (!cjk && !latin && !spaced) continue;
    size_t end = at;  // after the terminator and any closing quotes or brackets
    while (end < text.size()) {
      const Char d = char_at(text, end);
      if (!is_closing(d.c) && !(latin && ends_sentence(d.c)) && !(cjk && ends_sentence_cjk(d.c))) break;
      end = d.end;
    }
    const size_t next = skip_space(end);
    bool boundary = false;
    if (next >= text.size()) {
      boundary = false;  // the last sentence ends with the text
    } else if (cjk) {
      boundary = true;
    } else if (next > end) {  // whitespace follows
      const Char n = char_at(text, next);
      if (spaced) boundary = true;
      else
        boundary = (is_upper(n.c) || is_digit(n.c) || is_opening(n.c) || is_caseless_letter(n.c)) &&
                   !(c.c == '.' && end == at && period_after_abbreviation(text, c.begin));
    }
    if (!boundary) {
      at = end;
      continue;
    }
    out.push_back({begin, end});
    begin = at = next;
  }
  // The last sentence, without trailing whitespace.
  size_t end = text.size();
  while (end > begin) {
    size_t lead = end - 1;
    while (lead > begin && (static_cast<unsigned char>(text[lead]) & 0xc0) == 0x80) --lead;
    if (!is_space(char_at(text, lead).c)) break;
    end = lead;
  }
  if (end > begin) out.push_back({begin, end});
  return out;
}

}  // namespace petrel::text
