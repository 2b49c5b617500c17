// The Renderer's filters and tests (renderer.h).
#include <cmath>
#include <cstdlib>

#include "core/c_number.h"
#include "text/chat_template/python_text.h"
#include "text/chat_template/renderer.h"

namespace petrel::text::chat_template_detail {

namespace {

const Value* keyword(const std::vector<std::pair<std::string, Value>>& kwargs, const char* name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// A filter's parameter: the positional argument at `index`, else the keyword `name`.
const Value* param(const std::vector<Value>& args, const std::vector<std::pair<std::string, Value>>& kwargs,
                   size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  return keyword(kwargs, name);
}

}  // namespace

bool Renderer::apply_filter(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
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
bool Renderer::join(size_t offset, const Value& v, const Value* separator, const Value* attribute_name, Value& out) {
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

bool Renderer::list_or_reverse(size_t offset, const Value& v, bool reverse, Value& out) {
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
bool Renderer::select_or_map(size_t offset, const std::string& f, const Value& v, const std::vector<Value>& args,
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

bool Renderer::apply_test(size_t offset, const std::string& t, const Value& v, const std::vector<Value>& args, bool& result) {
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

}  // namespace petrel::text::chat_template_detail
