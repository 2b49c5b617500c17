// A JSON Schema validator for the tests (json_schema_validator.h): python3-jsonschema
// 4.10.3's Draft 2020-12 semantics over the fixtures' subset, written from its
// _validators.py, _format.py and _utils.py (and CPython 3.11's date.fromisoformat and
// int(text, 16), which its format checks call).
#include "support/json_schema_validator.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace petrel::test {
namespace json_schema_validator_detail {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw std::invalid_argument("JSON schema at \"" + where + "\": " + what);
}

// An integer as a sign and a magnitude: nlohmann keeps int64 and uint64 apart.
struct WideInteger {
  bool negative = false;
  uint64_t magnitude = 0;
};

WideInteger wide_of(const json& v) {
  if (v.is_number_unsigned()) return {false, v.get<uint64_t>()};
  const int64_t i = v.get<int64_t>();
  return i < 0 ? WideInteger{true, uint64_t{0} - static_cast<uint64_t>(i)} : WideInteger{false, static_cast<uint64_t>(i)};
}

int compare_wide(const WideInteger& a, const WideInteger& b) {
  if (a.magnitude == 0 && b.magnitude == 0) return 0;
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int by_magnitude = a.magnitude < b.magnitude ? -1 : a.magnitude > b.magnitude ? 1 : 0;
  return a.negative ? -by_magnitude : by_magnitude;
}

constexpr int kUnordered = 2;

// An integer against a double, exactly (as Python compares int with float).
int compare_wide_double(const WideInteger& a, double d) {
  if (std::isnan(d)) return kUnordered;
  constexpr double two_64 = 18446744073709551616.0;
  if (d >= two_64) return -1;
  if (d <= -two_64) return 1;
  const double whole = std::trunc(d);
  const WideInteger w{whole < 0, static_cast<uint64_t>(std::fabs(whole))};  // exact: |whole| < 2^64
  const int c = compare_wide(a, w);
  if (c != 0) return c;
  const double fraction = d - whole;
  return fraction > 0 ? -1 : fraction < 0 ? 1 : 0;
}

// -1, 0, 1, or kUnordered (NaN): numbers compared by value, whatever their representation.
int compare_numbers(const json& a, const json& b) {
  const bool a_float = a.is_number_float(), b_float = b.is_number_float();
  if (!a_float && !b_float) return compare_wide(wide_of(a), wide_of(b));
  if (a_float && b_float) {
    const double x = a.get<double>(), y = b.get<double>();
    if (std::isnan(x) || std::isnan(y)) return kUnordered;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (b_float) return compare_wide_double(wide_of(a), b.get<double>());
  const int c = compare_wide_double(wide_of(b), a.get<double>());
  return c == kUnordered ? c : -c;
}

// Python's == on values json.loads made, where a boolean is the number 0 or 1 unless
// `strict_bools` (python3-jsonschema's `equal`/`unbool`, which keep them apart).
// `strict_children`: the same for the values inside containers.
bool same_value(const json& a, const json& b, bool strict_bools, bool strict_children, size_t depth) {
  if (depth > kJsonSchemaValidatorDepth) refuse("", "values nested past the validator's depth");
  const auto as_number = [&](const json& v) { return v.is_number() || (!strict_bools && v.is_boolean()); };
  if (as_number(a) && as_number(b)) {
    const json x = a.is_boolean() ? json(a.get<bool>() ? 1 : 0) : a;
    const json y = b.is_boolean() ? json(b.get<bool>() ? 1 : 0) : b;
    return compare_numbers(x, y) == 0;
  }
  if (a.is_boolean() && b.is_boolean()) return a.get<bool>() == b.get<bool>();
  if (a.is_null() || b.is_null()) return a.is_null() && b.is_null();
  if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.get_ref<const std::string&>() == b.get_ref<const std::string&>();
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same_value(a[i], b[i], strict_children, strict_children, depth + 1)) return false;
    return true;
  }
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto other = b.find(it.key());
      if (other == b.end() || !same_value(it.value(), *other, strict_children, strict_children, depth + 1)) return false;
    }
    return true;
  }
  return false;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool leap_year(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }
int days_in_month(int y, int m) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap_year(y) ? 29 : days[m - 1];
}

// Days since 0001-01-01 (day 1), as CPython's ymd_to_ord.
int64_t ordinal_of(int y, int m, int d) {
  const int64_t py = y - 1;
  int64_t days = py * 365 + py / 4 - py / 100 + py / 400;
  for (int k = 1; k < m; ++k) days += days_in_month(y, k);
  return days + d;
}

