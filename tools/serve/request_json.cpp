#include "serve/request_json.h"

#include <cmath>
#include <cstring>

namespace petrel::serve {

// The length of the UTF-8 character at s[0] (n bytes left, n > 0), or 0 when the bytes
// there are not one.
static size_t utf8_length(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (no overlongs, surrogates, > U+10FFFF)
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (s[k] < 0x80 || s[k] > 0xBF) return 0;
  return len;
}

bool is_valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0, len; i < text.size(); i += len)
    if ((len = utf8_length(s + i, text.size() - i)) == 0) return false;
  return true;
}

// `text` with each byte that starts no UTF-8 character replaced by U+FFFD.
static std::string utf8_replaced(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_length(s + i, text.size() - i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  return out;
}

std::optional<size_t> json_depth_over(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
  return std::nullopt;
}

nlohmann::json parse_json_body(std::string_view body) {
  if (body.empty()) throw RequestError(400, "the request body is empty: expected a JSON object");
  if (!is_valid_utf8(body)) throw RequestError(400, "the request body is not valid UTF-8");
  // nlohmann's parser ends its input at a NUL byte: what follows one would be ignored. A
  // JSON text holds none (in a string it is written \u0000).
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos)
    throw RequestError(400, "the request body is not valid JSON: a NUL byte at byte " + std::to_string(nul) +
                                " (a string writes it \\u0000)");
  if (json_depth_over(body, kMaxJsonDepth))
    throw RequestError(400, "the request body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) +
                                " levels");
  try {
    return nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." without its tag;
    // its "last read: '...'" may end inside a character. A number past a double's range
    // is out_of_range.406, not a parse_error.
    std::string what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
    throw RequestError(400, "the request body is not valid JSON: " + utf8_replaced(what));
  }
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static std::string form_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
               hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_form_body(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> fields;
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find('&', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view pair = body.substr(start, end - start);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string name = form_decode(pair.substr(0, eq));
      std::string value = eq == std::string_view::npos ? std::string() : form_decode(pair.substr(eq + 1));
      if (!is_valid_utf8(name) || !is_valid_utf8(value))
        throw RequestError(400, "the form field '" + (is_valid_utf8(name) ? name : std::string("?")) +
                                    "' is not valid UTF-8");
      fields.emplace_back(std::move(name), std::move(value));
    }
    start = end + 1;
  }
  return fields;
}

static const nlohmann::json* member(const nlohmann::json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> string_field(const nlohmann::json& object, const char* field, const std::string& where) {
  const nlohmann::json* v = member(object, field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw RequestError(400, where + field + ": expected a string", where + field);
  return v->get<std::string>();
}

std::optional<bool> bool_field(const nlohmann::json& object, const char* field, const std::string& where) {
  const nlohmann::json* v = member(object, field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) throw RequestError(400, where + field + ": expected true or false", where + field);
  return v->get<bool>();
}

static std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  return nlohmann::json(v).dump();
}

std::optional<double> number_field(const nlohmann::json& object, const char* field, double min, double max,
                                   const std::string& where) {
  const nlohmann::json* v = member(object, field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw RequestError(400, where + field + ": expected a number", where + field);
  const double d = v->get<double>();
  if (!(d >= min && d <= max))
    throw RequestError(400, where + field + ": " + v->dump() + " is outside " + number_text(min) + ".." + number_text(max),
                       where + field);
  return d;
}

std::optional<int64_t> integer_field(const nlohmann::json& object, const char* field, int64_t min, int64_t max,
                                     const std::string& where) {
  const nlohmann::json* v = member(object, field);
  if (v == nullptr) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw RequestError(400, where + field + ": " + v->dump() + " is outside " + std::to_string(min) + ".." +
                                  std::to_string(max), where + field);
    i = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) && v->get<double>() == std::floor(v->get<double>()) &&
             std::fabs(v->get<double>()) < 9e18) {
    i = static_cast<int64_t>(v->get<double>());  // 16.0 is an integer to JavaScript clients
  } else {
    throw RequestError(400, where + field + ": expected an integer", where + field);
  }
  if (i < min || i > max)
    throw RequestError(400, where + field + ": " + std::to_string(i) + " is outside " + std::to_string(min) + ".." +
                                std::to_string(max), where + field);
  return i;
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace petrel::serve
