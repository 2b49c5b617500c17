// Reading a request's body: JSON under a nesting limit checked before parsing, form
// encoding, UTF-8, and typed fields whose errors name the field (OpenAI's `param`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace petrel::serve {

// Deeper JSON is refused before the parser sees it (the parser builds values with an
// explicit stack, but a value's copies and comparisons would recurse).
constexpr size_t kMaxJsonDepth = 64;

// A request the server refuses, with the HTTP status and what each API's error shape
// carries: the message, OpenAI's type, the field (`param`, empty: none) and code.
struct RequestError : std::runtime_error {
  int status;
  std::string type, param, code;
  RequestError(int status, const std::string& message, std::string param = "",
               std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};

bool is_valid_utf8(std::string_view text);

// The deepest nesting of arrays and objects in `text` if it exceeds `limit` (strings
// skipped, escapes included), else nullopt. One pass, no recursion.
std::optional<size_t> json_depth_over(std::string_view text, size_t limit);

// The body as JSON: 400 naming what is wrong (invalid UTF-8, a NUL byte, nesting deeper
// than kMaxJsonDepth, a syntax error and where).
nlohmann::json parse_json_body(std::string_view body);

// application/x-www-form-urlencoded: name/value pairs in order, '+' and %XX decoded;
// 400 when a value is not UTF-8.
std::vector<std::pair<std::string, std::string>> parse_form_body(std::string_view body);

// Typed fields of a JSON object. Absent or null: nullopt; the wrong type or a value out of
// range: 400 naming `field` (`where` prefixes it, e.g. "messages[2]." ).
std::optional<std::string> string_field(const nlohmann::json& object, const char* field, const std::string& where = "");
std::optional<bool> bool_field(const nlohmann::json& object, const char* field, const std::string& where = "");
std::optional<double> number_field(const nlohmann::json& object, const char* field, double min, double max,
                                   const std::string& where = "");
std::optional<int64_t> integer_field(const nlohmann::json& object, const char* field, int64_t min, int64_t max,
                                     const std::string& where = "");

// A JSON value as text for a response: invalid UTF-8 (none should reach here) replaced.
std::string json_text(const nlohmann::json& value);

}  // namespace petrel::serve
