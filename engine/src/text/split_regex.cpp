#include "text/split_regex.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "core/unicode.h"
#include "core/unicode_category.h"
#include "core/utf8.h"

namespace petrel::text {

namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;
using petrel::detail::GeneralCategory;
namespace tables = petrel::detail::unicode_tables;

constexpr size_t kMaxPatternBytes = 64 * 1024;
constexpr uint32_t kMaxRepeat = 100000;         // Oniguruma's ONIG_MAX_REPEAT_NUM
// A program's instructions bound the VM's work per code point (each at most visited and
// stepped once) and its memory per search. The largest real pre-tokenizer pattern has
// 121 (o200k's; Llama 3's 78, Qwen's 74, GPT-2's 67, DeepSeek's main one 47), so this
// leaves 8 times that; the random patterns of the Oniguruma oracle need up to 817.
// (It was 2^20: `(?:(?:.?){1000}){400}`, 21 bytes, made 800k threads per code point.)
constexpr uint64_t kMaxProgram = 1024;
constexpr size_t kMaxDepth = 500;               // groups, classes and stacked quantifiers
constexpr uint32_t kMaxHeight = 2000;           // of the syntax tree
constexpr uint32_t kMaxRegisters = 64;          // loops with an empty check
constexpr uint32_t kInfinite = std::numeric_limits<uint32_t>::max();
constexpr char32_t kMaxCodePoint = 0x10ffff;

void normalize(Ranges& r) {
  std::sort(r.begin(), r.end());
  size_t out = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (out > 0 && r[i].first <= r[out - 1].second + 1) {
      r[out - 1].second = std::max(r[out - 1].second, r[i].second);
    } else {
      r[out++] = r[i];
    }
  }
  r.resize(out);
}

bool in(const Ranges& r, char32_t c) {  // r normalized
  auto it = std::upper_bound(r.begin(), r.end(), std::make_pair(c, static_cast<char32_t>(kMaxCodePoint + 1)));
  return it != r.begin() && std::prev(it)->second >= c;
}

Ranges complement(const Ranges& r) {  // r normalized
  Ranges out;
  char32_t next = 0;
  for (const auto& [a, b] : r) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

// Adds every code point whose simple case folding equals that of a member.
void close_over_case(Ranges& r) {
  normalize(r);
  const auto& folds = tables::kCaseFolding;
  std::vector<char32_t> targets;  // folded forms with a member in their orbit
  for (const uint64_t e : folds) {
    const auto from = static_cast<char32_t>(e >> 21), to = static_cast<char32_t>(e & 0x1fffff);
    if (in(r, from) || in(r, to)) targets.push_back(to);
  }
  std::sort(targets.begin(), targets.end());
  for (const uint64_t e : folds) {
    const auto from = static_cast<char32_t>(e >> 21), to = static_cast<char32_t>(e & 0x1fffff);
    if (std::binary_search(targets.begin(), targets.end(), to)) {
      r.emplace_back(from, from);
      r.emplace_back(to, to);
    }
  }
  normalize(r);
}

Ranges category_ranges(uint32_t mask) {
  Ranges out;
  const auto& starts = tables::kCategoryStarts;
  const size_t n = sizeof starts / sizeof starts[0];
  for (size_t i = 0; i < n; ++i) {
    if ((mask >> (starts[i] & 31u) & 1u) == 0) continue;
    const char32_t first = starts[i] >> 5;
    const char32_t last = i + 1 < n ? (starts[i + 1] >> 5) - 1 : kMaxCodePoint;
    out.emplace_back(first, last);
  }
  normalize(out);
  return out;
}

constexpr uint32_t bit(GeneralCategory c) { return 1u << c; }
constexpr uint32_t kLetters = bit(tables::kLu) | bit(tables::kLl) | bit(tables::kLt) | bit(tables::kLm) | bit(tables::kLo);
constexpr uint32_t kMarks = bit(tables::kMn) | bit(tables::kMc) | bit(tables::kMe);
constexpr uint32_t kNumbers = bit(tables::kNd) | bit(tables::kNl) | bit(tables::kNo);
constexpr uint32_t kPunctuation = bit(tables::kPc) | bit(tables::kPd) | bit(tables::kPs) | bit(tables::kPe) |
                                  bit(tables::kPi) | bit(tables::kPf) | bit(tables::kPo);
constexpr uint32_t kSymbols = bit(tables::kSm) | bit(tables::kSc) | bit(tables::kSk) | bit(tables::kSo);
constexpr uint32_t kSeparators = bit(tables::kZs) | bit(tables::kZl) | bit(tables::kZp);
constexpr uint32_t kOthers = bit(tables::kCc) | bit(tables::kCf) | bit(tables::kCs) | bit(tables::kCo) | bit(tables::kCn);

// A General_Category property name (normalized: lower case, no spaces, '_' or '-') ->
// a category mask; 0 when unknown.
uint32_t category_mask(const std::string& name) {
  struct Name {
    const char* short_name;
    const char* long_name;
    uint32_t mask;
  };
  static const Name kNames[] = {
      {"l", "letter", kLetters},
      {"lc", "casedletter", bit(tables::kLu) | bit(tables::kLl) | bit(tables::kLt)},
      {"lu", "uppercaseletter", bit(tables::kLu)},
      {"ll", "lowercaseletter", bit(tables::kLl)},
      {"lt", "titlecaseletter", bit(tables::kLt)},
      {"lm", "modifierletter", bit(tables::kLm)},
      {"lo", "otherletter", bit(tables::kLo)},
      {"m", "mark", kMarks},
      {"mn", "nonspacingmark", bit(tables::kMn)},
      {"mc", "spacingmark", bit(tables::kMc)},
      {"me", "enclosingmark", bit(tables::kMe)},
      {"n", "number", kNumbers},
      {"nd", "decimalnumber", bit(tables::kNd)},
      {"nl", "letternumber", bit(tables::kNl)},
      {"no", "othernumber", bit(tables::kNo)},
      {"p", "punctuation", kPunctuation},
      {"pc", "connectorpunctuation", bit(tables::kPc)},
      {"pd", "dashpunctuation", bit(tables::kPd)},
      {"ps", "openpunctuation", bit(tables::kPs)},
      {"pe", "closepunctuation", bit(tables::kPe)},
      {"pi", "initialpunctuation", bit(tables::kPi)},
      {"pf", "finalpunctuation", bit(tables::kPf)},
      {"po", "otherpunctuation", bit(tables::kPo)},
      {"s", "symbol", kSymbols},
      {"sm", "mathsymbol", bit(tables::kSm)},
      {"sc", "currencysymbol", bit(tables::kSc)},
      {"sk", "modifiersymbol", bit(tables::kSk)},
      {"so", "othersymbol", bit(tables::kSo)},
      {"z", "separator", kSeparators},
      {"zs", "spaceseparator", bit(tables::kZs)},
      {"zl", "lineseparator", bit(tables::kZl)},
      {"zp", "paragraphseparator", bit(tables::kZp)},
      {"c", "other", kOthers},
      {"cc", "control", bit(tables::kCc)},
      {"cf", "format", bit(tables::kCf)},
      {"cs", "surrogate", bit(tables::kCs)},
      {"co", "privateuse", bit(tables::kCo)},
      {"cn", "unassigned", bit(tables::kCn)},
      {"any", "any", 0xffffffffu},
  };
  for (const Name& n : kNames) {
    if (name == n.short_name || name == n.long_name) return n.mask;
  }
  return 0;
}

Ranges white_space() {
  Ranges out;
  for (const auto& r : tables::kWhiteSpace) out.emplace_back(r.first, r.last);
  out.emplace_back(' ', ' ');
  normalize(out);
  return out;
}

Ranges word_characters() {
  Ranges out = category_ranges(kLetters | kMarks | bit(tables::kNd) | bit(tables::kPc));
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct Node {
  enum class Kind : uint8_t { kEmpty, kSet, kConcat, kAlt, kRepeat, kAssert };
  Kind kind = Kind::kEmpty;
  uint8_t assertion = 0;  // SplitRegex::Assertion
  bool greedy = true;
  uint32_t set = 0;       // kSet, kAssert (lookahead)
  uint32_t min = 0, max = 0;
  uint32_t height = 1;    // of the tree below: compiling recurses this deep
  bool nullable = false;  // can match the empty string
  std::vector<uint32_t> kids;
};

}  // namespace

bool SplitRegex::CodePointSet::contains(char32_t c) const {
  if (c < 128) return (ascii[c >> 6] >> (c & 63) & 1u) != 0;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(c, static_cast<char32_t>(kMaxCodePoint + 1)));
  return it != ranges.begin() && std::prev(it)->second >= c;
}

