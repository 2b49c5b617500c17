// A Jinja subset for chat templates: a lexer with Jinja's whitespace rules
// (trim_blocks, lstrip_blocks, `-`/`+` markers), a parser that keeps open blocks on an
// explicit stack and bounds expression depth, and a tree-walking renderer with
// Python's value semantics (str(), truthiness, slicing by code point) and a work budget.
// Where transformers.js and Python jinja2 differ, the engine follows transformers.js
// for an attribute of an undefined value (undefined, not an error) and Python for the
// rest (str() of values, tojson as transformers' json.dumps(ensure_ascii=False)).
#include "text/chat_template.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>

#include "core/c_number.h"
#include "core/string_hash.h"
#include "core/substring_search.h"
#include "core/unicode.h"
#include "core/utf8.h"

namespace petrel::text {
namespace chat_template_detail {
namespace {

constexpr int kMaxExpressionDepth = 2 * ChatTemplate::kMaxNesting;  // nodes under nodes in one expression
constexpr int kMaxValueDepth = ChatTemplate::kMaxNesting;           // lists in lists, dicts in dicts

// ---- text helpers -------------------------------------------------------------------

bool is_python_space_at(std::string_view s, size_t at, size_t* length) {
  const detail::CodePoint cp = detail::utf8_decode(s, at);
  *length = cp.length;
  return detail::is_python_space(cp.value);
}

// Python's str.rstrip() / lstrip() with no argument.
std::string_view rstrip_space(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the start of the last code point
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xc0) == 0x80 && end - start < 4) --start;
    size_t length = 0;
    if (!is_python_space_at(s, start, &length) || start + length != end) break;
    end = start;
  }
  return s.substr(0, end);
}
std::string_view lstrip_space(std::string_view s) {
  size_t at = 0, length = 0;
  while (at < s.size() && is_python_space_at(s, at, &length)) at += length;
  return s.substr(at);
}

// The number of code points (an ill-formed sequence is one, as utf8_decode reads it).
size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (size_t at = 0; at < s.size(); ++n) at += static_cast<uint8_t>(s[at]) < 0x80 ? 1 : detail::utf8_decode(s, at).length;
  return n;
}
// The start of the code point that ends at `end` (> 0), as a forward walk splits it:
// a byte that is no continuation byte starts a code point, and a sequence that does not
// reach `end` leaves the continuation bytes after it one code point each.
size_t previous_code_point_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xc0) == 0x80) --start;
  return detail::utf8_decode(s, start).length == end - start ? start : end - 1;
}
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool is_ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Python's repr(float): the shortest digits that read back, fixed notation for
// exponents -4..15, else d.ddde+XX. More digits never read back worse (a p-digit decimal
// is a (p+1)-digit one), so after one digit the shortest is searched between 2 and 17;
// *tries: how many precisions were written and read back (at most 6).
std::string python_float(double v, int* tries) {
  *tries = 1;
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const auto written = [&](int precision) { return core::format_c_double("%.*e", precision - 1, v); };
  std::string text = written(1);
  if (core::parse_c_double(text) != v) {
    int low = 2, high = 17;  // 17 significant digits always read back
    text = written(high);
    ++*tries;
    while (low < high) {
      const int middle = (low + high) / 2;
      std::string shorter = written(middle);
      ++*tries;
      if (core::parse_c_double(shorter) == v) {
        high = middle;
        text = std::move(shorter);
      } else {
        low = middle + 1;
      }
    }
  }
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  bool negative = text[0] == '-';
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (text[i] != '.') digits += text[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return out;
}

// ---- values -------------------------------------------------------------------------

struct ListData;
struct DictData;

// The sizes the value budget counts (kMaxAllocatedBytes): a 64-bit libstdc++ build's, on
// every build, so that a template is accepted or refused alike on every device (a 32-bit
// build's objects are smaller than counted). Checked against sizeof where they apply.
constexpr uint64_t kValueBytes = 32, kStringBytes = 32, kEntryBytes = kStringBytes + kValueBytes, kListBytes = 32,
                   kDictBytes = 56, kWeakPtrBytes = 16;

// 32 bytes: a kind, a number, and the string, list or dict it shares (immutable, but
// for a namespace's or loop's dict).
struct Value {
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  union {
    int64_t integer = 0;
    double number;
  };
  std::shared_ptr<const void> object;  // kString: std::string, kList: ListData, kDict: DictData

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value of_bool(bool b) { Value v; v.kind = Kind::kBool; v.boolean = b; return v; }
  static Value of_int(int64_t i) { Value v; v.kind = Kind::kInt; v.integer = i; return v; }
  static Value of_float(double d) { Value v; v.kind = Kind::kFloat; v.number = d; return v; }
  static Value of_string(std::string s) {
    Value v;
    v.kind = Kind::kString;
    v.object = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  const std::string& str() const { return *static_cast<const std::string*>(object.get()); }
  const ListData* list() const { return static_cast<const ListData*>(object.get()); }
  // A namespace or a loop is changed in place: its DictData was made mutable.
  DictData* dict() const { return const_cast<DictData*>(static_cast<const DictData*>(object.get())); }
  std::shared_ptr<const ListData> list_ptr() const { return std::static_pointer_cast<const ListData>(object); }
  std::shared_ptr<DictData> dict_ptr() const {
    return std::const_pointer_cast<DictData>(std::static_pointer_cast<const DictData>(object));
  }
};
using Kind = Value::Kind;

struct ListData {
  std::vector<Value> items;
  int depth = 1;
  bool is_tuple = false;  // only str() tells a tuple from a list
};
// A dict's entries in insertion order (as Python's) and, past kLinearKeys entries, an
// index of them by key: open addressing over SipHash under this process's key
// (core/string_hash.h), so that which keys collide cannot be chosen by a template, and
// find, insert and replace cost O(1) per key.
struct DictData {
  using Entry = std::pair<std::string, Value>;
  static constexpr size_t kLinearKeys = 8;
  static constexpr size_t npos = SIZE_MAX;

  std::vector<Entry> entries;
  std::vector<uint32_t> slots;  // an entry's index + 1, 0 when empty; a power of two long (or none)
  bool is_namespace = false;    // namespace(): attributes assignable, not a mapping
  bool is_loop = false;         // a for loop's `loop`, updated in place each turn (as Jinja's)
  int depth = 1;

  // The index's length for `count` entries: at most half full.
  static size_t slots_for(size_t count) {
    if (count <= kLinearKeys) return 0;
    size_t length = 32;
    while (length < 2 * count) length *= 2;
    return length;
  }
  // The bytes of the arrays holding `capacity` entries (keys' heaps aside).
  static uint64_t table_bytes(size_t capacity) {
    return uint64_t{capacity} * kEntryBytes + uint64_t{slots_for(capacity)} * sizeof(uint32_t) + 32;
  }

  size_t index_of(std::string_view key) const {
    if (slots.empty()) {
      for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i].first == key) return i;
      return npos;
    }
    const size_t mask = slots.size() - 1;
    for (size_t at = detail::StringHash()(key) & mask;; at = (at + 1) & mask) {
      if (slots[at] == 0) return npos;
      if (entries[slots[at] - 1].first == key) return slots[at] - 1;
    }
  }
  const Value* find(std::string_view key) const {
    const size_t i = index_of(key);
    return i == npos ? nullptr : &entries[i].second;
  }
  Value* find(std::string_view key) {
    const size_t i = index_of(key);
    return i == npos ? nullptr : &entries[i].second;
  }
  // Room for `count` entries (the caller accounted table_bytes(count)).
  void reserve(size_t count) {
    entries.reserve(count);
    const size_t length = slots_for(count);
    if (length > slots.size()) {
      slots.assign(length, 0);
      for (size_t i = 0; i < entries.size(); ++i) index(i);
    }
  }
  // Appends a key the dict does not hold, within the room reserve() made.
  void append(std::string key, Value value) {
    entries.emplace_back(std::move(key), std::move(value));
    if (slots_for(entries.size()) > slots.size()) reserve(entries.size());  // (only past reserve()'s room)
    else if (!slots.empty()) index(entries.size() - 1);
  }
  void clear() {
    entries.clear();
    slots.clear();
  }

 private:
  void index(size_t i) {
    const size_t mask = slots.size() - 1;
    size_t at = detail::StringHash()(entries[i].first) & mask;
    while (slots[at] != 0) at = (at + 1) & mask;
    slots[at] = static_cast<uint32_t>(i + 1);
  }
};
static_assert(sizeof(void*) != 8 || (sizeof(Value) == kValueBytes && sizeof(std::string) == kStringBytes &&
                                     sizeof(DictData::Entry) == kEntryBytes && sizeof(ListData) == kListBytes &&
                                     sizeof(DictData) == kDictBytes && sizeof(std::weak_ptr<DictData>) == kWeakPtrBytes),
              "the value budget counts a 64-bit build's sizes");

int depth_of(const Value& v) {
  if (v.is(Kind::kList)) return v.list()->depth;
  if (v.is(Kind::kDict)) return v.dict()->depth;
  return 0;
}
bool is_namespace(const Value& v) { return v.is(Kind::kDict) && v.dict()->is_namespace; }
// The two mutable values never go into a list, dict or namespace: no value can then
// reach itself, and a container's depth, fixed when it is built, stays true.
bool is_mutable(const Value& v) { return v.is(Kind::kDict) && (v.dict()->is_namespace || v.dict()->is_loop); }
bool is_number(const Value& v) { return v.is(Kind::kInt) || v.is(Kind::kFloat) || v.is(Kind::kBool); }
double as_double(const Value& v) {
  return v.is(Kind::kFloat) ? v.number : v.is(Kind::kBool) ? (v.boolean ? 1 : 0) : static_cast<double>(v.integer);
}
int64_t as_int(const Value& v) { return v.is(Kind::kBool) ? (v.boolean ? 1 : 0) : v.integer; }
bool is_integral(const Value& v) { return v.is(Kind::kInt) || v.is(Kind::kBool); }

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return v.dict()->is_namespace ? "namespace" : "dict";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.boolean;
    case Kind::kInt: return v.integer != 0;
    case Kind::kFloat: return v.number != 0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return !v.list()->items.empty();
    case Kind::kDict: return v.dict()->is_namespace || !v.dict()->entries.empty();
  }
  return false;
}

// ---- tokens -------------------------------------------------------------------------

enum class Tok : uint8_t { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind;
  std::string text;  // text, name, string value or operator
  size_t offset;     // into the normalized source
  int64_t integer = 0;
  double number = 0;
};

// ---- syntax tree --------------------------------------------------------------------

enum class ExprKind : uint8_t {
  kLiteral, kName, kList, kDict, kAttr, kItem, kSlice, kCall, kMethod, kFilter, kTest,
  kNeg, kPos, kNot, kBinary, kAnd, kOr, kCompare, kConditional, kConcat,
};
struct Expr {
  ExprKind kind;
  bool negate = false;  // kTest
  int depth = 1;
  size_t offset = 0;
  Value literal;
  std::string name;                  // name, attribute, function, method, filter, test, operator
  std::vector<std::unique_ptr<Expr>> args;        // children (may hold null for slice bounds / no else)
  std::vector<std::string> ops;      // kCompare: one per pair
  std::vector<std::string> keywords;  // calls: names of the last keywords.size() args
};
using ExprPtr = std::unique_ptr<Expr>;

enum class NodeKind : uint8_t { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue };
struct Node;
using Body = std::vector<std::unique_ptr<Node>>;
struct Node {
  NodeKind kind;
  size_t offset = 0;
  std::string text;                                 // kText
  ExprPtr expr;                                     // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;   // kIf; an else has no condition
  std::vector<std::string> targets;                 // kFor
  ExprPtr loop_filter;                              // kFor ... if cond
  Body body, else_body;                             // kFor
  bool in_else = false;                             // kFor while parsing
  std::string target, attribute;                    // kSet: name or ns.attribute
};

}  // namespace

struct Program {
  std::string source;  // normalized (for line:column in errors)
  Body body;
};