// The calendar date of ordinal `ordinal`, as CPython's ord_to_ymd (by years, then months).
bool date_of_ordinal(int64_t ordinal, int* y, int* m, int* d) {
  if (ordinal < 1) return false;
  int year = 1;
  // 146097 days per 400 years: jump whole cycles, then walk (at most 400 years).
  const int64_t cycles = (ordinal - 1) / 146097;
  year += static_cast<int>(cycles * 400);
  int64_t left = ordinal - cycles * 146097;
  while (left > (leap_year(year) ? 366 : 365)) {
    left -= leap_year(year) ? 366 : 365;
    ++year;
  }
  int month = 1;
  while (left > days_in_month(year, month)) left -= days_in_month(year, month++);
  *y = year;
  *m = month;
  *d = static_cast<int>(left);
  return true;
}

// `n` ASCII digits at s[at..]; false past the end (CPython's parse_digits reads the NUL).
bool digits_at(const std::string& s, size_t at, size_t n, int* value) {
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    if (at + k >= s.size() || !is_digit(s[at + k])) return false;
    v = v * 10 + (s[at + k] - '0');
  }
  *value = v;
  return true;
}

// python3-jsonschema's "date": s.isascii() and CPython 3.11's date.fromisoformat(s), which
// takes 7, 8 or 10 characters: YYYY-MM-DD, YYYYMMDD and the ISO week forms YYYY-Www-D,
// YYYYWwwD, YYYY-Www, YYYYWww, and does not look at what follows what it parsed
// ("20240101xx" is a date).
bool python_iso_date(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  if (s.size() != 7 && s.size() != 8 && s.size() != 10) return false;
  int year = 0, month = 0, day = 0;
  if (!digits_at(s, 0, 4, &year)) return false;
  size_t p = 4;
  const bool separator = s[p] == '-';
  p += separator;
  if (p < s.size() && s[p] == 'W') {
    int week = 0, weekday = 1;
    if (!digits_at(s, p + 1, 2, &week)) return false;
    p += 3;
    if (p < s.size()) {
      if (separator && s[p++] != '-') return false;
      if (!digits_at(s, p, 1, &weekday)) return false;
    }
    // CPython's iso_to_ymd: week 53 only in a year of 53 ISO weeks; day 1..7.
    const int first_weekday = static_cast<int>((ordinal_of(year == 0 ? 1 : year, 1, 1) + 6) % 7);
    if (year == 0) return false;  // ymd_to_ord of year 0: out of range for date() afterwards anyway
    if (week <= 0 || week >= 53) {
      if (week != 53 || !(first_weekday == 3 || (first_weekday == 2 && leap_year(year)))) return false;
    }
    if (weekday <= 0 || weekday >= 8) return false;
    // The Monday of week 1 is the Monday on or before January 4th.
    const int64_t jan4 = ordinal_of(year, 1, 4);
    const int64_t week1_monday = jan4 - (jan4 + 6) % 7;
    int y = 0, m = 0, d = 0;
    if (!date_of_ordinal(week1_monday + (week - 1) * 7 + (weekday - 1), &y, &m, &d)) return false;
    return y >= 1 && y <= 9999;
  }
  if (!digits_at(s, p, 2, &month)) return false;
  p += 2;
  if (separator && (p >= s.size() || s[p++] != '-')) return false;
  if (!digits_at(s, p, 2, &day)) return false;
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= days_in_month(year, month);
}

bool python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

// CPython's int(text, 16) >= 0 for ASCII text: spaces around, a sign, an optional 0x, hex
// digits with single underscores between them.
bool python_hex_integer(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && python_space(s[b])) ++b;
  while (e > b && python_space(s[e - 1])) --e;
  bool negative = false;
  if (b < e && (s[b] == '+' || s[b] == '-')) negative = s[b++] == '-';
  if (e - b >= 2 && s[b] == '0' && (s[b + 1] == 'x' || s[b + 1] == 'X')) {
    b += 2;
    if (b < e && s[b] == '_') ++b;
  }
  if (b == e) return false;
  bool nonzero = false;
  for (size_t k = b; k < e; ++k) {
    if (s[k] == '_') {
      if (k == b || k + 1 == e || s[k + 1] == '_') return false;
      continue;
    }
    if (!is_hex_digit(s[k])) return false;
    nonzero |= s[k] != '0';
  }
  return !negative || !nonzero;  // UUID(): 0 <= int < 2^128 (32 digits are below 2^128)
}