class SplitRegexCompiler {
 public:
  explicit SplitRegexCompiler(std::string_view pattern) : p_(pattern) {}

  Result<SplitRegex> compile() {
    if (p_.size() > kMaxPatternBytes)
      return Error{ErrorCode::kInvalidArgument, "split regex: the pattern has " + std::to_string(p_.size()) +
                                                    " bytes, more than 64 KiB"};
    const size_t bad = petrel::detail::utf8_invalid_at(p_);
    if (bad != p_.size()) return error("a byte that is not UTF-8", bad);
    const uint32_t root = parse_alternation(false);
    if (failed_) return error_;
    if (at_ < p_.size()) return error("an unbalanced ')'", at_);  // parse_alternation stops only at ')' or the end
    const uint64_t size = program_size(root) + 1;
    if (size > kMaxProgram)
      return Error{ErrorCode::kInvalidArgument, "split regex: the pattern compiles to more than " +
                                                    std::to_string(kMaxProgram) +
                                                    " instructions (counted repetitions expand)"};
    SplitRegex re;
    re.program_.reserve(size);
    emit(root, re.program_);
    re.program_.push_back({SplitRegex::Op::kMatch, SplitRegex::Assertion::kTextBegin, 0, 0, 0});
    re.registers_ = registers_;
    re.sets_.reserve(sets_.size());
    for (Ranges& r : sets_) {
      SplitRegex::CodePointSet s;
      for (const auto& [a, b] : r) {
        for (char32_t c = a; c <= b && c < 128; ++c) s.ascii[c >> 6] |= uint64_t{1} << (c & 63);
      }
      s.ranges = std::move(r);
      re.sets_.push_back(std::move(s));
    }
    return re;
  }

 private:
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  Error error(const std::string& what, size_t offset) const {
    return Error{ErrorCode::kInvalidArgument,
                 "split regex: " + what + " at offset " + std::to_string(offset) + " of the pattern"};
  }
  uint32_t fail(const std::string& what, size_t offset) {
    if (!failed_) {
      failed_ = true;
      error_ = error(what, offset);
    }
    return kNone;
  }
  bool more() const { return at_ < p_.size(); }
  char peek(size_t ahead = 0) const { return at_ + ahead < p_.size() ? p_[at_ + ahead] : '\0'; }
  char32_t next_code_point() {
    const petrel::detail::CodePoint cp = petrel::detail::utf8_decode(p_, at_);
    at_ += cp.length;
    return cp.value;
  }

