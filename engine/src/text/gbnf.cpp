#include "text/gbnf.h"

#include <algorithm>
#include <new>
#include <unordered_map>

#include "core/utf8.h"

namespace petrel::text {

namespace {

using Element = GbnfGrammar::Element;
using Range = std::pair<uint32_t, uint32_t>;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr size_t kNone = static_cast<size_t>(-1);

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// A rule as it is built: its alternatives' items (kChars / kRule, no kEnd).
struct RuleDraft {
  std::vector<std::vector<Element>> alternatives;
  bool defined = false;
  size_t used_at = kNone;     // the first reference's offset (for "undefined")
  size_t defined_at = kNone;  // where its definition (or its group / repetition) starts
  std::string name;
};

// An open group (or the rule's own alternatives at the bottom of the stack).
struct Frame {
  uint32_t rule;
  size_t open_at;           // the '(' (the rule's name for the bottom frame)
  size_t last = kNone;      // where the current sequence's last item starts (what a repetition repeats)
};

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}
  Result<GbnfGrammar> parse();

 private:
  // "grammar line:column" of byte offset `at` (columns count characters).
  // Counted on from the last offset asked for (groups and repetitions name their rules by
  // where they are, in increasing order): linear in the grammar over a parse.
  std::string where(size_t at) const {
    at = std::min(at, s_.size());
    if (at < where_.offset) where_ = {};
    for (size_t i = where_.offset; i < at; ++i) {
      if (s_[i] == '\n') {
        ++where_.line;
        where_.column = 1;
      } else if ((static_cast<uint8_t>(s_[i]) & 0xC0) != 0x80) {
        ++where_.column;
      }
    }
    where_.offset = at;
    return "grammar " + std::to_string(where_.line) + ":" + std::to_string(where_.column);
  }
  struct Position {
    size_t offset = 0, line = 1, column = 1;
  };
  mutable Position where_;
  Error fail(size_t at, const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument, where(at) + ": " + what};
  }
  std::string shown(size_t at) const {  // the character at `at`, quoted, for messages
    if (at >= s_.size()) return "the end of the grammar";
    if (s_[at] == '\n' || s_[at] == '\r') return "the end of the line";
    size_t prefix = 0;
    const size_t n = detail::utf8_sequence(s_, at, &prefix);
    return "'" + detail::to_valid_utf8(s_.substr(at, n == 0 ? 1 : n)) + "'";
  }
  void skip_space(bool newline_ok) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\r' && s_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  Result<uint32_t> rule_named(std::string_view name, size_t at) {
    auto found = ids_.find(std::string(name));
    if (found != ids_.end()) return found->second;
    auto id = new_rule(std::string(name), at);
    if (!id) return id;
    ids_.emplace(std::string(name), id.value());
    return id;
  }
  Result<uint32_t> new_rule(std::string name, size_t at) {
    if (rules_.size() >= kMaxGbnfRules)
      return fail(at, "more than " + std::to_string(kMaxGbnfRules) + " rules (groups and repetitions count)");
    rules_.emplace_back();
    rules_.back().name = std::move(name);
    rules_.back().defined_at = at;
    return static_cast<uint32_t>(rules_.size() - 1);
  }
  // A generated rule (a group's, a repetition's): named after the rule it is in and where.
  Result<uint32_t> generated_rule(uint32_t in, size_t at) {
    std::string name = rules_[in].name;
    const size_t slash = name.find('/');
    if (slash != std::string::npos) name.resize(slash);
    const std::string place = where(at);
    auto id = new_rule(name + "/" + place.substr(place.find(' ') + 1), at);
    if (id) rules_[id.value()].defined = true;
    return id;
  }
  Status charge(size_t elements, size_t at) {
    if (elements > kMaxGbnfElements - elements_)
      return fail(at, "the grammar expands to more than " + std::to_string(kMaxGbnfElements) + " items");
    elements_ += elements;
    return Status::ok();
  }
  // One character of a literal or class (an escape or a UTF-8 character) at pos_.
  Result<uint32_t> parse_char();
  Status parse_alternates(uint32_t rule);
  Status parse_literal(std::vector<Element>& seq);
  Status parse_class(std::vector<Element>& seq);
  Status repeat(Frame& frame, std::vector<Element>& seq, uint32_t min, uint32_t max, bool unbounded, size_t at);
  Result<uint32_t> parse_count(size_t at);
  uint32_t add_charset(std::vector<Range> ranges, bool negated);
  Status check_rules();
  Status check_left_recursion();
  GbnfGrammar flatten();

  std::string_view s_;
  size_t pos_ = 0;
  std::vector<RuleDraft> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  size_t elements_ = 0;
  size_t any_charset_ = kNone;  // `.`
  GbnfGrammar g_;
};