std::string replace_all(std::string s, const std::string& what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) s.replace(at, what.size(), with);
  return s;
}

// python3-jsonschema's "uuid": uuid.UUID(s) takes it, and s has '-' at 8, 13, 18 and 23.
// Non-ASCII text is refused (CPython's int() would take Unicode digits and spaces).
bool python_uuid(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  std::string hex = replace_all(replace_all(s, "urn:", ""), "uuid:", "");
  size_t b = 0, e = hex.size();
  while (b < e && (hex[b] == '{' || hex[b] == '}')) ++b;
  while (e > b && (hex[e - 1] == '{' || hex[e - 1] == '}')) --e;
  hex = replace_all(hex.substr(b, e - b), "-", "");
  if (hex.size() != 32 || !python_hex_integer(hex)) return false;
  for (const size_t k : {8, 13, 18, 23})
    if (s[k] != '-') return false;  // s is at least 32 characters here
  return true;
}

// rfc3339-validator's check (what python3-jsonschema's date-time uses when installed), of
// the text upper-cased: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), the day within its
// month and the year not 0. Python's `$` also lets one final newline pass.
bool rfc3339_date_time(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  if (!s.empty() && s.back() == '\n') s.pop_back();
  int year = 0, month = 0, day = 0, v = 0;
  if (s.size() < 20 || !digits_at(s, 0, 4, &year) || s[4] != '-' || !digits_at(s, 5, 2, &month) || s[7] != '-' ||
      !digits_at(s, 8, 2, &day) || s[10] != 'T')
    return false;
  if (month < 1 || month > 12 || year == 0 || day < 1 || day > days_in_month(year, month)) return false;
  if (!digits_at(s, 11, 2, &v) || v > 23 || s[13] != ':' || !digits_at(s, 14, 2, &v) || v > 59 || s[16] != ':' ||
      !digits_at(s, 17, 2, &v) || v > 59)
    return false;
  size_t p = 19;
  if (s[p] == '.') {
    const size_t first = ++p;
    while (p < s.size() && is_digit(s[p])) ++p;
    if (p == first) return false;
  }
  if (p < s.size() && s[p] == 'Z') return p + 1 == s.size();
  if (p >= s.size() || (s[p] != '+' && s[p] != '-')) return false;
  return s.size() == p + 6 && digits_at(s, p + 1, 2, &v) && v <= 23 && s[p + 3] == ':' && digits_at(s, p + 4, 2, &v) &&
         v <= 59;
}

class Validator {
 public:
  Validator(const json& root, const JsonSchemaValidatorOptions& options) : root_(root), options_(options) {}