  uint32_t add(Node n) {
    for (const uint32_t kid : n.kids) n.height = std::max(n.height, nodes_[kid].height + 1);
    switch (n.kind) {
      case Node::Kind::kEmpty: case Node::Kind::kAssert: n.nullable = true; break;
      case Node::Kind::kSet: n.nullable = false; break;
      case Node::Kind::kConcat:
        n.nullable = std::all_of(n.kids.begin(), n.kids.end(), [&](uint32_t k) { return nodes_[k].nullable; });
        break;
      case Node::Kind::kAlt:
        n.nullable = std::any_of(n.kids.begin(), n.kids.end(), [&](uint32_t k) { return nodes_[k].nullable; });
        break;
      case Node::Kind::kRepeat: n.nullable = n.min == 0 || nodes_[n.kids[0]].nullable; break;
    }
    if (n.height > kMaxHeight) return fail("nesting deeper than " + std::to_string(kMaxHeight) + " (groups and quantifiers)", at_);
    nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  // The index of a set (equal sets shared).
  uint32_t intern(Ranges r) {
    normalize(r);
    const auto [it, added] = set_index_.emplace(std::move(r), static_cast<uint32_t>(sets_.size()));
    if (added) sets_.push_back(it->first);
    return it->second;
  }
  uint32_t add_set(Ranges r, bool fold) {
    if (fold) {
      if (r.size() == 1 && r[0].first == r[0].second) {  // a literal: its case orbit, cached
        const char32_t c = r[0].first;
        auto it = folded_literals_.find(c);
        if (it == folded_literals_.end()) {
          close_over_case(r);
          it = folded_literals_.emplace(c, std::move(r)).first;
        }
        r = it->second;
      } else {
        close_over_case(r);
      }
    }
    Node n;
    n.kind = Node::Kind::kSet;
    n.set = intern(std::move(r));
    return add(std::move(n));
  }
  uint32_t add_assert(SplitRegex::Assertion a, uint32_t set = 0) {
    Node n;
    n.kind = Node::Kind::kAssert;
    n.assertion = static_cast<uint8_t>(a);
    n.set = set;
    return add(std::move(n));
  }

  // alternation := concatenation ('|' concatenation)*; stops before ')' or at the end.
  uint32_t parse_alternation(bool fold) {
    if (++depth_ > kMaxDepth) return fail("nesting deeper than " + std::to_string(kMaxDepth), at_);
    Node alt;
    alt.kind = Node::Kind::kAlt;
    while (true) {
      const uint32_t branch = parse_concatenation(fold);
      if (failed_) return kNone;
      alt.kids.push_back(branch);
      if (peek() != '|' || !more()) break;
      ++at_;
    }
    --depth_;
    if (alt.kids.size() == 1) return alt.kids[0];
    return add(std::move(alt));
  }

  // Reads "(?flags)" or "(?flags:" at at_: returns 0 when it is not one, ')' or ':'.
  char option_group(bool& fold, size_t& end) {
    if (peek() != '(' || peek(1) != '?') return 0;
    size_t i = at_ + 2;
    bool on = true, any = false, new_fold = fold;
    for (; i < p_.size(); ++i) {
      const char c = p_[i];
      if (c == '-' && on) {
        on = false;
      } else if (c == 'i') {
        new_fold = on;
        any = true;
      } else if (c == 'm' || c == 'x' || c == 'a' || c == 'u' || c == 'W' || c == 'D' || c == 'S' || c == 'P' ||
                 c == 'y' || c == 'I' || c == 'L') {
        fail(std::string("the option '") + c + "'", i);
        return 0;
      } else {
        break;
      }
    }
    if (i >= p_.size() || (p_[i] != ')' && p_[i] != ':') || (!any && on)) return 0;
    fold = new_fold;
    end = i + 1;
    return p_[i];
  }

  uint32_t parse_concatenation(bool fold) {
    Node cat;
    cat.kind = Node::Kind::kConcat;
    while (more() && peek() != '|' && peek() != ')') {
      bool new_fold = fold;
      size_t end = 0;
      const char kind = option_group(new_fold, end);
      if (failed_) return kNone;
      if (kind == ')') {  // (?i) applies to the rest of the enclosing group, its alternatives too
        at_ = end;
        const uint32_t rest = parse_alternation(new_fold);
        if (failed_) return kNone;
        cat.kids.push_back(rest);
        break;
      }
      const size_t atom_at = at_;
      uint32_t atom = parse_atom(fold);
      if (failed_) return kNone;
      atom = parse_quantifiers(atom, atom_at);
      if (failed_) return kNone;
      if (atom != kNone) cat.kids.push_back(atom);
    }
    if (cat.kids.size() == 1) return cat.kids[0];
    if (cat.kids.empty()) return add(Node{});
    return add(std::move(cat));
  }

  // {n}, {n,}, {n,m}, {,m} at at_: true and the bounds, else false (then '{' is literal).
  bool interval(uint32_t& min, uint32_t& max, size_t& end, bool& too_large) const {
    size_t i = at_ + 1;
    auto number = [&](uint32_t& v) {
      const size_t from = i;
      uint64_t value = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
        value = std::min<uint64_t>(value * 10 + static_cast<uint64_t>(p_[i] - '0'), uint64_t{1} << 40);
        ++i;
      }
      if (value > kMaxRepeat) too_large = true;
      v = static_cast<uint32_t>(std::min<uint64_t>(value, kMaxRepeat));
      return i > from;
    };
    too_large = false;
    const bool has_min = number(min);
    if (i < p_.size() && p_[i] == '}') {
      if (!has_min) return false;
      max = min;
    } else if (i < p_.size() && p_[i] == ',') {
      ++i;
      const bool has_max = number(max);
      if (!has_min && !has_max) return false;
      if (!has_min) min = 0;
      if (!has_max) max = kInfinite;
      if (i >= p_.size() || p_[i] != '}') return false;
    } else {
      return false;
    }
    end = i + 1;
    return true;
  }

