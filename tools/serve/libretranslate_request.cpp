#include "serve/libretranslate_request.h"

namespace petrel::serve {

using nlohmann::json;

json translate_request_fields(const std::string& content_type, std::string_view body) {
  if (content_type.rfind("application/x-www-form-urlencoded", 0) == 0) {
    json fields = json::object();
    for (auto& [name, value] : parse_form_body(body)) {
      if (name == "q" && fields.contains("q")) {
        if (!fields["q"].is_array()) fields["q"] = json::array({fields["q"]});
        fields["q"].push_back(std::move(value));
      } else {
        fields[name] = std::move(value);
      }
    }
    return fields;
  }
  if (content_type.rfind("multipart/", 0) == 0)
    throw RequestError(400, "send the fields as JSON or application/x-www-form-urlencoded, not multipart");
  json fields = parse_json_body(body);
  if (!fields.is_object()) throw RequestError(400, "the request body must be a JSON object");
  return fields;
}

TranslateFields read_translate_fields(const json& fields) {
  TranslateFields r;
  // q: a string, or a list of strings answered as a list in the same order.
  const auto q = fields.find("q");
  if (q == fields.end() || q->is_null()) throw RequestError(400, "Invalid request: missing q parameter");
  r.list = q->is_array();
  if (q->is_string()) {
    r.texts.push_back(q->get<std::string>());
  } else if (r.list) {
    if (q->size() > kMaxTexts) throw RequestError(400, "q: at most " + std::to_string(kMaxTexts) + " texts per request");
    for (const json& t : *q) {
      if (!t.is_string()) throw RequestError(400, "q: expected a string or a list of strings");
      r.texts.push_back(t.get<std::string>());
    }
  } else {
    throw RequestError(400, "q: expected a string or a list of strings");
  }
  const auto source = string_field(fields, "source");
  const auto target = string_field(fields, "target");
  if (!source) throw RequestError(400, "Invalid request: missing source parameter");
  if (!target) throw RequestError(400, "Invalid request: missing target parameter");
  r.source = *source;
  r.target = *target;
  const std::string format = string_field(fields, "format").value_or("text");
  if (format != "text" && format != "html") throw RequestError(400, "format: '" + format + "' is not text or html");
  r.html = format == "html";
  if (auto it = fields.find("alternatives"); it != fields.end() && it->is_string()) {  // a form's field is text
    const std::string text = it->get<std::string>();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 2 ||
        std::stoll(text) > kMaxAlternatives)
      throw RequestError(400, "alternatives: expected an integer 0.." + std::to_string(kMaxAlternatives));
    r.alternatives = std::stoll(text);
  } else {
    r.alternatives = integer_field(fields, "alternatives", 0, kMaxAlternatives).value_or(0);
  }
  return r;
}

}  // namespace petrel::serve