namespace {

std::string line_column(std::string_view source, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') ++line, column = 1;
    else if ((static_cast<uint8_t>(source[i]) & 0xc0) != 0x80) ++column;
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// Jinja's lexer: only \r\n, \r and \n are line breaks (all become \n), and one
// trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// ---- lexer --------------------------------------------------------------------------

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  Status run(std::vector<Token>& tokens) {
    size_t pos = 0;
    bool line_starting = true;  // the text ahead starts a line (lstrip_blocks applies at its start)
    while (pos <= src_.size()) {
      if (tokens.size() >= ChatTemplate::kMaxTokens) {
        stopped_at_ = pos;
        break;
      }
      size_t tag = src_.find('{', pos);
      while (tag != std::string::npos &&
             !(tag + 1 < src_.size() && (src_[tag + 1] == '{' || src_[tag + 1] == '%' || src_[tag + 1] == '#')))
        tag = src_.find('{', tag + 1);
      std::string_view text(src_.data() + pos, (tag == std::string::npos ? src_.size() : tag) - pos);
      if (tag == std::string::npos) {
        if (!text.empty()) tokens.push_back({Tok::kText, std::string(text), pos});
        break;
      }
      const char type = src_[tag + 1];
      const char marker = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (marker == '-') {
        text = rstrip_space(text);
      } else if (marker != '+' && type != '{') {  // lstrip_blocks: not for {{ }}
        const size_t line_start = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          if (lstrip_space(text.substr(line_start)).empty()) text = text.substr(0, line_start);
        }
      }
      if (!text.empty()) tokens.push_back({Tok::kText, std::string(text), pos});
      size_t inner = tag + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      size_t after = 0;
      if (type == '#') {
        const size_t end = src_.find("#}", inner);
        if (end == std::string::npos) return fail(tag, "unterminated comment '{#' (no '#}')");
        const char end_marker = end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        after = skip_after(end + 2, end_marker, true);
      } else {
        tokens.push_back({type == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", tag});
        Status s = lex_tag(tokens, tag, inner, type == '{', &after);
        if (!s) return s;
        if (stopped_at_ != std::string::npos) break;
      }
      line_starting = after > 0 && src_[after - 1] == '\n';
      pos = after;
      if (pos == src_.size()) break;
    }
    tokens.push_back({Tok::kEnd, "", stopped_at_ != std::string::npos ? stopped_at_ : src_.size()});
    return Status::ok();
  }

  // Where lexing stopped at kMaxTokens tokens (their kEnd is there), or npos.
  size_t stopped_at() const { return stopped_at_; }

 private:
  Status fail(size_t offset, const std::string& what) {
    return Error{ErrorCode::kFormat, "chat template " + line_column(src_, offset) + ": " + what};
  }

  // After a closing tag: `-` strips all whitespace, `+` nothing, else trim_blocks
  // drops one newline after a block or comment.
  size_t skip_after(size_t after, char marker, bool is_block) {
    if (marker == '-') {
      size_t length = 0;
      while (after < src_.size() && is_python_space_at(src_, after, &length)) after += length;
    } else if (marker != '+' && is_block && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    return after;
  }

  Status lex_tag(std::vector<Token>& tokens, size_t tag, size_t pos, bool variable, size_t* after) {
    std::vector<char> brackets;
    const char* close = variable ? "}}" : "%}";
    while (true) {
      while (pos < src_.size() && (src_[pos] == ' ' || src_[pos] == '\t' || src_[pos] == '\n' || src_[pos] == '\r' ||
                                   src_[pos] == '\f' || src_[pos] == '\v'))
        ++pos;
      if (tokens.size() >= ChatTemplate::kMaxTokens) {
        stopped_at_ = pos;
        return Status::ok();
      }
      if (pos >= src_.size()) return fail(tag, std::string("unterminated tag (no '") + close + "')");
      if (brackets.empty()) {
        char marker = '\0';
        size_t at = pos;
        if ((src_[at] == '-' || src_[at] == '+') && src_.compare(at + 1, 2, close) == 0) marker = src_[at], ++at;
        if (src_.compare(at, 2, close) == 0) {
          tokens.push_back({variable ? Tok::kVarEnd : Tok::kBlockEnd, "", pos});
          *after = skip_after(at + 2, marker, !variable);
          return Status::ok();
        }
      }
      const char c = src_[pos];
      const size_t start = pos;
      if (c == '\'' || c == '"') {
        std::string value;
        ++pos;
        while (pos < src_.size() && src_[pos] != c) {
          if (src_[pos] == '\\' && pos + 1 < src_.size()) {
            Status s = unescape(pos, value);
            if (!s) return s;
          } else {
            value += src_[pos++];
          }
        }
        if (pos >= src_.size()) return fail(start, "unterminated string literal");
        ++pos;
        tokens.push_back({Tok::kString, std::move(value), start});
      } else if (c >= '0' && c <= '9') {
        while (pos < src_.size() && ((src_[pos] >= '0' && src_[pos] <= '9') || src_[pos] == '_')) ++pos;
        bool is_float = false;
        if (pos + 1 < src_.size() && src_[pos] == '.' && src_[pos + 1] >= '0' && src_[pos + 1] <= '9') {
          is_float = true;
          ++pos;
          while (pos < src_.size() && ((src_[pos] >= '0' && src_[pos] <= '9') || src_[pos] == '_')) ++pos;
        }
        if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
          size_t e = pos + 1;
          if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
          if (e < src_.size() && src_[e] >= '0' && src_[e] <= '9') {
            is_float = true;
            pos = e;
            while (pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '9') ++pos;
          }
        }
        std::string digits;
        for (size_t i = start; i < pos; ++i)
          if (src_[i] != '_') digits += src_[i];
        Token token{is_float ? Tok::kFloat : Tok::kInt, digits, start};
        if (is_float) {
          token.number = core::parse_c_double(digits);
        } else {
          int64_t v = 0;
          for (char d : digits)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d - '0', &v))
              return fail(start, "integer literal out of range");
          token.integer = v;
        }
        tokens.push_back(std::move(token));
      } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        while (pos < src_.size() && (src_[pos] == '_' || is_ascii_alnum(src_[pos]))) ++pos;
        tokens.push_back({Tok::kName, src_.substr(start, pos - start), start});
      } else {
        static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* two : kTwo)
          if (src_.compare(pos, 2, two) == 0) op = two;
        if (op.empty()) {
          if (!std::strchr("+-*/%~<>=()[]{},.:|", c) || c == '\0') {
            const detail::CodePoint cp = detail::utf8_decode(src_, pos);
            return fail(start, "unexpected character '" + src_.substr(pos, cp.length) + "' in a tag");
          }
          op = std::string(1, c);
        }
        pos += op.size();
        if (op == "(" || op == "[" || op == "{") {
          brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (brackets.empty() || brackets.back() != op[0]) return fail(start, "unbalanced '" + op + "'");
          brackets.pop_back();
        }
        tokens.push_back({Tok::kOp, std::move(op), start});
      }
    }
  }

  // Python's unicode-escape for a string literal's backslash at src_[pos].
  Status unescape(size_t& pos, std::string& value) {
    const size_t start = pos;
    const char e = src_[pos + 1];
    pos += 2;
    switch (e) {
      case 'n': value += '\n'; return Status::ok();
      case 't': value += '\t'; return Status::ok();
      case 'r': value += '\r'; return Status::ok();
      case '\\': value += '\\'; return Status::ok();
      case '\'': value += '\''; return Status::ok();
      case '"': value += '"'; return Status::ok();
      case 'a': value += '\a'; return Status::ok();
      case 'b': value += '\b'; return Status::ok();
      case 'f': value += '\f'; return Status::ok();
      case 'v': value += '\v'; return Status::ok();
      case '\n': return Status::ok();  // a continued line
      case 'x': case 'u': case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t c = 0;
        for (size_t i = 0; i < digits; ++i, ++pos) {
          const char h = pos < src_.size() ? src_[pos] : '\0';
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return fail(start, std::string("truncated \\") + e + " escape in a string literal");
          c = c * 16 + static_cast<char32_t>(d);
        }
        if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return fail(start, "escape out of Unicode's range");
        detail::append_utf8(value, c);
        return Status::ok();
      }
      default:
        if (e >= '0' && e <= '7') {  // octal, up to 3 digits
          char32_t c = static_cast<char32_t>(e - '0');
          for (int i = 0; i < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++i) c = c * 8 + static_cast<char32_t>(src_[pos++] - '0');
          detail::append_utf8(value, c);
          return Status::ok();
        }
        value += '\\';  // Python keeps an unknown escape as written
        --pos;
        return Status::ok();
    }
  }

  const std::string& src_;
  size_t stopped_at_ = std::string::npos;
};

// ---- parser -------------------------------------------------------------------------