  uint32_t parse_quantifiers(uint32_t atom, size_t atom_at) {
    size_t stacked = 0;
    while (more()) {
      const size_t q_at = at_;
      const char c = peek();
      uint32_t min = 0, max = 0;
      bool fixed = false;
      if (c == '*') {
        min = 0, max = kInfinite, ++at_;
      } else if (c == '+') {
        min = 1, max = kInfinite, ++at_;
      } else if (c == '?') {
        min = 0, max = 1, ++at_;
      } else if (c == '{') {
        size_t end = 0;
        bool too_large = false;
        if (!interval(min, max, end, too_large)) break;
        if (too_large) return fail("a repeat count above " + std::to_string(kMaxRepeat), q_at);
        if (max != kInfinite && min > max) return fail("a repeat range {n,m} with n > m", q_at);
        fixed = min == max;
        at_ = end;
      } else {
        break;
      }
      bool greedy = true;
      if (peek() == '?' && !fixed && more()) {  // Oniguruma: {n}? is ({n})?, not lazy
        greedy = false;
        ++at_;
      } else if (peek() == '+' && c != '{' && more()) {
        return fail("a possessive quantifier", q_at);
      }
      if (atom == kNone) return fail("a quantifier with nothing to repeat", q_at);
      // Oniguruma refuses ^* and (?=a)*, takes (\Z){2}: a group may be repeated.
      if (nodes_[atom].kind == Node::Kind::kAssert && p_[atom_at] != '(') return fail("a quantifier on an assertion", q_at);
      if (++stacked > kMaxDepth) return fail("too many stacked quantifiers", q_at);
      Node r;
      r.kind = Node::Kind::kRepeat;
      r.min = min;
      r.max = max;
      r.greedy = greedy;
      r.kids.push_back(atom);
      atom = add(std::move(r));
    }
    return atom;
  }

  // An escape's meaning: a single code point or a set (or an anchor outside classes).
  enum class Escape { kChar, kSet, kAnchor, kError };
  Escape parse_escape(bool in_class, char32_t& c, Ranges& set, SplitRegex::Assertion& anchor) {
    const size_t esc_at = at_;
    ++at_;  // '\'
    if (!more()) {
      fail("a pattern ending in '\\'", esc_at);
      return Escape::kError;
    }
    const char32_t e = next_code_point();
    auto set_of = [&](Ranges r, bool negate) {
      set = negate ? complement(r) : std::move(r);
      return Escape::kSet;
    };
    switch (e) {
      case 't': c = '\t'; return Escape::kChar;
      case 'n': c = '\n'; return Escape::kChar;
      case 'r': c = '\r'; return Escape::kChar;
      case 'f': c = '\f'; return Escape::kChar;
      case 'v': c = '\v'; return Escape::kChar;
      case 'a': c = '\a'; return Escape::kChar;
      case 'e': c = 0x1b; return Escape::kChar;
      case 's': return set_of(white_space(), false);
      case 'S': return set_of(white_space(), true);
      case 'd': return set_of(category_ranges(bit(tables::kNd)), false);
      case 'D': return set_of(category_ranges(bit(tables::kNd)), true);
      case 'w': return set_of(word_characters(), false);
      case 'W': return set_of(word_characters(), true);
      case 'h': return set_of(Ranges{{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, false);
      case 'H': return set_of(Ranges{{'0', '9'}, {'A', 'F'}, {'a', 'f'}}, true);
      case 'b':
        if (in_class) {
          c = '\b';
          return Escape::kChar;
        }
        fail("the word boundary \\b", esc_at);
        return Escape::kError;
      case 'A': case 'z': case 'Z':
        if (in_class) break;
        anchor = e == 'A' ? SplitRegex::Assertion::kTextBegin
                 : e == 'z' ? SplitRegex::Assertion::kTextEnd
                            : SplitRegex::Assertion::kTextEndOrFinalNewline;
        return Escape::kAnchor;
      case 'x': {
        uint32_t value = 0;
        if (peek() == '{') {
          size_t i = at_ + 1, digits = 0;
          while (i < p_.size() && hex_value(p_[i]) >= 0 && digits < 8) value = value * 16 + static_cast<uint32_t>(hex_value(p_[i++])), ++digits;
          if (digits == 0 || i >= p_.size() || p_[i] != '}') {
            fail("a malformed \\x{...}", esc_at);
            return Escape::kError;
          }
          at_ = i + 1;
        } else {
          size_t digits = 0;
          while (digits < 2 && hex_value(peek()) >= 0) value = value * 16 + static_cast<uint32_t>(hex_value(p_[at_++])), ++digits;
          if (digits == 0) {
            fail("a malformed \\x", esc_at);
            return Escape::kError;
          }
          if (value >= 0x80) {
            fail("\\xHH above 7F (a raw byte in Oniguruma; write \\x{HH})", esc_at);
            return Escape::kError;
          }
        }
        if (value > kMaxCodePoint || (value >= 0xd800 && value <= 0xdfff)) {
          fail("an escape of no code point", esc_at);
          return Escape::kError;
        }
        c = value;
        return Escape::kChar;
      }
      case 'u': {
        uint32_t value = 0;
        for (int i = 0; i < 4; ++i) {
          if (hex_value(peek()) < 0) {
            fail("a malformed \\uHHHH", esc_at);
            return Escape::kError;
          }
          value = value * 16 + static_cast<uint32_t>(hex_value(p_[at_++]));
        }
        if (value >= 0xd800 && value <= 0xdfff) {
          fail("a surrogate \\u escape", esc_at);
          return Escape::kError;
        }
        c = value;
        return Escape::kChar;
      }
      case 'p': case 'P': {
        bool negate = e == 'P';
        if (peek() != '{') {
          fail("\\p without {name}", esc_at);
          return Escape::kError;
        }
        ++at_;
        if (peek() == '^') negate = !negate, ++at_;
        std::string name;
        while (more() && peek() != '}') {
          const char ch = p_[at_++];
          if (ch == ' ' || ch == '_' || ch == '-') continue;
          name += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
          if (name.size() > 64) break;
        }
        if (peek() != '}') {
          fail("an unterminated \\p{", esc_at);
          return Escape::kError;
        }
        ++at_;
        const uint32_t mask = category_mask(name);
        if (mask == 0) {
          fail("the property \\p{" + std::string(p_.substr(esc_at + 3, at_ - esc_at - 4)) +
                   "} (only General_Category values are supported)",
               esc_at);
          return Escape::kError;
        }
        return set_of(category_ranges(mask), negate);
      }
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      fail("a backreference", esc_at);
      return Escape::kError;
    }
    if (e == 'k') {
      fail("a named backreference \\k", esc_at);
      return Escape::kError;
    }
    if (e == 'g') {
      fail("a subexpression call \\g", esc_at);
      return Escape::kError;
    }
    if (e == '0') {
      fail("an octal escape", esc_at);
      return Escape::kError;
    }
    if (e < 128 && ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))) {
      fail(std::string("the escape \\") + static_cast<char>(e), esc_at);
      return Escape::kError;
    }
    c = e;  // escaped punctuation, space or non-ASCII: itself
    return Escape::kChar;
  }

