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

#include "core/c_number.h"
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

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t at = 0; at < s.size();) {
    const detail::CodePoint cp = detail::utf8_decode(s, at);
    out.push_back(cp.value);
    at += cp.length;
  }
  return out;
}
// The number of code points (an ill-formed sequence is one, as utf8_decode reads it).
size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (size_t at = 0; at < s.size(); ++n) at += static_cast<uint8_t>(s[at]) < 0x80 ? 1 : detail::utf8_decode(s, at).length;
  return n;
}
// The start of the code point that ends at `end` (> 0), as a forward walk splits it.
size_t previous_code_point_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xc0) == 0x80) --start;
  return detail::utf8_decode(s, start).length == end - start ? start : end - 1;
}
// Byte offsets of each code point's start, plus s.size() (8 bytes per byte of s).
std::vector<size_t> code_point_starts(std::string_view s) {
  std::vector<size_t> out;
  for (size_t at = 0; at < s.size(); at += detail::utf8_decode(s, at).length) out.push_back(at);
  out.push_back(s.size());
  return out;
}
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool is_ascii_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Python's repr(float): the shortest digits that read back, fixed notation for
// exponents -4..15, else d.ddde+XX.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = core::format_c_double("%.*e", precision - 1, v);
    if (core::parse_c_double(text) == v) break;
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

struct Value {
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::shared_ptr<const std::string> text;
  std::shared_ptr<const ListData> list;
  std::shared_ptr<DictData> dict;  // mutable only when it is a namespace

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value of_bool(bool b) { Value v; v.kind = Kind::kBool; v.boolean = b; return v; }
  static Value of_int(int64_t i) { Value v; v.kind = Kind::kInt; v.integer = i; return v; }
  static Value of_float(double d) { Value v; v.kind = Kind::kFloat; v.number = d; return v; }
  static Value of_string(std::string s) {
    Value v;
    v.kind = Kind::kString;
    v.text = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  const std::string& str() const { return *text; }
};
using Kind = Value::Kind;

struct ListData {
  std::vector<Value> items;
  int depth = 1;
  bool is_tuple = false;  // only str() tells a tuple from a list
};
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;  // insertion order, as Python's dict
  bool is_namespace = false;  // namespace(): attributes assignable, not a mapping
  bool is_loop = false;       // a for loop's `loop`, updated in place each turn (as Jinja's)
  int depth = 1;
  const Value* find(std::string_view key) const {
    for (const auto& [k, v] : entries)
      if (k == key) return &v;
    return nullptr;
  }
};

int depth_of(const Value& v) {
  if (v.is(Kind::kList)) return v.list->depth;
  if (v.is(Kind::kDict)) return v.dict->depth;
  return 0;
}
bool is_namespace(const Value& v) { return v.is(Kind::kDict) && v.dict->is_namespace; }
// The two mutable values never go into a list, dict or namespace: no value can then
// reach itself, and a container's depth, fixed when it is built, stays true.
bool is_mutable(const Value& v) { return v.is(Kind::kDict) && (v.dict->is_namespace || v.dict->is_loop); }
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
    case Kind::kDict: return v.dict->is_namespace ? "namespace" : "dict";
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
    case Kind::kString: return !v.text->empty();
    case Kind::kList: return !v.list->items.empty();
    case Kind::kDict: return v.dict->is_namespace || !v.dict->entries.empty();
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
  size_t offset = 0;
  int depth = 1;
  Value literal;
  std::string name;                  // name, attribute, function, method, filter, test, operator
  std::vector<std::string> ops;      // kCompare: one per pair
  std::vector<std::unique_ptr<Expr>> args;        // children (may hold null for slice bounds / no else)
  std::vector<std::string> keywords;  // calls: names of the last keywords.size() args
  bool negate = false;               // kTest
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
      }
      line_starting = after > 0 && src_[after - 1] == '\n';
      pos = after;
      if (pos == src_.size()) break;
    }
    tokens.push_back({Tok::kEnd, "", src_.size()});
    return Status::ok();
  }

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
};

