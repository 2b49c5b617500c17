#include "serve/openai_request.h"

#include <optional>
#include <string>

namespace petrel::serve {
namespace {

using nlohmann::json;

void require_object(const json& body) {
  if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object");
}

// The fields /v1/chat/completions and /v1/completions share.
void read_common(const json& body, CompletionFields& r) {
  GenerateOptions& o = r.options;
  // OpenAI's fields that change the output and that Petrel does not do are refused by name;
  // the rest of the fields it does not know are ignored, as OpenAI's servers do.
  if (bool_field(body, "logprobs").value_or(false)) throw RequestError(400, "logprobs: not supported", "logprobs");
  if (const auto it = body.find("tools"); it != body.end() && !it->is_null() && !(it->is_array() && it->empty()))
    throw RequestError(400, "tools: not supported", "tools");
  if (const auto it = body.find("functions"); it != body.end() && !it->is_null())
    throw RequestError(400, "functions: not supported", "functions");
  (void)integer_field(body, "best_of", 1, 1);  // several candidates per choice: not supported
  std::optional<int64_t> max_tokens = integer_field(body, "max_tokens", 1, int64_t{1} << 20);
  if (auto m = integer_field(body, "max_completion_tokens", 1, int64_t{1} << 20)) max_tokens = m;
  if (max_tokens) o.max_new_tokens = static_cast<size_t>(*max_tokens);
  if (auto t = number_field(body, "temperature", 0, kMaxSamplingScale)) {
    // 0 is greedy, as OpenAI's and llama-server's; otherwise sampling at that temperature.
    o.do_sample = *t >= kMinSamplingScale;
    if (*o.do_sample) o.temperature = static_cast<float>(*t);
  }
  if (auto p = number_field(body, "top_p", 0, 1)) {
    o.top_p = static_cast<float>(*p);  // 1e-320 is 0 as a float: refused as 0 is
    if (!(*o.top_p > 0)) throw RequestError(400, "top_p: must be more than 0", "top_p");
  }
  if (auto k = integer_field(body, "top_k", 0, 1 << 24)) o.top_k = static_cast<uint32_t>(*k);  // llama-server's
  if (auto p = number_field(body, "min_p", 0, 1)) o.min_p = static_cast<float>(*p);
  for (const char* field : {"repetition_penalty", "repeat_penalty"})
    if (auto p = number_field(body, field, kMinSamplingScale, kMaxSamplingScale)) o.repetition_penalty = static_cast<float>(*p);
  if (auto s = integer_field(body, "seed", 0, INT64_MAX)) o.seed = static_cast<uint64_t>(*s);
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      o.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& s : *it) {
        if (!s.is_string()) throw RequestError(400, "stop: expected a string or a list of strings", "stop");
        o.stop.push_back(s.get<std::string>());
      }
    } else {
      throw RequestError(400, "stop: expected a string or a list of strings", "stop");
    }
    if (o.stop.size() > kMaxStopStrings)
      throw RequestError(400, "stop: at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
    for (const std::string& s : o.stop)
      if (s.empty() || s.size() > kMaxStopBytes)
        throw RequestError(400, "stop: each string must be 1.." + std::to_string(kMaxStopBytes) + " bytes", "stop");
  }
  r.n = static_cast<size_t>(integer_field(body, "n", 1, kMaxChoices).value_or(1));
  r.stream = bool_field(body, "stream").value_or(false);
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw RequestError(400, "stream_options: expected an object", "stream_options");
    r.include_usage = bool_field(*it, "include_usage", "stream_options.").value_or(false);
  }
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw RequestError(400, "response_format: expected an object", "response_format");
    const std::string type = string_field(*it, "type", "response_format.").value_or("text");
    auto schema_text = [](const json& schema, const char* where) {
      if (!schema.is_object() && !schema.is_boolean())
        throw RequestError(400, std::string(where) + ": expected a JSON Schema (an object)", "response_format");
      return schema.dump();
    };
    if (type == "json_object") {  // any JSON object; llama-server also takes a schema here
      const auto schema = it->find("schema");
      o.json_schema = schema != it->end() && !schema->is_null() ? schema_text(*schema, "response_format.schema")
                                                                 : std::string(R"({"type": "object"})");
    } else if (type == "json_schema") {
      const auto spec = it->find("json_schema");
      if (spec == it->end() || !spec->is_object())
        throw RequestError(400, "response_format.json_schema: expected an object with a schema", "response_format");
      const auto schema = spec->find("schema");
      if (schema == spec->end()) throw RequestError(400, "response_format.json_schema.schema: required", "response_format");
      o.json_schema = schema_text(*schema, "response_format.json_schema.schema");
    } else if (type != "text") {
      throw RequestError(400, "response_format.type: '" + type + "' is not text, json_object or json_schema",
                         "response_format");
    }
  }
}

// A message's content: a string, or a list of text parts (joined by line breaks).
std::string message_content(const json& message, const std::string& where) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw RequestError(400, where + "content: expected a string or a list of parts", where + "content");
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string at = where + "content[" + std::to_string(i) + "].";
    if (!part.is_object()) throw RequestError(400, at + ": expected an object", where + "content");
    const std::string type = string_field(part, "type", at).value_or("");
    if (type != "text") throw RequestError(400, at + "type: only text parts are supported", where + "content");
    const auto t = string_field(part, "text", at);
    if (!t) throw RequestError(400, at + "text: required", where + "content");
    if (!text.empty()) text += '\n';
    text += *t;
  }
  return text;
}

}  // namespace

std::string read_model_field(const json& body) {
  require_object(body);
  const auto name = string_field(body, "model");
  if (!name) throw RequestError(400, "model: required (GET /v1/models lists them)", "model");
  return *name;
}

CompletionFields read_chat_fields(const json& body) {
  require_object(body);
  CompletionFields r;
  read_common(body, r);
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty())
    throw RequestError(400, "messages: expected a non-empty list of messages", "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "].";
    if (!m.is_object()) throw RequestError(400, where + ": expected an object", "messages");
    const auto role = string_field(m, "role", where);
    if (!role) throw RequestError(400, where + "role: required", where + "role");
    // OpenAI's newer name for the system role, which chat templates know as "system".
    r.messages.push_back({*role == "developer" ? "system" : *role, message_content(m, where)});
  }
  return r;
}

CompletionFields read_completion_fields(const json& body) {
  require_object(body);
  CompletionFields r;
  read_common(body, r);
  if (bool_field(body, "echo").value_or(false)) throw RequestError(400, "echo: not supported", "echo");
  if (!string_field(body, "suffix").value_or("").empty()) throw RequestError(400, "suffix: not supported", "suffix");
  const auto prompt = body.find("prompt");
  const char* expected = "prompt: expected a string or a list of strings (token ids are not supported)";
  if (prompt == body.end() || prompt->is_null()) throw RequestError(400, "prompt: required", "prompt");
  if (prompt->is_string()) {
    r.prompts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty()) {
    if (prompt->size() > kMaxPrompts)
      throw RequestError(400, "prompt: at most " + std::to_string(kMaxPrompts) + " prompts", "prompt");
    for (const json& p : *prompt) {
      if (!p.is_string()) throw RequestError(400, expected, "prompt");
      r.prompts.push_back(p.get<std::string>());
    }
  } else {
    throw RequestError(400, expected, "prompt");
  }
  return r;
}

}  // namespace petrel::serve
