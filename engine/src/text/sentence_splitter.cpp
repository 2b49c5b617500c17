#include "text/sentence_splitter.h"

#include <algorithm>
#include <iterator>
#include <cctype>
#include <string>

#include "core/unicode.h"
#include "core/utf8.h"

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

// The code point at text[at] (a malformed sequence counts as U+FFFD).
Char char_at(std::string_view text, size_t at) {
  const detail::CodePoint c = detail::utf8_decode(text, at);
  return {c.value, at, at + c.length};
}

// Case, letters without case, whitespace and digits come from Unicode's data
// (core/unicode.h), so every cased script splits alike.
using detail::is_caseless_letter;
using detail::is_decimal_digit;
using detail::is_lower;
using detail::is_upper_or_title;
bool is_space(char32_t c) { return detail::is_white_space(c); }

// Whether text[from, to) holds only no-break spaces (U+00A0, U+2007, U+202F): they glue
// what they separate ("1.\u00a0Overview", "Fig.\u00a03"), so no sentence ends there.
bool only_no_break_spaces(std::string_view text, size_t from, size_t to) {
  while (from < to) {
    const Char c = char_at(text, from);
    if (c.c != 0xA0 && c.c != 0x2007 && c.c != 0x202F) return false;
    from = c.end;
  }
  return true;
}
bool is_digit(char32_t c) { return is_decimal_digit(c); }

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

// The start of the character that ends at `end` (> 0): back over at most three
// continuation bytes to a lead byte that decodes to exactly there, else one byte.
size_t char_start_before(std::string_view text, size_t end) {
  for (size_t back = 2; back <= 4 && back <= end; ++back) {
    const size_t at = end - back;
    if ((static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) continue;
    return detail::utf8_decode(text, at).length == back ? at : end - 1;
  }
  return end - 1;
}

// Whether the period at `dot` follows an abbreviation or a single letter. The word
// starts after the last whitespace character, '(' or '"'; the caller asks only for a
// period that whitespace follows, so the words asked about never overlap and the scans
// back add up to the text's length.
bool period_after_abbreviation(std::string_view text, size_t dot) {
  size_t start = dot;
  while (start > 0) {
    const size_t before = char_start_before(text, start);
    const char32_t c = char_at(text, before).c;
    if (is_space(c) || c == '(' || c == '"') break;
    start = before;
  }
  std::string word(text.substr(start, dot - start));
  if (word.empty()) return false;
  for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (std::find(std::begin(kAbbreviations), std::end(kAbbreviations), word) != std::end(kAbbreviations)) return true;
  // A single letter, or letters with periods between ("u.s", "a.m"): initials.
  const Char last = char_at(text, start);
  if (last.end == dot && (is_upper_or_title(last.c) || is_lower(last.c))) return true;
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
    } else if (next > end && !only_no_break_spaces(text, end, next)) {  // whitespace follows
      const Char n = char_at(text, next);
      if (spaced) boundary = true;
      else
        boundary = (is_upper_or_title(n.c) || is_digit(n.c) || is_opening(n.c) || is_caseless_letter(n.c)) &&
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
    const size_t lead = std::max(begin, char_start_before(text, end));
    if (!is_space(char_at(text, lead).c)) break;
    end = lead;
  }
  if (end > begin) out.push_back({begin, end});
  return out;
}

std::vector<SentenceSpan> split_sentences_by_line(std::string_view text) {
  std::vector<SentenceSpan> out;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    for (const SentenceSpan& s : split_sentences(text.substr(begin, end - begin)))
      out.push_back({begin + s.begin, begin + s.end});
    begin = end + 1;
  }
  return out;
}

std::vector<SentenceSpan> split_lines(std::string_view text) {
  std::vector<SentenceSpan> out;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    size_t first = begin, last = end;
    while (first < last && is_space(char_at(text, first).c)) first = char_at(text, first).end;
    while (last > first) {  // trailing whitespace: step back over whole characters
      size_t start = last - 1;
      while (start > first && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      if (!is_space(char_at(text, start).c)) break;
      last = start;
    }
    if (last > first) out.push_back({first, last});
    begin = end + 1;
  }
  return out;
}

std::vector<SentenceSpan> split_sentences_by_paragraph(std::string_view text) {
  std::vector<SentenceSpan> out;
  size_t paragraph = 0;  // where the current paragraph starts
  auto flush = [&](size_t end) {
    for (const SentenceSpan& s : split_sentences(text.substr(paragraph, end - paragraph)))
      out.push_back({paragraph + s.begin, paragraph + s.end});
  };
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    bool blank = true;
    for (size_t at = begin; at < end && blank;) {
      const Char c = char_at(text, at);
      blank = is_space(c.c);
      at = c.end;
    }
    if (blank) {
      flush(begin);
      paragraph = end;
    }
    begin = end + 1;
  }
  if (paragraph < text.size()) flush(text.size());
  return out;
}

}  // namespace petrel::text