  // Whether `instance` (at JSON pointer `at`) is valid under `schema` (at `schema_at` in
  // the root); on false, *reason says where and why.
  bool valid(const json& schema, const std::string& schema_at, const json& instance, const std::string& at, size_t depth,
             std::string* reason) {
    if (depth > kJsonSchemaValidatorDepth) refuse(schema_at, "schemas applied past the validator's depth (a $ref cycle?)");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) *reason = at + ": the schema false";
      return schema.get<bool>();
    }
    if (!schema.is_object()) refuse(schema_at, "a schema must be an object or a boolean");
    for (auto it = schema.begin(); it != schema.end(); ++it)
      if (!known_keyword(it.key())) refuse(schema_at, "keyword \"" + it.key() + "\" is outside the validator's subset");
    const auto fail = [&](const std::string& why) {
      *reason = at + ": " + why;
      return false;
    };
    const auto keyword = [&](const char* name) -> const json* {
      const auto it = schema.find(name);
      return it == schema.end() ? nullptr : &*it;
    };
    const std::string here = schema_at + "/";

    if (const json* ref = keyword("$ref")) {
      std::string ref_at;
      const json& target = resolve(*ref, here + "$ref", &ref_at);
      if (!valid(target, ref_at, instance, at, depth + 1, reason)) return false;
    }
    if (const json* type = keyword("type")) {
      bool any = false;
      if (type->is_string()) {
        any = has_type(instance, type->get<std::string>(), here + "type");
      } else if (type->is_array() && !type->empty()) {
        for (const json& t : *type) {
          if (!t.is_string()) refuse(here + "type", "a list of type names");
          any |= has_type(instance, t.get<std::string>(), here + "type");
        }
      } else {
        refuse(here + "type", "a type name or a non-empty list of them");
      }
      if (!any) return fail("type " + type->dump());
    }
    if (const json* values = keyword("enum")) {
      if (!values->is_array()) refuse(here + "enum", "an array");
      // `instance == 0 or instance == 1` (booleans too) compares without booleans as
      // numbers; any other instance by Python's ==, under which [true] == [1].
      const bool zero_or_one = instance.is_boolean() || (instance.is_number() && (compare_numbers(instance, json(0)) == 0 ||
                                                                                  compare_numbers(instance, json(1)) == 0));
      bool found = false;
      for (const json& v : *values) found = found || same_value(instance, v, true, zero_or_one, 0);
      if (!found) return fail("enum");
    }
    if (const json* value = keyword("const"))
      if (!same_value(instance, *value, true, true, 0)) return fail("const " + value->dump());
    if (instance.is_string()) {
      const size_t length = code_points(instance.get_ref<const std::string&>());
      if (const json* n = keyword("minLength"))
        if (length < count(*n, here + "minLength")) return fail("minLength " + n->dump());
      if (const json* n = keyword("maxLength"))
        if (length > count(*n, here + "maxLength")) return fail("maxLength " + n->dump());
      if (const json* format = keyword("format")) {
        if (!format->is_string()) refuse(here + "format", "a string");
        if (!format_valid(format->get<std::string>(), instance.get_ref<const std::string&>()))
          return fail("format " + format->dump());
      }
    }
    if (instance.is_number()) {
      // Python compares int with float exactly; NaN never fails a bound (a < b is False).
      const auto bound = [&](const char* name, bool (*fails)(int)) -> bool {
        const json* b = keyword(name);
        if (!b) return false;
        if (!b->is_number()) refuse(here + name, "a number");
        const int c = compare_numbers(instance, *b);
        return c != kUnordered && fails(c);
      };
      if (bound("minimum", [](int c) { return c < 0; })) return fail("minimum " + schema["minimum"].dump());
      if (bound("maximum", [](int c) { return c > 0; })) return fail("maximum " + schema["maximum"].dump());
      if (bound("exclusiveMinimum", [](int c) { return c <= 0; }))
        return fail("exclusiveMinimum " + schema["exclusiveMinimum"].dump());
      if (bound("exclusiveMaximum", [](int c) { return c >= 0; }))
        return fail("exclusiveMaximum " + schema["exclusiveMaximum"].dump());
    }
    if (instance.is_array()) {
      if (const json* n = keyword("minItems"))
        if (instance.size() < count(*n, here + "minItems")) return fail("minItems " + n->dump());
      if (const json* n = keyword("maxItems"))
        if (instance.size() > count(*n, here + "maxItems")) return fail("maxItems " + n->dump());
      size_t prefix = 0;
      if (const json* prefix_items = keyword("prefixItems")) {
        if (!prefix_items->is_array()) refuse(here + "prefixItems", "an array of schemas");
        prefix = prefix_items->size();
        for (size_t i = 0; i < prefix && i < instance.size(); ++i)
          if (!valid((*prefix_items)[i], here + "prefixItems/" + std::to_string(i), instance[i], at + "/" + std::to_string(i),
                     depth + 1, reason))
            return false;
      }
      if (const json* items = keyword("items")) {
        if (items->is_boolean() && !items->get<bool>()) {
          if (instance.size() > prefix) return fail("items false after " + std::to_string(prefix) + " prefixItems");
        } else {
          for (size_t i = prefix; i < instance.size(); ++i)
            if (!valid(*items, here + "items", instance[i], at + "/" + std::to_string(i), depth + 1, reason)) return false;
        }
      }
    }
    if (instance.is_object()) {
      const json* properties = keyword("properties");
      if (properties && !properties->is_object()) refuse(here + "properties", "an object of schemas");
      if (const json* required = keyword("required")) {
        if (!required->is_array()) refuse(here + "required", "an array of names");
        for (const json& name : *required) {
          if (!name.is_string()) refuse(here + "required", "an array of names");
          if (!instance.contains(name.get<std::string>())) return fail("required " + name.dump());
        }
      }
      const json* additional = keyword("additionalProperties");
      for (auto it = instance.begin(); it != instance.end(); ++it) {
        const std::string key_at = at + "/" + pointer_token(it.key());
        if (properties && properties->contains(it.key())) {
          if (!valid((*properties)[it.key()], here + "properties/" + pointer_token(it.key()), it.value(), key_at, depth + 1,
                     reason))
            return false;
        } else if (additional) {
          if (!valid(*additional, here + "additionalProperties", it.value(), key_at, depth + 1, reason)) return false;
        }
      }
    }
    if (const json* branches = keyword("anyOf")) {
      if (!branches->is_array() || branches->empty()) refuse(here + "anyOf", "a non-empty array of schemas");
      bool any = false;
      std::string ignored;
      for (size_t i = 0; i < branches->size() && !any; ++i)
        any = valid((*branches)[i], here + "anyOf/" + std::to_string(i), instance, at, depth + 1, &ignored);
      if (!any) return fail("no schema of anyOf");
    }
    if (const json* branches = keyword("oneOf")) {
      if (!branches->is_array() || branches->empty()) refuse(here + "oneOf", "a non-empty array of schemas");
      size_t matching = 0;
      std::string ignored;
      for (size_t i = 0; i < branches->size(); ++i)
        matching += valid((*branches)[i], here + "oneOf/" + std::to_string(i), instance, at, depth + 1, &ignored);
      if (matching != 1) return fail(std::to_string(matching) + " schemas of oneOf (exactly one must match)");
    }
    return true;
  }

 private:
  static bool known_keyword(const std::string& k) {
    static const char* const known[] = {
        // Validation keywords of the subset.
        "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
        "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
        "$ref", "format",
        // Annotations and definitions, which constrain nothing.
        "$defs", "definitions", "$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated",
        "readOnly", "writeOnly"};
    for (const char* name : known)
      if (k == name) return true;
    return false;
  }

  static std::string pointer_token(const std::string& key) { return replace_all(replace_all(key, "~", "~0"), "/", "~1"); }

  static size_t count(const json& n, const std::string& where) {
    if (n.is_number_unsigned()) return n.get<size_t>();
    if (n.is_number_integer() && n.get<int64_t>() >= 0) return static_cast<size_t>(n.get<int64_t>());
    refuse(where, "a non-negative integer");
  }

  bool has_type(const json& v, const std::string& type, const std::string& where) const {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "number") return v.is_number();
    if (type == "integer") {
      if (!v.is_number_float()) return v.is_number();
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;  // Python's float.is_integer(): 7.0 is an integer
    }
    refuse(where, "unknown type \"" + type + "\"");
  }

  bool format_valid(const std::string& format, const std::string& s) const {
    if (format == "date") return python_iso_date(s);
    if (format == "uuid") return python_uuid(s);
    if (format == "date-time") return !options_.check_time_formats || rfc3339_date_time(s);
    if (format == "time") return !options_.check_time_formats || rfc3339_date_time("1970-01-01T" + s);
    return true;  // python3-jsonschema passes formats it has no check for
  }

  // The schema a local $ref names: a JSON pointer (~0, ~1 and %XX unescaped) from the root.
  const json& resolve(const json& ref, const std::string& where, std::string* target_at) const {
    if (!ref.is_string()) refuse(where, "a string");
    const std::string& text = ref.get_ref<const std::string&>();
    if (text.empty() || text[0] != '#') refuse(where, "only local references (\"#...\") are supported");
    std::string pointer;
    for (size_t i = 1; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size() && is_hex_digit(text[i + 1]) && is_hex_digit(text[i + 2])) {
        pointer += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        pointer += text[i];
      }
    }
    if (!pointer.empty() && pointer[0] != '/') refuse(where, "\"" + text + "\" is not a JSON pointer");
    const json* node = &root_;
    *target_at = "";
    size_t at = 1;
    while (at <= pointer.size() && !pointer.empty()) {
      size_t end = pointer.find('/', at);
      if (end == std::string::npos) end = pointer.size();
      const std::string token = replace_all(replace_all(pointer.substr(at, end - at), "~1", "/"), "~0", "~");
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 10 && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        refuse(where, "\"" + text + "\" points to nothing");
      }
      *target_at += "/" + pointer_token(token);
      at = end + 1;
    }
    return *node;
  }

  const json& root_;
  JsonSchemaValidatorOptions options_;
};

}  // namespace json_schema_validator_detail

JsonSchemaVerdict validate_json_schema(const nlohmann::json& schema, const nlohmann::json& instance,
                                       const JsonSchemaValidatorOptions& options) {
  json_schema_validator_detail::Validator v(schema, options);
  JsonSchemaVerdict verdict;
  verdict.valid = v.valid(schema, "", instance, "", 0, &verdict.reason);
  if (verdict.valid) verdict.reason.clear();
  return verdict;
}

}  // namespace petrel::test
