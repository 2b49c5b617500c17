// The Renderer's methods (renderer.h): a string's strip(), split(), replace(),
// startswith() / endswith() and case maps; a dict's get(), keys(), values() and items().
#include <algorithm>
#include <functional>

#include "core/substring_search.h"
#include "core/unicode.h"
#include "core/utf8.h"
#include "text/chat_template/python_text.h"
#include "text/chat_template/renderer.h"

namespace petrel::text::chat_template_detail {

namespace {

char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// The code points strip() is given: ASCII in a bitmap, the rest sorted.
struct CodePointSet {
  uint64_t ascii[2] = {0, 0};
  std::vector<char32_t> others;
  bool has_ascii(char32_t c) const { return (ascii[c >> 6] >> (c & 63)) & 1; }
};

}  // namespace

// str.strip / lstrip / rstrip with an optional set of characters.
bool Renderer::strip(size_t offset, std::string_view s, const Value* chars, bool left, bool right, Value& out) {
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
bool Renderer::split(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out) {
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
bool Renderer::replace(size_t offset, std::string_view s, const std::vector<Value>& args, Value& out) {
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

bool Renderer::starts_or_ends(size_t offset, std::string_view s, const std::vector<Value>& args, bool ends, Value& out) {
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

bool Renderer::case_map(size_t offset, std::string_view s, const std::string& how, Value& out) {
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
bool Renderer::dict_view(size_t offset, const DictData& dict, const std::string& what, Value& out) {
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

bool Renderer::call_method(const Expr& e, Value& out) {
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

}  // namespace petrel::text::chat_template_detail
