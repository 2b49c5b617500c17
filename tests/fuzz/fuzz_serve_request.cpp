// Fuzz target: petrel-serve's reading of request bodies (tools/serve/request_json.h,
// openai_request.h, libretranslate_request.h), no model loaded. The input is a body:
// as JSON, parse_json_body must return a value or refuse with a RequestError, and
// json_depth_over's verdict must agree with the nesting depth nlohmann's parser sees
// (counted by a SAX reader, which takes any depth without recursion); a parsed value is
// read as a chat completion, a completion and a translation request. As a form, the
// fields must be UTF-8 and read as a translation request. Every refusal is a 400
// RequestError with a UTF-8 message, whose `param`, when given, starts the message;
// what a reader returns holds its limits. Any other exception, a crash or a sanitizer
// report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/libretranslate_request.h"
#include "serve/openai_request.h"
#include "serve/request_json.h"

namespace {

using nlohmann::json;
using petrel::serve::RequestError;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

void check_refusal(const RequestError& e) {
  require(e.status == 400, "a body is refused with 400");
  const std::string message = e.what();
  require(!message.empty(), "a refusal says why");
  require(petrel::serve::is_valid_utf8(message), "a refusal's message is UTF-8");
  require(e.param.empty() || message.compare(0, e.param.size(), e.param) == 0, "a refusal's message starts with its param");
}

// Counts the nesting of what the parser takes; nlohmann's sax_parse keeps its own stack.
struct DepthCounter : json::json_sax_t {
  size_t depth = 0, deepest = 0;
  bool open() {
    if (++depth > deepest) deepest = depth;
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// The deepest nesting of a parsed value, walked with a stack of its own.
size_t value_depth(const json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const json*, size_t>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->is_structured()) continue;
    if (depth + 1 > deepest) deepest = depth + 1;
    for (const json& child : *value) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

void read_openai(const json& body) {
  try {
    (void)petrel::serve::read_model_field(body);
  } catch (const RequestError& e) {
    check_refusal(e);
  }
  for (const bool chat : {true, false}) {
    try {
      const petrel::serve::CompletionFields r =
          chat ? petrel::serve::read_chat_fields(body) : petrel::serve::read_completion_fields(body);
      require(r.n >= 1 && r.n <= static_cast<size_t>(petrel::serve::kMaxChoices), "n within 1..kMaxChoices");
      require(r.options.max_new_tokens <= (size_t{1} << 20), "max_tokens within its range");
      require(r.options.stop.size() <= petrel::kMaxStopStrings, "at most kMaxStopStrings stop strings");
      for (const std::string& s : r.options.stop)
        require(!s.empty() && s.size() <= petrel::kMaxStopBytes, "stop strings of 1..kMaxStopBytes bytes");
      require(!r.options.top_p || (*r.options.top_p > 0 && *r.options.top_p <= 1), "top_p within (0, 1]");
      // The engine's ranges, as floats (Sampler's checks).
      auto within = [](const std::optional<float>& v, float min, float max) { return !v || (*v >= min && *v <= max); };
      require(within(r.options.temperature, petrel::kMinSamplingScale, petrel::kMaxSamplingScale), "a sampling temperature");
      require(within(r.options.repetition_penalty, petrel::kMinSamplingScale, petrel::kMaxSamplingScale),
              "a repetition penalty within the engine's range");
      require(within(r.options.min_p, 0, 1), "min_p within [0, 1]");
      require(r.options.json_schema.empty() || json::accept(r.options.json_schema), "a response format's schema is JSON");
      if (chat) {
        require(!r.messages.empty() && r.prompts.empty(), "a chat has messages");
        for (const petrel::ChatMessage& m : r.messages)
          require(petrel::serve::is_valid_utf8(m.role) && petrel::serve::is_valid_utf8(m.content), "messages are UTF-8");
      } else {
        require(!r.prompts.empty() && r.prompts.size() <= petrel::serve::kMaxPrompts && r.messages.empty(),
                "1..kMaxPrompts prompts");
      }
    } catch (const RequestError& e) {
      check_refusal(e);
    }
  }
}

void read_translate(const json& fields) {
  try {
    const petrel::serve::TranslateFields r = petrel::serve::read_translate_fields(fields);
    require(r.texts.size() <= petrel::serve::kMaxTexts, "at most kMaxTexts texts");
    require(r.list || r.texts.size() == 1, "a single q is one text");
    require(r.alternatives >= 0 && r.alternatives <= petrel::serve::kMaxAlternatives, "alternatives within 0..8");
  } catch (const RequestError& e) {
    check_refusal(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  // JSON: the parser's verdict, the depth scan against the depth the parser sees.
  // (The parser ends its input at a NUL byte; parse_json_body refuses one.)
  DepthCounter counter;
  const bool valid = body.find('\0') == std::string_view::npos && json::sax_parse(body.begin(), body.end(), &counter);
  if (valid) {
    require(!petrel::serve::json_depth_over(body, counter.deepest), "no deeper than the parser's depth");
    if (counter.deepest > 0)
      require(petrel::serve::json_depth_over(body, counter.deepest - 1) == counter.deepest,
              "the depth scan finds the parser's depth");
  }
  try {
    const json value = petrel::serve::parse_json_body(body);
    require(valid && counter.deepest <= petrel::serve::kMaxJsonDepth, "parsed JSON is JSON within the depth limit");
    // (A repeated key keeps its last value, which may be shallower than an earlier one.)
    require(value_depth(value) <= counter.deepest, "the value is no deeper than the text");
    require(json::parse(petrel::serve::json_text(value)) == value, "the value's text reads back as the value");
    read_openai(value);
    read_translate(value);
  } catch (const RequestError& e) {
    check_refusal(e);
    require(!valid || counter.deepest > petrel::serve::kMaxJsonDepth, "JSON within the depth limit is taken");
  }
  try {
    read_translate(petrel::serve::translate_request_fields("application/json", body));
  } catch (const RequestError& e) {
    check_refusal(e);
  }
  try {
    (void)petrel::serve::translate_request_fields("multipart/form-data; boundary=x", body);
    require(false, "multipart is refused");
  } catch (const RequestError& e) {
    check_refusal(e);
  }

  // A form: name/value pairs, each decoded to UTF-8 no longer than its text.
  try {
    const auto pairs = petrel::serve::parse_form_body(body);
    size_t bytes = 0;
    for (const auto& [name, value] : pairs) {
      require(petrel::serve::is_valid_utf8(name) && petrel::serve::is_valid_utf8(value), "form fields are UTF-8");
      bytes += name.size() + value.size();
    }
    require(bytes <= body.size(), "decoding does not lengthen a form");
  } catch (const RequestError& e) {
    check_refusal(e);
  }
  try {
    read_translate(petrel::serve::translate_request_fields("application/x-www-form-urlencoded; charset=utf-8", body));
  } catch (const RequestError& e) {
    check_refusal(e);
  }
  return 0;
}
