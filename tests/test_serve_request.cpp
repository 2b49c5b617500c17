// petrel-serve's reading of untrusted request bodies (tools/serve/request_json.h,
// openai_request.h, libretranslate_request.h), no model loaded: the nesting limit
// checked before parsing, escapes, forms, and the status and field each refusal names.
// The megabyte bodies (which a fuzzer does not reach) are "[.][linear]".
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/libretranslate_request.h"
#include "serve/openai_request.h"
#include "serve/request_json.h"

namespace serve_request_test {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using petrel::serve::RequestError;
namespace serve = petrel::serve;

// The RequestError `read` throws (a test failure when it throws none).
RequestError refusal(const std::function<void()>& read) {
  try {
    read();
  } catch (const RequestError& e) {
    return e;
  }
  FAIL("no RequestError was thrown");
  return RequestError(0, "");
}

std::string nested(size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

TEST_CASE("serve request: nesting up to kMaxJsonDepth is parsed, deeper is refused before parsing", "[serve]") {
  const size_t limit = serve::kMaxJsonDepth;
  const json value = serve::parse_json_body(nested(limit, "1"));
  size_t depth = 0;
  for (const json* v = &value; v->is_array(); v = &(*v)[0]) ++depth;
  CHECK(depth == limit);
  CHECK(!serve::json_depth_over(nested(limit), limit));
  CHECK(serve::json_depth_over(nested(limit + 1), limit) == limit + 1);

  // Objects count as arrays do; brackets inside strings, escaped quotes included, do not.
  std::string objects;
  for (size_t i = 0; i < limit; ++i) objects += R"({"a":)";
  objects += R"("[[[\"[[{{")" + std::string(limit, '}');
  CHECK_NOTHROW(serve::parse_json_body(objects));
  CHECK(serve::json_depth_over(R"(["\"[[[", []])", 2) == std::nullopt);
  CHECK(serve::json_depth_over(R"(["\\", [[]]])", 2) == 3u);  // the string ends after an escaped backslash

  // Closing brackets before any opening one do not lower the count below zero.
  const RequestError e = refusal([&] { serve::parse_json_body(std::string(100, ']') + nested(limit + 1)); });
  CHECK(e.status == 400);
  CHECK_THAT(e.what(), Contains("deeper than 64"));

  // Deep-but-allowed nesting inside a request: a response format's schema.
  std::string schema = R"({"type":"object"})";
  for (size_t i = 0; i + 3 < limit; ++i) schema = R"({"not":)" + schema + "}";
  const std::string text = R"({"model":"m","prompt":"p","response_format":{"type":"json_object","schema":)" + schema + "}}";
  CHECK(serve::json_depth_over(text, limit - 1) == limit);
  const json body = serve::parse_json_body(text);
  const serve::CompletionFields r = serve::read_completion_fields(body);
  CHECK(json::parse(r.options.json_schema) == json::parse(schema));
}

TEST_CASE("serve request: bodies that are not UTF-8 or not JSON are refused with 400", "[serve]") {
  for (const std::string& body : {std::string(), std::string("{\"q\":\"\xC0\xAF\"}"), std::string("{\"q\":\"\xED\xA0\x80\"}"),
                                 std::string("{\"q\":\"\xF4\x90\x80\x80\"}"), std::string("{\"q\":\"\xE2\x82\"}"),
                                 std::string("{\"q\":1,}"), std::string("{\"q\":\"\\ud800\"}"), std::string("[1] 2")}) {
    CAPTURE(body);
    const RequestError e = refusal([&] { serve::parse_json_body(body); });
    CHECK(e.status == 400);
    CHECK(e.param.empty());
  }
  // A number past a double's range is nlohmann's out_of_range, not its parse_error: a
  // RequestError all the same.
  const RequestError overflow = refusal([] { serve::parse_json_body(R"({"model":"m","n":1e400})"); });
  CHECK(overflow.status == 400);
  CHECK_THAT(overflow.what(), Contains("number overflow"));
  // nlohmann's parser takes a NUL byte for the end of its input: whatever follows one is
  // refused, not ignored.
  using namespace std::string_literals;
  for (const std::string& body : {"{\"q\":\"x\"}\0[[[garbage"s, "{\"q\":\"a\0b\"}"s, "\0"s}) {
    const RequestError e = refusal([&] { serve::parse_json_body(body); });
    CHECK(e.status == 400);
    CHECK_THAT(e.what(), Contains("NUL byte at byte " + std::to_string(body.find('\0'))));
  }
  // A syntax error's message quotes what the parser last read, which may end inside a
  // character: the message stays UTF-8.
  const RequestError cut = refusal([] { serve::parse_json_body("{\"q\": \xDE\xAEllo\"}"); });
  CHECK(serve::is_valid_utf8(cut.what()));
  CHECK_THAT(cut.what(), Contains("\xEF\xBF\xBD"));
  // A form field that decodes to bytes that are not UTF-8 is refused by its name.
  const RequestError e = refusal([] { serve::parse_form_body("q=ok&text=%FF%FE"); });
  CHECK(e.status == 400);
  CHECK_THAT(e.what(), Contains("'text'"));
  CHECK_THAT(refusal([] { serve::translate_request_fields("multipart/form-data; boundary=x", "--x--"); }).what(),
             Contains("multipart"));
  CHECK_THAT(refusal([] { serve::translate_request_fields("application/json", "[1]"); }).what(), Contains("JSON object"));
}

TEST_CASE("serve request: a form's '+', %XX and repeated q", "[serve]") {
  const auto pairs = serve::parse_form_body("q=a+b%2Bc&&source=en&q=%E2%82%AC%zz&flag&target=de%");
  REQUIRE(pairs.size() == 5);
  CHECK(pairs[0] == std::make_pair(std::string("q"), std::string("a b+c")));
  CHECK(pairs[2] == std::make_pair(std::string("q"), std::string("\xE2\x82\xAC%zz")));
  CHECK(pairs[3] == std::make_pair(std::string("flag"), std::string()));
  CHECK(pairs[4].second == "de%");
  const serve::TranslateFields r = serve::read_translate_fields(
      serve::translate_request_fields("application/x-www-form-urlencoded", "q=one&source=en&target=de&q=two&alternatives=3"));
  CHECK(r.list);
  CHECK(r.texts == std::vector<std::string>{"one", "two"});
  CHECK(r.alternatives == 3);
  CHECK(!r.html);
}

TEST_CASE("serve request: wrong-typed and out-of-range fields name their field", "[serve]") {
  struct Case {
    const char* body;
    const char* param;
  };
  const char* base = R"("model":"m","messages":[{"role":"user","content":"hi"}])";
  for (const Case& c : {Case{R"("temperature":"hot")", "temperature"}, Case{R"("n":17)", "n"}, Case{R"("n":0)", "n"},
                        Case{R"("max_tokens":1.5)", "max_tokens"}, Case{R"("seed":18446744073709551615)", "seed"},
                        Case{R"("top_p":0)", "top_p"}, Case{R"("top_p":1e-320)", "top_p"}, Case{R"("stream":"yes")", "stream"},
                        Case{R"("stream_options":{"include_usage":1})", "stream_options.include_usage"},
                        Case{R"("stop":[1])", "stop"}, Case{R"("stop":"")", "stop"},
                        Case{R"("response_format":{"type":"xml"})", "response_format"},
                        Case{R"("logprobs":true)", "logprobs"}, Case{R"("tools":[{}])", "tools"}}) {
    const std::string body = std::string("{") + base + "," + c.body + "}";
    CAPTURE(body);
    const RequestError e = refusal([&] { serve::read_chat_fields(serve::parse_json_body(body)); });
    CHECK(e.status == 400);
    CHECK(e.param == c.param);
    CHECK_THAT(e.what(), StartsWith(c.param));
  }
  for (const Case& c : {Case{R"({"model":5,"messages":[]})", "model"}, Case{R"({"messages":[]})", "model"}}) {
    const RequestError e = refusal([&] { serve::read_model_field(serve::parse_json_body(c.body)); });
    CHECK(e.status == 400);
    CHECK(e.param == c.param);
  }
  const RequestError role = refusal(
      [] { serve::read_chat_fields(serve::parse_json_body(R"({"messages":[{"role":"user"},{"role":5}]})")); });
  CHECK(role.param == "messages[1].role");
  const RequestError part = refusal([] {
    serve::read_chat_fields(serve::parse_json_body(R"({"messages":[{"role":"user","content":[{"type":"image"}]}]})"));
  });
  CHECK(part.param == "messages[0].content");
  const RequestError prompts = refusal([] {
    serve::read_completion_fields(serve::parse_json_body(R"({"prompt":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"));
  });
  CHECK(prompts.param == "prompt");
  const RequestError not_object = refusal([] { serve::read_model_field(json::array()); });
  CHECK(not_object.status == 400);
  CHECK(not_object.param.empty());

  // /translate: LibreTranslate's messages.
  for (const char* body : {R"({"q":5,"source":"en","target":"de"})", R"({"q":"x","source":"en"})",
                           R"({"q":"x","source":"en","target":"de","format":"pdf"})",
                           R"({"q":"x","source":"en","target":"de","alternatives":9})",
                           R"({"q":"x","source":"en","target":"de","alternatives":"-1"})"}) {
    CAPTURE(body);
    CHECK(refusal([&] { serve::read_translate_fields(serve::parse_json_body(body)); }).status == 400);
  }
}

TEST_CASE("serve request: 8 MiB of '[' is refused by the depth scan, which stops at the limit", "[serve][.][linear]") {
  const std::string body(size_t{8} << 20, '[');
  CHECK(serve::json_depth_over(body, serve::kMaxJsonDepth) == serve::kMaxJsonDepth + 1);
  CHECK(serve::json_depth_over(body, body.size() - 1) == body.size());
  CHECK(!serve::json_depth_over(body, body.size()));
  // A syntax error would name a position; the depth check comes first.
  const RequestError e = refusal([&] { serve::parse_json_body(body); });
  CHECK(e.status == 400);
  CHECK_THAT(e.what(), Contains("deeper than 64 levels"));
  // The same as a translation request's fields, and brackets after a megabyte of closers.
  CHECK_THAT(refusal([&] { serve::translate_request_fields("application/json", body); }).what(), Contains("deeper"));
  CHECK_THAT(refusal([&] { serve::parse_json_body(std::string(size_t{4} << 20, ']') + body); }).what(),
             Contains("deeper"));
}

TEST_CASE("serve request: a 4 MiB prompt of escapes is decoded whole", "[serve][.][linear]") {
  // Escaped text and what it decodes to, built side by side: quotes, backslashes and
  // brackets (which must not count as nesting), \n, \u00e9 and a surrogate pair.
  std::string escaped, decoded;
  const size_t target = size_t{4} << 20;
  while (escaped.size() < target) {
    escaped += R"(\"[{\\\n\u00e9\ud83d\ude00x)";
    decoded += "\"[{\\\n\xC3\xA9\xF0\x9F\x98\x80x";
  }
  const std::string body = R"({"model":"m","prompt":")" + escaped + R"(","stop":[")" + std::string(1, '[') + R"("]})";
  CHECK(!serve::json_depth_over(body, 2));
  const serve::CompletionFields r = serve::read_completion_fields(serve::parse_json_body(body));
  REQUIRE(r.prompts.size() == 1);
  CHECK(r.prompts[0] == decoded);
  CHECK(r.options.stop == std::vector<std::string>{"["});
  // The same text as a translation, and as one raw string with its escapes taken apart.
  const std::string translate = R"({"q":")" + escaped + R"(","source":"en","target":"de"})";
  const serve::TranslateFields t = serve::read_translate_fields(serve::translate_request_fields("application/json", translate));
  CHECK(t.texts == std::vector<std::string>{decoded});
  // A lone backslash at the end leaves the string open: a syntax error, not a crash.
  CHECK(refusal([&] { serve::parse_json_body(R"({"q":")" + escaped + "\\"); }).status == 400);
}

TEST_CASE("serve request: a form of 100,000 pairs is read in one pass", "[serve][.][linear]") {
  const size_t pairs = 100000;
  std::string repeated = "source=en&target=de", distinct = "q=x&source=en&target=de";
  for (size_t i = 0; i < pairs; ++i) {
    repeated += "&q=t+" + std::to_string(i) + "%21";
    distinct += "&k" + std::to_string(i) + "=%E2%82%AC";
  }
  const auto fields = serve::parse_form_body(repeated);
  REQUIRE(fields.size() == pairs + 2);
  CHECK(fields[2 + 12345] == std::make_pair(std::string("q"), std::string("t 12345!")));
  // 100,000 texts in q: more than a request may ask for.
  const json q = serve::translate_request_fields("application/x-www-form-urlencoded", repeated);
  CHECK(q["q"].size() == pairs);
  const RequestError e = refusal([&] { serve::read_translate_fields(q); });
  CHECK(e.status == 400);
  CHECK_THAT(e.what(), Contains("at most 1024"));
  // 100,000 other fields are ignored.
  const json d = serve::translate_request_fields("application/x-www-form-urlencoded", distinct);
  CHECK(d.size() == pairs + 3);
  CHECK(d["k99999"] == "\xE2\x82\xAC");
  CHECK(serve::read_translate_fields(d).texts == std::vector<std::string>{"x"});
}

}  // namespace serve_request_test
