#include "text/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/utf8.h"
#include "text/gbnf.h"
#include "text/json_value.h"

namespace petrel::text {

namespace {

using Node = JsonDocument::Node;
constexpr uint32_t kNone = UINT32_MAX;

const char* const kAnnotations[] = {"title",      "description", "$schema",  "$id",     "$comment", "examples",
                                    "default",    "deprecated",  "readOnly", "writeOnly", "$defs",  "definitions"};

// Keywords by the type they constrain (JSON Schema applies each to values of that type only).
const char* const kObjectKeywords[] = {"properties", "required", "additionalProperties"};
const char* const kArrayKeywords[] = {"items", "prefixItems", "minItems", "maxItems"};
const char* const kStringKeywords[] = {"minLength", "maxLength", "format"};
const char* const kIntegerKeywords[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

template <size_t N>
bool one_of(std::string_view key, const char* const (&list)[N]) {
  for (const char* k : list)
    if (key == k) return true;
  return false;
}

// The primitive rules (llama.cpp's, bounded); each is written once, when first used.
const char* const kSpaceRule = "( \" \" | \"\\n\"{1,2} [ \\t]{0,20} )?";
// After a backslash: an escape; a \u escape of a surrogate only as a high one followed
// by a low one (a lone surrogate is no character: llama.cpp takes one, strict readers
// refuse it, and a pair is then one character for minLength as for the validator).
const char* const kEscape =
    "([\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
    "[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ))";
const char* const kUnescaped = "[^\"\\\\\\x7F\\x00-\\x1F";  // a class left open for more exclusions

std::string pointer_token(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// A GBNF string literal of UTF-8 text.
std::string gbnf_literal(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A code point inside a GBNF character class.
std::string class_char(char32_t c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return std::string(1, static_cast<char>(c));
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\\U";
  for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(c >> shift) & 15];
  return out;
}

std::string repeat_suffix(size_t min, size_t max) {
  if (min == 0 && max == 1) return "?";
  if (min == max) return min == 1 ? "" : "{" + std::to_string(min) + "}";
  return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

// `item` min..max times (max >= 1), `separator` between two (llama.cpp's build_repetition).
std::string repetition(const std::string& item, size_t min, size_t max, const std::string& separator) {
  if (separator.empty()) return "(" + item + ")" + repeat_suffix(min, max);
  std::string out = item;
  if (max > 1) out += " ( " + separator + " " + item + " )" + repeat_suffix(min == 0 ? 0 : min - 1, max - 1);
  if (min == 0) out = "( " + out + " )?";
  return out;
}

// Integers in [from, to], both of `from.size()` digits (llama.cpp's uniform_range). It
// recurses once per digit: at most kSchemaMaxIntegerDigits deep, whatever the input.
void uniform_range(std::string_view from, std::string_view to, std::string& out) {
  size_t i = 0;
  while (i < from.size() && i < to.size() && from[i] == to[i]) ++i;
  if (i > 0) out += "\"" + std::string(from.substr(0, i)) + "\"";
  if (i >= from.size()) return;
  if (i > 0) out += " ";
  const auto digit_range = [&](char a, char b) {
    out += '[';
    out += a;
    if (b != a) {
      out += '-';
      out += b;
    }
    out += ']';
  };
  const size_t sub = from.size() - i - 1;
  if (sub == 0) {
    digit_range(from[i], to[i]);
    return;
  }
  const std::string zeros(sub, '0'), nines(sub, '9');
  const std::string_view from_sub = from.substr(i + 1), to_sub = to.substr(i + 1);
  const std::string more = " [0-9]" + repeat_suffix(sub, sub);
  bool to_reached = false;
  out += "(";
  if (from_sub == zeros) {
    if (to_sub == nines) {
      digit_range(from[i], to[i]);
      to_reached = true;
    } else {
      digit_range(from[i], static_cast<char>(to[i] - 1));
    }
    out += more;
  } else {
    digit_range(from[i], from[i]);
    out += " (";
    uniform_range(from_sub, nines, out);
    out += ")";
    if (from[i] + 1 < to[i] || (from[i] + 1 == to[i] && to_sub == nines)) {
      out += " | ";
      if (to_sub == nines) {
        digit_range(static_cast<char>(from[i] + 1), to[i]);
        to_reached = true;
      } else {
        digit_range(static_cast<char>(from[i] + 1), static_cast<char>(to[i] - 1));
      }
      out += more;
    }
  }
  if (!to_reached) {
    out += " | ";
    digit_range(to[i], to[i]);
    out += " (";
    uniform_range(zeros, to_sub, out);
    out += ")";
  }
  out += ")";
}

// Non-negative integers in [lo, hi] written without leading zeros.
std::string natural_range(int64_t lo, int64_t hi) {
  std::string out;
  std::string from = std::to_string(lo);
  const std::string to = std::to_string(hi);
  for (size_t digits = from.size(); digits < to.size(); ++digits) {
    uniform_range(from, std::string(digits, '9'), out);
    out += " | ";
    from = "1" + std::string(digits, '0');
  }
  uniform_range(from, to, out);
  return out;
}

std::string integer_range(int64_t lo, int64_t hi) {
  if (hi < 0) return "\"-\" (" + natural_range(-hi, -lo) + ")";
  if (lo < 0) return "\"-\" (" + natural_range(1, -lo) + ") | " + natural_range(0, hi);
  return natural_range(lo, hi);
}

class Converter {
 public:
  explicit Converter(const JsonDocument& doc) : d_(doc) {}

  Result<std::string> run() {
    const uint32_t root = d_.root();
    Status s = check_schema_kind(root, "");
    if (!s) return s.error();
    names_.insert("root");
    rules_.push_back({"root", ""});
    work_.push_back({root, 0, ""});
    while (!work_.empty()) {
      const Task t = work_.back();
      work_.pop_back();
      auto body = visit(t);
      if (!body) return body.error();
      // Sub-schemas written alike (a thousand properties of one type) share one rule.
      if (body.value().size() > 32) {
        const auto same = body_rules_.emplace(body.value(), rules_[t.rule].first);
        if (!same.second) body.value() = same.first->second;
      }
      output_bytes_ += body.value().size();
      if (output_bytes_ > kMaxGbnfBytes) return too_big();
      rules_[t.rule].second = std::move(body.value());
    }
    std::string out;
    for (const auto& r : rules_) {
      out += r.first;
      out += " ::= ";
      out += r.second;
      out += '\n';
      if (out.size() > kMaxGbnfBytes) return too_big();
    }
    return out;
  }

 private:
  struct Task {
    uint32_t node;
    size_t rule;          // index in rules_
    std::string pointer;  // the JSON pointer of the schema
  };

  Error too_big() const {
    return Error{ErrorCode::kInvalidArgument,
                 "JSON schema: the grammar would be longer than the limit of " + std::to_string(kMaxGbnfBytes) + " bytes"};
  }
  static Error fail(ErrorCode code, const std::string& pointer, const std::string& what) {
    return Error{code, "JSON schema " + json_quote(pointer) + ": " + what};
  }
  static Error unsupported(const std::string& pointer, const std::string& what) {
    return fail(ErrorCode::kUnsupported, pointer, what);
  }
  static Error invalid(const std::string& pointer, const std::string& what) {
    return fail(ErrorCode::kInvalidArgument, pointer, what);
  }

  Status check_schema_kind(uint32_t n, const std::string& pointer) const {
    const JsonKind k = d_.node(n).kind;
    if (k == JsonKind::kObject) return Status::ok();
    if (k == JsonKind::kBool) {
      if (d_.node(n).boolean) return Status::ok();
      return invalid(pointer, "the schema false accepts no value");
    }
    return invalid(pointer, "a schema must be an object or a boolean");
  }

  // A new rule's name from `hint`: letters, digits and '-', unique.
  std::string new_name(std::string_view hint) {
    std::string base;
    for (const char c : hint) {
      if (base.size() >= 40) break;
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (ok) base += c;
      else if (base.empty() || base.back() != '-') base += '-';
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty()) base = "rule";
    std::string name = base;
    size_t& suffix = next_suffix_[base];  // names taken are never tried twice
    while (names_.count(name) != 0) name = base + "-" + std::to_string(++suffix);
    names_.insert(name);
    return name;
  }
  std::string add_rule(std::string_view hint, std::string body) {
    std::string name = new_name(hint);
    output_bytes_ += body.size();
    rules_.push_back({name, std::move(body)});
    return name;
  }

  // The rule a sub-schema becomes (visited later from the work list).
  Result<std::string> schema_rule(uint32_t n, const std::string& pointer, const std::string& parent, std::string_view hint) {
    Status s = check_schema_kind(n, pointer);
    if (!s) return s.error();
    if (d_.node(n).kind == JsonKind::kBool) return free_value(0);
    // {"type": "boolean"} and its like are the primitive rule itself (as llama.cpp writes them).
    const Node& schema = d_.node(n);
    bool only_type = true;
    for (uint32_t k = 0; k < schema.count && only_type; ++k)
      only_type = d_.key_text(n, k) == "type" || one_of(d_.key_text(n, k), kAnnotations);
    const uint32_t type = d_.find(n, "type");
    if (only_type && type != kNone && d_.node(type).kind == JsonKind::kString) {
      const std::string& t = d_.node(type).text;
      if (t == "null" || t == "boolean" || t == "number" || t == "integer" || t == "string") return primitive(t);
    }
    const std::string name = new_name(parent + "-" + std::string(hint));
    rules_.push_back({name, ""});
    work_.push_back({n, rules_.size() - 1, pointer});
    return name;
  }

  // A primitive rule's name, adding it (and what it uses) the first time.
  std::string primitive(const std::string& name) {
    if (!names_.insert(name).second) return name;
    std::string body;
    if (name == "space") {
      body = kSpaceRule;
    } else if (name == "char") {
      body = std::string(kUnescaped) + "] | [\\\\] " + kEscape;
    } else if (name == "string") {
      body = "\"\\\"\" " + primitive("char") + repeat_suffix(0, kSchemaDefaultMaxLength) + " \"\\\"\" " + primitive("space");
    } else if (name == "integral-part") {
      body = "[0] | [1-9] [0-9]" + repeat_suffix(0, kSchemaMaxIntegerDigits - 1);
    } else if (name == "decimal-part") {
      body = "[0-9]" + repeat_suffix(1, kSchemaMaxIntegerDigits);
    } else if (name == "number") {
      const std::string ip = primitive("integral-part");
      // The exponent has at most two digits (llama.cpp's takes 16): so every number written
      // is below 1e116, a finite double, which every JSON reader can hold.
      body = "(\"-\"? " + ip + ") (\".\" " + primitive("decimal-part") + ")? ([eE] [-+]? [0-9] [0-9]?)? " +
             primitive("space");
    } else if (name == "integer") {
      body = "(\"-\"? " + primitive("integral-part") + ") " + primitive("space");
    } else if (name == "boolean") {
      body = "(\"true\" | \"false\") " + primitive("space");
    } else if (name == "null") {
      body = "\"null\" " + primitive("space");
    } else if (name == "uuid") {
      body = "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} "
             "\"\\\"\" " + primitive("space");
    } else if (name == "date") {
      // llama.cpp's rule takes any day 01-31 in any month and the year 0000; this one is
      // the calendar's (what a validator's date check takes): 30-day months, February's
      // 29th in leap years only, years 0001-9999.
      body = "( [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9] ) \"-\" ( "
             "( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] ) | "
             "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"30\" ) | "
             "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | "
             "( [0-9]{2} ( [02468] [48] | [13579] [26] | [2468] \"0\" ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\" ) "
             "\"-02-29\"";
    } else if (name == "time") {
      body = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) "
             "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )";
    } else if (name == "date-time") {
      body = primitive("date") + " \"T\" " + primitive("time");
    } else if (name == "date-string" || name == "time-string" || name == "date-time-string") {
      body = "\"\\\"\" " + primitive(name.substr(0, name.size() - 7)) + " \"\\\"\" " + primitive("space");
    }
    output_bytes_ += body.size();
    rules_.push_back({name, std::move(body)});
    return name;
  }

  // Any JSON value nesting at most kSchemaFreeValueDepth - depth containers.
  std::string free_value(size_t depth) {
    const std::string name = depth == 0 ? "value" : "value-" + std::to_string(depth);
    if (names_.count(name) != 0) return name;
    names_.insert(name);
    std::string body;
    if (depth < kSchemaFreeValueDepth) body = free_object(depth) + " | " + free_array(depth) + " | ";
    body += primitive("string") + " | " + primitive("number") + " | " + primitive("boolean") + " | " + primitive("null");
    output_bytes_ += body.size();
    rules_.push_back({name, std::move(body)});
    return name;
  }
  std::string free_object(size_t depth) {
    const std::string name = depth == 0 ? "object" : "object-" + std::to_string(depth);
    if (!names_.insert(name).second) return name;
    const size_t at = rules_.size();
    rules_.push_back({name, ""});
    const std::string sp = primitive("space");
    const std::string kv = primitive("string") + " \":\" " + sp + " " + free_value(depth + 1);
    rules_[at].second = "\"{\" " + sp + " " + repetition(kv, 0, kSchemaMaxExtraProperties, "\",\" " + sp) + " \"}\" " + sp;
    output_bytes_ += rules_[at].second.size();
    return name;
  }
  std::string free_array(size_t depth) {
    const std::string name = depth == 0 ? "array" : "array-" + std::to_string(depth);
    if (!names_.insert(name).second) return name;
    const size_t at = rules_.size();
    rules_.push_back({name, ""});
    const std::string sp = primitive("space");
    rules_[at].second = "\"[\" " + sp + " " + repetition(free_value(depth + 1), 0, kSchemaDefaultMaxItems, "\",\" " + sp) +
                        " \"]\" " + sp;
    output_bytes_ += rules_[at].second.size();
    return name;
  }

  // A value as compact JSON (the text a `const` or `enum` value must be written as),
  // walked with an explicit stack.
  std::string compact(uint32_t root) const {
    std::string out;
    struct Frame {
      uint32_t node, next;
    };
    std::vector<Frame> stack;
    const auto scalar = [&](uint32_t n) {
      const Node& v = d_.node(n);
      switch (v.kind) {
        case JsonKind::kNull: out += "null"; break;
        case JsonKind::kBool: out += v.boolean ? "true" : "false"; break;
        case JsonKind::kNumber: out += v.text; break;
        case JsonKind::kString: out += json_quote(v.text); break;
        case JsonKind::kArray: out += '['; stack.push_back({n, 0}); break;
        case JsonKind::kObject: out += '{'; stack.push_back({n, 0}); break;
      }
    };
    scalar(root);
    while (!stack.empty()) {
      Frame& f = stack.back();
      const Node& c = d_.node(f.node);
      if (f.next == c.count) {
        out += c.kind == JsonKind::kArray ? ']' : '}';
        stack.pop_back();
        continue;
      }
      const uint32_t k = f.next++;
      if (k > 0) out += ',';
      if (c.kind == JsonKind::kObject) {
        out += json_quote(d_.key_text(f.node, k));
        out += ':';
      }
      scalar(d_.child(f.node, k));
    }
    return out;
  }

  static bool value_has_type(const JsonDocument& d, uint32_t v, std::string_view type) {
    const Node& n = d.node(v);
    if (type == "null") return n.kind == JsonKind::kNull;
    if (type == "boolean") return n.kind == JsonKind::kBool;
    if (type == "string") return n.kind == JsonKind::kString;
    if (type == "array") return n.kind == JsonKind::kArray;
    if (type == "object") return n.kind == JsonKind::kObject;
    if (type == "number") return n.kind == JsonKind::kNumber;
    int64_t unused = 0;
    if (type == "integer") return n.kind == JsonKind::kNumber && d.integer_value(v, &unused);
    return false;
  }

  Result<size_t> count_keyword(uint32_t schema, const std::string& pointer, const char* key, size_t cap) {
    const uint32_t v = d_.find(schema, key);
    const std::string at = pointer + "/" + key;
    int64_t n = 0;
    if (!d_.integer_value(v, &n) || n < 0) return invalid(at, json_quote(key) + " must be a non-negative integer");
    return static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(cap)));
  }

  Result<std::string> visit(const Task& t) {
    const uint32_t s = t.node;
    const Node& n = d_.node(s);
    const std::string name = rules_[t.rule].first;  // a copy: rules_ grows
    if (n.kind == JsonKind::kBool) return free_value(0);
    // Which keywords stand here; any other is refused.
    bool has_type_keywords[4] = {false, false, false, false};  // object, array, string, integer
    std::vector<std::string> constraints;  // the non-annotation keywords, in order
    for (uint32_t k = 0; k < n.count; ++k) {
      const std::string& key = d_.key_text(s, k);
      if (one_of(key, kAnnotations)) continue;
      const bool known = key == "type" || key == "$ref" || key == "anyOf" || key == "oneOf" || key == "enum" ||
                         key == "const";
      if (one_of(key, kObjectKeywords)) has_type_keywords[0] = true;
      else if (one_of(key, kArrayKeywords)) has_type_keywords[1] = true;
      else if (one_of(key, kStringKeywords)) has_type_keywords[2] = true;
      else if (one_of(key, kIntegerKeywords)) has_type_keywords[3] = true;
      else if (!known)
        return unsupported(t.pointer + "/" + pointer_token(key), json_quote(key) + " is not supported");
      constraints.push_back(key);
    }
    const auto alone = [&](const char* keyword, std::initializer_list<const char*> allowed) -> Status {
      for (const std::string& c : constraints) {
        if (c == keyword) continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || c == a;
        if (!ok)
          return unsupported(t.pointer + "/" + pointer_token(c),
                             json_quote(c) + " cannot be combined with " + json_quote(keyword));
      }
      return Status::ok();
    };

    if (d_.find(s, "$ref") != kNone) {
      Status a = alone("$ref", {});
      if (!a) return a.error();
      return resolve_ref(d_.find(s, "$ref"), t.pointer + "/$ref");
    }
    for (const char* union_key : {"anyOf", "oneOf"}) {
      const uint32_t list = d_.find(s, union_key);
      if (list == kNone) continue;
      Status a = alone(union_key, {});
      if (!a) return a.error();
      const std::string at = t.pointer + "/" + union_key;
      if (d_.node(list).kind != JsonKind::kArray || d_.node(list).count == 0)
        return invalid(at, json_quote(union_key) + " must be a non-empty array of schemas");
      std::string body;
      for (uint32_t i = 0; i < d_.node(list).count; ++i) {
        const uint32_t alt = d_.child(list, i);
        if (d_.node(alt).kind == JsonKind::kBool && !d_.node(alt).boolean) continue;  // matches nothing
        auto r = schema_rule(alt, at + "/" + std::to_string(i), name, std::to_string(i));
        if (!r) return r.error();
        if (!body.empty()) body += " | ";
        body += r.value();
      }
      if (body.empty()) return invalid(at, "every alternative is the schema false");
      return body;
    }

    // The types allowed: `type`, or those the keywords constrain.
    static const char* const kTypes[] = {"object", "array", "string", "integer", "number", "boolean", "null"};
    std::vector<std::string> types;
    const uint32_t type = d_.find(s, "type");
    if (type != kNone) {
      const std::string at = t.pointer + "/type";
      const Node& tn = d_.node(type);
      std::vector<uint32_t> names;
      if (tn.kind == JsonKind::kString) names.push_back(type);
      else if (tn.kind == JsonKind::kArray && tn.count > 0)
        for (uint32_t i = 0; i < tn.count; ++i) names.push_back(d_.child(type, i));
      else return invalid(at, "\"type\" must be a type name or a non-empty array of them");
      for (const uint32_t v : names) {
        if (d_.node(v).kind != JsonKind::kString || !one_of(d_.node(v).text, kTypes))
          return invalid(at, "\"type\" names object, array, string, integer, number, boolean or null");
        if (std::find(types.begin(), types.end(), d_.node(v).text) == types.end()) types.push_back(d_.node(v).text);
      }
      const auto has = [&](const char* ty) { return std::find(types.begin(), types.end(), ty) != types.end(); };
      const char* const kGroupType[] = {"object", "array", "string", "integer"};
      for (const std::string& c : constraints) {
        int group = one_of(c, kObjectKeywords) ? 0 : one_of(c, kArrayKeywords) ? 1 : one_of(c, kStringKeywords) ? 2
                                                 : one_of(c, kIntegerKeywords) ? 3 : -1;
        if (group < 0) continue;
        if (group == 3 && has("number"))
          return unsupported(t.pointer + "/" + c, json_quote(c) + " is supported for integers only, not numbers");
        if (!has(kGroupType[group]))
          return invalid(t.pointer + "/" + c, json_quote(c) + " constrains " + kGroupType[group] +
                                                  "s, and \"type\" allows none");
      }
    } else {
      if (has_type_keywords[3])
        return unsupported(t.pointer, "\"minimum\" and \"maximum\" need \"type\": \"integer\"");
      if (has_type_keywords[0]) types.push_back("object");
      if (has_type_keywords[1]) types.push_back("array");
      if (has_type_keywords[2]) types.push_back("string");
    }

    const uint32_t const_value = d_.find(s, "const"), enum_list = d_.find(s, "enum");
    if (const_value != kNone || enum_list != kNone) {
      const char* keyword = const_value != kNone ? "const" : "enum";
      Status a = alone(keyword, {"type"});
      if (!a) return a.error();
      std::vector<uint32_t> values;
      if (const_value != kNone) {
        values.push_back(const_value);
      } else {
        if (d_.node(enum_list).kind != JsonKind::kArray || d_.node(enum_list).count == 0)
          return invalid(t.pointer + "/enum", "\"enum\" must be a non-empty array");
        for (uint32_t i = 0; i < d_.node(enum_list).count; ++i) values.push_back(d_.child(enum_list, i));
      }
      std::vector<std::string> texts;
      std::unordered_set<std::string> seen;
      for (const uint32_t v : values) {
        bool ok = types.empty();
        for (const std::string& ty : types) ok = ok || value_has_type(d_, v, ty);
        if (!ok) continue;  // a value the type refuses is no valid instance
        std::string text = compact(v);
        output_bytes_ += text.size();
        if (output_bytes_ > kMaxGbnfBytes) return too_big();
        if (seen.insert(text).second) texts.push_back(std::move(text));
      }
      if (texts.empty()) return invalid(t.pointer + "/" + keyword, std::string("no value of ") + json_quote(keyword) +
                                                                       " has a type that \"type\" allows");
      return "( " + literals(texts, name) + " ) " + primitive("space");
    }

    if (types.empty()) return free_value(0);
    std::string body;
    for (const std::string& ty : types) {
      auto alt = type_rule(t, ty);
      if (!alt) return alt.error();
      if (!body.empty()) body += " | ";
      body += types.size() > 1 ? "( " + alt.value() + " )" : alt.value();
    }
    return body;
  }

  // Alternatives of literal texts. Up to kFlatLiterals of them side by side (llama.cpp's
  // form); more share their prefixes in a trie, a rule per branching node, so that a
  // matcher follows one path per character, not one per value.
  std::string literals(const std::vector<std::string>& texts, const std::string& name) {
    constexpr size_t kFlatLiterals = 16;
    if (texts.size() <= kFlatLiterals) {
      std::string body;
      for (const std::string& text : texts) body += (body.empty() ? "" : " | ") + gbnf_literal(text);
      return body;
    }
    struct TrieNode {
      std::map<char32_t, uint32_t> children;
      bool end = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& text : texts) {
      uint32_t at = 0;
      for (size_t i = 0; i < text.size();) {
        const detail::CodePoint cp = detail::utf8_decode(text, i);
        i += cp.length;
        auto it = trie[at].children.find(cp.value);
        if (it == trie[at].children.end()) {
          trie.push_back(TrieNode{});
          it = trie[at].children.emplace(cp.value, static_cast<uint32_t>(trie.size() - 1)).first;
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    // The alternatives of a node: each child's run of single-child nodes as one literal,
    // then the rule of the node where the run branches (made and filled from `pending`).
    std::vector<std::pair<uint32_t, size_t>> pending;  // node, its rule in rules_
    const auto alternatives = [&](uint32_t v) {
      std::string body;
      for (const auto& c : trie[v].children) {
        std::string run;
        uint32_t at = c.second;
        detail::append_utf8(run, c.first);
        while (!trie[at].end && trie[at].children.size() == 1) {
          detail::append_utf8(run, trie[at].children.begin()->first);
          at = trie[at].children.begin()->second;
        }
        body += (body.empty() ? "" : " | ") + gbnf_literal(run);
        if (!trie[at].children.empty()) {
          const std::string rule = new_name(name + "-literal");
          rules_.push_back({rule, ""});
          pending.push_back({at, rules_.size() - 1});
          body += " " + rule;
        }
      }
      if (trie[v].end) body = "( " + body + " )?";
      return body;
    };
    std::string root = alternatives(0);
    while (!pending.empty()) {
      const auto [v, rule] = pending.back();
      pending.pop_back();
      std::string body = alternatives(v);
      output_bytes_ += body.size();
      rules_[rule].second = std::move(body);
    }
    return root;
  }

  Result<std::string> resolve_ref(uint32_t ref, const std::string& at) {
    if (d_.node(ref).kind != JsonKind::kString) return invalid(at, "\"$ref\" must be a string");
    const std::string& text = d_.node(ref).text;
    if (text.empty() || text[0] != '#')
      return unsupported(at, "$ref " + json_quote(text) + " is not supported: only local references (\"#/...\")");
    // Walk the JSON pointer after '#'.
    uint32_t target = d_.root();
    std::string pointer;
    size_t i = 1;
    if (text.size() > 1 && text[1] != '/') return invalid(at, "$ref " + json_quote(text) + " is not a JSON pointer");
    while (i < text.size()) {
      size_t end = text.find('/', i + 1);
      if (end == std::string::npos) end = text.size();
      std::string token;
      for (size_t j = i + 1; j < end; ++j) {
        if (text[j] == '~' && j + 1 < end && (text[j + 1] == '0' || text[j + 1] == '1')) {
          token += text[j + 1] == '0' ? '~' : '/';
          ++j;
        } else if (text[j] == '~') {
          return invalid(at, "$ref " + json_quote(text) + " has a '~' that is not ~0 or ~1");
        } else {
          token += text[j];
        }
      }
      const Node& tn = d_.node(target);
      uint32_t next = kNone;
      if (tn.kind == JsonKind::kObject) {
        next = d_.find(target, token);
      } else if (tn.kind == JsonKind::kArray && !token.empty() && token.size() < 10 &&
                 token.find_first_not_of("0123456789") == std::string::npos && (token == "0" || token[0] != '0')) {
        const unsigned long k = std::stoul(token);
        if (k < tn.count) next = d_.child(target, static_cast<uint32_t>(k));
      }
      if (next == kNone) return invalid(at, "$ref " + json_quote(text) + " points to nothing in the schema");
      target = next;
      pointer += "/" + pointer_token(token);
      i = end;
    }
    auto known = ref_rules_.find(target);
    if (known != ref_rules_.end()) return known->second;
    auto r = schema_rule(target, pointer, "ref", pointer);
    if (!r) return r.error();
    ref_rules_.emplace(target, r.value());
    return r.value();
  }

  Result<std::string> type_rule(const Task& t, const std::string& type) {
    if (type == "null" || type == "boolean" || type == "number") return primitive(type);
    if (type == "integer") return integer_rule(t);
    if (type == "string") return string_rule(t);
    if (type == "array") return array_rule(t);
    return object_rule(t);
  }

  Result<std::string> integer_rule(const Task& t) {
    const uint32_t s = t.node;
    constexpr int64_t kBound = 9999999999999999;  // the largest 16-digit integer
    int64_t lo = -kBound, hi = kBound;
    bool bounded = false;
    for (const char* key : kIntegerKeywords) {
      const uint32_t v = d_.find(s, key);
      if (v == kNone) continue;
      bounded = true;
      if (d_.node(v).kind != JsonKind::kNumber)
        return invalid(t.pointer + "/" + key, json_quote(key) + " must be a number");
      const double x = d_.number_value(v);
      const std::string k = key;
      // The integers the keyword allows start (or end) here.
      double edge = k == "minimum" ? std::ceil(x) : k == "exclusiveMinimum" ? std::floor(x) + 1
                    : k == "maximum" ? std::floor(x) : std::ceil(x) - 1;
      if (k == "minimum" || k == "exclusiveMinimum") {
        if (edge > static_cast<double>(kBound))
          return unsupported(t.pointer + "/" + key, "no integer of at most 16 digits is allowed");
        if (edge > static_cast<double>(lo)) lo = static_cast<int64_t>(edge);
      } else {
        if (edge < -static_cast<double>(kBound))
          return unsupported(t.pointer + "/" + key, "no integer of at most 16 digits is allowed");
        if (edge < static_cast<double>(hi)) hi = static_cast<int64_t>(edge);
      }
    }
    if (!bounded) return primitive("integer");
    if (lo > hi) return invalid(t.pointer, "no integer is within its minimum and maximum");
    return "(" + integer_range(lo, hi) + ") " + primitive("space");
  }

  Result<std::string> string_rule(const Task& t) {
    const uint32_t s = t.node;
    const uint32_t format = d_.find(s, "format");
    const bool lengths = d_.find(s, "minLength") != kNone || d_.find(s, "maxLength") != kNone;
    if (format != kNone) {
      const std::string at = t.pointer + "/format";
      if (d_.node(format).kind != JsonKind::kString) return invalid(at, "\"format\" must be a string");
      const std::string& f = d_.node(format).text;
      if (f != "date" && f != "time" && f != "date-time" && f != "uuid")
        return unsupported(at, "format " + json_quote(f) + " is not supported (date, time, date-time, uuid are)");
      if (lengths) return unsupported(at, "\"format\" cannot be combined with \"minLength\" or \"maxLength\"");
      return primitive(f == "uuid" ? "uuid" : f + "-string");
    }
    if (!lengths) return primitive("string");
    size_t min = 0, max = kSchemaDefaultMaxLength;
    if (d_.find(s, "minLength") != kNone) {
      auto m = count_keyword(s, t.pointer, "minLength", kSchemaMaxLength + 1);
      if (!m) return m.error();
      if (m.value() > kSchemaMaxLength)
        return unsupported(t.pointer + "/minLength", "a minLength over " + std::to_string(kSchemaMaxLength));
      min = m.value();
      max = std::max(max, min);
    }
    if (d_.find(s, "maxLength") != kNone) {
      auto m = count_keyword(s, t.pointer, "maxLength", kSchemaMaxLength);
      if (!m) return m.error();
      max = m.value();
    }
    if (min > max) return invalid(t.pointer, "minLength is over maxLength");
    const std::string quote = "\"\\\"\"";
    if (max == 0) return quote + " " + quote + " " + primitive("space");
    return quote + " " + primitive("char") + repeat_suffix(min, max) + " " + quote + " " + primitive("space");
  }

  Result<std::string> array_rule(const Task& t) {
    const uint32_t s = t.node;
    const std::string name = rules_[t.rule].first;  // a copy: rules_ grows
    const std::string sp = primitive("space");
    const std::string comma = "\",\" " + sp;
    std::vector<std::string> prefix;
    const uint32_t prefix_items = d_.find(s, "prefixItems");
    if (prefix_items != kNone) {
      const std::string at = t.pointer + "/prefixItems";
      if (d_.node(prefix_items).kind != JsonKind::kArray) return invalid(at, "\"prefixItems\" must be an array of schemas");
      for (uint32_t i = 0; i < d_.node(prefix_items).count; ++i) {
        const uint32_t item = d_.child(prefix_items, i);
        if (d_.node(item).kind == JsonKind::kBool && !d_.node(item).boolean)
          return unsupported(at + "/" + std::to_string(i), "a prefix item that is the schema false");
        auto r = schema_rule(item, at + "/" + std::to_string(i), name, "item-" + std::to_string(i));
        if (!r) return r.error();
        prefix.push_back(r.value());
      }
    }
    // The schema of the elements after the prefix (none when `items` is false).
    std::string rest;
    bool rest_allowed = true;
    const uint32_t items = d_.find(s, "items");
    if (items == kNone) {
      rest = free_value(0);
    } else if (d_.node(items).kind == JsonKind::kArray) {
      return unsupported(t.pointer + "/items", "\"items\" as an array (write \"prefixItems\")");
    } else if (d_.node(items).kind == JsonKind::kBool && !d_.node(items).boolean) {
      rest_allowed = false;
    } else {
      auto r = schema_rule(items, t.pointer + "/items", name, "item");
      if (!r) return r.error();
      rest = r.value();
    }
    size_t min = 0;
    size_t max = rest_allowed ? std::max(kSchemaDefaultMaxItems, prefix.size()) : prefix.size();
    if (d_.find(s, "minItems") != kNone) {
      auto m = count_keyword(s, t.pointer, "minItems", kSchemaMaxItems + 1);
      if (!m) return m.error();
      if (m.value() > kSchemaMaxItems)
        return unsupported(t.pointer + "/minItems", "a minItems over " + std::to_string(kSchemaMaxItems));
      min = m.value();
      if (rest_allowed) max = std::max(max, min);
    }
    if (d_.find(s, "maxItems") != kNone) {
      auto m = count_keyword(s, t.pointer, "maxItems", kSchemaMaxItems);
      if (!m) return m.error();
      max = std::min(max, m.value());
    }
    if (min > max) return invalid(t.pointer, "no array length satisfies minItems, maxItems and items");
    const std::string open = "\"[\" " + sp + " ", close = " \"]\" " + sp;
    if (max == 0) return open + close.substr(1);
    if (prefix.empty()) return open + repetition(rest, min, max, comma) + close;
    // Elements i.. of an array with a prefix, one rule per prefix position (a chain, so
    // nothing nests with the prefix's length).
    const size_t positions = std::min(prefix.size(), max);
    std::vector<size_t> from(positions);
    for (size_t i = 0; i < positions; ++i) {
      from[i] = rules_.size();
      rules_.push_back({new_name(name + "-from-" + std::to_string(i)), ""});
    }
    for (size_t i = 0; i < positions; ++i) {
      std::string body = (i > 0 ? comma + " " : std::string()) + prefix[i];
      if (i + 1 < positions) {
        body += " " + rules_[from[i + 1]].first + (i + 1 < min ? "" : "?");
      } else if (i + 1 < max) {  // the elements after the prefix
        const size_t rest_min = min > positions ? min - positions : 0;
        body += " ( " + comma + " " + rest + " )" + repeat_suffix(rest_min, max - positions);
      }
      output_bytes_ += body.size();
      rules_[from[i]].second = std::move(body);
    }
    return open + rules_[from[0]].first + (min == 0 ? "?" : "") + close;
  }

  Result<std::string> object_rule(const Task& t) {
    const uint32_t s = t.node;
    const std::string name = rules_[t.rule].first;  // a copy: rules_ grows
    const std::string sp = primitive("space");
    const std::string comma = "\",\" " + sp;
    const uint32_t properties = d_.find(s, "properties"), required = d_.find(s, "required"),
                   additional = d_.find(s, "additionalProperties");
    if (properties != kNone && d_.node(properties).kind != JsonKind::kObject)
      return invalid(t.pointer + "/properties", "\"properties\" must be an object");
    // Extra keys: llama.cpp's default is none when there are properties, any otherwise.
    bool extras = properties == kNone;
    uint32_t extra_schema = kNone;
    if (additional != kNone) {
      const Node& a = d_.node(additional);
      if (a.kind == JsonKind::kBool) {
        extras = a.boolean;
      } else if (a.kind == JsonKind::kObject) {
        extras = true;
        extra_schema = additional;
      } else {
        return invalid(t.pointer + "/additionalProperties", "\"additionalProperties\" must be a schema");
      }
    }
    if (properties == kNone && required == kNone && extras && extra_schema == kNone) return free_object(0);

    std::unordered_set<std::string> required_names, property_names;
    if (properties != kNone)
      for (uint32_t k = 0; k < d_.node(properties).count; ++k) property_names.insert(d_.key_text(properties, k));
    if (required != kNone) {
      const std::string at = t.pointer + "/required";
      if (d_.node(required).kind != JsonKind::kArray) return invalid(at, "\"required\" must be an array of names");
      for (uint32_t i = 0; i < d_.node(required).count; ++i) {
        const uint32_t r = d_.child(required, i);
        if (d_.node(r).kind != JsonKind::kString) return invalid(at, "\"required\" must be an array of names");
        if (property_names.count(d_.node(r).text) == 0)
          return unsupported(at + "/" + std::to_string(i),
                             "required property " + json_quote(d_.node(r).text) + " is not in \"properties\"");
        required_names.insert(d_.node(r).text);
      }
    }
    std::vector<std::string> required_kv, optional_kv;
    std::vector<std::string> names;
    const uint32_t count = properties == kNone ? 0 : d_.node(properties).count;
    for (uint32_t k = 0; k < count; ++k) {
      const std::string& key = d_.key_text(properties, k);
      const uint32_t sub = d_.child(properties, k);
      const std::string at = t.pointer + "/properties/" + pointer_token(key);
      if (d_.node(sub).kind == JsonKind::kBool && !d_.node(sub).boolean) {
        if (required_names.count(key) != 0) return invalid(at, "a required property whose schema is false");
        continue;  // the property may not appear
      }
      auto value = schema_rule(sub, at, name, key);
      if (!value) return value.error();
      std::string kv = add_rule(name + "-" + key + "-kv",
                                gbnf_literal(json_quote(key)) + " " + sp + " \":\" " + sp + " " + value.value());
      (required_names.count(key) != 0 ? required_kv : optional_kv).push_back(kv);
      names.push_back(key);
    }
    bool has_extras = false;
    if (extras) {
      std::string value;
      if (extra_schema != kNone) {
        auto r = schema_rule(extra_schema, t.pointer + "/additionalProperties", name, "additional");
        if (!r) return r.error();
        value = r.value();
      } else {
        value = free_value(0);
      }
      std::string key;
      if (names.empty()) {
        key = primitive("string");
      } else {
        auto k = other_key_rule(t, names);
        if (!k) return k.error();
        key = k.value();
      }
      optional_kv.push_back(add_rule(name + "-additional-kv", key + " \":\" " + sp + " " + value));
      has_extras = true;
    }
    if (output_bytes_ > kMaxGbnfBytes) return too_big();

    std::string body = "\"{\" " + sp;
    for (size_t i = 0; i < required_kv.size(); ++i) body += (i > 0 ? " " + comma + " " : " ") + required_kv[i];
    if (!optional_kv.empty()) {
      // llama.cpp's optional properties: any subsequence in order; alternative i starts
      // with property i, and rest-j is ("," kv_j)? rest-(j+1).
      const size_t m = optional_kv.size();
      const auto is_extra = [&](size_t j) { return has_extras && j + 1 == m; };
      const auto extra_repeat = [&](size_t min) {
        return repeat_suffix(min, kSchemaMaxExtraProperties);
      };
      std::vector<std::string> rest(m + 1);
      for (size_t j = m; j-- > 1;) {
        std::string r = "( " + comma + " " + optional_kv[j] + " )" + (is_extra(j) ? extra_repeat(0) : "?");
        if (j + 1 < m) r += " " + rest[j + 1];
        rest[j] = add_rule(name + "-rest-" + std::to_string(j), r);
      }
      std::string alternatives;
      for (size_t i = 0; i < m; ++i) {
        if (i > 0) alternatives += " | ";
        if (is_extra(i)) {
          alternatives += optional_kv[i];
          if (kSchemaMaxExtraProperties > 1)
            alternatives += " ( " + comma + " " + optional_kv[i] + " )" + repeat_suffix(0, kSchemaMaxExtraProperties - 1);
        } else {
          alternatives += optional_kv[i] + (i + 1 < m ? " " + rest[i + 1] : "");
        }
      }
      body += required_kv.empty() ? " ( " + alternatives + " )?" : " ( " + comma + " ( " + alternatives + " ) )?";
    }
    return body + " \"}\" " + sp;
  }

  // A key (a JSON string and its space) that is none of `names` (llama.cpp's
  // _not_strings): a trie of the names, a rule per node; at most kSchemaDefaultMaxLength
  // characters (or one more than the longest name).
  Result<std::string> other_key_rule(const Task& t, const std::vector<std::string>& names) {
    struct TrieNode {
      std::map<char32_t, uint32_t> children;
      bool end = false;
      uint32_t depth = 0;
    };
    std::vector<TrieNode> trie(1);
    size_t longest = 0;
    for (const std::string& key : names) {
      uint32_t at = 0;
      size_t length = 0;
      for (size_t i = 0; i < key.size();) {
        const detail::CodePoint cp = detail::utf8_decode(key, i);
        i += cp.length;
        if (cp.value < 0x20 || cp.value == '"' || cp.value == '\\' || cp.value == 0x7f)
          return unsupported(t.pointer + "/properties/" + pointer_token(key),
                             "additional properties beside a property name that JSON escapes");
        auto it = trie[at].children.find(cp.value);
        if (it == trie[at].children.end()) {
          trie.push_back(TrieNode{});
          trie.back().depth = trie[at].depth + 1;
          it = trie[at].children.emplace(cp.value, static_cast<uint32_t>(trie.size() - 1)).first;
        }
        at = it->second;
        ++length;
      }
      trie[at].end = true;
      longest = std::max(longest, length);
    }
    const size_t limit = std::max(kSchemaDefaultMaxLength, longest + 1);
    if (limit > kSchemaMaxLength)
      return unsupported(t.pointer + "/properties", "additional properties beside a property name of over " +
                                                        std::to_string(kSchemaMaxLength - 1) + " characters");
    const std::string ch = primitive("char");
    const std::string base = rules_[t.rule].first + "-other-key";
    std::vector<std::string> node_rule(trie.size());
    for (size_t v = 0; v < trie.size(); ++v) node_rule[v] = new_name(base);
    for (size_t v = 0; v < trie.size(); ++v) {
      const TrieNode& tn = trie[v];
      if (v > 0 && tn.children.empty()) continue;  // a whole name: its parent writes what may follow
      std::string body, excluded;
      const size_t left = limit - tn.depth;  // characters that may still come (>= 1)
      for (const auto& c : tn.children) {
        const TrieNode& child = trie[c.second];
        excluded += class_char(c.first);
        if (!body.empty()) body += " | ";
        body += "[" + class_char(c.first) + "] ";
        if (child.children.empty()) body += ch + repeat_suffix(1, left - 1);  // a name: one more character at least
        else body += node_rule[c.second];
      }
      if (!body.empty()) body += " | ";
      body += "( " + std::string(kUnescaped) + excluded + "] | [\\\\] " + kEscape + " )";
      if (left > 1) body += " " + ch + repeat_suffix(0, left - 1);
      if (!tn.end) body = "( " + body + " )?";
      output_bytes_ += body.size();
      if (output_bytes_ > kMaxGbnfBytes) return too_big();
      rules_.push_back({node_rule[v], std::move(body)});
    }
    return add_rule(base, "\"\\\"\" " + node_rule[0] + " \"\\\"\" " + primitive("space"));
  }

  const JsonDocument& d_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, size_t> next_suffix_;
  std::vector<Task> work_;
  std::unordered_map<uint32_t, std::string> ref_rules_;  // a $ref target -> its rule
  std::unordered_map<std::string, std::string> body_rules_;  // a visited schema's rule body -> its rule
  size_t output_bytes_ = 0;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema) {
  try {
    auto doc = parse_json(schema);
    if (!doc) return Error{doc.error().code, "JSON schema: " + doc.error().message};
    auto gbnf = Converter(doc.value()).run();
    if (!gbnf) return gbnf;
    // What is returned compiles: a cycle of $ref that reads no character ({"$ref": "#"},
    // {"anyOf": [{"$ref": "#"}]}) is GBNF's left recursion, and a grammar past GBNF's
    // limits is refused here, as the schema's error.
    auto compiled = parse_gbnf(gbnf.value());
    if (!compiled) {
      const bool cycle = compiled.error().message.find("left recursion") != std::string::npos;
      return Error{compiled.error().code == ErrorCode::kOutOfMemory ? ErrorCode::kOutOfMemory : ErrorCode::kInvalidArgument,
                   std::string("JSON schema: ") +
                       (cycle ? "a cycle of $ref that reads no character (" : "the grammar is past GBNF's limits (") +
                       compiled.error().message + ")"};
    }
    return gbnf;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "JSON schema: out of memory"};
  }
}

}  // namespace petrel::text