// ---- renderer -----------------------------------------------------------------------

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Renderer {
 public:
  explicit Renderer(const Program& program) : program_(program) {}
  ~Renderer() {
    // Namespaces are the only mutable values: clearing them breaks any cycle a template
    // built through them (ns.a = [ns] is refused, but be safe for what it may hold).
    for (const std::shared_ptr<DictData>& ns : namespaces_) ns->entries.clear();
  }

  Result<std::string> run(const ChatTemplateInputs& inputs) {
    scopes_.emplace_back();
    Global& globals = scopes_.back();
    auto messages = std::make_shared<ListData>();
    messages->depth = 2;
    for (const ChatMessage& m : inputs.messages) {
      if (!charge(1 + (m.role.size() + m.content.size()) / 64)) return error_;
      auto message = std::make_shared<DictData>();
      message->entries.emplace_back("role", Value::of_string(m.role));
      message->entries.emplace_back("content", Value::of_string(m.content));
      Value v;
      v.kind = Kind::kDict;
      v.dict = std::move(message);
      messages->items.push_back(std::move(v));
    }
    Value list;
    list.kind = Kind::kList;
    list.list = std::move(messages);
    globals.emplace_back("messages", std::move(list));
    globals.emplace_back("add_generation_prompt", Value::of_bool(inputs.add_generation_prompt));
    globals.emplace_back("tools", Value::none());
    globals.emplace_back("documents", Value::none());
    for (const auto& [name, value] : inputs.strings) set_variable(name, Value::of_string(value));
    for (const auto& [name, value] : inputs.flags) set_variable(name, Value::of_bool(value));
    Flow flow = Flow::kNormal;
    if (!render_body(program_.body, 0, flow)) return error_;
    return std::move(out_);
  }

 private:
  using Global = std::vector<std::pair<std::string, Value>>;

  // -- errors and budget
  bool fail(size_t offset, const std::string& what, ErrorCode code = ErrorCode::kInvalidArgument) {
    error_ = Error{code, "chat template " + line_column(program_.source, offset) + ": " + what};
    return false;
  }
  bool charge(uint64_t steps) {
    steps_ += steps;
    if (steps_ <= ChatTemplate::kMaxSteps) return true;
    error_ = Error{ErrorCode::kInvalidArgument,
                   "chat template: rendering needs more than " + std::to_string(ChatTemplate::kMaxSteps) + " steps of work"};
    return false;
  }
  // Every string and list a render builds counts here, freed or not: what it can hold
  // at once is below this.
  bool account(size_t offset, uint64_t bytes) {
    allocated_ += bytes;
    if (allocated_ <= ChatTemplate::kMaxAllocatedBytes) return true;
    return fail(offset, "rendering builds more than " + std::to_string(ChatTemplate::kMaxAllocatedBytes) + " bytes of values",
                ErrorCode::kOutOfMemory);
  }
  bool make_string(size_t offset, std::string s, Value& out) {
    if (s.size() > ChatTemplate::kMaxOutputBytes)
      return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
    if (!charge(1 + s.size() / 16) || !account(offset, 64 + s.size())) return false;
    out = Value::of_string(std::move(s));
    return true;
  }
  bool make_list(size_t offset, std::vector<Value> items, Value& out, bool is_tuple = false) {
    if (items.size() > ChatTemplate::kMaxOutputBytes)
      return fail(offset, "a list longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " items", ErrorCode::kOutOfMemory);
    if (!charge(1 + items.size()) || !account(offset, 64 + items.size() * sizeof(Value))) return false;
    auto list = std::make_shared<ListData>();
    for (const Value& v : items) {
      if (is_mutable(v)) return fail(offset, "a namespace or loop cannot be put in a list");
      list->depth = std::max(list->depth, depth_of(v) + 1);
    }
    if (list->depth > kMaxValueDepth)
      return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
    list->items = std::move(items);
    list->is_tuple = is_tuple;
    out = Value{};
    out.kind = Kind::kList;
    out.list = std::move(list);
    return true;
  }
  bool make_dict(size_t offset, std::vector<std::pair<std::string, Value>> entries, bool is_ns, Value& out) {
    if (!charge(1 + entries.size()) || !account(offset, 64 + entries.size() * (sizeof(Value) + 32))) return false;
    auto dict = std::make_shared<DictData>();
    dict->is_namespace = is_ns;
    for (auto& [key, value] : entries) {
      if (is_mutable(value)) return fail(offset, "a namespace or loop cannot be put in a dict or namespace");
      dict->depth = std::max(dict->depth, depth_of(value) + 1);
      bool replaced = false;
      for (auto& [k, v] : dict->entries)
        if (k == key) v = value, replaced = true;
      if (!replaced) dict->entries.emplace_back(key, std::move(value));
    }
    if (dict->depth > kMaxValueDepth)
      return fail(offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
    if (is_ns) namespaces_.push_back(dict);
    out = Value{};
    out.kind = Kind::kDict;
    out.dict = std::move(dict);
    return true;
  }
  bool emit(size_t offset, std::string_view text) {
    if (out_.size() + text.size() > ChatTemplate::kMaxOutputBytes)
      return fail(offset, "output longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
    if (!charge(1 + text.size() / 16)) return false;
    out_.append(text);
    return true;
  }

  // -- variables
  const Value* lookup(std::string_view name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope)
      for (const auto& [k, v] : *scope)
        if (k == name) return &v;
    return nullptr;
  }
  void set_variable(const std::string& name, Value value) {
    for (auto& [k, v] : scopes_.back())
      if (k == name) {
        v = std::move(value);
        return;
      }
    scopes_.back().emplace_back(name, std::move(value));
  }

  // -- statements
  bool render_body(const Body& body, int depth, Flow& flow) {
    for (const std::unique_ptr<Node>& node : body) {
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
              if (!render_body(branch, depth + 1, flow)) return false;
              break;
            }
          }
          break;
        case NodeKind::kFor:
          if (!render_for(*node, depth)) return false;
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
    if (node.attribute.empty()) {
      set_variable(node.target, std::move(v));
      return true;
    }
    const Value* target = lookup(node.target);
    if (!target || !is_namespace(*target))
      return fail(node.offset, "'{% set " + node.target + "." + node.attribute + " %}' needs '" + node.target + "' to be a namespace()");
    if (is_mutable(v)) return fail(node.offset, "a namespace or loop cannot be put in a namespace");
    DictData& ns = *target->dict;
    ns.depth = std::max(ns.depth, depth_of(v) + 1);
    if (ns.depth > kMaxValueDepth)
      return fail(node.offset, "lists or dicts nested more than " + std::to_string(kMaxValueDepth) + " deep");
    for (auto& [k, value] : ns.entries)
      if (k == node.attribute) {
        value = std::move(v);
        return true;
      }
    if (!charge(ns.entries.size())) return false;
    ns.entries.emplace_back(node.attribute, std::move(v));
    return true;
  }

  bool render_for(const Node& node, int depth) {
    Value iterable;
    if (!eval(*node.expr, iterable)) return false;
    // A list is immutable: the loop reads it in place; anything else becomes one.
    if (!iterable.is(Kind::kList)) {
      std::vector<Value> materialized;
      if (!iterate(node.offset, iterable, materialized) || !make_list(node.offset, std::move(materialized), iterable))
        return false;
    }
    std::shared_ptr<const ListData> sequence = iterable.list;
    scopes_.emplace_back();
    struct PopScope {
      ~PopScope() { scopes.pop_back(); }
      std::vector<Global>& scopes;
    } pop{scopes_};
    if (node.loop_filter) {  // filtered first: loop.index and loop.length count what passes
      std::vector<Value> kept;
      for (const Value& item : sequence->items) {
        if (!charge(1) || !bind_targets(node, item)) return false;
        Value keep;
        if (!eval(*node.loop_filter, keep)) return false;
        if (truthy(keep)) kept.push_back(item);
      }
      Value filtered;
      if (!make_list(node.offset, std::move(kept), filtered)) return false;
      sequence = filtered.list;
    }
    const std::vector<Value>& items = sequence->items;
    const int64_t length = static_cast<int64_t>(items.size());
    Value loop;
    loop.kind = Kind::kDict;
    loop.dict = std::make_shared<DictData>();
    loop.dict->is_loop = true;
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem", "depth", "depth0"})
      loop.dict->entries.emplace_back(key, Value{});
    loop.dict->entries[9].second = Value::of_int(1);
    loop.dict->entries[10].second = Value::of_int(0);
    set_variable("loop", loop);
    for (int64_t i = 0; i < length; ++i) {
      if (!charge(8)) return false;
      auto& entries = loop.dict->entries;
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
      if (!render_body(node.body, depth + 1, flow)) return false;
      if (flow == Flow::kBreak) break;
    }
    if (length == 0) {
      Flow flow = Flow::kNormal;
      if (!render_body(node.else_body, depth + 1, flow)) return false;
    }
    return true;
  }

  bool bind_targets(const Node& node, const Value& item) {
    if (node.targets.size() == 1) {
      set_variable(node.targets[0], item);
      return true;
    }
    std::vector<Value> parts;
    if (!iterate(node.offset, item, parts)) return false;
    if (parts.size() != node.targets.size())
      return fail(node.offset, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(node.targets.size()) + " loop variables");
    for (size_t i = 0; i < parts.size(); ++i) set_variable(node.targets[i], std::move(parts[i]));
    return true;
  }

  // Python's iter(): a list's items, a string's characters, a dict's keys; undefined
  // iterates as empty (Jinja's Undefined).
  bool iterate(size_t offset, const Value& v, std::vector<Value>& out) {
    switch (v.kind) {
      case Kind::kUndefined: return true;
      case Kind::kList:
        if (!charge(1 + v.list->items.size()) || !account(offset, v.list->items.size() * sizeof(Value))) return false;
        out = v.list->items;
        return true;
      case Kind::kString: {
        const std::string& s = v.str();
        if (!charge(1 + s.size()) || !account(offset, s.size() * (sizeof(Value) + 64))) return false;
        for (size_t at = 0; at < s.size();) {
          const size_t length = detail::utf8_decode(s, at).length;
          out.push_back(Value::of_string(s.substr(at, length)));
          at += length;
        }
        return true;
      }
      case Kind::kDict:
        if (v.dict->is_namespace) break;
        if (!charge(1 + v.dict->entries.size())) return false;
        for (const auto& [k, value] : v.dict->entries) out.push_back(Value::of_string(k));
        return true;
      default: break;
    }
    return fail(offset, std::string("cannot iterate over a ") + kind_name(v));
  }

  // -- conversions
  // Python's str() (undefined renders as "").
  bool to_text(size_t offset, const Value& v, std::string& out) {
    switch (v.kind) {
      case Kind::kUndefined: out.clear(); return true;
      case Kind::kString: out = v.str(); return true;
      default: return repr(offset, v, out, false);
    }
  }
  // Python's repr() (str() at the top when `top_str`: strings bare).
  bool repr(size_t offset, const Value& v, std::string& out, bool quote_strings = true) {
    if (!charge(1)) return false;
    if (out.size() > ChatTemplate::kMaxOutputBytes)
      return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
    switch (v.kind) {
      case Kind::kUndefined: out += "Undefined"; return true;  // (a top-level undefined prints as "")
      case Kind::kNone: out += "None"; return true;
      case Kind::kBool: out += v.boolean ? "True" : "False"; return true;
      case Kind::kInt: out += std::to_string(v.integer); return true;
      case Kind::kFloat: out += python_float(v.number); return true;
      case Kind::kString:
        if (!charge(v.str().size() / 64)) return false;
        if (!quote_strings) {
          out += v.str();
        } else {
          const bool dq = v.str().find('\'') != std::string::npos && v.str().find('"') == std::string::npos;
          const char quote = dq ? '"' : '\'';
          out += quote;
          for (char c : v.str()) {
            const auto u = static_cast<unsigned char>(c);
            if (c == quote || c == '\\') out += '\\', out += c;
            else if (c == '\n') out += "\\n";
            else if (c == '\r') out += "\\r";
            else if (c == '\t') out += "\\t";
            else if (u < 0x20 || u == 0x7f) {
              char hex[8];
              std::snprintf(hex, sizeof hex, "\\x%02x", u);
              out += hex;
            } else out += c;
          }
          out += quote;
        }
        return true;
      case Kind::kList: {
        out += v.list->is_tuple ? '(' : '[';
        bool first = true;
        for (const Value& item : v.list->items) {
          if (!first) out += ", ";
          first = false;
          if (!repr(offset, item, out)) return false;
        }
        if (v.list->is_tuple && v.list->items.size() == 1) out += ',';
        out += v.list->is_tuple ? ')' : ']';
        return true;
      }
      case Kind::kDict: {
        out += v.dict->is_namespace ? "<Namespace {" : "{";
        bool first = true;
        for (const auto& [k, value] : v.dict->entries) {
          if (!first) out += ", ";
          first = false;
          if (!repr(offset, Value::of_string(k), out)) return false;
          out += ": ";
          if (!repr(offset, value, out)) return false;
        }
        out += v.dict->is_namespace ? "}>" : "}";
        return true;
      }
    }
    return true;
  }

  // transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent).
  bool to_json(size_t offset, const Value& v, int64_t indent, int level, std::string& out) {
    if (!charge(1)) return false;
    if (out.size() > ChatTemplate::kMaxOutputBytes)
      return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
    const auto newline = [&](int lvl) {
      if (indent < 0) return;
      out += '\n';
      out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
    };
    switch (v.kind) {
      case Kind::kUndefined: return fail(offset, "tojson of an undefined value");
      case Kind::kNone: out += "null"; return true;
      case Kind::kBool: out += v.boolean ? "true" : "false"; return true;
      case Kind::kInt: out += std::to_string(v.integer); return true;
      case Kind::kFloat:
        out += std::isnan(v.number) ? "NaN" : std::isinf(v.number) ? (v.number < 0 ? "-Infinity" : "Infinity") : python_float(v.number);
        return true;
      case Kind::kString: {
        if (!charge(v.str().size() / 2)) return false;
        const std::string& s = v.str();
        out += '"';
        for (size_t at = 0; at < s.size();) {
          size_t run = at;  // plain ASCII goes over as it is
          while (run < s.size() && static_cast<uint8_t>(s[run]) >= 0x20 && static_cast<uint8_t>(s[run]) < 0x80 && s[run] != '"' && s[run] != '\\') ++run;
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
          else if (c < 0x20) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(c));
            out += hex;
          } else if (cp.length == 1 || detail::utf8_sequence(s, at) != 0) {
            out.append(s, at, cp.length);
          } else {
            out += "\xef\xbf\xbd";  // malformed bytes: U+FFFD, as a decoded Python str would hold
          }
          at += cp.length;
        }
        out += '"';
        return true;
      }
      case Kind::kList: {
        if (v.list->items.empty()) {
          out += "[]";
          return true;
        }
        out += '[';
        bool first = true;
        for (const Value& item : v.list->items) {
          if (!first) out += indent < 0 ? ", " : ",";
          first = false;
          newline(level + 1);
          if (!to_json(offset, item, indent, level + 1, out)) return false;
        }
        newline(level);
        out += ']';
        return true;
      }
      case Kind::kDict: {
        if (v.dict->is_namespace) return fail(offset, "tojson of a namespace");
        if (v.dict->entries.empty()) {
          out += "{}";
          return true;
        }
        out += '{';
        bool first = true;
        for (const auto& [k, value] : v.dict->entries) {
          if (!first) out += indent < 0 ? ", " : ",";
          first = false;
          newline(level + 1);
          if (!to_json(offset, Value::of_string(k), indent, level + 1, out)) return false;
          out += ": ";
          if (!to_json(offset, value, indent, level + 1, out)) return false;
        }
        newline(level);
        out += '}';
        return true;
      }
    }
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
        if (!charge(a.str().size() / 64)) return false;
        result = a.str() == b.str();
        return true;
      case Kind::kList:
        if (a.list->items.size() != b.list->items.size()) {
          result = false;
          return true;
        }
        for (size_t i = 0; i < a.list->items.size(); ++i) {
          if (!equal(a.list->items[i], b.list->items[i], result)) return false;
          if (!result) return true;
        }
        result = true;
        return true;
      case Kind::kDict:
        if (a.dict == b.dict) {
          result = true;
          return true;
        }
        if (a.dict->is_namespace || b.dict->is_namespace || a.dict->entries.size() != b.dict->entries.size()) {
          result = false;
          return true;
        }
        for (const auto& [k, value] : a.dict->entries) {
          if (!charge(b.dict->entries.size())) return false;
          const Value* other = b.dict->find(k);
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
      if (!charge(std::min(a.str().size(), b.str().size()) / 64)) return false;
      result = a.str() < b.str();
      return true;
    }
    if (a.is(Kind::kList) && b.is(Kind::kList)) {
      const auto& x = a.list->items;
      const auto& y = b.list->items;
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
      case Kind::kString:
        if (!item.is(Kind::kString)) return fail(offset, std::string("'in <string>' needs a string, not a ") + kind_name(item));
        if (!charge(1 + container.str().size() / 16)) return false;
        result = container.str().find(item.str()) != std::string::npos;
        return true;
      case Kind::kList:
        for (const Value& v : container.list->items) {
          if (!equal(item, v, result)) return false;
          if (result) return true;
        }
        result = false;
        return true;
      case Kind::kDict:
        if (container.dict->is_namespace) break;
        if (!charge(container.dict->entries.size())) return false;
        result = item.is(Kind::kString) && container.dict->find(item.str()) != nullptr;
        return true;
      default: break;
    }
    return fail(offset, std::string("'in' needs a string, list or dict on its right, not a ") + kind_name(container));
  }

  // -- expressions
  bool eval(const Expr& e, Value& out) {
    if (!charge(1)) return false;
    switch (e.kind) {
      case ExprKind::kLiteral: out = e.literal; return true;
      case ExprKind::kName: {
        const Value* v = lookup(e.name);
        out = v ? *v : Value{};
        return true;
      }
      case ExprKind::kList: {
        std::vector<Value> items(e.args.size());
        for (size_t i = 0; i < e.args.size(); ++i)
          if (!eval(*e.args[i], items[i])) return false;
        return make_list(e.offset, std::move(items), out, e.name == "tuple");
      }
      case ExprKind::kDict: {
        std::vector<std::pair<std::string, Value>> entries;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value key, value;
          if (!eval(*e.args[i], key) || !eval(*e.args[i + 1], value)) return false;
          if (!key.is(Kind::kString)) return fail(e.args[i]->offset, std::string("dict keys must be strings here, not a ") + kind_name(key));
          entries.emplace_back(key.str(), std::move(value));
        }
        return make_dict(e.offset, std::move(entries), false, out);
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
        std::string left, right;
        if (!eval(*e.args[0], a) || !eval(*e.args[1], b) || !to_text(e.offset, a, left) || !to_text(e.offset, b, right))
          return false;
        if (left.size() + right.size() > ChatTemplate::kMaxOutputBytes)
          return fail(e.offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
        return make_string(e.offset, left + right, out);
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
  bool attribute(const Value& object, const std::string& name, Value& out) {
    out = Value{};
    if (object.is(Kind::kDict)) {
      if (!charge(object.dict->entries.size() / 8)) return false;
      if (const Value* v = object.dict->find(name)) out = *v;
    }
    return true;
  }

  bool subscript(size_t offset, const Value& object, const Value& key, Value& out) {
    out = Value{};
    if (object.is(Kind::kDict)) {
      if (!key.is(Kind::kString)) return true;
      return attribute(object, key.str(), out);
    }
    if (object.is(Kind::kList) || object.is(Kind::kString)) {
      if (key.is(Kind::kString)) return true;  // an attribute of a list or string: undefined
      if (!is_integral(key)) return fail(offset, std::string("indices must be integers, not a ") + kind_name(key));
      int64_t index = as_int(key);
      if (object.is(Kind::kList)) {
        const int64_t size = static_cast<int64_t>(object.list->items.size());
        if (index < 0) index += size;
        if (index >= 0 && index < size) out = object.list->items[static_cast<size_t>(index)];
        return true;
      }
      const std::string& s = object.str();
      if (!charge(1 + s.size() / (index < 0 ? 2 : 8))) return false;
      if (index < 0) index += static_cast<int64_t>(count_code_points(s));
      if (index < 0) return true;
      size_t at = 0;
      for (int64_t i = 0; i < index && at < s.size(); ++i) at += detail::utf8_decode(s, at).length;
      if (at < s.size()) out = Value::of_string(s.substr(at, detail::utf8_decode(s, at).length));
      return true;
    }
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
    std::vector<size_t> starts;
    int64_t length = 0;
    if (object.is(Kind::kList)) {
      length = static_cast<int64_t>(object.list->items.size());
    } else if (object.is(Kind::kString)) {
      if (!charge(1 + object.str().size() / 2) || !account(e.offset, object.str().size() * sizeof(size_t))) return false;
      starts = code_point_starts(object.str());
      length = static_cast<int64_t>(starts.size()) - 1;
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
    std::vector<int64_t> picks;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      picks.push_back(i);
      if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step) break;
    }
    if (!charge(1 + picks.size())) return false;
    if (object.is(Kind::kList)) {
      std::vector<Value> items;
      items.reserve(picks.size());
      for (int64_t i : picks) items.push_back(object.list->items[static_cast<size_t>(i)]);
      return make_list(e.offset, std::move(items), out, object.list->is_tuple);
    }
    std::string s;
    for (int64_t i : picks) s.append(object.str(), starts[static_cast<size_t>(i)], starts[static_cast<size_t>(i) + 1] - starts[static_cast<size_t>(i)]);
    return make_string(e.offset, std::move(s), out);
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
          if (x == INT64_MIN && y == -1) return fail(e.offset, "integer overflow");
          int64_t q = x / y, m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
          r = op == "//" ? q : m;
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
    if (op == "+" && a.is(Kind::kString) && b.is(Kind::kString)) {
      if (a.str().size() + b.str().size() > ChatTemplate::kMaxOutputBytes)
        return fail(e.offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
      return make_string(e.offset, a.str() + b.str(), out);
    }
    if (op == "+" && a.is(Kind::kList) && b.is(Kind::kList)) {
      if (a.list->items.size() + b.list->items.size() > ChatTemplate::kMaxOutputBytes)
        return fail(e.offset, "a list longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " items", ErrorCode::kOutOfMemory);
      if (!charge(a.list->items.size() + b.list->items.size())) return false;
      std::vector<Value> items = a.list->items;
      items.insert(items.end(), b.list->items.begin(), b.list->items.end());
      return make_list(e.offset, std::move(items), out);
    }
    if (op == "*" && (is_integral(a) || is_integral(b)) && (a.is(Kind::kString) || b.is(Kind::kString) || a.is(Kind::kList) || b.is(Kind::kList))) {
      const Value& sequence = is_integral(a) ? b : a;
      const int64_t times = std::max<int64_t>(0, as_int(is_integral(a) ? a : b));
      const size_t unit = sequence.is(Kind::kString) ? sequence.str().size() : sequence.list->items.size();
      if (unit != 0 && static_cast<uint64_t>(times) > ChatTemplate::kMaxOutputBytes / unit)
        return fail(e.offset, "a repeated string or list longer than " + std::to_string(ChatTemplate::kMaxOutputBytes), ErrorCode::kOutOfMemory);
      if (!charge(static_cast<uint64_t>(times) * unit / 8)) return false;
      if (sequence.is(Kind::kString)) {
        std::string s;
        s.reserve(unit * static_cast<size_t>(times));
        for (int64_t i = 0; i < times; ++i) s += sequence.str();
        return make_string(e.offset, std::move(s), out);
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < times; ++i) items.insert(items.end(), sequence.list->items.begin(), sequence.list->items.end());
      return make_list(e.offset, std::move(items), out, sequence.list->is_tuple);
    }
    return fail(e.offset, "unsupported operand types for '" + op + "': " + kind_name(a) + " and " + kind_name(b));
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
      std::vector<std::pair<std::string, Value>> entries;
      if (args.size() > 1) return fail(e.offset, "namespace() takes at most one positional argument");
      if (args.size() == 1) {
        if (!args[0].is(Kind::kDict) || args[0].dict->is_namespace)
          return fail(e.offset, "namespace() takes a dict and keyword arguments");
        entries = args[0].dict->entries;
      }
      for (auto& kv : kwargs) entries.push_back(std::move(kv));
      return make_dict(e.offset, std::move(entries), true, out);
    }
    // range([start,] stop[, step])
    if (!kwargs.empty() || args.empty() || args.size() > 3) return fail(e.offset, "range() takes 1 to 3 integers");
    for (const Value& a : args)
      if (!is_integral(a)) return fail(e.offset, std::string("range() takes integers, not a ") + kind_name(a));
    const int64_t start = args.size() == 1 ? 0 : as_int(args[0]);
    const int64_t stop = args.size() == 1 ? as_int(args[0]) : as_int(args[1]);
    const int64_t step = args.size() == 3 ? as_int(args[2]) : 1;
    if (step == 0) return fail(e.offset, "range() step cannot be zero");
    const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    if (count > static_cast<double>(ChatTemplate::kMaxSteps)) {
      if (!charge(ChatTemplate::kMaxSteps + 1)) return false;
    }
    if (!charge(static_cast<uint64_t>(count)) || !account(e.offset, static_cast<uint64_t>(count) * sizeof(Value))) return false;
    std::vector<Value> items;
    items.reserve(static_cast<size_t>(count));
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      items.push_back(Value::of_int(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return make_list(e.offset, std::move(items), out);
  }

  // str.strip / lstrip / rstrip with an optional set of characters.
  bool strip(size_t offset, const std::string& s, const Value* chars, bool left, bool right, Value& out) {
    std::vector<char32_t> set;
    const bool whitespace = !chars || chars->is(Kind::kNone) || chars->is(Kind::kUndefined);
    if (!whitespace) {
      if (!chars->is(Kind::kString)) return fail(offset, std::string("strip() takes a string, not a ") + kind_name(*chars));
      set = code_points(chars->str());
    }
    if (!charge(1 + s.size() / 2 * (1 + set.size()))) return false;
    const auto strips = [&](char32_t c) {
      return whitespace ? detail::is_python_space(c) : std::find(set.begin(), set.end(), c) != set.end();
    };
    size_t first = 0, last = s.size();
    while (left && first < last) {
      const detail::CodePoint cp = detail::utf8_decode(s, first);
      if (!strips(cp.value)) break;
      first += cp.length;
    }
    while (right && last > first) {
      const size_t start = previous_code_point_start(s, last);
      if (!strips(detail::utf8_decode(s, start).value)) break;
      last = start;
    }
    return make_string(offset, s.substr(first, last - first), out);
  }

  bool split(size_t offset, const std::string& s, const std::vector<Value>& args, Value& out) {
    if (!charge(1 + s.size() / 16) || !account(offset, s.size())) return false;
    int64_t max_split = -1;
    if (args.size() > 1) {
      if (!is_integral(args[1])) return fail(offset, "split() maxsplit must be an integer");
      max_split = as_int(args[1]);
    }
    std::vector<Value> parts;
    if (args.empty() || args[0].is(Kind::kNone)) {  // runs of whitespace, ends dropped
      if (!charge(s.size() / 2) || !account(offset, s.size() * sizeof(size_t))) return false;
      const std::vector<size_t> starts = code_point_starts(s);
      size_t i = 0;
      const size_t n = starts.size() - 1;
      const auto space = [&](size_t k) { return detail::is_python_space(detail::utf8_decode(s, starts[k]).value); };
      while (true) {
        while (i < n && space(i)) ++i;
        if (i == n) break;
        if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {  // the rest as it is
          parts.push_back(Value::of_string(s.substr(starts[i])));
          break;
        }
        size_t j = i;
        while (j < n && !space(j)) ++j;
        parts.push_back(Value::of_string(s.substr(starts[i], starts[j] - starts[i])));
        i = j;
      }
    } else {
      if (!args[0].is(Kind::kString)) return fail(offset, std::string("split() takes a string, not a ") + kind_name(args[0]));
      const std::string& sep = args[0].str();
      if (sep.empty()) return fail(offset, "split() with an empty separator");
      size_t at = 0;
      while (true) {
        const size_t found = (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) ? std::string::npos : s.find(sep, at);
        if (found == std::string::npos) {
          parts.push_back(Value::of_string(s.substr(at)));
          break;
        }
        parts.push_back(Value::of_string(s.substr(at, found - at)));
        at = found + sep.size();
      }
    }
    return make_list(offset, std::move(parts), out);
  }

  bool replace(size_t offset, const std::string& s, const std::vector<Value>& args, Value& out) {
    if (args.size() < 2 || !args[0].is(Kind::kString) || !args[1].is(Kind::kString))
      return fail(offset, "replace() takes two strings");
    int64_t count = -1;
    if (args.size() > 2) {
      if (!is_integral(args[2])) return fail(offset, "replace() count must be an integer");
      count = as_int(args[2]);
    }
    const std::string& from = args[0].str();
    const std::string& to = args[1].str();
    std::string result;
    if (from.empty()) {  // Python: `to` before every character and at the end
      if (!charge(1 + s.size() / 2) || !account(offset, s.size() * sizeof(size_t))) return false;
      const std::vector<size_t> starts = code_point_starts(s);
      for (size_t i = 0; i + 1 < starts.size() + 1; ++i) {
        if (count >= 0 && static_cast<int64_t>(i) >= count) {
          result.append(s, starts[std::min(i, starts.size() - 1)], std::string::npos);
          break;
        }
        if (result.size() + to.size() > ChatTemplate::kMaxOutputBytes)
          return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
        result += to;
        if (i + 1 < starts.size()) result.append(s, starts[i], starts[i + 1] - starts[i]);
      }
      return make_string(offset, std::move(result), out);
    }
    size_t at = 0;
    int64_t done = 0;
    while (true) {
      const size_t found = (count >= 0 && done >= count) ? std::string::npos : s.find(from, at);
      if (found == std::string::npos) break;
      result.append(s, at, found - at);
      result += to;
      if (result.size() > ChatTemplate::kMaxOutputBytes)
        return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
      at = found + from.size();
      ++done;
    }
    result.append(s, at, std::string::npos);
    return make_string(offset, std::move(result), out);
  }

  bool starts_or_ends(size_t offset, const std::string& s, const std::vector<Value>& args, bool ends, Value& out) {
    if (args.size() != 1) return fail(offset, std::string(ends ? "endswith" : "startswith") + "() takes one argument");
    std::vector<Value> candidates;
    if (args[0].is(Kind::kList)) candidates = args[0].list->items;
    else candidates.push_back(args[0]);
    if (!charge(candidates.size())) return false;
    for (const Value& c : candidates) {
      if (!c.is(Kind::kString)) return fail(offset, std::string("startswith()/endswith() take strings, not a ") + kind_name(c));
      const std::string& p = c.str();
      if (!charge(p.size() / 16)) return false;
      if (p.size() <= s.size() && s.compare(ends ? s.size() - p.size() : 0, p.size(), p) == 0) {
        out = Value::of_bool(true);
        return true;
      }
    }
    out = Value::of_bool(false);
    return true;
  }

  bool case_map(size_t offset, const std::string& s, const std::string& how, Value& out) {
    std::string r = s;
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
    return make_string(offset, std::move(r), out);
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
    } else if (object.is(Kind::kDict) && !object.dict->is_namespace) {
      const auto& entries = object.dict->entries;
      if (m == "get") {
        if (args.empty() || args.size() > 2) return fail(e.offset, "get() takes a key and an optional default");
        out = args.size() == 2 ? args[1] : Value::none();
        if (args[0].is(Kind::kString)) {
          if (!charge(entries.size() / 8)) return false;
          if (const Value* v = object.dict->find(args[0].str())) out = *v;
        }
        return true;
      }
      std::vector<Value> items;
      for (const auto& [k, v] : entries) {
        if (m == "keys") {
          items.push_back(Value::of_string(k));
        } else if (m == "values") {
          items.push_back(v);
        } else if (m == "items") {
          Value pair;
          if (!make_list(e.offset, {Value::of_string(k), v}, pair, true)) return false;
          items.push_back(std::move(pair));
        }
      }
      if (m == "keys" || m == "values" || m == "items") return make_list(e.offset, std::move(items), out);
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
    if (!charge(1)) return false;
    if (f == "trim") {
      std::string s;
      if (!to_text(offset, v, s)) return false;
      return strip(offset, s, param(args, kwargs, 0, "chars"), true, true, out);
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
      return make_string(offset, std::move(s), out);
    }
    if (f == "length" || f == "count") {
      switch (v.kind) {
        case Kind::kUndefined: out = Value::of_int(0); return true;
        case Kind::kString:
          if (!charge(v.str().size() / 2)) return false;
          out = Value::of_int(static_cast<int64_t>(count_code_points(v.str())));
          return true;
        case Kind::kList: out = Value::of_int(static_cast<int64_t>(v.list->items.size())); return true;
        case Kind::kDict: out = Value::of_int(static_cast<int64_t>(v.dict->entries.size())); return true;
        default: return fail(offset, std::string("length of a ") + kind_name(v));
      }
    }
    if (f == "lower" || f == "upper" || f == "capitalize" || f == "title") {
      std::string s;
      if (!to_text(offset, v, s)) return false;
      return case_map(offset, s, f, out);
    }
    if (f == "first" || f == "last") {
      out = Value{};
      if (v.is(Kind::kList)) {
        if (!v.list->items.empty()) out = f == "first" ? v.list->items.front() : v.list->items.back();
        return true;
      }
      if (v.is(Kind::kString)) {
        if (v.str().empty()) return true;
        return subscript(offset, v, Value::of_int(f == "first" ? 0 : -1), out);
      }
      if (v.is(Kind::kUndefined)) return true;
      if (v.is(Kind::kDict) && !v.dict->is_namespace) {  // a dict's first or last key
        if (!v.dict->entries.empty()) out = Value::of_string(f == "first" ? v.dict->entries.front().first : v.dict->entries.back().first);
        return true;
      }
      return fail(offset, "|" + f + " of a " + kind_name(v));
    }
    if (f == "join") {
      const Value* separator = param(args, kwargs, 0, "d");
      const Value* attribute_name = param(args, kwargs, 1, "attribute");
      std::string sep;
      if (separator && !to_text(offset, *separator, sep)) return false;
      std::vector<Value> items;
      if (!iterate(offset, v, items)) return false;
      std::string s;
      for (size_t i = 0; i < items.size(); ++i) {
        Value item = items[i];
        if (attribute_name && attribute_name->is(Kind::kString) && !attribute(items[i], attribute_name->str(), item)) return false;
        std::string text;
        if (!to_text(offset, item, text)) return false;
        if (i > 0) s += sep;
        s += text;
        if (s.size() > ChatTemplate::kMaxOutputBytes)
          return fail(offset, "a string longer than " + std::to_string(ChatTemplate::kMaxOutputBytes) + " bytes", ErrorCode::kOutOfMemory);
        if (!charge(1 + text.size() / 64)) return false;
      }
      return make_string(offset, std::move(s), out);
    }
    if (f == "default" || f == "d") {
      const Value* fallback = param(args, kwargs, 0, "default_value");
      const Value* boolean = param(args, kwargs, 1, "boolean");
      const bool use_fallback = v.is(Kind::kUndefined) || (boolean && truthy(*boolean) && !truthy(v));
      out = use_fallback ? (fallback ? *fallback : Value::of_string("")) : v;
      return true;
    }
    if (f == "string") {
      std::string s;
      if (!to_text(offset, v, s)) return false;
      return make_string(offset, std::move(s), out);
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
        const std::string trimmed(lstrip_space(rstrip_space(v.str())));
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
      if (!v.is(Kind::kDict) || v.dict->is_namespace) return fail(offset, std::string("|items of a ") + kind_name(v));
      std::vector<Value> items;
      for (const auto& [k, value] : v.dict->entries) {
        Value pair;
        if (!make_list(offset, {Value::of_string(k), value}, pair, true)) return false;
        items.push_back(std::move(pair));
      }
      return make_list(offset, std::move(items), out);
    }
    if (f == "replace") {
      std::string s;
      if (!to_text(offset, v, s)) return false;
      return replace(offset, s, args, out);
    }
    if (f == "list" || f == "reverse") {
      if (f == "reverse" && v.is(Kind::kString)) {
        if (!charge(1 + v.str().size() / 2) || !account(offset, v.str().size() * sizeof(size_t))) return false;
        const std::vector<size_t> starts = code_point_starts(v.str());
        std::string s;
        for (size_t i = starts.size() - 1; i > 0; --i) s.append(v.str(), starts[i - 1], starts[i] - starts[i - 1]);
        return make_string(offset, std::move(s), out);
      }
      std::vector<Value> items;
      if (!iterate(offset, v, items)) return false;
      if (f == "reverse") std::reverse(items.begin(), items.end());
      return make_list(offset, std::move(items), out);
    }
    if (f == "abs") {
      if (v.is(Kind::kFloat)) out = Value::of_float(std::fabs(v.number));
      else if (is_integral(v) && as_int(v) != INT64_MIN) out = Value::of_int(std::llabs(as_int(v)));
      else return fail(offset, std::string("|abs of a ") + kind_name(v));
      return true;
    }
    // select / reject (test), selectattr / rejectattr (attribute [, test]), map
    std::vector<Value> items;
    if (!iterate(offset, v, items)) return false;
    std::vector<Value> kept;
    if (f == "map") {
      const Value* attribute_name = keyword(kwargs, "attribute");
      if (attribute_name) {
        if (!attribute_name->is(Kind::kString)) return fail(offset, "map(attribute=...) takes a string");
        const Value* fallback = keyword(kwargs, "default");
        for (const Value& item : items) {
          Value mapped;
          if (!attribute(item, attribute_name->str(), mapped)) return false;
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
    std::string attribute_name;
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
      if (by_attribute && !attribute(item, attribute_name, subject)) return false;
      bool passes = false;
      if (test.empty()) passes = truthy(subject);
      else if (!apply_test(offset, test, subject, test_args, passes)) return false;
      if (passes == select) kept.push_back(item);
    }
    return make_list(offset, std::move(kept), out);
  }

  bool apply_test(size_t offset, const std::string& t, const Value& v, const std::vector<Value>& args, bool& result) {
    if (!charge(1)) return false;
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
    else if (t == "iterable") result = v.is(Kind::kUndefined) || v.is(Kind::kString) || v.is(Kind::kList) || (v.is(Kind::kDict) && !v.dict->is_namespace);
    else if (t == "mapping") result = v.is(Kind::kDict) && !v.dict->is_namespace;
    else if (t == "sequence") result = v.is(Kind::kUndefined) || v.is(Kind::kString) || v.is(Kind::kList) || (v.is(Kind::kDict) && !v.dict->is_namespace);
    else if (t == "lower" || t == "upper") {
      std::string s;
      if (!to_text(offset, v, s)) return false;
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
  uint64_t steps_ = 0;
  uint64_t allocated_ = 0;
  Error error_{ErrorCode::kInternal, ""};
  std::vector<Global> scopes_;
  std::vector<std::shared_ptr<DictData>> namespaces_;
};

}  // namespace
}  // namespace chat_template_detail

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  using namespace chat_template_detail;
  if (source.size() > kMaxTemplateBytes)
    return Error{ErrorCode::kFormat, "chat template: " + std::to_string(source.size()) + " bytes, more than the " +
                                         std::to_string(kMaxTemplateBytes) + " allowed"};
  auto program = std::make_shared<Program>();
  program->source = normalize_newlines(source);
  std::vector<Token> tokens;
  Status lexed = Lexer(program->source).run(tokens);
  if (!lexed) return lexed.error();
  Status parsed = Parser(tokens, program->source).run(program->body);
  if (!parsed) return parsed.error();
  ChatTemplate t;
  t.program_ = std::move(program);
  return t;
}

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!program_) return Error{ErrorCode::kInvalidArgument, "chat template: not parsed"};
  chat_template_detail::Renderer renderer(*program_);
  return renderer.run(inputs);
}

}  // namespace petrel::text
