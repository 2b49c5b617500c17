// GBNF grammars (llama.cpp's grammars/README.md): text -> a compiled grammar of rules
// over Unicode code-point ranges, which text::GbnfMatcher (gbnf_matcher.h) runs.
//
// The syntax is llama.cpp's: `name ::= alternatives` rules (names of letters, digits and
// '-'; a rule ends at the end of its line, except inside parentheses), sequences,
// alternation `|`, literals "..." and character classes [...] / [^...] with ranges and the
// escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, `.` (any character), rule
// references, grouping ( ), the repetitions * + ? {m} {m,} {m,n} (applied, as llama.cpp
// does, to the last item: a whole literal, a class, a reference or a group), and comments
// from # to the end of the line. `root` is the start. Anything else is refused with the
// line and column (1-based, in characters) where it stands; a rule used but never defined,
// a rule defined twice, a missing root, and left recursion (a rule that can reach itself
// before consuming a character, directly, through other rules, or through rules or
// repetitions that can match the empty string) are refused by name: such a rule would
// never let a matcher finish expanding it.
//
// Repetitions are expanded as llama.cpp expands them: x{m,n} is m copies of x, then n - m
// nested optional rules (x{m,} a rule x R | empty); so the compiled size grows with the
// counts, and every limit below is checked before memory is taken for what it bounds.
// Parsing keeps the open groups on an explicit stack: nothing recurses on the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

constexpr size_t kMaxGbnfBytes = size_t{4} << 20;          // grammar text
constexpr size_t kMaxGbnfRules = size_t{1} << 20;          // rules, the groups' and repetitions' included
constexpr size_t kMaxGbnfNesting = 256;                    // groups open at once
constexpr uint32_t kMaxGbnfRepetition = 1000;              // m and n of {m,n}
constexpr size_t kMaxGbnfElements = size_t{1} << 22;       // compiled elements (after expansion)

struct GbnfGrammar {
  // One item of an alternative: a character (a set of code points), a reference to a rule,
  // or the end of the alternative.
  enum Kind : uint8_t { kChars = 0, kRule = 1, kEnd = 2 };
  struct Element {
    Kind kind;
    uint32_t value;  // kChars: the charset's index; kRule: the rule's index
  };
  struct Charset {
    uint64_t ascii[2];     // code points 0..127, a bit each
    uint32_t begin, end;   // its ranges: ranges[begin, end), sorted, disjoint, not adjacent
  };
  std::vector<Element> elements;  // every alternative's items, each run ended by kEnd
  std::vector<Charset> charsets;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
  // Rule r's alternatives start at elements[alternatives[i]] for i in
  // [rule_alternatives[r], rule_alternatives[r + 1]).
  std::vector<uint32_t> alternatives;
  std::vector<uint32_t> rule_alternatives;
  std::vector<std::string> rule_names;  // the grammar's names; a group's or repetition's: "name/3:14"
  uint32_t root = 0;

  bool contains(uint32_t charset, uint32_t code_point) const {
    const Charset& c = charsets[charset];
    if (code_point < 128) return (c.ascii[code_point >> 6] >> (code_point & 63)) & 1;
    uint32_t lo = c.begin, hi = c.end;  // the first range ending at or after code_point
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (ranges[mid].second < code_point) lo = mid + 1;
      else hi = mid;
    }
    return lo < c.end && ranges[lo].first <= code_point;
  }
  // Whether the charset holds a code point in [first, last].
  bool intersects(uint32_t charset, uint32_t first, uint32_t last) const {
    const Charset& c = charsets[charset];
    for (uint32_t i = c.begin; i < c.end; ++i)
      if (ranges[i].first <= last && ranges[i].second >= first) return true;
    return false;
  }
  size_t rule_count() const { return rule_names.size(); }
};

// Compiles GBNF text. Errors (kInvalidArgument) say "grammar line:column: what".
Result<GbnfGrammar> parse_gbnf(std::string_view text);

}  // namespace petrel::text
