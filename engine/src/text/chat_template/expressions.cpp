// The Renderer's expressions (renderer.h): evaluation, the operators, subscripts and
// slices, and the functions (raise_exception, namespace, range).
#include <cmath>

#include "core/utf8.h"
#include "text/chat_template/python_text.h"
#include "text/chat_template/renderer.h"

namespace petrel::text::chat_template_detail {

namespace {

// The number of items a slice start:stop:step picks (bounds already adjusted).
uint64_t slice_length(int64_t start, int64_t stop, int64_t step) {
  if (step > 0 ? start >= stop : start <= stop) return 0;
  const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return (span - 1) / stride + 1;
}

}  // namespace

bool Renderer::eval(const Expr& e, Value& out) {
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

bool Renderer::concatenate(size_t offset, std::string_view left, std::string_view right, Value& out) {
  std::string s;
  return reserve_text(offset, s, uint64_t{left.size()} + right.size()) && append(offset, s, left) &&
         append(offset, s, right) && finish_string(offset, std::move(s), out);
}

bool Renderer::eval_args(const Expr& e, size_t first, std::vector<Value>& args, std::vector<std::pair<std::string, Value>>& kwargs) {
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
bool Renderer::attribute(const Value& object, std::string_view name, Value& out) {
  Value found;
  if (object.is(Kind::kDict)) {
    if (!charge(1 + name.size() / kBytesPerStep)) return false;
    if (const Value* v = object.dict()->find(name)) found = *v;
  }
  out = std::move(found);
  return true;
}

bool Renderer::subscript(size_t offset, const Value& object, const Value& key, Value& out) {
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

bool Renderer::eval_slice(const Expr& e, Value& out) {
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

bool Renderer::eval_binary(const Expr& e, Value& out) {
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
bool Renderer::repeat(size_t offset, const Value& sequence, int64_t times_given, Value& out) {
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

bool Renderer::call_function(const Expr& e, Value& out) {
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

}  // namespace petrel::text::chat_template_detail