bool known_filter(std::string_view name) {
  static const char* const kFilters[] = {
      "trim", "tojson", "length", "count", "lower", "upper", "first", "last", "join", "default", "d",
      "string", "int", "float", "items", "capitalize", "title", "replace", "list", "reverse", "select",
      "reject", "selectattr", "rejectattr", "map", "abs"};
  for (const char* f : kFilters)
    if (name == f) return true;
  return false;
}
bool known_test(std::string_view name) {
  static const char* const kTests[] = {
      "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
      "iterable", "mapping", "sequence", "equalto", "eq", "==", "ne", "!=", "odd", "even", "divisibleby",
      "lower", "upper", "in"};
  for (const char* t : kTests)
    if (name == t) return true;
  return false;
}
bool known_function(std::string_view name) { return name == "raise_exception" || name == "namespace" || name == "range"; }
bool known_method(std::string_view name) {
  static const char* const kMethods[] = {
      "strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower", "replace",
      "title", "capitalize", "get", "items", "keys", "values"};
  for (const char* m : kMethods)
    if (name == m) return true;
  return false;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& source) : tokens_(tokens), source_(source) {}

  // Where the error run() returned is.
  size_t error_offset() const { return error_offset_; }

  Status run(Body& root) {
    struct Open {
      Node* node;
      Body* body;
    };
    std::vector<Open> stack;
    Body* body = &root;
    while (peek().kind != Tok::kEnd) {
      const Token& token = next();
      if (token.kind == Tok::kText) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kText;
        node->offset = token.offset;
        node->text = token.text;
        body->push_back(std::move(node));
        continue;
      }
      if (token.kind == Tok::kVarBegin) {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kOutput;
        node->offset = token.offset;
        if (!parse_expression(node->expr)) return error_;
        if (!expect(Tok::kVarEnd, "'}}'")) return error_;
        body->push_back(std::move(node));
        continue;
      }
      // {% statement %}
      const Token& keyword = peek();
      if (keyword.kind != Tok::kName) return fail(keyword.offset, "expected a statement name after '{%'");
      next();
      const std::string& word = keyword.text;
      if (word == "set") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kSet;
        node->offset = keyword.offset;
        const Token& target = next();
        if (target.kind != Tok::kName) return fail(target.offset, "expected a variable name after 'set'");
        node->target = target.text;
        if (is_op(".")) {
          next();
          const Token& attribute = next();
          if (attribute.kind != Tok::kName) return fail(attribute.offset, "expected an attribute name after '.'");
          node->attribute = attribute.text;
        }
        if (is_op(",")) return fail(peek().offset, "'{% set a, b = ... %}' (unpacking) is not supported");
        if (!is_op("=")) return fail(peek().offset, "'{% set %}' blocks ({% endset %}) are not supported; expected '='");
        next();
        if (!parse_expression(node->expr)) return error_;
        body->push_back(std::move(node));
      } else if (word == "if") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kIf;
        node->offset = keyword.offset;
        ExprPtr condition;
        if (!parse_expression(condition)) return error_;
        node->branches.emplace_back(std::move(condition), Body{});
        Node* open = node.get();
        body->push_back(std::move(node));
        if (static_cast<int>(stack.size()) >= ChatTemplate::kMaxNesting)
          return fail(keyword.offset, "blocks nested more than " + std::to_string(ChatTemplate::kMaxNesting) + " deep");
        stack.push_back({open, body});
        body = &open->branches.back().second;
      } else if (word == "elif" || word == "else") {
        if (stack.empty()) return fail(keyword.offset, "'{% " + word + " %}' outside '{% if %}' / '{% for %}'");
        Node* open = stack.back().node;
        if (open->kind == NodeKind::kFor) {
          if (word == "elif" || open->in_else) return fail(keyword.offset, "unexpected '{% " + word + " %}' in '{% for %}'");
          open->in_else = true;
          body = &open->else_body;
        } else {
          if (!open->branches.back().first) return fail(keyword.offset, "'{% " + word + " %}' after '{% else %}'");
          ExprPtr condition;
          if (word == "elif" && !parse_expression(condition)) return error_;
          if (word == "else") {  // an else needs a placeholder-free branch: null condition
            open->branches.emplace_back(nullptr, Body{});
          } else {
            open->branches.emplace_back(std::move(condition), Body{});
          }
          body = &open->branches.back().second;
        }
      } else if (word == "endif" || word == "endfor") {
        const NodeKind expected = word == "endif" ? NodeKind::kIf : NodeKind::kFor;
        if (stack.empty() || stack.back().node->kind != expected)
          return fail(keyword.offset, "unexpected '{% " + word + " %}'" +
                                          (stack.empty() ? std::string() : " (the open block is '" + open_name(*stack.back().node) + "')"));
        body = stack.back().body;
        stack.pop_back();
      } else if (word == "for") {
        auto node = std::make_unique<Node>();
        node->kind = NodeKind::kFor;
        node->offset = keyword.offset;
        while (true) {
          const Token& target = next();
          if (target.kind != Tok::kName) return fail(target.offset, "expected a loop variable name after 'for'");
          node->targets.push_back(target.text);
          if (!is_op(",")) break;
          next();
        }
        if (!(peek().kind == Tok::kName && peek().text == "in")) return fail(peek().offset, "expected 'in' after the loop variables");
        next();
        if (!parse_or(node->expr)) return error_;  // no conditional expression: `if` filters the loop
        if (peek().kind == Tok::kName && peek().text == "if") {
          next();
          if (!parse_expression(node->loop_filter)) return error_;
        }
        if (peek().kind == Tok::kName && peek().text == "recursive") return fail(peek().offset, "recursive loops are not supported");
        Node* open = node.get();
        body->push_back(std::move(node));
        if (static_cast<int>(stack.size()) >= ChatTemplate::kMaxNesting)
          return fail(keyword.offset, "blocks nested more than " + std::to_string(ChatTemplate::kMaxNesting) + " deep");
        stack.push_back({open, body});
        body = &open->body;
      } else if (word == "break" || word == "continue") {
        bool in_loop = false;
        for (const Open& o : stack) in_loop = in_loop || o.node->kind == NodeKind::kFor;
        if (!in_loop) return fail(keyword.offset, "'{% " + word + " %}' outside a loop");
        auto node = std::make_unique<Node>();
        node->kind = word == "break" ? NodeKind::kBreak : NodeKind::kContinue;
        node->offset = keyword.offset;
        body->push_back(std::move(node));
      } else {
        static const char* const kKnownUnsupported[] = {
            "macro", "endmacro", "call", "endcall", "filter", "endfilter", "block", "endblock", "extends",
            "include", "import", "from", "raw", "endraw", "with", "endwith", "generation", "endgeneration",
            "endset", "do", "autoescape", "endautoescape", "trans"};
        for (const char* unsupported : kKnownUnsupported)
          if (word == unsupported) return fail(keyword.offset, "'{% " + word + " %}' is not supported");
        return fail(keyword.offset, "unknown statement '{% " + word + " %}'");
      }
      if (!expect(Tok::kBlockEnd, "'%}'")) return error_;
    }
    if (!stack.empty())
      return fail(stack.back().node->offset, "'{% " + open_name(*stack.back().node) + " %}' is never closed (no '{% end" +
                                                 open_name(*stack.back().node) + " %}')");
    return Status::ok();
  }

 private:
  static std::string open_name(const Node& node) { return node.kind == NodeKind::kIf ? "if" : "for"; }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[at_];
    if (at_ + 1 < tokens_.size()) ++at_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == Tok::kOp && peek(ahead).text == op; }
  bool is_name(const char* name) const { return peek().kind == Tok::kName && peek().text == name; }

  Error fail(size_t offset, const std::string& what) {
    error_ = Error{ErrorCode::kFormat, "chat template " + line_column(source_, offset) + ": " + what};
    error_offset_ = offset;
    return error_;
  }
  bool failed(size_t offset, const std::string& what) {
    fail(offset, what);
    return false;
  }
  bool expect(Tok kind, const char* what) {
    if (peek().kind == kind) {
      next();
      return true;
    }
    return failed(peek().offset, std::string("expected ") + what + describe_found());
  }
  bool expect_op(const char* op) {
    if (is_op(op)) {
      next();
      return true;
    }
    return failed(peek().offset, std::string("expected '") + op + "'" + describe_found());
  }
  std::string describe_found() const {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kEnd: return " before the end of the template";
      case Tok::kBlockEnd: return ", found '%}'";
      case Tok::kVarEnd: return ", found '}}'";
      case Tok::kName: case Tok::kOp: return ", found '" + t.text + "'";
      case Tok::kString: return ", found a string";
      default: return "";
    }
  }

  // A node over `children`: its depth is checked here, so evaluating a left-deep chain
  // (`a + b + c + ...`, parsed by loops) is bounded too.
  bool make(ExprPtr& out, ExprKind kind, size_t offset, std::vector<ExprPtr> children) {
    out = std::make_unique<Expr>();
    out->kind = kind;
    out->offset = offset;
    for (const ExprPtr& c : children)
      if (c) out->depth = std::max(out->depth, c->depth + 1);
    out->args = std::move(children);
    if (out->depth > kMaxExpressionDepth)
      return failed(offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }
  bool make2(ExprPtr& out, ExprKind kind, size_t offset, ExprPtr a, ExprPtr b) {
    std::vector<ExprPtr> children;
    children.push_back(std::move(a));
    children.push_back(std::move(b));
    return make(out, kind, offset, std::move(children));
  }

  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };
  bool too_deep() {
    if (recursion_ <= kMaxExpressionDepth) return false;
    fail(peek().offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }

  bool parse_expression(ExprPtr& out) {
    DepthGuard guard(recursion_);
    if (too_deep()) return false;
    if (!parse_or(out)) return false;
    while (is_name("if")) {
      const size_t offset = next().offset;
      ExprPtr condition, otherwise;
      if (!parse_or(condition)) return false;
      if (is_name("else")) {
        next();
        if (!parse_expression(otherwise)) return false;
      }
      std::vector<ExprPtr> children;
      children.push_back(std::move(out));
      children.push_back(std::move(condition));
      children.push_back(std::move(otherwise));
      if (!make(out, ExprKind::kConditional, offset, std::move(children))) return false;
    }
    return true;
  }
  bool parse_or(ExprPtr& out) {
    if (!parse_and(out)) return false;
    while (is_name("or")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_and(right) || !make2(out, ExprKind::kOr, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_and(ExprPtr& out) {
    if (!parse_not(out)) return false;
    while (is_name("and")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_not(right) || !make2(out, ExprKind::kAnd, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_not(ExprPtr& out) {
    if (is_name("not")) {
      DepthGuard guard(recursion_);
      if (too_deep()) return false;
      const size_t offset = next().offset;
      ExprPtr operand;
      if (!parse_not(operand)) return false;
      return make2(out, ExprKind::kNot, offset, std::move(operand), nullptr);
    }
    return parse_compare(out);
  }
  bool parse_compare(ExprPtr& out) {
    ExprPtr first;
    if (!parse_math1(first)) return false;
    std::vector<ExprPtr> operands;
    std::vector<std::string> ops;
    const size_t offset = peek().offset;
    while (true) {
      std::string op;
      if (peek().kind == Tok::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                      peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek(1).kind == Tok::kName && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      ExprPtr right;
      if (!parse_math1(right)) return false;
      if (operands.empty()) operands.push_back(std::move(first));
      operands.push_back(std::move(right));
      ops.push_back(op);
    }
    if (operands.empty()) {
      out = std::move(first);
      return true;
    }
    if (!make(out, ExprKind::kCompare, offset, std::move(operands))) return false;
    out->ops = std::move(ops);
    return true;
  }
  bool parse_math1(ExprPtr& out) {
    if (!parse_concat(out)) return false;
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      ExprPtr right;
      if (!parse_concat(right) || !make2(out, ExprKind::kBinary, op.offset, std::move(out), std::move(right))) return false;
      out->name = op.text;
    }
    return true;
  }
  bool parse_concat(ExprPtr& out) {
    if (!parse_math2(out)) return false;
    while (is_op("~")) {
      const size_t offset = next().offset;
      ExprPtr right;
      if (!parse_math2(right) || !make2(out, ExprKind::kConcat, offset, std::move(out), std::move(right))) return false;
    }
    return true;
  }
  bool parse_math2(ExprPtr& out) {
    if (!parse_pow(out)) return false;
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      ExprPtr right;
      if (!parse_pow(right) || !make2(out, ExprKind::kBinary, op.offset, std::move(out), std::move(right))) return false;
      out->name = op.text;
    }
    return true;
  }
  bool parse_pow(ExprPtr& out) {
    if (!parse_unary(out, true)) return false;
    if (is_op("**")) return failed(peek().offset, "the '**' operator is not supported");
    return true;
  }
  bool parse_unary(ExprPtr& out, bool with_filter) {
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(recursion_);
      if (too_deep()) return false;
      const Token& op = next();
      ExprPtr operand;
      if (!parse_unary(operand, false)) return false;
      if (!make2(out, op.text == "-" ? ExprKind::kNeg : ExprKind::kPos, op.offset, std::move(operand), nullptr)) return false;
    } else {
      if (!parse_primary(out) || !parse_postfix(out)) return false;
    }
    return with_filter ? parse_filters_and_tests(out) : true;
  }

  bool parse_call_args(ExprPtr& call) {  // after '(' ; the arguments go after call->args' existing ones
    if (!expect_op("(")) return false;
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) return failed(peek().offset, "'*args' / '**kwargs' in a call are not supported");
      std::string keyword;
      if (peek().kind == Tok::kName && is_op("=", 1)) {
        keyword = next().text;
        next();
      } else if (!call->keywords.empty()) {
        return failed(peek().offset, "a positional argument after a keyword argument");
      }
      ExprPtr arg;
      if (!parse_expression(arg)) return false;
      call->depth = std::max(call->depth, arg->depth + 1);
      call->args.push_back(std::move(arg));
      if (!keyword.empty()) call->keywords.push_back(keyword);
      if (is_op(",")) next();
      else if (!is_op(")")) return failed(peek().offset, "expected ',' or ')' in the arguments" + describe_found());
    }
    next();
    if (call->depth > kMaxExpressionDepth)
      return failed(call->offset, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
    return true;
  }

  bool parse_postfix(ExprPtr& out) {
    while (true) {
      if (is_op(".")) {
        const size_t offset = next().offset;
        const Token& name = next();
        if (name.kind == Tok::kInt) {
          ExprPtr index = std::make_unique<Expr>();
          index->kind = ExprKind::kLiteral;
          index->literal = Value::of_int(name.integer);
          if (!make2(out, ExprKind::kItem, offset, std::move(out), std::move(index))) return false;
          continue;
        }
        if (name.kind != Tok::kName) return failed(name.offset, "expected an attribute name after '.'");
        if (is_op("(")) {
          if (!known_method(name.text)) return failed(name.offset, "unknown method '" + name.text + "()'");
          if (!make2(out, ExprKind::kMethod, name.offset, std::move(out), nullptr)) return false;
          out->args.pop_back();
          out->name = name.text;
          if (!parse_call_args(out)) return false;
        } else {
          if (!make2(out, ExprKind::kAttr, offset, std::move(out), nullptr)) return false;
          out->args.pop_back();
          out->name = name.text;
        }
      } else if (is_op("[")) {
        const size_t offset = next().offset;
        ExprPtr bounds[3];
        bool slice = false;
        for (int part = 0; part < 3; ++part) {
          if (!is_op(":") && !is_op("]")) {
            if (!parse_expression(bounds[part])) return false;
          }
          if (is_op(":") && part < 2) {
            next();
            slice = true;
          } else {
            break;
          }
        }
        if (!expect_op("]")) return false;
        if (!slice) {
          if (!bounds[0]) return failed(offset, "empty subscript '[]'");
          if (!make2(out, ExprKind::kItem, offset, std::move(out), std::move(bounds[0]))) return false;
        } else {
          std::vector<ExprPtr> children;
          children.push_back(std::move(out));
          for (ExprPtr& b : bounds) children.push_back(std::move(b));
          if (!make(out, ExprKind::kSlice, offset, std::move(children))) return false;
        }
      } else if (is_op("(")) {
        if (out->kind != ExprKind::kName)
          return failed(peek().offset, "only functions and methods can be called");
        if (!known_function(out->name)) return failed(out->offset, "unknown function '" + out->name + "()'");
        out->kind = ExprKind::kCall;
        if (!parse_call_args(out)) return false;
      } else {
        return true;
      }
    }
  }

  bool parse_filters_and_tests(ExprPtr& out) {
    while (true) {
      if (is_op("|")) {
        next();
        const Token& name = next();
        if (name.kind != Tok::kName) return failed(name.offset, "expected a filter name after '|'");
        if (!known_filter(name.text)) return failed(name.offset, "unknown filter '" + name.text + "'");
        if (!make2(out, ExprKind::kFilter, name.offset, std::move(out), nullptr)) return false;
        out->args.pop_back();
        out->name = name.text;
        if (is_op("(") && !parse_call_args(out)) return false;
      } else if (is_name("is")) {
        next();
        bool negate = false;
        if (is_name("not")) next(), negate = true;
        const Token& name = next();
        if (name.kind != Tok::kName && !(name.kind == Tok::kOp && (name.text == "==" || name.text == "!=")))
          return failed(name.offset, "expected a test name after 'is'");
        if (!known_test(name.text)) return failed(name.offset, "unknown test '" + name.text + "'");
        if (!make2(out, ExprKind::kTest, name.offset, std::move(out), nullptr)) return false;
        out->args.pop_back();
        out->name = name.text;
        out->negate = negate;
        if (is_op("(")) {
          if (!parse_call_args(out)) return false;
        } else {
          const Token& t = peek();
          const bool starts_primary = (t.kind == Tok::kName && t.text != "else" && t.text != "or" && t.text != "and" &&
                                       t.text != "if" && t.text != "is" && t.text != "not" && t.text != "in") ||
                                      t.kind == Tok::kString || t.kind == Tok::kInt || t.kind == Tok::kFloat ||
                                      (t.kind == Tok::kOp && (t.text == "[" || t.text == "{"));
          if (starts_primary) {
            ExprPtr arg;
            if (!parse_primary(arg) || !parse_postfix(arg)) return false;
            out->depth = std::max(out->depth, arg->depth + 1);
            out->args.push_back(std::move(arg));
          }
        }
      } else {
        return true;
      }
    }
  }

  bool parse_primary(ExprPtr& out) {
    DepthGuard guard(recursion_);
    if (too_deep()) return false;
    const Token& t = next();
    out = std::make_unique<Expr>();
    out->offset = t.offset;
    switch (t.kind) {
      case Tok::kString: {
        out->kind = ExprKind::kLiteral;
        std::string value = t.text;
        while (peek().kind == Tok::kString) value += next().text;  // 'a' 'b' is 'ab'
        out->literal = Value::of_string(std::move(value));
        return true;
      }
      case Tok::kInt:
        out->kind = ExprKind::kLiteral;
        out->literal = Value::of_int(t.integer);
        return true;
      case Tok::kFloat:
        out->kind = ExprKind::kLiteral;
        out->literal = Value::of_float(t.number);
        return true;
      case Tok::kName:
        out->kind = ExprKind::kLiteral;
        if (t.text == "true" || t.text == "True") out->literal = Value::of_bool(true);
        else if (t.text == "false" || t.text == "False") out->literal = Value::of_bool(false);
        else if (t.text == "none" || t.text == "None") out->literal = Value::none();
        else {
          out->kind = ExprKind::kName;
          out->name = t.text;
        }
        return true;
      case Tok::kOp:
        if (t.text == "(") {
          std::vector<ExprPtr> items;
          bool tuple = false;
          while (!is_op(")")) {
            ExprPtr item;
            if (!parse_expression(item)) return false;
            items.push_back(std::move(item));
            if (!is_op(",")) break;
            next();
            tuple = true;
          }
          if (!expect_op(")")) return false;
          if (items.empty()) tuple = true;
          if (!tuple) {
            out = std::move(items[0]);
            return true;
          }
          if (!make(out, ExprKind::kList, t.offset, std::move(items))) return false;
          out->name = "tuple";
          return true;
        }
        if (t.text == "[") {
          std::vector<ExprPtr> items;
          while (!is_op("]")) {
            ExprPtr item;
            if (!parse_expression(item)) return false;
            items.push_back(std::move(item));
            if (!is_op(",")) break;
            next();
          }
          if (!expect_op("]")) return false;
          return make(out, ExprKind::kList, t.offset, std::move(items));
        }
        if (t.text == "{") {
          std::vector<ExprPtr> items;  // key, value, key, value, ...
          while (!is_op("}")) {
            ExprPtr key, value;
            if (!parse_expression(key) || !expect_op(":") || !parse_expression(value)) return false;
            items.push_back(std::move(key));
            items.push_back(std::move(value));
            if (!is_op(",")) break;
            next();
          }
          if (!expect_op("}")) return false;
          return make(out, ExprKind::kDict, t.offset, std::move(items));
        }
        return failed(t.offset, "unexpected '" + t.text + "' in an expression");
      case Tok::kEnd: return failed(t.offset, "unexpected end of the template in an expression");
      case Tok::kBlockEnd: return failed(t.offset, "unexpected '%}' in an expression");
      case Tok::kVarEnd: return failed(t.offset, "unexpected '}}' in an expression");
      default: return failed(t.offset, "unexpected token in an expression");
    }
  }

  const std::vector<Token>& tokens_;
  const std::string& source_;
  size_t at_ = 0;
  int recursion_ = 0;
  Error error_{ErrorCode::kFormat, ""};
  size_t error_offset_ = 0;
};

// ---- renderer -----------------------------------------------------------------------
//
// The work budget (kMaxSteps). The rule: a step is at most ~50 ns of work on this
// machine (release build; each kind of operation run in a loop until a budget stopped
// it took 1-38 ns per step), so the whole budget is at most a second. Real templates
// take 0.5-0.9 M steps for a 1 MB, 200-message conversation. A step is
// one statement or expression node, one value copied, compared or looked up (a variable
// or a key: hashed), or the bytes below; a loop turn's bookkeeping is 8. Every operation
// is charged before it runs for the most its operands' sizes let it do (strip(), which
// may stop early, for the whole string); a non-ASCII strip() test, charged one by one,
// is charged before it is made.
constexpr uint64_t kBytesPerStep = 16;           // copied, compared, searched or hashed
constexpr uint64_t kDecodedBytesPerStep = 8;     // walked code point by code point
constexpr uint64_t kAccountedBytesPerStep = 32;  // allocated (the value budget's bytes): the allocation, first use and free
constexpr uint64_t kOutputBytesPerStep = 8;      // written to the output: fresh memory, grown by copies
constexpr uint64_t kStepsPerFloatTry = 16;       // repr(float): a printf and a strtod per precision tried
constexpr char kHexDigits[] = "0123456789abcdef";

// The value budget (kMaxAllocatedBytes) counts the real bytes of everything a render
// allocates, before it is allocated, freed or not (so what it holds at once is below
// it): a Value in a list, make_shared's block of a string, list or dict (the object
// beside its control block), a string's heap past its small-string buffer, a dict's
// entries and index, a vector's whole capacity, malloc's header. These are libstdc++'s
// layouts; elsewhere they are estimates of the same order.
constexpr uint64_t kMallocBytes = 16;
constexpr uint64_t shared_block_bytes(uint64_t object_bytes) {
  return object_bytes + 16 + kMallocBytes;  // vtable pointer and use counts, then the object
}
uint64_t heap_bytes(uint64_t capacity) {  // a std::string's buffer, past the 15 bytes it holds inside
  return capacity > 15 ? capacity + 1 + kMallocBytes : 0;
}
uint64_t string_bytes(uint64_t size) { return shared_block_bytes(kStringBytes) + heap_bytes(size); }

constexpr size_t kMaxStringBytes = ChatTemplate::kMaxOutputBytes;  // the longest string a render builds
constexpr size_t kMaxListItems = ChatTemplate::kMaxOutputBytes;    // the longest list
constexpr size_t kNowhere = SIZE_MAX;                              // an error with no place in the template

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

Value list_value(std::shared_ptr<const ListData> list) {
  Value v;
  v.kind = Kind::kList;
  v.object = std::move(list);
  return v;
}
Value dict_value(std::shared_ptr<DictData> dict) {
  Value v;
  v.kind = Kind::kDict;
  v.object = std::move(dict);
  return v;
}

// The code points strip() is given: ASCII in a bitmap, the rest sorted.
struct CodePointSet {
  uint64_t ascii[2] = {0, 0};
  std::vector<char32_t> others;
  bool has_ascii(char32_t c) const { return (ascii[c >> 6] >> (c & 63)) & 1; }
};

// The number of items a slice start:stop:step picks (bounds already adjusted).
uint64_t slice_length(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 ? start >= stop : start <= stop) return 0;
  const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return (span - 1) / stride + 1;
}

class Renderer {
 public:
  explicit Renderer(const Program& program) : program_(program) {}
  ~Renderer() {
    // Namespaces are the only mutable values and none can be put in a value, so none
    // can reach itself; clearing the live ones would break a cycle all the same.
    for (const std::weak_ptr<DictData>& weak : namespaces_)
      if (std::shared_ptr<DictData> ns = weak.lock()) ns->clear();
  }

  Result<std::string> run(const ChatTemplateInputs& inputs) {
    max_output_ = std::min(inputs.max_output_bytes, ChatTemplate::kMaxOutputBytes);
    scopes_.emplace_back();
    Value messages;
    if (!new_messages(inputs.messages, messages) || !set_variable(kMessages, std::move(messages)) ||
        !set_variable(kAddGenerationPrompt, Value::of_bool(inputs.add_generation_prompt)) ||
        !set_variable(kTools, Value::none()) || !set_variable(kDocuments, Value::none()))
      return error_;
    for (const auto& [name, value] : inputs.strings) {
      Value v;
      if (!new_string(kNowhere, value, v) || !set_variable(name, std::move(v))) return error_;
    }
    for (const auto& [name, value] : inputs.flags)
      if (!set_variable(name, Value::of_bool(value))) return error_;
    Flow flow = Flow::kNormal;
    if (!render_body(program_.body, flow)) return error_;
    return std::move(out_);
  }

  // After std::bad_alloc or std::length_error: what the render held is let go first.
  Error out_of_memory() {
    out_ = std::string();
    while (scopes_.size() > 1) pop_scope();
    variables_.clear();
    return Error{ErrorCode::kOutOfMemory, "chat template" + where(at_) + ": out of memory while rendering"};
  }

 private:
  struct Binding {
    size_t scope;
    Value value;
  };

  inline static const std::string kMessages = "messages", kAddGenerationPrompt = "add_generation_prompt",
                                  kTools = "tools", kDocuments = "documents", kLoop = "loop";

  // -- errors and budgets
  std::string where(size_t offset) const {
    return offset == kNowhere ? std::string() : " " + line_column(program_.source, offset);
  }
  bool fail(size_t offset, const std::string& what, ErrorCode code = ErrorCode::kInvalidArgument) {
    error_ = Error{code, "chat template" + where(offset) + ": " + what};
    return false;
  }
  bool too_long(size_t offset) {
    return fail(offset, "a string longer than " + std::to_string(kMaxStringBytes) + " bytes", ErrorCode::kOutOfMemory);
  }
  bool charge(uint64_t steps) {
    if (steps <= ChatTemplate::kMaxSteps - steps_) {
      steps_ += steps;
      return true;
    }
    steps_ = ChatTemplate::kMaxSteps;
    return fail(at_, "rendering needs more than " + std::to_string(ChatTemplate::kMaxSteps) + " steps of work");
  }
  bool account(size_t offset, uint64_t bytes) {
    if (bytes <= ChatTemplate::kMaxAllocatedBytes - allocated_) {
      allocated_ += bytes;
      return charge(bytes / kAccountedBytesPerStep);
    }
    return fail(offset, "rendering builds more than " + std::to_string(ChatTemplate::kMaxAllocatedBytes) + " bytes of values",
                ErrorCode::kOutOfMemory);
  }

  // -- strings: every one is built here, its bytes accounted before they are taken
  // Room for `more` bytes in `s`: what it needs, or twice its capacity (at most the
  // longest string).
  bool reserve_text(size_t offset, std::string& s, uint64_t more) {
    if (more > kMaxStringBytes - s.size()) return too_long(offset);
    const size_t need = s.size() + static_cast<size_t>(more);
    if (need <= s.capacity()) return true;
    const size_t capacity = std::max(need, std::min(2 * s.capacity(), kMaxStringBytes));
    if (!account(offset, heap_bytes(capacity))) return false;
    s.reserve(capacity);
    return true;
  }
  bool append(size_t offset, std::string& s, std::string_view piece) {
    if (!charge(piece.size() / kBytesPerStep) || !reserve_text(offset, s, piece.size())) return false;
    s.append(piece);
    return true;
  }
  // A string value holding a copy of `text`.
  bool new_string(size_t offset, std::string_view text, Value& out) {
    if (text.size() > kMaxStringBytes) return too_long(offset);
    if (!charge(1 + text.size() / kBytesPerStep) || !account(offset, string_bytes(text.size()))) return false;
    out = Value::of_string(std::string(text));
    return true;
  }
  // A string value of `built`, whose heap reserve_text() accounted.
  bool finish_string(size_t offset, std::string&& built, Value& out) {
    if (!charge(1) || !account(offset, shared_block_bytes(kStringBytes))) return false;
    out = Value::of_string(std::move(built));
    return true;
  }

  // -- lists
  // Room for `more` items in `items`: what it needs, or twice its capacity.
  bool reserve_values(size_t offset, std::vector<Value>& items, uint64_t more) {
    if (more > kMaxListItems - items.size())
      return fail(offset, "a list longer than " + std::to_string(kMaxListItems) + " items", ErrorCode::kOutOfMemory);
    const size_t need = items.size() + static_cast<size_t>(more);
    if (need <= items.capacity()) return true;
    const size_t capacity = std::max(need, std::min(2 * items.capacity(), kMaxListItems));
    if (!account(offset, uint64_t{capacity} * kValueBytes + kMallocBytes)) return false;
    items.reserve(capacity);
    return true;
  }
  bool push_value(size_t offset, std::vector<Value>& items, Value v) {
    if (!reserve_values(offset, items, 1)) return false;
    items.push_back(std::move(v));
    return true;
  }
  // A list value of `items`, whose buffer reserve_values() accounted.
  bool make_list(size_t offset, std::vector<Value>&& items, Value& out, bool is_tuple = false) {
    if (!charge(1 + items.size() / kBytesPerStep) || !account(offset, shared_block_bytes(kListBytes))) return false;
    auto list = std::make_shared<ListData>();
    for (const Value& v : items) {
      if (is_mutable(v)) return fail(offset, "a namespace or loop cannot be put in a list");
      list->depth = std::max(list->depth, depth_of(v) + 1);
    }
    if (list->depth > kMaxValueDepth)
      return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
    list->items = std::move(items);
    list->is_tuple = is_tuple;
    out = list_value(std::move(list));
    return true;
  }

  // -- dicts
  // A dict with room for `count` entries.
  bool new_dict(size_t offset, size_t count, bool is_ns, std::shared_ptr<DictData>& out) {
    if (count > kMaxListItems)
      return fail(offset, "a dict of more than " + std::to_string(kMaxListItems) + " keys", ErrorCode::kOutOfMemory);
    const uint64_t registry = is_ns ? 2 * kWeakPtrBytes : 0;
    if (!charge(1 + count / kBytesPerStep) ||
        !account(offset, shared_block_bytes(kDictBytes) + DictData::table_bytes(count) + registry))
      return false;
    out = std::make_shared<DictData>();
    out->is_namespace = is_ns;
    out->reserve(count);
    if (is_ns) namespaces_.push_back(out);
    return true;
  }
  // dict[key] = value: replaced where it is, or appended (its room accounted first).
  bool dict_set(size_t offset, DictData& dict, std::string_view key, Value value) {
    if (is_mutable(value)) return fail(offset, "a namespace or loop cannot be put in a dict or namespace");
    const int depth = std::max(dict.depth, depth_of(value) + 1);
    if (depth > kMaxValueDepth)
      return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
    // Two hashes of the key (find, then index) and, amortized, its share of the index's rebuilds.
    if (!charge(2 * (1 + key.size() / kBytesPerStep))) return false;
    if (key.size() > kMaxStringBytes) return too_long(offset);
    dict.depth = depth;
    if (Value* existing = dict.find(key)) {
      *existing = std::move(value);
      return true;
    }
    uint64_t bytes = heap_bytes(key.size());
    size_t capacity = dict.entries.capacity();
    if (dict.entries.size() == capacity) {
      capacity = std::max<size_t>(4, 2 * capacity);
      bytes += DictData::table_bytes(capacity);
    }
    if (!account(offset, bytes)) return false;
    dict.reserve(capacity);
    dict.append(std::string(key), std::move(value));
    return true;
  }

  // -- output
  bool emit(size_t offset, std::string_view text) {
    if (text.size() > max_output_ - out_.size())
      return fail(offset, "the output would be longer than " + std::to_string(max_output_) + " bytes", ErrorCode::kOutOfMemory);
    if (!charge(1 + text.size() / kOutputBytesPerStep)) return false;
    const size_t need = out_.size() + text.size();
    if (need > out_.capacity()) out_.reserve(std::max(need, std::min(2 * out_.capacity(), max_output_)));
    out_.append(text);
    return true;
  }

  // -- variables: one hash map from a name to its bindings, innermost last; each open
  // scope (the template's, then one per for loop, at most kMaxNesting) lists the names
  // it bound. A binding is made by a {% set %} or a loop's names, so there are at most as
  // many as the template has of those, whatever the render does.
  bool set_variable(const std::string& name, Value value) {
    if (!charge(1 + name.size() / kBytesPerStep)) return false;
    const size_t scope = scopes_.size() - 1;
    auto found = variables_.find(name);
    if (found == variables_.end()) found = variables_.emplace(name, std::vector<Binding>()).first;
    std::vector<Binding>& bindings = found->second;
    if (!bindings.empty() && bindings.back().scope == scope) {
      bindings.back().value = std::move(value);
      return true;
    }
    bindings.push_back({scope, std::move(value)});
    scopes_.back().push_back(&bindings);
    return true;
  }
  // The variable's value, or null when it is undefined.
  bool lookup(const std::string& name, const Value*& out) {
    if (!charge(1 + name.size() / kBytesPerStep)) return false;
    const auto found = variables_.find(name);
    out = found == variables_.end() || found->second.empty() ? nullptr : &found->second.back().value;
    return true;
  }
  void pop_scope() {
    for (std::vector<Binding>* bindings : scopes_.back()) bindings->pop_back();
    scopes_.pop_back();
  }

  bool new_messages(const std::vector<ChatMessage>& messages, Value& out) {
    std::vector<Value> items;
    if (!reserve_values(kNowhere, items, messages.size())) return false;
    for (const ChatMessage& m : messages) {
      Value role, content;
      std::shared_ptr<DictData> message;
      if (!new_string(kNowhere, m.role, role) || !new_string(kNowhere, m.content, content) ||
          !new_dict(kNowhere, 2, false, message))
        return false;
      message->append("role", std::move(role));
      message->append("content", std::move(content));
      items.push_back(dict_value(std::move(message)));
    }
    return make_list(kNowhere, std::move(items), out);
  }

  // -- statements
  bool render_body(const Body& body, Flow& flow) {
    for (const std::unique_ptr<Node>& node : body) {
      at_ = node->offset;
      if (!charge(1)) return false;
      switch (node->kind) {
        case NodeKind::kText:
          if (!emit(node->offset, node->text)) return false;
          break;
        case NodeKind::kOutput: {
          Value v;
          if (!eval(*node->expr, v)) return false;
          if (v.is(Kind::kString)) {
            if (!emit(node->offset, v.str())) return false;
          } else {
            std::string text;
            if (!to_text(node->offset, v, text) || !emit(node->offset, text)) return false;
          }
          break;
        }
        case NodeKind::kSet:
          if (!render_set(*node)) return false;
          break;
        case NodeKind::kIf:
          for (const auto& [condition, branch] : node->branches) {
            bool taken = true;
            if (condition) {
              Value v;
              if (!eval(*condition, v)) return false;
              taken = truthy(v);
            }
            if (taken) {
              if (!render_body(branch, flow)) return false;
              break;
            }
          }
          break;
        case NodeKind::kFor:
          if (!render_for(*node)) return false;
          break;
        case NodeKind::kBreak:
          flow = Flow::kBreak;
          break;
        case NodeKind::kContinue:
          flow = Flow::kContinue;
          break;
      }
      if (flow != Flow::kNormal) return true;
    }
    return true;
  }

  bool render_set(const Node& node) {
    Value v;
    if (!eval(*node.expr, v)) return false;
    if (node.attribute.empty()) return set_variable(node.target, std::move(v));
    const Value* target = nullptr;
    if (!lookup(node.target, target)) return false;
    if (!target || !is_namespace(*target))
      return fail(node.offset, "'{% set " + node.target + "." + node.attribute + " %}' needs '" + node.target + "' to be a namespace()");
    const std::shared_ptr<DictData> ns = target->dict_ptr();
    return dict_set(node.offset, *ns, node.attribute, std::move(v));
  }

  bool render_for(const Node& node) {
    Value iterable;
    if (!eval(*node.expr, iterable)) return false;
    // A list is immutable: the loop reads it in place; anything else becomes one.
    if (!as_list(node.offset, iterable, iterable)) return false;
    std::shared_ptr<const ListData> sequence = iterable.list_ptr();
    scopes_.emplace_back();
    struct PopScope {
      ~PopScope() { renderer.pop_scope(); }
      Renderer& renderer;
    } pop{*this};
    if (node.loop_filter) {  // filtered first: loop.index and loop.length count what passes
      std::vector<Value> kept;
      for (const Value& item : sequence->items) {
        if (!charge(1) || !bind_targets(node, item)) return false;
        Value keep;
        if (!eval(*node.loop_filter, keep)) return false;
        if (truthy(keep) && !push_value(node.offset, kept, item)) return false;
      }
      Value filtered;
      if (!make_list(node.offset, std::move(kept), filtered)) return false;
      sequence = filtered.list_ptr();
    }
    const std::vector<Value>& items = sequence->items;
    const int64_t length = static_cast<int64_t>(items.size());
    std::shared_ptr<DictData> loop;
    static const char* const kLoopKeys[] = {"index",    "index0",   "revindex", "revindex0", "first", "last",
                                            "length",   "previtem", "nextitem", "depth",     "depth0"};
    constexpr size_t kLoopKeyCount = sizeof kLoopKeys / sizeof kLoopKeys[0];
    if (!new_dict(node.offset, kLoopKeyCount, false, loop)) return false;
    loop->is_loop = true;
    for (const char* key : kLoopKeys) loop->append(key, Value{});
    loop->entries[9].second = Value::of_int(1);
    loop->entries[10].second = Value::of_int(0);
    if (!set_variable(kLoop, dict_value(loop))) return false;
    for (int64_t i = 0; i < length; ++i) {
      if (!charge(8)) return false;
      auto& entries = loop->entries;
      entries[0].second = Value::of_int(i + 1);
      entries[1].second = Value::of_int(i);
      entries[2].second = Value::of_int(length - i);
      entries[3].second = Value::of_int(length - i - 1);
      entries[4].second = Value::of_bool(i == 0);
      entries[5].second = Value::of_bool(i == length - 1);
      entries[6].second = Value::of_int(length);
      entries[7].second = i > 0 ? items[static_cast<size_t>(i - 1)] : Value{};
      entries[8].second = i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value{};
      if (!bind_targets(node, items[static_cast<size_t>(i)])) return false;
      Flow flow = Flow::kNormal;
      if (!render_body(node.body, flow)) return false;
      if (flow == Flow::kBreak) break;
    }
    if (length == 0) {
      Flow flow = Flow::kNormal;
      if (!render_body(node.else_body, flow)) return false;
    }
    return true;
  }

  bool bind_targets(const Node& node, const Value& item) {
    if (node.targets.size() == 1) return set_variable(node.targets[0], item);
    Value sequence;
    if (!as_list(node.offset, item, sequence)) return false;
    const std::vector<Value>& parts = sequence.list()->items;
    if (parts.size() != node.targets.size())
      return fail(node.offset, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(node.targets.size()) + " loop variables");
    for (size_t i = 0; i < parts.size(); ++i)
      if (!set_variable(node.targets[i], parts[i])) return false;
    return true;
  }

  // Python's iter() as a list: a list itself, a string's characters, a dict's keys;
  // undefined iterates as empty (Jinja's Undefined). `out` may be `v`.
  bool as_list(size_t offset, const Value& v, Value& out) {
    const Value source = v;
    std::vector<Value> items;
    switch (source.kind) {
      case Kind::kList: out = source; return true;
      case Kind::kUndefined: return make_list(offset, {}, out);
      case Kind::kString: {
        const std::string& s = source.str();
        if (!charge(1 + s.size() / kDecodedBytesPerStep)) return false;
        const size_t count = count_code_points(s);
        // A Value and a shared string (no heap: at most 4 bytes) per character.
        if (!charge(count) || !reserve_values(offset, items, count) || !account(offset, count * string_bytes(4))) return false;
        for (size_t at = 0; at < s.size();) {
          const size_t length = detail::utf8_decode(s, at).length;
          items.push_back(Value::of_string(s.substr(at, length)));
          at += length;
        }
        return make_list(offset, std::move(items), out);
      }
      case Kind::kDict: {
        if (source.dict()->is_namespace) break;
        if (!reserve_values(offset, items, source.dict()->entries.size())) return false;
        for (const auto& [key, value] : source.dict()->entries) {
          Value k;
          if (!new_string(offset, key, k)) return false;
          items.push_back(std::move(k));
        }
        return make_list(offset, std::move(items), out);
      }
      default: break;
    }
    return fail(offset, std::string("cannot iterate over a ") + kind_name(source));
  }

  // -- conversions
  // Python's str() (undefined renders as ""), appended to `out`.
  bool to_text(size_t offset, const Value& v, std::string& out) {
    if (v.is(Kind::kUndefined)) return true;
    return repr(offset, v, out, false);
  }
  // str(v) without a copy when it is a string: `text` views `v` or `scratch`.
  bool text_of(size_t offset, const Value& v, std::string& scratch, std::string_view& text) {
    if (v.is(Kind::kString)) {
      text = v.str();
      return true;
    }
    scratch.clear();
    if (!to_text(offset, v, scratch)) return false;
    text = scratch;
    return true;
  }
  // Python's repr() (str() at the top when not `quote_strings`: strings bare).
  bool repr(size_t offset, const Value& v, std::string& out, bool quote_strings = true) {
    if (!charge(1)) return false;
    switch (v.kind) {
      case Kind::kUndefined: return append(offset, out, "Undefined");  // (a top-level undefined prints as "")
      case Kind::kNone: return append(offset, out, "None");
      case Kind::kBool: return append(offset, out, v.boolean ? "True" : "False");
      case Kind::kInt: return append(offset, out, std::to_string(v.integer));
      case Kind::kFloat: return append_float(offset, out, v.number);
      case Kind::kString: return quote_strings ? append_repr(offset, out, v.str()) : append(offset, out, v.str());
      case Kind::kList: {
        if (!append(offset, out, v.list()->is_tuple ? "(" : "[")) return false;
        bool first = true;
        for (const Value& item : v.list()->items) {
          if (!first && !append(offset, out, ", ")) return false;
          first = false;
          if (!repr(offset, item, out)) return false;
        }
        if (v.list()->is_tuple && v.list()->items.size() == 1 && !append(offset, out, ",")) return false;
        return append(offset, out, v.list()->is_tuple ? ")" : "]");
      }
      case Kind::kDict: {
        if (!append(offset, out, v.dict()->is_namespace ? "<Namespace {" : "{")) return false;
        bool first = true;
        for (const auto& [k, value] : v.dict()->entries) {
          if (!first && !append(offset, out, ", ")) return false;
          first = false;
          if (!charge(1) || !append_repr(offset, out, k) || !append(offset, out, ": ") || !repr(offset, value, out)) return false;
        }
        return append(offset, out, v.dict()->is_namespace ? "}>" : "}");
      }
    }
    return true;
  }
  // repr() of a float: each precision tried is a C printf and strtod.
  bool append_float(size_t offset, std::string& out, double number) {
    int tries = 0;
    const std::string text = python_float(number, &tries);
    return charge(kStepsPerFloatTry * static_cast<uint64_t>(tries)) && append(offset, out, text);
  }
  // repr() of a string: measured, then written into the room it needs.
  bool append_repr(size_t offset, std::string& out, std::string_view s) {
    if (!charge(1 + 2 * s.size() / kBytesPerStep)) return false;
    const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
    const char quote = dq ? '"' : '\'';
    const auto is_control = [](unsigned char u) { return u < 0x20 || u == 0x7f; };
    uint64_t size = 2;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      size += c == quote || c == '\\' || c == '\n' || c == '\r' || c == '\t' ? 2 : is_control(u) ? 4 : 1;
    }
    if (!charge(size / kBytesPerStep) || !reserve_text(offset, out, size)) return false;
    out += quote;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (c == quote || c == '\\') out += '\\', out += c;
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (is_control(u)) out += "\\x", out += kHexDigits[u >> 4], out += kHexDigits[u & 15];
      else out += c;
    }
    out += quote;
    return true;
  }

  // transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent).
  bool to_json(size_t offset, const Value& v, int64_t indent, int level, std::string& out) {
    if (!charge(1)) return false;
    const auto newline = [&](int lvl) {
      if (indent < 0) return true;
      const uint64_t spaces = static_cast<uint64_t>(indent) * static_cast<uint64_t>(lvl);
      if (!charge(spaces / kBytesPerStep) || !reserve_text(offset, out, 1 + spaces)) return false;
      out += '\n';
      out.append(static_cast<size_t>(spaces), ' ');
      return true;
    };
    switch (v.kind) {
      case Kind::kUndefined: return fail(offset, "tojson of an undefined value");
      case Kind::kNone: return append(offset, out, "null");
      case Kind::kBool: return append(offset, out, v.boolean ? "true" : "false");
      case Kind::kInt: return append(offset, out, std::to_string(v.integer));
      case Kind::kFloat:
        if (std::isnan(v.number)) return append(offset, out, "NaN");
        if (std::isinf(v.number)) return append(offset, out, v.number < 0 ? "-Infinity" : "Infinity");
        return append_float(offset, out, v.number);
      case Kind::kString: return append_json(offset, out, v.str());
      case Kind::kList: {
        if (v.list()->items.empty()) return append(offset, out, "[]");
        if (!append(offset, out, "[")) return false;
        bool first = true;
        for (const Value& item : v.list()->items) {
          if (!first && !append(offset, out, indent < 0 ? ", " : ",")) return false;
          first = false;
          if (!newline(level + 1) || !to_json(offset, item, indent, level + 1, out)) return false;
        }
        return newline(level) && append(offset, out, "]");
      }
      case Kind::kDict: {
        if (v.dict()->is_namespace) return fail(offset, "tojson of a namespace");
        if (v.dict()->entries.empty()) return append(offset, out, "{}");
        if (!append(offset, out, "{")) return false;
        bool first = true;
        for (const auto& [k, value] : v.dict()->entries) {
          if (!first && !append(offset, out, indent < 0 ? ", " : ",")) return false;
          first = false;
          if (!newline(level + 1) || !charge(1) || !append_json(offset, out, k) || !append(offset, out, ": ") ||
              !to_json(offset, value, indent, level + 1, out))
            return false;
        }
        return newline(level) && append(offset, out, "}");
      }
    }
    return true;
  }
  // A JSON string: measured, then written into the room it needs. Bytes that are no
  // UTF-8 become U+FFFD, as a decoded Python str would hold.
  bool append_json(size_t offset, std::string& out, std::string_view s) {
    if (!charge(1 + 2 * s.size() / kDecodedBytesPerStep)) return false;
    const auto plain = [&](size_t at) {  // plain ASCII goes over as it is
      const auto u = static_cast<uint8_t>(s[at]);
      return u >= 0x20 && u < 0x80 && s[at] != '"' && s[at] != '\\';
    };
    const auto escaped_length = [](char32_t c) -> size_t {
      if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') return 2;
      return c < 0x20 ? 6 : 0;  // \u00XX; 0: not escaped
    };
    uint64_t size = 2;
    for (size_t at = 0; at < s.size();) {
      if (plain(at)) {
        ++size, ++at;
        continue;
      }
      const detail::CodePoint cp = detail::utf8_decode(s, at);
      const size_t escaped = escaped_length(cp.value);
      size += escaped != 0 ? escaped : detail::utf8_sequence(s, at) != 0 ? cp.length : 3;
      at += cp.length;
    }
    if (!charge(size / kBytesPerStep) || !reserve_text(offset, out, size)) return false;
    out += '"';
    for (size_t at = 0; at < s.size();) {
      size_t run = at;
      while (run < s.size() && plain(run)) ++run;
      if (run > at) {
        out.append(s, at, run - at);
        at = run;
        continue;
      }
      const detail::CodePoint cp = detail::utf8_decode(s, at);
      const char32_t c = cp.value;
      if (c == '"') out += "\\\"";
      else if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c == '\b') out += "\\b";
      else if (c == '\f') out += "\\f";
      else if (c < 0x20) out += "\\u00", out += kHexDigits[c >> 4], out += kHexDigits[c & 15];
      else if (detail::utf8_sequence(s, at) != 0) {
        out.append(s, at, cp.length);
      } else {
        out += "\xef\xbf\xbd";
      }
      at += cp.length;
    }
    out += '"';
    return true;
  }

  bool equal(const Value& a, const Value& b, bool& result) {
    if (!charge(1)) return false;
    if (is_number(a) && is_number(b)) {
      result = is_integral(a) && is_integral(b) ? as_int(a) == as_int(b) : as_double(a) == as_double(b);
      return true;
    }
    if (a.kind != b.kind) {
      result = false;
      return true;
    }
    switch (a.kind) {
      case Kind::kUndefined:
      case Kind::kNone: result = true; return true;
      case Kind::kString:
        if (!charge(std::min(a.str().size(), b.str().size()) / kBytesPerStep)) return false;
        result = a.str() == b.str();
        return true;
      case Kind::kList:
        if (a.list()->items.size() != b.list()->items.size()) {
          result = false;
          return true;
        }
        for (size_t i = 0; i < a.list()->items.size(); ++i) {
          if (!equal(a.list()->items[i], b.list()->items[i], result)) return false;
          if (!result) return true;
        }
        result = true;
        return true;
      case Kind::kDict:
        if (a.object == b.object) {
          result = true;
          return true;
        }
        if (a.dict()->is_namespace || b.dict()->is_namespace || a.dict()->entries.size() != b.dict()->entries.size()) {
          result = false;
          return true;
        }
        for (const auto& [k, value] : a.dict()->entries) {
          if (!charge(1 + k.size() / kBytesPerStep)) return false;
          const Value* other = b.dict()->find(k);
          if (!other) {
            result = false;
            return true;
          }
          if (!equal(value, *other, result)) return false;
          if (!result) return true;
        }
        result = true;
        return true;
      default: result = false; return true;
    }
  }

  // Python's <: numbers, strings (code point order is UTF-8 byte order), lists.
  bool less(size_t offset, const Value& a, const Value& b, bool& result) {
    if (!charge(1)) return false;
    if (is_number(a) && is_number(b)) {
      result = is_integral(a) && is_integral(b) ? as_int(a) < as_int(b) : as_double(a) < as_double(b);
      return true;
    }
    if (a.is(Kind::kString) && b.is(Kind::kString)) {
      if (!charge(std::min(a.str().size(), b.str().size()) / kBytesPerStep)) return false;
      result = a.str() < b.str();
      return true;
    }
    if (a.is(Kind::kList) && b.is(Kind::kList)) {
      const auto& x = a.list()->items;
      const auto& y = b.list()->items;
      for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        bool same = false;
        if (!equal(x[i], y[i], same)) return false;
        if (!same) return less(offset, x[i], y[i], result);
      }
      result = x.size() < y.size();
      return true;
    }
    return fail(offset, std::string("cannot order a ") + kind_name(a) + " and a " + kind_name(b));
  }

  bool contains(size_t offset, const Value& item, const Value& container, bool& result) {
    switch (container.kind) {
      case Kind::kUndefined: result = false; return true;
      case Kind::kString: {
        if (!item.is(Kind::kString)) return fail(offset, std::string("'in <string>' needs a string, not a ") + kind_name(item));
        const std::string& text = container.str();
        const std::string& pattern = item.str();
        if (pattern.size() > text.size()) {
          result = false;
          return true;
        }
        // Two-Way: the pattern's factorization, then at most 2 comparisons per text byte.
        if (!charge(1 + (2 * text.size() + pattern.size()) / kBytesPerStep)) return false;
        result = detail::find_substring(text, pattern) != std::string::npos;
        return true;
      }
      case Kind::kList:
        for (const Value& v : container.list()->items) {
          if (!equal(item, v, result)) return false;
          if (result) return true;
        }
        result = false;
        return true;
      case Kind::kDict:
        if (container.dict()->is_namespace) break;
        if (!item.is(Kind::kString)) {
          result = false;
          return true;
        }
        if (!charge(1 + item.str().size() / kBytesPerStep)) return false;
        result = container.dict()->find(item.str()) != nullptr;
        return true;
      default: break;
    }
    return fail(offset, std::string("'in' needs a string, list or dict on its right, not a ") + kind_name(container));
  }

  // -- expressions
  bool eval(const Expr& e, Value& out) {
    at_ = e.offset;
    if (!charge(1)) return false;
    switch (e.kind) {
      case ExprKind::kLiteral: out = e.literal; return true;
      case ExprKind::kName: {
        const Value* v = nullptr;
        if (!lookup(e.name, v)) return false;
        out = v ? *v : Value{};
        return true;
      }
      case ExprKind::kList: {
        std::vector<Value> items;
        if (!reserve_values(e.offset, items, e.args.size())) return false;
        for (const ExprPtr& arg : e.args) {
          Value v;
          if (!eval(*arg, v)) return false;
          items.push_back(std::move(v));
        }
        return make_list(e.offset, std::move(items), out, e.name == "tuple");
      }
      case ExprKind::kDict: {
        std::shared_ptr<DictData> dict;
        if (!new_dict(e.offset, e.args.size() / 2, false, dict)) return false;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key, value;
          if (!eval(*e.args[i], key) || !eval(*e.args[i + 1], value)) return false;
          if (!key.is(Kind::kString)) return fail(e.args[i]->offset, std::string("dict keys must be strings here, not a ") + kind_name(key));
          if (!dict_set(e.offset, *dict, key.str(), std::move(value))) return false;
        }
        out = dict_value(std::move(dict));
        return true;
      }
      case ExprKind::kAttr: {
        Value object;
        if (!eval(*e.args[0], object)) return false;
        return attribute(object, e.name, out);
      }
      case ExprKind::kItem: {
        Value object, key;
        if (!eval(*e.args[0], object) || !eval(*e.args[1], key)) return false;
        return subscript(e.offset, object, key, out);
      }
      case ExprKind::kSlice: return eval_slice(e, out);
      case ExprKind::kCall: return call_function(e, out);
      case ExprKind::kMethod: return call_method(e, out);
      case ExprKind::kFilter: {
        Value operand;
        if (!eval(*e.args[0], operand)) return false;
        std::vector<Value> args;
        std::vector<std::pair<std::string, Value>> kwargs;
        if (!eval_args(e, 1, args, kwargs)) return false;
        return apply_filter(e.offset, e.name, operand, args, kwargs, out);
      }
      case ExprKind::kTest: {
        Value operand;
        if (!eval(*e.args[0], operand)) return false;
        std::vector<Value> args;
        std::vector<std::pair<std::string, Value>> kwargs;
        if (!eval_args(e, 1, args, kwargs)) return false;
        bool result = false;
        if (!apply_test(e.offset, e.name, operand, args, result)) return false;
        out = Value::of_bool(result != e.negate);
        return true;
      }
      case ExprKind::kNeg:
      case ExprKind::kPos: {
        Value v;
        if (!eval(*e.args[0], v)) return false;
        if (!is_number(v)) return fail(e.offset, std::string("unary minus or plus on a ") + kind_name(v));
        if (e.kind == ExprKind::kPos) out = v.is(Kind::kBool) ? Value::of_int(as_int(v)) : v;
        else if (v.is(Kind::kFloat)) out = Value::of_float(-v.number);
        else if (as_int(v) == INT64_MIN) return fail(e.offset, "integer overflow");
        else out = Value::of_int(-as_int(v));
        return true;
      }
      case ExprKind::kNot: {
        Value v;
        if (!eval(*e.args[0], v)) return false;
        out = Value::of_bool(!truthy(v));
        return true;
      }
      case ExprKind::kAnd:
      case ExprKind::kOr: {  // Python: the deciding operand itself
        if (!eval(*e.args[0], out)) return false;
        if (truthy(out) == (e.kind == ExprKind::kOr)) return true;
        return eval(*e.args[1], out);
      }
      case ExprKind::kConditional: {
        Value condition;
        if (!eval(*e.args[1], condition)) return false;
        if (truthy(condition)) return eval(*e.args[0], out);
        if (e.args[2]) return eval(*e.args[2], out);
        out = Value{};
        return true;
      }
      case ExprKind::kConcat: {
        Value a, b;
        std::string left_scratch, right_scratch;
        std::string_view left, right;
        if (!eval(*e.args[0], a) || !eval(*e.args[1], b) || !text_of(e.offset, a, left_scratch, left) ||
            !text_of(e.offset, b, right_scratch, right))
          return false;
        return concatenate(e.offset, left, right, out);
      }
      case ExprKind::kCompare: {
        Value left;
        if (!eval(*e.args[0], left)) return false;
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right;
          if (!eval(*e.args[i + 1], right)) return false;
          bool result = false;
          const std::string& op = e.ops[i];
          if (op == "==" || op == "!=") {
            if (!equal(left, right, result)) return false;
            if (op == "!=") result = !result;
          } else if (op == "in" || op == "not in") {
            if (!contains(e.offset, left, right, result)) return false;
            if (op == "not in") result = !result;
          } else if (op == "<") {
            if (!less(e.offset, left, right, result)) return false;
          } else if (op == ">") {
            if (!less(e.offset, right, left, result)) return false;
          } else if (op == "<=") {
            if (!less(e.offset, right, left, result)) return false;
            result = !result;
          } else {
            if (!less(e.offset, left, right, result)) return false;
            result = !result;
          }
          if (!result) {
            out = Value::of_bool(false);
            return true;
          }
          left = std::move(right);
        }
        out = Value::of_bool(true);
        return true;
      }
      case ExprKind::kBinary: return eval_binary(e, out);
    }
    return fail(e.offset, "internal: unknown expression");
  }

  bool concatenate(size_t offset, std::string_view left, std::string_view right, Value& out) {
    std::string s;
    return reserve_text(offset, s, uint64_t{left.size()} + right.size()) && append(offset, s, left) &&
           append(offset, s, right) && finish_string(offset, std::move(s), out);
  }

  bool eval_args(const Expr& e, size_t first, std::vector<Value>& args, std::vector<std::pair<std::string, Value>>& kwargs) {
    const size_t positional = e.args.size() - e.keywords.size();
    for (size_t i = first; i < e.args.size(); ++i) {
      Value v;
      if (!eval(*e.args[i], v)) return false;
      if (i < positional) args.push_back(std::move(v));
      else kwargs.emplace_back(e.keywords[i - positional], std::move(v));
    }
    return true;
  }

  // Jinja's getattr: a dict's key (a namespace's attribute), else undefined; an
  // attribute of undefined or none is undefined (as transformers.js has it).
  bool attribute(const Value& object, std::string_view name, Value& out) {
    Value found;
    if (object.is(Kind::kDict)) {
      if (!charge(1 + name.size() / kBytesPerStep)) return false;
      if (const Value* v = object.dict()->find(name)) found = *v;
    }
    out = std::move(found);
    return true;
  }

  bool subscript(size_t offset, const Value& object, const Value& key, Value& out) {
    if (object.is(Kind::kDict)) {
      if (!key.is(Kind::kString)) {
        out = Value{};
        return true;
      }
      return attribute(object, key.str(), out);
    }
    if (object.is(Kind::kList) || object.is(Kind::kString)) {
      if (key.is(Kind::kString)) {  // an attribute of a list or string: undefined
        out = Value{};
        return true;
      }
      if (!is_integral(key)) return fail(offset, std::string("indices must be integers, not a ") + kind_name(key));
      int64_t index = as_int(key);
      if (object.is(Kind::kList)) {
        const int64_t size = static_cast<int64_t>(object.list()->items.size());
        if (index < 0) index += size;
        out = index >= 0 && index < size ? object.list()->items[static_cast<size_t>(index)] : Value{};
        return true;
      }
      const Value source = object;  // `out` may be `object`
      const std::string& s = source.str();
      // The code point `index` from the start, or -index from the end: at most 4 bytes each.
      const uint64_t count = index >= 0 ? static_cast<uint64_t>(index) + 1 : 0 - static_cast<uint64_t>(index);
      if (!charge(1 + std::min<uint64_t>(s.size(), count > s.size() ? s.size() : 4 * count) / kDecodedBytesPerStep)) return false;
      out = Value{};
      if (count > s.size()) return true;  // more code points than bytes
      size_t at = 0;
      if (index >= 0) {
        for (int64_t i = 0; i < index && at < s.size(); ++i) at += detail::utf8_decode(s, at).length;
        if (at >= s.size()) return true;
      } else {
        size_t end = s.size();
        for (uint64_t i = 0; i < count; ++i) {
          if (end == 0) return true;
          at = previous_code_point_start(s, end);
          end = at;
        }
      }
      return new_string(offset, std::string_view(s).substr(at, detail::utf8_decode(s, at).length), out);
    }
    out = Value{};
    return true;  // undefined, none, numbers: undefined
  }

  bool eval_slice(const Expr& e, Value& out) {
    Value object;
    if (!eval(*e.args[0], object)) return false;
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; ++i) {
      if (!e.args[static_cast<size_t>(i) + 1]) continue;
      Value v;
      if (!eval(*e.args[static_cast<size_t>(i) + 1], v)) return false;
      if (v.is(Kind::kNone) || v.is(Kind::kUndefined)) continue;
      if (!is_integral(v)) return fail(e.offset, std::string("slice bounds must be integers, not a ") + kind_name(v));
      bounds[i] = as_int(v);
      given[i] = true;
    }
    const int64_t step = given[2] ? bounds[2] : 1;
    if (step == 0) return fail(e.offset, "slice step cannot be zero");
    if (step == INT64_MIN) return fail(e.offset, "slice step out of range");
    int64_t length = 0;
    if (object.is(Kind::kList)) {
      length = static_cast<int64_t>(object.list()->items.size());
    } else if (object.is(Kind::kString)) {
      if (!charge(1 + object.str().size() / kDecodedBytesPerStep)) return false;
      length = static_cast<int64_t>(count_code_points(object.str()));
    } else {  // Jinja: what cannot be sliced gives undefined
      out = Value{};
      return true;
    }
    // CPython's PySlice_AdjustIndices.
    const auto adjust = [&](int64_t v, bool is_given, int64_t fallback) {
      if (!is_given) return fallback;
      if (v < 0) {
        v += length;
        if (v < 0) v = step < 0 ? -1 : 0;
      } else if (v >= length) {
        v = step < 0 ? length - 1 : length;
      }
      return v;
    };
    const int64_t start = adjust(bounds[0], given[0], step < 0 ? length - 1 : 0);
    const int64_t stop = adjust(bounds[1], given[1], step < 0 ? -1 : length);
    const uint64_t count = slice_length(start, stop, step);
    if (object.is(Kind::kList)) {
      std::vector<Value> items;
      if (!charge(count) || !reserve_values(e.offset, items, count)) return false;
      for (uint64_t k = 0; k < count; ++k) items.push_back(object.list()->items[static_cast<size_t>(start + static_cast<int64_t>(k) * step)]);
      return make_list(e.offset, std::move(items), out, object.list()->is_tuple);
    }
    // A string: its code points walked twice (to measure, then to copy), forward or
    // backward from code point `start`.
    const std::string& s = object.str();
    if (!charge(2 * (1 + s.size() / kDecodedBytesPerStep) + s.size() / kBytesPerStep)) return false;
    const auto walk = [&](auto&& visit) {
      if (count == 0) return;
      size_t at = 0;
      for (int64_t i = 0; i < start; ++i) at += detail::utf8_decode(s, at).length;
      for (uint64_t k = 0;;) {
        const size_t size = detail::utf8_decode(s, at).length;
        visit(at, size);
        if (++k == count) return;
        if (step > 0) {
          for (int64_t i = 0; i < step; ++i) at += detail::utf8_decode(s, at).length;
        } else {
          for (int64_t i = 0; i < -step; ++i) at = previous_code_point_start(s, at);
        }
      }
    };
    uint64_t bytes = 0;
    walk([&](size_t, size_t size) { bytes += size; });
    std::string sliced;
    if (!reserve_text(e.offset, sliced, bytes)) return false;
    walk([&](size_t at, size_t size) { sliced.append(s, at, size); });
    return finish_string(e.offset, std::move(sliced), out);
  }

  bool eval_binary(const Expr& e, Value& out) {
    Value a, b;
    if (!eval(*e.args[0], a) || !eval(*e.args[1], b)) return false;
    const std::string& op = e.name;
    if (a.is(Kind::kUndefined) || b.is(Kind::kUndefined))
      return fail(e.offset, "'" + op + "' on an undefined value");
    if (is_number(a) && is_number(b)) {
      if (is_integral(a) && is_integral(b) && op != "/") {
        const int64_t x = as_int(a), y = as_int(b);
        int64_t r = 0;
        bool overflow = false;
        if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
        else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
        else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
        else {  // // and %: Python floors
          if (y == 0) return fail(e.offset, "integer division or modulo by zero");
          if (y == -1) {  // (x / -1 overflows for INT64_MIN; x % -1 is 0)
            overflow = op == "//" && __builtin_sub_overflow(int64_t{0}, x, &r);
          } else {
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
            r = op == "//" ? q : m;
          }
        }
        if (overflow) return fail(e.offset, "integer overflow");
        out = Value::of_int(r);
        return true;
      }
      const double x = as_double(a), y = as_double(b);
      if ((op == "/" || op == "//" || op == "%") && y == 0) return fail(e.offset, "float division by zero");
      double r = 0;
      if (op == "+") r = x + y;
      else if (op == "-") r = x - y;
      else if (op == "*") r = x * y;
      else if (op == "/") r = x / y;
      else if (op == "//") r = std::floor(x / y);
      else {
        r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
      }
      out = Value::of_float(r);
      return true;
    }
    if (op == "+" && a.is(Kind::kString) && b.is(Kind::kString)) return concatenate(e.offset, a.str(), b.str(), out);
    if (op == "+" && a.is(Kind::kList) && b.is(Kind::kList)) {
      const std::vector<Value>& x = a.list()->items;
      const std::vector<Value>& y = b.list()->items;
      std::vector<Value> items;
      if (!charge(x.size() + y.size()) || !reserve_values(e.offset, items, uint64_t{x.size()} + y.size())) return false;
      items.insert(items.end(), x.begin(), x.end());
      items.insert(items.end(), y.begin(), y.end());
      return make_list(e.offset, std::move(items), out);
    }
    if (op == "*" && (is_integral(a) || is_integral(b)) && (a.is(Kind::kString) || b.is(Kind::kString) || a.is(Kind::kList) || b.is(Kind::kList)))
      return repeat(e.offset, is_integral(a) ? b : a, as_int(is_integral(a) ? a : b), out);
    return fail(e.offset, "unsupported operand types for '" + op + "': " + kind_name(a) + " and " + kind_name(b));
  }

  // A string or list `times` over: its size computed and checked before anything is built.
  bool repeat(size_t offset, const Value& sequence, int64_t times_given, Value& out) {
    const uint64_t times = times_given > 0 ? static_cast<uint64_t>(times_given) : 0;
    const bool is_string = sequence.is(Kind::kString);
    const uint64_t unit = is_string ? sequence.str().size() : sequence.list()->items.size();
    const uint64_t limit = is_string ? kMaxStringBytes : kMaxListItems;
    if (unit != 0 && times > limit / unit)
      return fail(offset, std::string(is_string ? "a repeated string longer than " : "a repeated list longer than ") +
                              std::to_string(limit) + (is_string ? " bytes" : " items"),
                  ErrorCode::kOutOfMemory);
    const uint64_t total = unit * times;
    if (is_string) {
      std::string s;
      if (!charge(total / kBytesPerStep) || !reserve_text(offset, s, total)) return false;
      if (total != 0) {  // doubling: log(times) copies
        s = sequence.str();
        while (2 * s.size() <= total) s.append(s.data(), s.size());
        s.append(s.data(), static_cast<size_t>(total) - s.size());
      }
      return finish_string(offset, std::move(s), out);
    }
    std::vector<Value> items;
    if (!charge(total) || !reserve_values(offset, items, total)) return false;
    for (uint64_t i = 0; i < times && unit != 0; ++i) items.insert(items.end(), sequence.list()->items.begin(), sequence.list()->items.end());
    return make_list(offset, std::move(items), out, sequence.list()->is_tuple);
  }

  // -- functions, methods, filters, tests
  bool call_function(const Expr& e, Value& out) {
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
    if (!eval_args(e, 0, args, kwargs)) return false;
    if (e.name == "raise_exception") {
      std::string message;
      if (!args.empty() && !to_text(e.offset, args[0], message)) return false;
      return fail(e.offset, "raise_exception: " + message);
    }
    if (e.name == "namespace") {
      if (args.size() > 1) return fail(e.offset, "namespace() takes at most one positional argument");
      const DictData* from = nullptr;
      if (args.size() == 1) {
        if (!args[0].is(Kind::kDict) || args[0].dict()->is_namespace)
          return fail(e.offset, "namespace() takes a dict and keyword arguments");
        from = args[0].dict();
      }
      std::shared_ptr<DictData> ns;
      if (!new_dict(e.offset, (from ? from->entries.size() : 0) + kwargs.size(), true, ns)) return false;
      if (from)
        for (const auto& [key, value] : from->entries)
          if (!dict_set(e.offset, *ns, key, value)) return false;
      for (auto& [key, value] : kwargs)
        if (!dict_set(e.offset, *ns, key, std::move(value))) return false;
      out = dict_value(std::move(ns));
      return true;
    }
    // range([start,] stop[, step])
    if (!kwargs.empty() || args.empty() || args.size() > 3) return fail(e.offset, "range() takes 1 to 3 integers");
    for (const Value& a : args)
      if (!is_integral(a)) return fail(e.offset, std::string("range() takes integers, not a ") + kind_name(a));
    const int64_t start = args.size() == 1 ? 0 : as_int(args[0]);
    const int64_t stop = args.size() == 1 ? as_int(args[0]) : as_int(args[1]);
    const int64_t step = args.size() == 3 ? as_int(args[2]) : 1;
    if (step == 0) return fail(e.offset, "range() step cannot be zero");
    const uint64_t count = slice_length(start, stop, step);
    std::vector<Value> items;
    if (!charge(count) || !reserve_values(e.offset, items, count)) return false;
    for (uint64_t k = 0; k < count; ++k)  // (start + k * step stays between start and stop)
      items.push_back(Value::of_int(static_cast<int64_t>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(step))));
    return make_list(e.offset, std::move(items), out);
  }

  // str.strip / lstrip / rstrip with an optional set of characters.
  bool strip(size_t offset, std::string_view s, const Value* chars, bool left, bool right, Value& out) {
    CodePointSet set;
    const bool whitespace = !chars || chars->is(Kind::kNone) || chars->is(Kind::kUndefined);
    if (!whitespace) {
      if (!chars->is(Kind::kString)) return fail(offset, std::string("strip() takes a string, not a ") + kind_name(*chars));
      const std::string& c = chars->str();
      if (!charge(1 + c.size() / kDecodedBytesPerStep)) return false;
      size_t others = 0;
      for (size_t at = 0; at < c.size(); ++others) at += static_cast<uint8_t>(c[at]) < 0x80 ? 1 : detail::utf8_decode(c, at).length;
      if (!account(offset, others * sizeof(char32_t) + kMallocBytes)) return false;
      set.others.reserve(others);
      for (size_t at = 0; at < c.size();) {
        const detail::CodePoint cp = detail::utf8_decode(c, at);
        if (cp.value < 0x80) set.ascii[cp.value >> 6] |= uint64_t{1} << (cp.value & 63);
        else set.others.push_back(cp.value);
        at += cp.length;
      }
      // Sorted (n log n comparisons), then each test is a binary search.
      uint64_t log = 1;
      while (log < 64 && (uint64_t{1} << log) < set.others.size()) ++log;
      if (!charge(set.others.size() * log / kBytesPerStep)) return false;
      std::sort(set.others.begin(), set.others.end());
      set.others.erase(std::unique(set.others.begin(), set.others.end()), set.others.end());
    }
    if (!charge(1 + s.size() / kDecodedBytesPerStep)) return false;
    // A test is a bitmap, a space table or a binary search: a non-ASCII one is charged as it is made.
    const auto strips = [&](char32_t c, bool& result) {
      if (whitespace) {
        result = detail::is_python_space(c);
      } else if (c < 0x80) {
        result = set.has_ascii(c);
      } else {
        if (!set.others.empty() && !charge(1)) return false;
        result = std::binary_search(set.others.begin(), set.others.end(), c);
      }
      return true;
    };
    size_t first = 0, last = s.size();
    bool stripped = false;
    while (left && first < last) {
      const detail::CodePoint cp = detail::utf8_decode(s, first);
      if (!strips(cp.value, stripped)) return false;
      if (!stripped) break;
      first += cp.length;
    }
    while (right && last > first) {
      const size_t start = previous_code_point_start(s, last);
      if (!strips(detail::utf8_decode(s, start).value, stripped)) return false;
      if (!stripped) break;
      last = start;
    }
    return new_string(offset, s.substr(first, last - first), out);
  }

  // str.split(): the parts are counted (and their bytes summed) before any is made; the
  // count stops where they would pass the value budget.
  bool split(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out) {
    int64_t max_split = -1;
    if (args.size() > 1) {
      if (!is_integral(args[1])) return fail(offset, "split() maxsplit must be an integer");
      max_split = as_int(args[1]);
    }
    const auto limited = [&](uint64_t parts) { return max_split >= 0 && parts == static_cast<uint64_t>(max_split); };
    // Walks the parts, calling visit(start, end) for each while it returns true.
    using Visit = std::function<bool(size_t, size_t)>;
    std::function<void(const Visit&)> walk;
    if (args.empty() || args[0].is(Kind::kNone)) {  // runs of whitespace, ends dropped
      if (!charge(2 * (1 + s.size() / kDecodedBytesPerStep))) return false;
      walk = [&](const Visit& visit) {
        const auto space_at = [&](size_t at, size_t* length) {
          const detail::CodePoint cp = detail::utf8_decode(s, at);
          *length = cp.length;
          return detail::is_python_space(cp.value);
        };
        uint64_t parts = 0;
        size_t at = 0, length = 0;
        while (true) {
          while (at < s.size() && space_at(at, &length)) at += length;
          if (at == s.size()) return;
          if (limited(parts)) {  // the rest as it is
            visit(at, s.size());
            return;
          }
          size_t end = at;
          while (end < s.size() && !space_at(end, &length)) end += length;
          if (!visit(at, end)) return;
          ++parts;
          at = end;
        }
      };
    } else {
      if (!args[0].is(Kind::kString)) return fail(offset, std::string("split() takes a string, not a ") + kind_name(args[0]));
      const std::string& separator = args[0].str();
      if (separator.empty()) return fail(offset, "split() with an empty separator");
      if (!charge(2 * (1 + (2 * s.size() + separator.size()) / kBytesPerStep))) return false;
      walk = [&](const Visit& visit) {
        const detail::SubstringFinder finder(separator);
        uint64_t parts = 0;
        size_t at = 0;
        while (true) {
          const size_t found = limited(parts) ? std::string::npos : finder.find(s, at);
          if (found == std::string::npos) {
            visit(at, s.size());
            return;
          }
          if (!visit(at, found)) return;
          ++parts;
          at = found + separator.size();
        }
      };
    }
    uint64_t parts = 0, bytes = 0;
    const uint64_t room = ChatTemplate::kMaxAllocatedBytes - allocated_;
    walk([&](size_t start, size_t end) {
      ++parts;
      bytes += kValueBytes + string_bytes(end - start);
      return bytes <= room;
    });
    std::vector<Value> items;  // (a part: a string made, and freed with the list)
    if (!charge(2 * parts) || !account(offset, bytes - parts * kValueBytes) || !reserve_values(offset, items, parts))
      return false;
    walk([&](size_t start, size_t end) {
      items.push_back(Value::of_string(std::string(s.substr(start, end - start))));
      return true;
    });
    return make_list(offset, std::move(items), out);
  }

  // str.replace(): the matches are counted and the result's size computed before it is built.
  bool replace(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out) {
    if (args.size() < 2 || !args[0].is(Kind::kString) || !args[1].is(Kind::kString))
      return fail(offset, "replace() takes two strings");
    uint64_t count = UINT64_MAX;
    if (args.size() > 2) {
      if (!is_integral(args[2])) return fail(offset, "replace() count must be an integer");
      if (as_int(args[2]) >= 0) count = static_cast<uint64_t>(as_int(args[2]));
    }
    const std::string& from = args[0].str();
    const std::string& to = args[1].str();
    std::string result;
    if (from.empty()) {  // Python: `to` before every character and at the end
      if (!charge(1 + s.size() / kDecodedBytesPerStep)) return false;
      const uint64_t inserts = std::min<uint64_t>(count, count_code_points(s) + 1);
      if (to.size() != 0 && inserts > (kMaxStringBytes - s.size()) / to.size()) return too_long(offset);
      if (!charge(inserts + s.size() / kDecodedBytesPerStep) || !reserve_text(offset, result, s.size() + inserts * to.size()) ||
          !charge(inserts * to.size() / kBytesPerStep))
        return false;
      size_t at = 0;
      for (uint64_t i = 0; i < inserts; ++i) {
        result += to;
        if (at < s.size()) {
          const size_t length = detail::utf8_decode(s, at).length;
          result.append(s, at, length);
          at += length;
        }
      }
      result.append(s, at, std::string::npos);
      return finish_string(offset, std::move(result), out);
    }
    const detail::SubstringFinder finder(from);
    if (!charge(2 * (1 + (2 * s.size() + from.size()) / kBytesPerStep))) return false;  // two searches
    uint64_t matches = 0;
    for (size_t at = 0; matches < count;) {
      const size_t found = finder.find(s, at);
      if (found == std::string::npos) break;
      ++matches;
      at = found + from.size();
    }
    // The result: s.size() - matches * from.size() + matches * to.size() bytes.
    const uint64_t kept = s.size() - matches * from.size();
    if (to.size() != 0 && matches > (kMaxStringBytes - std::min<uint64_t>(kept, kMaxStringBytes)) / to.size()) return too_long(offset);
    if (!charge(matches) || !reserve_text(offset, result, kept + matches * to.size()) || !charge((kept + matches * to.size()) / kBytesPerStep))
      return false;
    size_t at = 0;
    for (uint64_t done = 0; done < matches; ++done) {
      const size_t found = finder.find(s, at);
      result.append(s, at, found - at);
      result += to;
      at = found + from.size();
    }
    result.append(s, at, std::string::npos);
    return finish_string(offset, std::move(result), out);
  }

  bool starts_or_ends(size_t offset, std::string_view s, const std::vector<Value>& args, bool ends, Value& out) {
    if (args.size() != 1) return fail(offset, std::string(ends ? "endswith" : "startswith") + "() takes one argument");
    const bool many = args[0].is(Kind::kList);
    const Value* candidates = many ? args[0].list()->items.data() : &args[0];
    const size_t count = many ? args[0].list()->items.size() : 1;
    for (size_t i = 0; i < count; ++i) {
      const Value& c = candidates[i];
      if (!c.is(Kind::kString)) return fail(offset, std::string("startswith()/endswith() take strings, not a ") + kind_name(c));
      const std::string& p = c.str();
      if (!charge(1 + std::min(p.size(), s.size()) / kBytesPerStep)) return false;
      if (p.size() <= s.size() && s.compare(ends ? s.size() - p.size() : 0, p.size(), p) == 0) {
        out = Value::of_bool(true);
        return true;
      }
    }
    out = Value::of_bool(false);
    return true;
  }

  bool case_map(size_t offset, std::string_view s, const std::string& how, Value& out) {
    std::string r;
    if (!charge(s.size() / kBytesPerStep) || !reserve_text(offset, r, s.size()) || !append(offset, r, s)) return false;
    if (how == "upper") {
      for (char& c : r) c = ascii_upper(c);
    } else if (how == "lower") {
      for (char& c : r) c = ascii_lower(c);
    } else if (how == "capitalize") {
      for (char& c : r) c = ascii_lower(c);
      if (!r.empty()) r[0] = ascii_upper(r[0]);
    } else {  // title: Jinja's do_title, a word starts after whitespace, '-', '(', '{', '[' or '<'
      bool word_start = true;
      for (char& c : r) {
        const bool separator = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' ||
                               c == '(' || c == '{' || c == '[' || c == '<';
        if (separator) {
          word_start = true;
          continue;
        }
        c = word_start ? ascii_upper(c) : ascii_lower(c);
        word_start = false;
      }
    }
    return finish_string(offset, std::move(r), out);
  }

  // A dict's keys(), values() or items() (pairs as tuples), each made after its bytes are accounted.
  bool dict_view(size_t offset, const DictData& dict, const std::string& what, Value& out) {
    std::vector<Value> items;
    if (!reserve_values(offset, items, dict.entries.size())) return false;
    for (const auto& [k, v] : dict.entries) {
      if (what == "values") {
        if (!charge(1)) return false;
        items.push_back(v);
        continue;
      }
      Value key;
      if (!new_string(offset, k, key)) return false;
      if (what == "keys") {
        items.push_back(std::move(key));
        continue;
      }
      std::vector<Value> pair;
      if (!reserve_values(offset, pair, 2)) return false;
      pair.push_back(std::move(key));
      pair.push_back(v);
      Value tuple;
      if (!make_list(offset, std::move(pair), tuple, true)) return false;
      items.push_back(std::move(tuple));
    }
    return make_list(offset, std::move(items), out);
  }

  bool call_method(const Expr& e, Value& out) {
    Value object;
    if (!eval(*e.args[0], object)) return false;
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
    if (!eval_args(e, 1, args, kwargs)) return false;
    if (!kwargs.empty()) return fail(e.offset, "keyword arguments to ." + e.name + "() are not supported");
    const std::string& m = e.name;
    if (object.is(Kind::kString)) {
      const std::string& s = object.str();
      if (m == "strip" || m == "lstrip" || m == "rstrip")
        return strip(e.offset, s, args.empty() ? nullptr : &args[0], m != "rstrip", m != "lstrip", out);
      if (m == "split") return split(e.offset, s, args, out);
      if (m == "startswith" || m == "endswith") return starts_or_ends(e.offset, s, args, m == "endswith", out);
      if (m == "replace") return replace(e.offset, s, args, out);
      if (m == "upper" || m == "lower" || m == "title" || m == "capitalize") return case_map(e.offset, s, m, out);
    } else if (object.is(Kind::kDict) && !object.dict()->is_namespace) {
      if (m == "get") {
        if (args.empty() || args.size() > 2) return fail(e.offset, "get() takes a key and an optional default");
        Value found = args.size() == 2 ? args[1] : Value::none();
        if (args[0].is(Kind::kString)) {
          if (!charge(1 + args[0].str().size() / kBytesPerStep)) return false;
          if (const Value* v = object.dict()->find(args[0].str())) found = *v;
        }
        out = std::move(found);
        return true;
      }
      if (m == "keys" || m == "values" || m == "items") return dict_view(e.offset, *object.dict(), m, out);
    }
    return fail(e.offset, "a " + std::string(kind_name(object)) + " has no method ." + m + "()");
  }

  static const Value* keyword(const std::vector<std::pair<std::string, Value>>& kwargs, const char* name) {
    for (const auto& [k, v] : kwargs)
      if (k == name) return &v;
    return nullptr;
  }
  // A filter's parameter: the positional argument at `index`, else the keyword `name`.
  static const Value* param(const std::vector<Value>& args, const std::vector<std::pair<std::string, Value>>& kwargs,
                            size_t index, const char* name) {
    if (index < args.size()) return &args[index];
    return keyword(kwargs, name);
  }

  bool apply_filter(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
                    const std::vector<std::pair<std::string, Value>>& kwargs, Value& out) {
    if (!charge(2)) return false;  // (found by name among two dozen)
    std::string scratch;
    std::string_view text;
    if (f == "trim") {
      if (!text_of(offset, v, scratch, text)) return false;
      return strip(offset, text, param(args, kwargs, 0, "chars"), true, true, out);
    }
    if (f == "tojson") {
      const Value* indent = param(args, kwargs, 0, "indent");
      int64_t width = -1;
      if (indent && !indent->is(Kind::kNone)) {
        if (!is_integral(*indent) || as_int(*indent) < 0 || as_int(*indent) > 64) return fail(offset, "tojson indent must be an integer 0..64");
        width = as_int(*indent);
      }
      for (const auto& [k, value] : kwargs)
        if (k != "indent") return fail(offset, "tojson(" + k + "=...) is not supported");
      std::string s;
      if (!to_json(offset, v, width, 0, s)) return false;
      return finish_string(offset, std::move(s), out);
    }
    if (f == "length" || f == "count") {
      switch (v.kind) {
        case Kind::kUndefined: out = Value::of_int(0); return true;
        case Kind::kString: {
          if (!charge(v.str().size() / kDecodedBytesPerStep)) return false;
          const auto n = static_cast<int64_t>(count_code_points(v.str()));
          out = Value::of_int(n);
          return true;
        }
        case Kind::kList: out = Value::of_int(static_cast<int64_t>(v.list()->items.size())); return true;
        case Kind::kDict: out = Value::of_int(static_cast<int64_t>(v.dict()->entries.size())); return true;
        default: return fail(offset, std::string("length of a ") + kind_name(v));
      }
    }
    if (f == "lower" || f == "upper" || f == "capitalize" || f == "title") {
      if (!text_of(offset, v, scratch, text)) return false;
      return case_map(offset, text, f, out);
    }
    if (f == "first" || f == "last") {
      if (v.is(Kind::kList)) {
        const std::vector<Value>& items = v.list()->items;
        out = items.empty() ? Value{} : f == "first" ? items.front() : items.back();
        return true;
      }
      if (v.is(Kind::kString)) {
        if (v.str().empty()) {
          out = Value{};
          return true;
        }
        return subscript(offset, v, Value::of_int(f == "first" ? 0 : -1), out);
      }
      if (v.is(Kind::kUndefined)) {
        out = Value{};
        return true;
      }
      if (v.is(Kind::kDict) && !v.dict()->is_namespace) {  // a dict's first or last key
        const auto& entries = v.dict()->entries;
        if (entries.empty()) {
          out = Value{};
          return true;
        }
        return new_string(offset, f == "first" ? entries.front().first : entries.back().first, out);
      }
      return fail(offset, "|" + f + " of a " + kind_name(v));
    }
    if (f == "join") return join(offset, v, param(args, kwargs, 0, "d"), param(args, kwargs, 1, "attribute"), out);
    if (f == "default" || f == "d") {
      const Value* fallback = param(args, kwargs, 0, "default_value");
      const Value* boolean = param(args, kwargs, 1, "boolean");
      const bool use_fallback = v.is(Kind::kUndefined) || (boolean && truthy(*boolean) && !truthy(v));
      if (!use_fallback) out = v;
      else if (fallback) out = *fallback;
      else return new_string(offset, "", out);
      return true;
    }
    if (f == "string") {
      if (v.is(Kind::kString)) {
        out = v;
        return true;
      }
      std::string s;
      return to_text(offset, v, s) && finish_string(offset, std::move(s), out);
    }
    if (f == "int" || f == "float") {
      const Value* fallback = param(args, kwargs, 0, "default");
      const Value otherwise = fallback ? *fallback : f == "int" ? Value::of_int(0) : Value::of_float(0);
      double d = 0;
      bool ok = true;
      if (is_number(v)) {
        d = as_double(v);
        if (f == "int" && is_integral(v)) {
          out = Value::of_int(as_int(v));
          return true;
        }
      } else if (v.is(Kind::kString)) {
        const std::string_view trimmed = lstrip_space(rstrip_space(v.str()));
        // Decoded to trim it, copied once to read it (and strtod reads it once).
        if (!charge(1 + v.str().size() / kDecodedBytesPerStep + trimmed.size() / kBytesPerStep) ||
            !account(offset, heap_bytes(trimmed.size())))
          return false;
        size_t consumed = 0;
        d = trimmed.empty() ? 0 : core::parse_c_double(trimmed, &consumed);
        ok = !trimmed.empty() && consumed == trimmed.size() && trimmed.find_first_of("xXpP") == std::string::npos;
      } else {
        ok = false;
      }
      if (!ok || (f == "int" && !(std::fabs(d) < 9.2e18))) {  // (NaN fails the int test too)
        out = otherwise;
        return true;
      }
      out = f == "int" ? Value::of_int(static_cast<int64_t>(d)) : Value::of_float(d);
      return true;
    }
    if (f == "items") {
      if (v.is(Kind::kUndefined)) return make_list(offset, {}, out);
      if (!v.is(Kind::kDict) || v.dict()->is_namespace) return fail(offset, std::string("|items of a ") + kind_name(v));
      const Value source = v;  // `out` may be `v`
      return dict_view(offset, *source.dict(), "items", out);
    }
    if (f == "replace") {
      if (!text_of(offset, v, scratch, text)) return false;
      return replace(offset, text, args, out);
    }
    if (f == "list" || f == "reverse") return list_or_reverse(offset, v, f == "reverse", out);
    if (f == "abs") {
      if (v.is(Kind::kFloat)) out = Value::of_float(std::fabs(v.number));
      else if (is_integral(v) && as_int(v) == INT64_MIN) return fail(offset, "integer overflow in |abs");
      else if (is_integral(v)) out = Value::of_int(std::llabs(as_int(v)));
      else return fail(offset, std::string("|abs of a ") + kind_name(v));
      return true;
    }
    return select_or_map(offset, f, v, args, kwargs, out);
  }

  // |join: the parts' sizes summed first (non-strings written twice, to measure and to copy).
  bool join(size_t offset, const Value& v, const Value* separator, const Value* attribute_name, Value& out) {
    std::string sep_scratch, item_scratch;
    std::string_view sep;
    if (separator && !text_of(offset, *separator, sep_scratch, sep)) return false;
    Value sequence;
    if (!as_list(offset, v, sequence)) return false;
    const std::vector<Value>& items = sequence.list()->items;
    const bool by_attribute = attribute_name && attribute_name->is(Kind::kString);
    Value item;  // (`text` may view it)
    const auto part = [&](size_t i, std::string_view& text) {
      if (!charge(1)) return false;
      item = items[i];
      if (by_attribute && !attribute(items[i], attribute_name->str(), item)) return false;
      return text_of(offset, item, item_scratch, text);
    };
    uint64_t size = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string_view text;
      if (!part(i, text)) return false;
      size += (i > 0 ? sep.size() : 0) + text.size();
      if (size > kMaxStringBytes) return too_long(offset);
    }
    std::string s;
    if (!reserve_text(offset, s, size)) return false;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string_view text;
      if (!part(i, text) || (i > 0 && !append(offset, s, sep)) || !append(offset, s, text)) return false;
    }
    return finish_string(offset, std::move(s), out);
  }

  bool list_or_reverse(size_t offset, const Value& v, bool reverse, Value& out) {
    const Value source = v;  // `out` may be `v`
    if (reverse && source.is(Kind::kString)) {  // code points, last first
      const std::string& s = source.str();
      std::string r;
      if (!charge(1 + s.size() / kDecodedBytesPerStep) || !reserve_text(offset, r, s.size()) || !charge(s.size() / kBytesPerStep))
        return false;
      for (size_t end = s.size(); end > 0;) {
        const size_t start = previous_code_point_start(s, end);
        r.append(s, start, end - start);
        end = start;
      }
      return finish_string(offset, std::move(r), out);
    }
    Value sequence;
    if (!as_list(offset, source, sequence)) return false;
    if (!reverse && !sequence.list()->is_tuple) {  // a list's |list is itself (lists are never changed)
      out = std::move(sequence);
      return true;
    }
    const std::vector<Value>& items = sequence.list()->items;
    std::vector<Value> copy;
    if (!charge(items.size()) || !reserve_values(offset, copy, items.size())) return false;
    if (reverse) copy.assign(items.rbegin(), items.rend());
    else copy.assign(items.begin(), items.end());
    return make_list(offset, std::move(copy), out);
  }

  // select / reject (test), selectattr / rejectattr (attribute [, test]), map
  bool select_or_map(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
                     const std::vector<std::pair<std::string, Value>>& kwargs, Value& out) {
    Value sequence;
    if (!as_list(offset, v, sequence)) return false;
    const std::vector<Value>& items = sequence.list()->items;
    std::vector<Value> kept;
    if (f == "map") {
      if (!reserve_values(offset, kept, items.size())) return false;
      const Value* attribute_name = keyword(kwargs, "attribute");
      if (attribute_name) {
        if (!attribute_name->is(Kind::kString)) return fail(offset, "map(attribute=...) takes a string");
        const Value* fallback = keyword(kwargs, "default");
        for (const Value& item : items) {
          Value mapped;
          if (!charge(1) || !attribute(item, attribute_name->str(), mapped)) return false;
          if (mapped.is(Kind::kUndefined) && fallback) mapped = *fallback;
          kept.push_back(std::move(mapped));
        }
        return make_list(offset, std::move(kept), out);
      }
      if (args.empty() || !args[0].is(Kind::kString) || !known_filter(args[0].str()) || args[0].str() == "map")
        return fail(offset, "map() takes a filter name or attribute=");
      const std::vector<Value> rest(args.begin() + 1, args.end());
      for (const Value& item : items) {
        Value mapped;
        if (!apply_filter(offset, args[0].str(), item, rest, {}, mapped)) return false;
        kept.push_back(std::move(mapped));
      }
      return make_list(offset, std::move(kept), out);
    }
    const bool by_attribute = f == "selectattr" || f == "rejectattr";
    const bool select = f == "select" || f == "selectattr";
    size_t next_arg = 0;
    std::string_view attribute_name;
    if (by_attribute) {
      if (args.empty() || !args[0].is(Kind::kString)) return fail(offset, f + "() takes an attribute name");
      attribute_name = args[0].str();
      next_arg = 1;
    }
    std::string test;
    if (args.size() > next_arg) {
      if (!args[next_arg].is(Kind::kString) || !known_test(args[next_arg].str()))
        return fail(offset, f + "() takes a test name");
      test = args[next_arg].str();
    }
    const std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(std::min(args.size(), next_arg + 1)), args.end());
    for (const Value& item : items) {
      Value subject = item;
      if (!charge(1) || (by_attribute && !attribute(item, attribute_name, subject))) return false;
      bool passes = false;
      if (test.empty()) passes = truthy(subject);
      else if (!apply_test(offset, test, subject, test_args, passes)) return false;
      if (passes == select && !push_value(offset, kept, item)) return false;
    }
    return make_list(offset, std::move(kept), out);
  }

  bool apply_test(size_t offset, const std::string& t, const Value& v, const std::vector<Value>& args, bool& result) {
    if (!charge(2)) return false;  // (found by name among two dozen)
    if (t == "defined") result = !v.is(Kind::kUndefined);
    else if (t == "undefined") result = v.is(Kind::kUndefined);
    else if (t == "none") result = v.is(Kind::kNone);
    else if (t == "string") result = v.is(Kind::kString);
    else if (t == "number") result = is_number(v);
    else if (t == "integer") result = v.is(Kind::kInt);
    else if (t == "float") result = v.is(Kind::kFloat);
    else if (t == "boolean") result = v.is(Kind::kBool);
    else if (t == "true") result = v.is(Kind::kBool) && v.boolean;
    else if (t == "false") result = v.is(Kind::kBool) && !v.boolean;
    else if (t == "iterable") result = v.is(Kind::kUndefined) || v.is(Kind::kString) || v.is(Kind::kList) || (v.is(Kind::kDict) && !v.dict()->is_namespace);
    else if (t == "mapping") result = v.is(Kind::kDict) && !v.dict()->is_namespace;
    else if (t == "sequence") result = v.is(Kind::kUndefined) || v.is(Kind::kString) || v.is(Kind::kList) || (v.is(Kind::kDict) && !v.dict()->is_namespace);
    else if (t == "lower" || t == "upper") {
      std::string scratch;
      std::string_view s;
      if (!text_of(offset, v, scratch, s) || !charge(s.size() / kBytesPerStep)) return false;
      bool cased = false, all = true;
      for (char c : s) {
        const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
        cased = cased || lower || upper;
        if (t == "lower" ? upper : lower) all = false;
      }
      result = cased && all;
    } else if ((t == "odd" || t == "even") && v.is(Kind::kFloat)) {  // Python: value % 2 == 1
      const double r = std::fmod(v.number, 2.0);
      result = t == "odd" ? (r == 1 || r == -1) : r == 0;
    } else if (t == "odd" || t == "even" || t == "divisibleby") {
      if (!is_integral(v)) return fail(offset, "'is " + t + "' needs an integer, not a " + kind_name(v));
      int64_t by = 2;
      if (t == "divisibleby") {
        if (args.size() != 1 || !is_integral(args[0]) || as_int(args[0]) == 0) return fail(offset, "'is divisibleby' needs a non-zero integer");
        by = as_int(args[0]);
      }
      const int64_t r = by == -1 ? 0 : as_int(v) % by;
      result = t == "odd" ? r != 0 : r == 0;
    } else if (t == "in") {
      if (args.size() != 1) return fail(offset, "'is in' needs one argument");
      return contains(offset, v, args[0], result);
    } else {  // equalto / eq / == / ne / !=
      if (args.size() != 1) return fail(offset, "'is " + t + "' needs one argument");
      if (!equal(v, args[0], result)) return false;
      if (t == "ne" || t == "!=") result = !result;
    }
    return true;
  }

  const Program& program_;
  std::string out_;
  size_t max_output_ = 0;
  uint64_t steps_ = 0;
  uint64_t allocated_ = 0;
  size_t at_ = kNowhere;  // the node being rendered, for errors of the budgets
  Error error_{ErrorCode::kInternal, ""};
  detail::StringMap<std::string, std::vector<Binding>> variables_;
  std::vector<std::vector<std::vector<Binding>*>> scopes_;
  std::vector<std::weak_ptr<DictData>> namespaces_;
};

}  // namespace
}  // namespace chat_template_detail

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  using namespace chat_template_detail;
  if (source.size() > kMaxTemplateBytes)
    return Error{ErrorCode::kFormat, "chat template: " + std::to_string(source.size()) + " bytes, more than the " +
                                         std::to_string(kMaxTemplateBytes) + " allowed"};
  try {
    auto program = std::make_shared<Program>();
    program->source = normalize_newlines(source);
    std::vector<Token> tokens;
    Lexer lexer(program->source);
    Status lexed = lexer.run(tokens);
    if (!lexed) return lexed.error();
    Parser parser(tokens, program->source);
    Status parsed = parser.run(program->body);
    // Past kMaxTokens the tokens read are parsed: an error they hold is the one to tell.
    const size_t stopped_at = lexer.stopped_at();
    if (stopped_at != std::string::npos && (parsed || parser.error_offset() >= stopped_at))
      return Error{ErrorCode::kFormat, "chat template " + line_column(program->source, stopped_at) + ": more than " +
                                           std::to_string(kMaxTokens) + " tokens (names, operators, values and texts)"};
    if (!parsed) return parsed.error();
    ChatTemplate t;
    t.program_ = std::move(program);
    return t;
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return Error{ErrorCode::kOutOfMemory, "chat template: out of memory while parsing"};
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!program_) return Error{ErrorCode::kInvalidArgument, "chat template: not parsed"};
  chat_template_detail::Renderer renderer(*program_);
  try {
    return renderer.run(inputs);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  try {
    return renderer.out_of_memory();
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "chat template: out of memory while rendering"};
  }
}

}  // namespace petrel::text