  // A class at at_ ('['): its members (before negation and folding: the caller's fold).
  bool parse_class(bool fold, Ranges& out) {
    const size_t open_at = at_;
    if (++depth_ > kMaxDepth) {
      fail("nesting deeper than " + std::to_string(kMaxDepth), at_);
      return false;
    }
    ++at_;  // '['
    bool negate = false;
    if (peek() == '^' && more()) negate = true, ++at_;
    Ranges set;
    // Class intersection (a&&b): the operands' ranges intersected (an empty operand is
    // the empty set, as in Oniguruma: [a&&] matches nothing).
    std::optional<Ranges> intersection;  // of the operands before the last &&
    auto finish_operand = [&] {
      normalize(set);
      if (!intersection) return;
      Ranges either = complement(*intersection);  // A & B = ~(~A | ~B)
      const Ranges not_set = complement(set);
      either.insert(either.end(), not_set.begin(), not_set.end());
      normalize(either);
      set = complement(either);
      intersection.reset();
    };
    bool first = true;
    while (true) {
      if (!more()) {
        fail("a class without its ']'", open_at);
        return false;
      }
      const char c = peek();
      if (c == ']' && !first) {
        ++at_;
        finish_operand();
        break;
      }
      first = false;
      if (c == '&' && peek(1) == '&') {
        at_ += 2;
        finish_operand();
        intersection = std::move(set);
        set.clear();
        continue;
      }
      if (c == '[') {
        if (peek(1) == ':') {
          fail("a POSIX bracket [:...:]", at_);
          return false;
        }
        Ranges nested;
        if (!parse_class(fold, nested)) return false;
        set.insert(set.end(), nested.begin(), nested.end());
        continue;
      }
      char32_t low = 0;
      const size_t item_at = at_;
      if (!class_item(low, set)) {
        if (failed_) return false;
        continue;  // a set escape, added
      }
      if (peek() == '-' && peek(1) != ']' && at_ + 1 < p_.size()) {
        ++at_;
        char32_t high = 0;
        Ranges ignored;
        if (peek() == '[') {
          fail("a range ending in a class", item_at);
          return false;
        }
        if (!class_item(high, ignored)) {
          if (!failed_) fail("a range ending in a class escape", item_at);
          return false;
        }
        if (high < low) {
          fail("a range out of order", item_at);
          return false;
        }
        set.emplace_back(low, high);
      } else {
        set.emplace_back(low, low);
      }
    }
    --depth_;
    if (fold) close_over_case(set);
    normalize(set);
    out = negate ? complement(set) : std::move(set);
    return true;
  }

  // One class member: true and `c` for a code point; false after adding an escape's set
  // to `set` (or on failure).
  bool class_item(char32_t& c, Ranges& set) {
    if (peek() != '\\') {
      c = next_code_point();
      return true;
    }
    const size_t esc_at = at_;
    Ranges escape_set;
    SplitRegex::Assertion anchor{};
    switch (parse_escape(true, c, escape_set, anchor)) {
      case Escape::kChar: return true;
      case Escape::kSet: set.insert(set.end(), escape_set.begin(), escape_set.end()); return false;
      case Escape::kAnchor: fail("an anchor in a class", esc_at); return false;
      case Escape::kError: return false;
    }
    return false;
  }