Result<uint32_t> Parser::parse_char() {
  const size_t at = pos_;
  const char c = s_[pos_];
  if (c == '\\') {
    if (pos_ + 1 >= s_.size()) return fail(at, "an escape at the end of the grammar");
    const char e = s_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\': return uint32_t{'\\'};
      case '"': return uint32_t{'"'};
      case '[': return uint32_t{'['};
      case ']': return uint32_t{']'};
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i, ++pos_) {
          const char h = pos_ < s_.size() ? s_[pos_] : '\0';
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0)
            return fail(at, std::string("\\") + e + " takes " + std::to_string(digits) + " hexadecimal digits");
          v = v << 4 | static_cast<uint32_t>(d);
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF))
          return fail(at, "\\" + std::string(1, e) + ": not a Unicode scalar value");
        return v;
      }
      default:
        return fail(at, "unknown escape " + shown(at + 1).insert(1, "\\"));
    }
  }
  const detail::CodePoint cp = detail::utf8_decode(s_, pos_);
  if (cp.value == 0xfffd && detail::utf8_sequence(s_, pos_) == 0) return fail(at, "invalid UTF-8");
  pos_ += cp.length;
  return static_cast<uint32_t>(cp.value);
}

uint32_t Parser::add_charset(std::vector<Range> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  if (negated) {
    std::vector<Range> complement;
    uint32_t next = 0;
    for (const Range& r : merged) {
      if (r.first > next) complement.push_back({next, r.first - 1});
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  GbnfGrammar::Charset c{{0, 0}, static_cast<uint32_t>(g_.ranges.size()), 0};
  for (const Range& r : merged) {
    for (uint32_t cp = r.first; cp <= std::min<uint32_t>(r.second, 127); ++cp) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
    g_.ranges.push_back(r);
  }
  c.end = static_cast<uint32_t>(g_.ranges.size());
  g_.charsets.push_back(c);
  return static_cast<uint32_t>(g_.charsets.size() - 1);
}

Status Parser::parse_literal(std::vector<Element>& seq) {
  const size_t open = pos_++;
  while (true) {
    if (pos_ >= s_.size()) return fail(open, "the literal is not closed (no '\"')");
    if (s_[pos_] == '"') break;
    auto c = parse_char();
    if (!c) return c.error();
    if (Status st = charge(1, open); !st) return st;
    seq.push_back({GbnfGrammar::kChars, add_charset({{c.value(), c.value()}}, false)});
  }
  ++pos_;
  return Status::ok();
}

Status Parser::parse_class(std::vector<Element>& seq) {
  const size_t open = pos_++;
  bool negated = false;
  if (pos_ < s_.size() && s_[pos_] == '^') {
    negated = true;
    ++pos_;
  }
  std::vector<Range> ranges;
  while (true) {
    if (pos_ >= s_.size()) return fail(open, "the character class is not closed (no ']')");
    if (s_[pos_] == ']') break;
    const size_t at = pos_;
    auto first = parse_char();
    if (!first) return first.error();
    uint32_t last = first.value();
    if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
      ++pos_;
      auto end = parse_char();
      if (!end) return end.error();
      if (end.value() < first.value()) return fail(at, "the range's end comes before its start");
      last = end.value();
    }
    if (ranges.size() >= kMaxGbnfBytes) return fail(at, "too many ranges");
    ranges.push_back({first.value(), last});
  }
  ++pos_;
  if (Status st = charge(1, open); !st) return st;
  seq.push_back({GbnfGrammar::kChars, add_charset(std::move(ranges), negated)});
  return Status::ok();
}

Result<uint32_t> Parser::parse_count(size_t at) {
  if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail(pos_, "expected a number, found " + shown(pos_));
  uint64_t v = 0;
  while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
    v = v * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
    if (v > kMaxGbnfRepetition)
      return fail(at, "a repetition count above " + std::to_string(kMaxGbnfRepetition));
  }
  return static_cast<uint32_t>(v);
}

