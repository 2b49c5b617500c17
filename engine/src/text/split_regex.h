// The regular expressions of Hugging Face tokenizer.json pre-tokenizers (Split patterns,
// ByteLevel's GPT-2 pattern), in the Oniguruma syntax HF's `tokenizers` compiles them with
// (the onig crate: ONIG_SYNTAX_ONIGURUMA, ONIG_OPTION_NONE, UTF-8), matched in time linear
// in the text: a Pike VM (Thompson NFA simulation whose threads keep their priority), which
// gives a backtracking engine's leftmost-first result without backtracking.
//
// Supported: literals; escapes \t \n \r \f \v \a \e, \xHH, \x{H...}, \uHHHH, an escaped
// punctuation character; `.` (anything but \n); classes [...] with ranges, negation,
// nested classes and escapes; \s \S (White_Space: U+0009..000D, U+0020, U+0085, U+00A0,
// Zs, U+2028, U+2029: Oniguruma's Unicode \s), \d \D (Nd), \w \W (L, M, Nd, Pc), \h \H
// (hex digit); \p{..} \P{..} \p{^..} with a General_Category (L, Lu, LC, N, Nd, ..., short
// or long names: Letter, Decimal_Number, ...; case, spaces, `_` and `-` ignored) or Any;
// class intersection [a-z&&[^aeiou]]; groups (...), (?:...), (?<name>...), (?i:...), (?-i:...), (?i) (to the group's end), (?#..);
// alternation; * + ? {n} {n,} {n,m} {,m} greedy and lazy (`??` `*?` `+?` `{n,m}?`; as in
// Oniguruma, a `{n}` that is not an interval is literal text); anchors ^ and $ (Oniguruma's
// line anchors: ^ at the start or after a \n that is not the last byte, $ at the end or
// before any \n), \A, \z, \Z; lookahead (?=X) and (?!X) where X matches exactly one code
// point (a class, a literal, an alternation of those): an assertion on the next code
// point, `(?!X)` holding at the end of the text — which covers `\s+(?!\S)`.
// (?i) is simple case folding (CaseFolding.txt C+S, closed over: `s` matches `S` and
// U+017F, `k` U+212A), applied as Oniguruma does to literals and bracketed classes (a
// negated one is folded, then negated) but not to a class escape outside brackets
// ((?i)\p{Lu} is still upper case only; (?i)[\p{Lu}] is any cased letter); Oniguruma's
// multi-character folds (`ss` ~ U+00DF) are not supported.
// Refused with kInvalidArgument naming the construct and its offset: backreferences,
// lookbehind, longer lookahead, atomic groups, possessive quantifiers, conditionals,
// \b \B \G \K \R \X and other escapes, POSIX brackets [:alpha:],
// script properties (\p{Han}), unbalanced parentheses and brackets, bad ranges, repeat
// counts above 100000, programs above 1024 instructions, nesting deeper than 500,
// patterns above 64 KiB, patterns that are not UTF-8.
//
// A loop (*, +, {n,}) whose body can match empty, like (x|.??)*, ends on an empty
// iteration at that iteration's priority, as Oniguruma's empty check does (RE2 and Rust's
// regex drop such an iteration instead). Beyond 64 such loops in a pattern, and in counted
// repetitions {n,m}, an empty iteration is dropped; random patterns with repeated parts
// that can match empty still differ from Oniguruma on about 1 in 2000 (pattern, text)
// pairs (nested and counted repetitions of such parts), none of the tokenizers' patterns
// has one. Oniguruma's quirks kept: a(?i)b|c is a(?i:b|c); x{2}? is (?:x{2})?, not lazy.
//
// Where JavaScript (new RegExp(p, "u")) differs: its \s adds U+FEFF and lacks U+0085, its
// \d and \w are ASCII, its ^ and $ are the text's ends (no "m" flag), its `.` also
// excludes \r, U+2028, U+2029, and it has no (?i:...) groups.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/status.h"

namespace petrel::text {

class SplitRegex {
 public:
  // Compiles a pattern (UTF-8). Unsupported syntax -> kInvalidArgument naming the
  // construct and its byte offset.
  static Result<SplitRegex> compile(std::string_view pattern);

  // Every non-overlapping match, leftmost-first (Oniguruma / Perl priority: the first
  // alternative that matches wins, greedy quantifiers prefer longer), left to right, as
  // HF's tokenizers finds them (the onig crate's find_iter, the same as Rust's regex):
  // after an empty match the search resumes one code point on, and an empty match right
  // at the previous match's end is skipped. Appends (begin, end) byte offsets into `text`
  // to `matches` (cleared first). `text` should be valid UTF-8 (a malformed byte counts
  // as one U+FFFD) and shorter than 4 GiB (longer: no matches).
  // Time: O(program size) per code point scanned; each search scans from where it
  // starts to its match's end, and past that only while a higher-priority alternative
  // is still alive — linear over the whole text for the tokenizers' patterns (whose
  // alternatives end at a class change); a pattern whose preferred alternative runs far
  // past a lower one's match and then fails (`a*b|a` on "aaaa...") rescans that stretch
  // for each match, as Rust's regex does.
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches) const;
  // find_all that gives up, with the matches incomplete, once its searches have scanned
  // more than `max_scanned` bytes in all (kRescans: a pattern that rescans, above, is
  // refused on a long text instead of taking quadratic time) or the VM has taken more
  // than `steps_left` steps (kTooManySteps: a program with hundreds of threads alive at
  // each position); `steps_left` loses the steps taken, so that calls can share a budget.
  enum class Within : uint8_t { kDone, kRescans, kTooManySteps };
  Within find_all_within(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches,
                         uint64_t max_scanned, uint64_t& steps_left) const;

  // find_all, returning the VM's work (threads stepped plus instructions visited): the
  // linear-time tests count it.
  uint64_t find_all_counting_steps(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches) const;

  // The compiled program's instruction count.
  size_t program_size() const { return program_.size(); }

 private:
  struct CodePointSet {
    uint64_t ascii[2] = {0, 0};  // members below U+0080
    std::vector<std::pair<char32_t, char32_t>> ranges;  // all members, sorted, disjoint
    bool contains(char32_t c) const;
  };
  // kSave and kCheckProgress make a loop whose body can match empty end on an empty
  // iteration, as Oniguruma's empty check does: kSave keeps the iteration's start in a
  // thread register, kCheckProgress goes on to the loop's exit when the text position is
  // still that one, else back to the loop.
  enum class Op : uint8_t { kChar, kSplit, kJump, kAssert, kMatch, kSave, kCheckProgress };
  enum class Assertion : uint8_t {
    kLineBegin, kLineEnd, kTextBegin, kTextEnd, kTextEndOrFinalNewline, kNextIn, kNextNotIn
  };
  struct Instruction {
    Op op;
    Assertion assertion;  // kAssert
    uint32_t x;           // kChar, kAssert kNext*: the set; kSplit (preferred), kJump, kCheckProgress: the target;
                          // kSave: the register
    uint32_t y;           // kSplit: the other target; kCheckProgress: the target after an empty iteration
    uint32_t z;           // kCheckProgress: the register
  };
  friend class SplitRegexCompiler;

  bool assertion_holds(const Instruction& inst, std::string_view text, size_t at) const;
  template <bool kCount>
  uint64_t run(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches,
               uint64_t max_scanned = UINT64_MAX, uint64_t max_steps = UINT64_MAX, Within* within = nullptr) const;

  std::vector<Instruction> program_;
  std::vector<CodePointSet> sets_;
  uint32_t registers_ = 0;  // per thread: one per loop whose body can match empty
};

}  // namespace petrel::text