  uint32_t parse_group(bool fold) {
    const size_t open_at = at_;
    bool lookahead = false, negative = false;
    bool group_fold = fold;
    size_t end = 0;
    const char option = option_group(group_fold, end);
    if (failed_) return kNone;
    ++at_;  // '('
    if (peek() == '?') {
      const char k = peek(1);
      if (option == ':') {
        at_ = end;
      } else if (k == ':') {
        at_ += 2;
      } else if (k == '=' || k == '!') {
        lookahead = true;
        negative = k == '!';
        at_ += 2;
      } else if (k == '<' && (peek(2) == '=' || peek(2) == '!')) {
        return fail("a lookbehind", open_at);
      } else if (k == '<' || k == '\'') {  // a named group: grouping only
        const char close = k == '<' ? '>' : '\'';
        size_t i = at_ + 2;
        while (i < p_.size() && p_[i] != close && p_[i] != ')') ++i;
        if (i >= p_.size() || p_[i] != close || i == at_ + 2) return fail("a malformed group name", open_at);
        at_ = i + 1;
      } else if (k == '#') {
        while (more() && peek() != ')') ++at_;
        if (!more()) return fail("an unterminated (?#", open_at);
        ++at_;
        return kNone;  // a comment: nothing
      } else if (k == '>') {
        return fail("an atomic group", open_at);
      } else if (k == '(') {
        return fail("a conditional group", open_at);
      } else if (k == '~') {
        return fail("an absent group", open_at);
      } else {
        return fail("an unsupported group (?" + std::string(1, k) + "...", open_at);
      }
    }
    const uint32_t inner = parse_alternation(group_fold);
    if (failed_) return kNone;
    if (peek() != ')' || !more()) return fail("a '(' without its ')'", open_at);
    ++at_;
    if (!lookahead) return inner;
    // One code point: a set, or an alternation of sets.
    const Node& n = nodes_[inner];
    Ranges r;
    auto add_kid = [&](uint32_t id) {
      if (nodes_[id].kind != Node::Kind::kSet) return false;
      const Ranges& s = sets_[nodes_[id].set];
      r.insert(r.end(), s.begin(), s.end());
      return true;
    };
    bool one = add_kid(inner);
    if (!one && n.kind == Node::Kind::kAlt) {
      one = true;
      for (const uint32_t kid : n.kids) one = one && add_kid(kid);
    }
    if (!one) return fail("a lookahead that is not one code point (a class or a character)", open_at);
    return add_assert(negative ? SplitRegex::Assertion::kNextNotIn : SplitRegex::Assertion::kNextIn,
                      intern(std::move(r)));
  }

  uint32_t parse_atom(bool fold) {
    const size_t atom_at = at_;
    const char c = peek();
    switch (c) {
      case '(': return parse_group(fold);
      case '[': {
        Ranges set;
        if (!parse_class(fold, set)) return kNone;
        return add_set(std::move(set), false);  // folded inside, before negation
      }
      case '.':
        ++at_;
        return add_set(Ranges{{0, '\n' - 1}, {'\n' + 1, kMaxCodePoint}}, false);
      case '^': ++at_; return add_assert(SplitRegex::Assertion::kLineBegin);
      case '$': ++at_; return add_assert(SplitRegex::Assertion::kLineEnd);
      case '*': case '+': case '?':
        return fail("a quantifier with nothing to repeat", atom_at);
      case '{': {
        uint32_t min = 0, max = 0;
        size_t end = 0;
        bool too_large = false;
        if (interval(min, max, end, too_large)) return fail("a quantifier with nothing to repeat", atom_at);
        break;  // a literal '{'
      }
      case '\\': {
        char32_t ch = 0;
        Ranges set;
        SplitRegex::Assertion anchor{};
        switch (parse_escape(false, ch, set, anchor)) {
          case Escape::kChar: return add_set(Ranges{{ch, ch}}, fold);
          case Escape::kSet: return add_set(std::move(set), false);  // Oniguruma folds bracketed classes only
          case Escape::kAnchor: return add_assert(anchor);
          case Escape::kError: return kNone;
        }
        return kNone;
      }
      default:
        break;
    }
    const char32_t ch = next_code_point();
    return add_set(Ranges{{ch, ch}}, fold);
  }

  uint64_t program_size(uint32_t id) const {
    const Node& n = nodes_[id];
    const uint64_t cap = kMaxProgram + 1;
    switch (n.kind) {
      case Node::Kind::kEmpty: return 0;
      case Node::Kind::kSet: case Node::Kind::kAssert: return 1;
      case Node::Kind::kConcat: case Node::Kind::kAlt: {
        uint64_t total = n.kind == Node::Kind::kAlt ? 2 * (n.kids.size() - 1) : 0;
        for (const uint32_t kid : n.kids) total = std::min(cap, total + program_size(kid));
        return total;
      }
      case Node::Kind::kRepeat: {
        const uint64_t body = program_size(n.kids[0]);
        uint64_t total = std::min(cap, body * n.min);
        if (n.max == kInfinite) return std::min(cap, total + body + 3);  // + kSave when the body can match empty
        return std::min(cap, total + (body + 1) * (n.max - n.min));
      }
    }
    return cap;
  }