// x{min,max} on the sequence's last item, as llama.cpp's handle_repetitions.
Status Parser::repeat(Frame& frame, std::vector<Element>& seq, uint32_t min, uint32_t max, bool unbounded, size_t at) {
  if (frame.last == kNone) return fail(at, shown(at) + " repeats nothing (no item before it)");
  if (frame.last >= seq.size()) return Status::ok();  // an empty item ("", x{0}) repeated: still empty
  const std::vector<Element> unit(seq.begin() + static_cast<std::ptrdiff_t>(frame.last), seq.end());
  seq.resize(frame.last);
  const size_t optional = unbounded ? 1 : max - min;
  // Copies, then the optional rules (each: the unit, a reference, two ends).
  if (Status st = charge((size_t{min} + optional) * unit.size() + optional * 3, at); !st) return st;
  for (uint32_t i = 0; i < min; ++i) seq.insert(seq.end(), unit.begin(), unit.end());
  if (unbounded) {
    auto r = generated_rule(frame.rule, at);
    if (!r) return r.error();
    std::vector<Element> loop = unit;
    loop.push_back({GbnfGrammar::kRule, r.value()});
    rules_[r.value()].alternatives = {std::move(loop), {}};
    seq.push_back({GbnfGrammar::kRule, r.value()});
  } else if (max > min) {
    size_t previous = kNone;
    for (uint32_t k = 0; k < max - min; ++k) {
      auto r = generated_rule(frame.rule, at);
      if (!r) return r.error();
      std::vector<Element> more = unit;
      if (previous != kNone) more.push_back({GbnfGrammar::kRule, static_cast<uint32_t>(previous)});
      rules_[r.value()].alternatives = {std::move(more), {}};
      previous = r.value();
    }
    seq.push_back({GbnfGrammar::kRule, static_cast<uint32_t>(previous)});
  }
  return Status::ok();
}

// A rule's alternatives, up to the end of its line; groups open and close on `frames`.
Status Parser::parse_alternates(uint32_t rule) {
  std::vector<Frame> frames{{rule, pos_}};
  rules_[rule].alternatives.emplace_back();
  while (true) {
    Frame& f = frames.back();
    std::vector<Element>& seq = rules_[f.rule].alternatives.back();
    const bool nested = frames.size() > 1;
    if (pos_ >= s_.size()) break;
    const size_t at = pos_;
    const char c = s_[pos_];
    if (c == '"') {
      f.last = seq.size();
      if (Status st = parse_literal(seq); !st) return st;
      skip_space(nested);
    } else if (c == '[') {
      f.last = seq.size();
      if (Status st = parse_class(seq); !st) return st;
      skip_space(nested);
    } else if (is_word_char(c)) {
      while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
      auto ref = rule_named(s_.substr(at, pos_ - at), at);
      if (!ref) return ref.error();
      if (rules_[ref.value()].used_at == kNone) rules_[ref.value()].used_at = at;
      if (Status st = charge(1, at); !st) return st;
      f.last = seq.size();
      seq.push_back({GbnfGrammar::kRule, ref.value()});
      skip_space(nested);
    } else if (c == '(') {
      if (frames.size() > kMaxGbnfNesting)
        return fail(at, "groups nested more than " + std::to_string(kMaxGbnfNesting) + " deep");
      auto group = generated_rule(f.rule, at);
      if (!group) return group.error();
      rules_[group.value()].alternatives.emplace_back();
      frames.push_back({group.value(), at});
      ++pos_;
      skip_space(true);
    } else if (c == ')') {
      if (!nested) return fail(at, "')' without a '(' before it");
      const uint32_t group = f.rule;
      frames.pop_back();
      if (Status st = charge(1, at); !st) return st;
      std::vector<Element>& outer = rules_[frames.back().rule].alternatives.back();
      frames.back().last = outer.size();
      outer.push_back({GbnfGrammar::kRule, group});
      ++pos_;
      skip_space(frames.size() > 1);
    } else if (c == '|') {
      rules_[f.rule].alternatives.emplace_back();
      f.last = kNone;
      ++pos_;
      skip_space(true);
    } else if (c == '.') {
      if (Status st = charge(1, at); !st) return st;
      f.last = seq.size();
      if (any_charset_ == kNone) any_charset_ = add_charset({{0, kMaxCodePoint}}, false);
      seq.push_back({GbnfGrammar::kChars, static_cast<uint32_t>(any_charset_)});
      ++pos_;
      skip_space(nested);
    } else if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      Status st = c == '*' ? repeat(f, seq, 0, 0, true, at)
                  : c == '+' ? repeat(f, seq, 1, 0, true, at)
                             : repeat(f, seq, 0, 1, false, at);
      if (!st) return st;
      skip_space(nested);
    } else if (c == '{') {
      ++pos_;
      skip_space(false);
      auto min = parse_count(at);
      if (!min) return min.error();
      skip_space(false);
      uint32_t max = min.value();
      bool unbounded = false;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        skip_space(false);
        if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
          auto m = parse_count(at);
          if (!m) return m.error();
          max = m.value();
          skip_space(false);
        } else {
          unbounded = true;
        }
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') return fail(pos_, "expected '}', found " + shown(pos_));
      ++pos_;
      if (!unbounded && max < min.value()) return fail(at, "{m,n} with n smaller than m");
      if (Status st = repeat(f, seq, min.value(), max, unbounded, at); !st) return st;
      skip_space(nested);
    } else if (nested && (c == '\n' || c == '\r')) {
      skip_space(true);
    } else {
      break;
    }
  }
  if (frames.size() > 1) {
    if (pos_ >= s_.size()) return fail(frames.back().open_at, "the '(' is never closed");
    return fail(pos_, "unexpected " + shown(pos_) + " (the '(' at " + where(frames.back().open_at).substr(8) +
                          " is still open)");
  }
  return Status::ok();
}

