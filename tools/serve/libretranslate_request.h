// Reading LibreTranslate's POST /translate: its fields from a JSON or form body, and q,
// source, target, format and alternatives checked, no model needed (the handler looks
// the language pair up and translates; tests/fuzz/fuzz_serve_request.cpp reads requests
// alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/request_json.h"

namespace petrel::serve {

constexpr size_t kMaxTexts = 1024;       // q's strings per request
constexpr int64_t kMaxAlternatives = 8;  // translations besides the best

// The request's fields as a JSON object, from a JSON body or, when `content_type` (the
// Content-Type header) is application/x-www-form-urlencoded, form fields (a repeated q
// is a list); 400 for multipart, a body that is not a JSON object, or invalid UTF-8.
nlohmann::json translate_request_fields(const std::string& content_type, std::string_view body);

struct TranslateFields {
  std::vector<std::string> texts;  // q: at most kMaxTexts
  bool list = false;               // q was a list: the answer is one too, in the same order
  std::string source, target;      // client language codes; source may be "auto"
  bool html = false;               // format html (else text)
  int64_t alternatives = 0;        // 0..kMaxAlternatives (a form's text "3" too)
};

// q, source, target, format and alternatives of `fields`: 400 for one missing, of the
// wrong type or out of range, with LibreTranslate's messages.
TranslateFields read_translate_fields(const nlohmann::json& fields);

}  // namespace petrel::serve