  void emit(uint32_t id, std::vector<SplitRegex::Instruction>& prog) {
    using Op = SplitRegex::Op;
    const Node& n = nodes_[id];
    auto here = [&] { return static_cast<uint32_t>(prog.size()); };
    switch (n.kind) {
      case Node::Kind::kEmpty: return;
      case Node::Kind::kSet: prog.push_back({Op::kChar, SplitRegex::Assertion::kTextBegin, n.set, 0, 0}); return;
      case Node::Kind::kAssert:
        prog.push_back({Op::kAssert, static_cast<SplitRegex::Assertion>(n.assertion), n.set, 0, 0});
        return;
      case Node::Kind::kConcat:
        for (const uint32_t kid : n.kids) emit(kid, prog);
        return;
      case Node::Kind::kAlt: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i + 1 < n.kids.size(); ++i) {
          const uint32_t split = here();
          prog.push_back({Op::kSplit, SplitRegex::Assertion::kTextBegin, split + 1, 0, 0});
          emit(n.kids[i], prog);
          jumps.push_back(here());
          prog.push_back({Op::kJump, SplitRegex::Assertion::kTextBegin, 0, 0, 0});
          prog[split].y = here();
        }
        emit(n.kids.back(), prog);
        for (const uint32_t j : jumps) prog[j].x = here();
        return;
      }
      case Node::Kind::kRepeat: {
        for (uint32_t i = 0; i < n.min; ++i) emit(n.kids[0], prog);
        auto split = [&](uint32_t body, uint32_t out) {
          prog.push_back({Op::kSplit, SplitRegex::Assertion::kTextBegin, n.greedy ? body : out, n.greedy ? out : body, 0});
        };
        if (n.max == kInfinite) {
          const bool check = nodes_[n.kids[0]].nullable && registers_ < kMaxRegisters;
          const uint32_t loop = here();
          split(loop + 1, 0);
          const uint32_t reg = registers_;
          if (check) prog.push_back({Op::kSave, SplitRegex::Assertion::kTextBegin, registers_++, 0, 0});
          emit(n.kids[0], prog);
          const uint32_t back = here();
          prog.push_back({check ? Op::kCheckProgress : Op::kJump, SplitRegex::Assertion::kTextBegin, loop, 0, reg});
          (n.greedy ? prog[loop].y : prog[loop].x) = here();
          prog[back].y = here();
          return;
        }
        std::vector<uint32_t> splits;
        for (uint32_t i = n.min; i < n.max; ++i) {
          splits.push_back(here());
          split(here() + 1, 0);
          emit(n.kids[0], prog);
        }
        for (const uint32_t s : splits) (n.greedy ? prog[s].y : prog[s].x) = here();
        return;
      }
    }
  }

  std::string_view p_;
  size_t at_ = 0;
  size_t depth_ = 0;
  bool failed_ = false;
  Error error_{ErrorCode::kInvalidArgument, ""};
  std::vector<Node> nodes_;
  std::vector<Ranges> sets_;
  uint32_t registers_ = 0;
  std::map<Ranges, uint32_t> set_index_;
  std::map<char32_t, Ranges> folded_literals_;
};

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) { return SplitRegexCompiler(pattern).compile(); }

bool SplitRegex::assertion_holds(const Instruction& inst, std::string_view text, size_t at) const {
  const size_t n = text.size();
  switch (inst.assertion) {
    case Assertion::kLineBegin: return at == 0 || (text[at - 1] == '\n' && at < n);
    case Assertion::kLineEnd: return at == n || text[at] == '\n';
    case Assertion::kTextBegin: return at == 0;
    case Assertion::kTextEnd: return at == n;
    case Assertion::kTextEndOrFinalNewline: return at == n || (at + 1 == n && text[at] == '\n');
    case Assertion::kNextIn:
    case Assertion::kNextNotIn: {
      const bool member = at < n && sets_[inst.x].contains(petrel::detail::utf8_decode(text, at).value);
      return inst.assertion == Assertion::kNextIn ? member : !member;
    }
  }
  return false;
}

namespace {

// A Pike VM thread list: program counters in priority order, each with its match's start
// and registers (SplitRegex::registers_ per thread); `mark` (generation stamps) keeps one
// thread per program counter.
struct ThreadList {
  std::vector<uint32_t> pcs, starts, regs, mark;
  uint32_t generation = 1;
  void reset(size_t program) {
    pcs.clear();
    starts.clear();
    regs.clear();
    mark.assign(program, 0);
    generation = 1;
  }
  void clear() {
    pcs.clear();
    starts.clear();
    regs.clear();
    if (++generation == 0) {  // wrapped: stamps would repeat
      std::fill(mark.begin(), mark.end(), 0);
      generation = 1;
    }
  }
};

}  // namespace