Status Parser::check_rules() {
  for (const RuleDraft& r : rules_)
    if (!r.defined)
      return fail(r.used_at, "rule '" + detail::to_valid_utf8(r.name) + "' is used but never defined");
  if (ids_.find("root") == ids_.end()) return fail(s_.size(), "the grammar has no rule 'root'");
  return Status::ok();
}

// Left recursion: a rule that reaches itself through the items an alternative may start
// with (a reference, and any item after references that can match the empty string).
Status Parser::check_left_recursion() {
  const size_t n = rules_.size();
  // Which rules can match the empty string: a worklist over the alternatives made only of
  // references, each waiting for its references' count to reach zero.
  std::vector<uint8_t> nullable(n, 0);
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> waiting(n);  // rule -> (rule, alternative) using it
  std::vector<uint32_t> pending;  // per alternative: references not known to be nullable
  std::vector<uint32_t> owner;
  std::vector<uint32_t> work;
  for (uint32_t r = 0; r < n; ++r) {
    for (const std::vector<Element>& alt : rules_[r].alternatives) {
      const auto a = static_cast<uint32_t>(pending.size());
      bool chars = false;
      uint32_t refs = 0;
      for (const Element& e : alt) {
        if (e.kind == GbnfGrammar::kChars) chars = true;
        else ++refs;
      }
      pending.push_back(chars ? UINT32_MAX : refs);
      owner.push_back(r);
      if (chars) continue;
      if (refs == 0 && !nullable[r]) {
        nullable[r] = 1;
        work.push_back(r);
      }
      for (const Element& e : alt) waiting[e.value].push_back({r, a});
    }
  }
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    for (const auto& [user, a] : waiting[r]) {
      if (pending[a] == UINT32_MAX || pending[a] == 0) continue;
      if (--pending[a] == 0 && !nullable[user]) {
        nullable[user] = 1;
        work.push_back(user);
      }
    }
  }
  waiting.clear();
  waiting.shrink_to_fit();
  // Edges to the rules an alternative may start with; a cycle is left recursion.
  std::vector<std::vector<uint32_t>> starts(n);
  for (uint32_t r = 0; r < n; ++r)
    for (const std::vector<Element>& alt : rules_[r].alternatives)
      for (const Element& e : alt) {
        if (e.kind == GbnfGrammar::kChars) break;
        starts[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
  // Iterative depth-first search: 0 unseen, 1 on the path, 2 done.
  std::vector<uint8_t> color(n, 0);
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge
  for (uint32_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    path.push_back({root, 0});
    color[root] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == starts[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = starts[r][next++];
      if (color[to] == 0) {
        color[to] = 1;
        path.push_back({to, 0});
      } else if (color[to] == 1) {
        // The cycle: the path from `to` to here, then `to` again.
        size_t first = path.size();
        while (first > 0 && path[first - 1].first != to) --first;
        --first;
        std::string cycle;
        size_t shown_rules = 0;
        for (size_t i = first; i < path.size() && shown_rules < 8; ++i, ++shown_rules)
          cycle += detail::to_valid_utf8(rules_[path[i].first].name) + " -> ";
        if (path.size() - first > 8) cycle += "... -> ";
        cycle += detail::to_valid_utf8(rules_[to].name);
        return fail(rules_[to].defined_at, "left recursion: rule '" + detail::to_valid_utf8(rules_[to].name) +
                                               "' can reach itself without consuming a character (" + cycle + ")");
      }
    }
  }
  return Status::ok();
}

GbnfGrammar Parser::flatten() {
  size_t total = 0, alternatives = 0;
  for (const RuleDraft& r : rules_) {
    alternatives += r.alternatives.size();
    for (const auto& alt : r.alternatives) total += alt.size() + 1;
  }
  g_.elements.reserve(total);
  g_.alternatives.reserve(alternatives);
  g_.rule_alternatives.reserve(rules_.size() + 1);
  g_.rule_names.reserve(rules_.size());
  for (RuleDraft& r : rules_) {
    g_.rule_alternatives.push_back(static_cast<uint32_t>(g_.alternatives.size()));
    for (auto& alt : r.alternatives) {
      g_.alternatives.push_back(static_cast<uint32_t>(g_.elements.size()));
      g_.elements.insert(g_.elements.end(), alt.begin(), alt.end());
      g_.elements.push_back({GbnfGrammar::kEnd, 0});
      std::vector<Element>().swap(alt);
    }
    g_.rule_names.push_back(std::move(r.name));
  }
  g_.rule_alternatives.push_back(static_cast<uint32_t>(g_.alternatives.size()));
  g_.root = ids_.at("root");
  return std::move(g_);
}

Result<GbnfGrammar> Parser::parse() {
  if (s_.size() > kMaxGbnfBytes)
    return Error{ErrorCode::kInvalidArgument, "grammar: " + std::to_string(s_.size()) + " bytes, more than the " +
                                                  std::to_string(kMaxGbnfBytes) + " a grammar may have"};
  skip_space(true);
  while (pos_ < s_.size()) {
    const size_t at = pos_;
    while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
    if (pos_ == at) return fail(at, "expected a rule name, found " + shown(at));
    const std::string_view name = s_.substr(at, pos_ - at);
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") return fail(pos_, "expected '::=', found " + shown(pos_));
    pos_ += 3;
    skip_space(true);
    auto rule = rule_named(name, at);
    if (!rule) return rule.error();
    RuleDraft& r = rules_[rule.value()];
    if (r.defined) return fail(at, "rule '" + std::string(name) + "' is defined twice (first at " + where(r.defined_at).substr(8) + ")");
    r.defined = true;
    r.defined_at = at;
    if (Status st = parse_alternates(rule.value()); !st) return st.error();
    if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r')
      return fail(pos_, "unexpected " + shown(pos_));
    skip_space(true);
  }
  if (Status st = check_rules(); !st) return st.error();
  for (const RuleDraft& r : rules_) elements_ += r.alternatives.size();  // their ends
  if (elements_ > kMaxGbnfElements)
    return fail(s_.size(), "the grammar expands to more than " + std::to_string(kMaxGbnfElements) + " items");
  if (Status st = check_left_recursion(); !st) return st.error();
  return flatten();
}

}  // namespace

Result<GbnfGrammar> parse_gbnf(std::string_view text) {
  try {
    Parser parser(text);
    return parser.parse();
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "grammar: out of memory"};
  }
}

}  // namespace petrel::text
