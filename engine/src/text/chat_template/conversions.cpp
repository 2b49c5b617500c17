// The Renderer's conversions (renderer.h): a value as a list (Python's iter()), as text
// (str(), repr(), tojson) and compared (==, <, `in`).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/c_number.h"
#include "core/substring_search.h"
#include "core/utf8.h"
#include "text/chat_template/python_text.h"
#include "text/chat_template/renderer.h"

namespace petrel::text::chat_template_detail {

namespace {

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

constexpr char kHexDigits[] = "0123456789abcdef";

}  // namespace

// Python's iter() as a list: a list itself, a string's characters, a dict's keys;
// undefined iterates as empty (Jinja's Undefined). `out` may be `v`.
bool Renderer::as_list(size_t offset, const Value& v, Value& out) {
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

// Python's str() (undefined renders as ""), appended to `out`.
bool Renderer::to_text(size_t offset, const Value& v, std::string& out) {
  if (v.is(Kind::kUndefined)) return true;
  return repr(offset, v, out, false);
}

// str(v) without a copy when it is a string: `text` views `v` or `scratch`.
bool Renderer::text_of(size_t offset, const Value& v, std::string& scratch, std::string_view& text) {
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
bool Renderer::repr(size_t offset, const Value& v, std::string& out, bool quote_strings) {
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
bool Renderer::append_float(size_t offset, std::string& out, double number) {
  int tries = 0;
  const std::string text = python_float(number, &tries);
  return charge(kStepsPerFloatTry * static_cast<uint64_t>(tries)) && append(offset, out, text);
}

// repr() of a string: measured, then written into the room it needs.
bool Renderer::append_repr(size_t offset, std::string& out, std::string_view s) {
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
bool Renderer::to_json(size_t offset, const Value& v, int64_t indent, int level, std::string& out) {
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
bool Renderer::append_json(size_t offset, std::string& out, std::string_view s) {
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

bool Renderer::equal(const Value& a, const Value& b, bool& result) {
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
bool Renderer::less(size_t offset, const Value& a, const Value& b, bool& result) {
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

bool Renderer::contains(size_t offset, const Value& item, const Value& container, bool& result) {
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

}  // namespace petrel::text::chat_template_detail