template <bool kCount>
uint64_t SplitRegex::run(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches,
                         uint64_t max_scanned, uint64_t max_steps, Within* within) const {
  matches.clear();
  if (within != nullptr) *within = Within::kDone;
  if (program_.empty() || text.size() > std::numeric_limits<uint32_t>::max()) return 0;
  uint64_t steps = 0;
  const size_t n = text.size();
  const size_t r = registers_;
  ThreadList lists[2];
  lists[0].reset(program_.size());
  lists[1].reset(program_.size());
  struct Frame {
    uint32_t pc, regs;  // regs: the registers' offset in `pool`
  };
  std::vector<Frame> stack;
  std::vector<uint32_t> pool;  // register sets of the threads being followed
  const std::vector<uint32_t> no_registers(r, 0);

  // Follows kSplit, kJump, kAssert, kSave and kCheckProgress from `pc` at text position
  // `at`, appending the kChar and kMatch threads reached to `list` in priority order.
  // Work is counted as it costs: every frame followed (one already marked too), and a
  // thread's registers, copied as it is saved or queued, a step per 8.
  const uint64_t register_steps = r / 8;
  auto add_thread = [&](ThreadList& list, uint32_t pc, size_t at, uint32_t start, const uint32_t* regs) {
    pool.assign(regs, regs + r);
    // (A target already marked is not pushed: it would be dropped when popped.)
    auto push = [&](uint32_t target, uint32_t regs_at) {
      if (program_[target].op == Op::kCheckProgress || list.mark[target] != list.generation)
        stack.push_back({target, regs_at});
    };
    stack.push_back({pc, 0});
    while (!stack.empty()) {
      const Frame f = stack.back();
      stack.pop_back();
      const Instruction& inst = program_[f.pc];
      if (kCount) ++steps;
      // kCheckProgress goes on by its thread's register: each visit counts (at most one
      // per visit of the instruction before it, which is marked).
      if (inst.op != Op::kCheckProgress) {
        if (list.mark[f.pc] == list.generation) continue;
        list.mark[f.pc] = list.generation;
      }
      switch (inst.op) {
        case Op::kSplit:
          push(inst.y, f.regs);
          push(inst.x, f.regs);
          break;
        case Op::kJump: push(inst.x, f.regs); break;
        case Op::kAssert:
          if (assertion_holds(inst, text, at)) push(f.pc + 1, f.regs);
          break;
        case Op::kSave: {
          if (kCount) steps += register_steps;
          const auto copy = static_cast<uint32_t>(pool.size());
          pool.resize(pool.size() + r);
          std::copy(pool.begin() + f.regs, pool.begin() + f.regs + static_cast<ptrdiff_t>(r), pool.begin() + copy);
          pool[copy + inst.x] = static_cast<uint32_t>(at);
          push(f.pc + 1, copy);
          break;
        }
        case Op::kCheckProgress:
          push(pool[f.regs + inst.z] == at ? inst.y : inst.x, f.regs);
          break;
        case Op::kChar:
        case Op::kMatch:
          if (kCount) steps += register_steps;
          list.pcs.push_back(f.pc);
          list.starts.push_back(start);
          if (r > 0)
            list.regs.insert(list.regs.end(), pool.begin() + f.regs, pool.begin() + f.regs + static_cast<ptrdiff_t>(r));
          break;
      }
    }
  };

  uint64_t scanned = 0;  // bytes the searches stepped over, in all
  // The leftmost-first match starting at or after `from`: false when there is none.
  auto search = [&](size_t from, uint32_t& begin, uint32_t& end) {
    ThreadList* current = &lists[0];
    ThreadList* next = &lists[1];
    current->clear();
    bool matched = false;
    size_t at = from;
    for (;;) {
      if (!matched) add_thread(*current, 0, at, static_cast<uint32_t>(at), no_registers.data());
      if (kCount && steps > max_steps) break;  // (the caller sees it; checked per position: a few programs' worth)
      if (current->pcs.empty()) {
        if (matched || at >= n) break;
        at += petrel::detail::utf8_decode(text, at).length;  // nothing starts here
        current->clear();
        continue;
      }
      petrel::detail::CodePoint cp{0, 1};
      if (at < n) cp = petrel::detail::utf8_decode(text, at);
      next->clear();
      for (size_t i = 0; i < current->pcs.size(); ++i) {
        if (kCount) ++steps;
        const uint32_t p = current->pcs[i];
        const Instruction& inst = program_[p];
        if (inst.op == Op::kMatch) {
          matched = true;
          begin = current->starts[i];
          end = static_cast<uint32_t>(at);
          break;  // lower-priority threads lose
        }
        if (at < n && sets_[inst.x].contains(cp.value))
          add_thread(*next, p + 1, at + cp.length, current->starts[i], current->regs.data() + i * r);
      }
      std::swap(current, next);
      if (at >= n || scanned + (at - from) >= max_scanned) break;  // (the caller sees the limit passed)
      at += cp.length;
    }
    scanned += at - from + 1;
    return matched;
  };

  size_t from = 0;
  bool have_last = false;
  uint32_t last_end = 0;
  while (from <= n) {
    uint32_t begin = 0, end = 0;
    const bool found = search(from, begin, end);
    if (scanned > max_scanned || (kCount && steps > max_steps)) {
      if (within != nullptr) *within = kCount && steps > max_steps ? Within::kTooManySteps : Within::kRescans;
      break;
    }
    if (!found) break;
    if (begin == end && have_last && begin == last_end) {  // an empty match at the last one's end
      if (begin >= n) break;
      from = begin + petrel::detail::utf8_decode(text, begin).length;
      continue;
    }
    matches.emplace_back(begin, end);
    have_last = true;
    last_end = end;
    if (begin == end) {
      if (end >= n) break;
      from = end + petrel::detail::utf8_decode(text, end).length;
    } else {
      from = end;
    }
  }
  return steps;
}

void SplitRegex::find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& matches) const {
  run<false>(text, matches);
}

SplitRegex::Within SplitRegex::find_all_within(std::string_view text,
                                               std::vector<std::pair<uint32_t, uint32_t>>& matches,
                                               uint64_t max_scanned, uint64_t& steps_left) const {
  Within within = Within::kDone;
  const uint64_t steps = run<true>(text, matches, max_scanned, steps_left, &within);
  steps_left -= std::min(steps, steps_left);
  return within;
}

uint64_t SplitRegex::find_all_counting_steps(std::string_view text,
                                             std::vector<std::pair<uint32_t, uint32_t>>& matches) const {
  return run<true>(text, matches);
}

}  // namespace petrel::text
