// text::ChatTemplate against the oracle's renderings (tests/fixtures/chat_templates,
// written by tools/reference/make_chat_template_fixtures.mjs) and against hostile
// templates: every limit must end in an Error, never a hang, a crash or a huge string.
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "text/chat_template.h"

namespace {

nlohmann::json chat_template_fixture(const std::string& name) {
  std::ifstream in(petrel::test::fixture_dir() + "/chat_templates/" + name + ".json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

petrel::text::ChatTemplateInputs chat_inputs_of(const nlohmann::json& inputs) {
  petrel::text::ChatTemplateInputs out;
  for (const auto& m : inputs.at("messages")) out.messages.push_back({m.at("role"), m.at("content")});
  out.add_generation_prompt = inputs.at("add_generation_prompt");
  for (const auto& s : inputs.at("strings")) out.strings.emplace_back(s.at(0), s.at(1));
  for (const auto& f : inputs.at("flags")) out.flags.emplace_back(f.at(0), f.at(1));
  return out;
}

// The error parse() or render() gives for `source` over one user message.
petrel::Error chat_template_error(const std::string& source) {
  auto parsed = petrel::text::ChatTemplate::parse(source);
  if (!parsed) return parsed.error();
  petrel::text::ChatTemplateInputs inputs;
  inputs.messages = {{"user", "hi"}};
  auto rendered = parsed.value().render(inputs);
  REQUIRE_FALSE(rendered);
  return rendered.error();
}

std::string chat_template_repeated(const std::string& s, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("chat_template: real templates render as transformers.js renders them", "[chat_template]") {
  for (const std::string name : {"gemma3", "qwen3", "llama3.1", "qwen2.5", "gemma2", "snippets"}) {
    const nlohmann::json fixture = chat_template_fixture(name);
    if (name != "snippets") CHECK(fixture.at("cases").size() >= 20);
    for (const auto& c : fixture.at("cases")) {
      const std::string source = c.contains("template") ? c.at("template") : fixture.at("template");
      INFO(name << " / " << c.at("name").get<std::string>() << " (oracle: " << c.at("oracle").get<std::string>() << ")");
      auto parsed = petrel::text::ChatTemplate::parse(source);
      REQUIRE(parsed);
      auto rendered = parsed.value().render(chat_inputs_of(c.at("inputs")));
      if (c.value("jinja2_error_type", "") == "UndefinedError") {
        // jinja2 refuses an attribute of an undefined value (messages[0].role of no
        // messages); transformers.js, whose answer the engine follows, reads undefined.
        CHECK(rendered);
      } else if (c.contains("expected")) {
        REQUIRE(rendered);
        CHECK(rendered.value() == c.at("expected").get<std::string>());
      } else {
        REQUIRE_FALSE(rendered);
        CHECK(rendered.error().code == petrel::ErrorCode::kInvalidArgument);
        CHECK_THAT(rendered.error().message, Catch::Contains(c.at("expected_error").get<std::string>()));
      }
    }
  }
}

TEST_CASE("chat_template: one parsed template renders many inputs, and variables not given are undefined", "[chat_template]") {
  auto parsed = petrel::text::ChatTemplate::parse(
      "{{ bos_token }}|{{ x is defined }}|{{ tools is none }}|{{ enable_thinking is false }}|{{ add_generation_prompt }}"
      "{% for m in messages %}|{{ m.role }}={{ m.content }}{% endfor %}");
  REQUIRE(parsed);
  const petrel::text::ChatTemplate& chat = parsed.value();
  petrel::text::ChatTemplateInputs inputs;
  inputs.messages = {{"user", "a"}, {"assistant", "b"}};
  auto first = chat.render(inputs);
  REQUIRE(first);
  CHECK(first.value() == "|False|True|False|True|user=a|assistant=b");
  inputs.strings = {{"bos_token", "<s>"}};
  inputs.flags = {{"enable_thinking", false}};
  inputs.add_generation_prompt = false;
  auto second = chat.render(inputs);
  REQUIRE(second);
  CHECK(second.value() == "<s>|False|True|True|False|user=a|assistant=b");
}

TEST_CASE("chat_template: raise_exception() is an Error carrying the template's message", "[chat_template]") {
  const petrel::Error e = chat_template_error("{% if messages[0].role == 'user' %}{{ raise_exception('Roles must be X') }}{% endif %}");
  CHECK(e.code == petrel::ErrorCode::kInvalidArgument);
  CHECK_THAT(e.message, Catch::Contains("Roles must be X") && Catch::Contains("1:"));
}

TEST_CASE("chat_template: what the subset lacks is refused at parse, naming the construct and its line:column", "[chat_template]") {
  struct Refused {
    const char* source;
    const char* names;
  };
  const Refused cases[] = {
      {"{{ x | frobnicate }}", "unknown filter 'frobnicate'"},
      {"{% macro m() %}x{% endmacro %}", "'{% macro %}' is not supported"},
      {"{% frob %}", "unknown statement '{% frob %}'"},
      {"{{ x is frob }}", "unknown test 'frob'"},
      {"{{ frob() }}", "unknown function 'frob()'"},
      {"{{ 'a'.frob() }}", "unknown method 'frob()'"},
      {"{{ 2 ** 3 }}", "'**'"},
      {"{% set x %}y{% endset %}", "{% set %}"},
      {"line one\n  {{ x | nope }}", "2:10: unknown filter 'nope'"},
      {"{{ x", "1:1: unterminated tag"},
      {"{% if x", "1:1: unterminated tag"},
      {"{# comment", "unterminated comment"},
      {"{{ 'abc }}", "unterminated string literal"},
      {"{% if true %}x", "'{% if %}' is never closed"},
      {"{% for x in y %}x{% endif %}", "unexpected '{% endif %}'"},
      {"{% endfor %}", "unexpected '{% endfor %}'"},
      {"{% else %}", "outside"},
      {"{% break %}", "outside a loop"},
      {"{{ (1 }}", "unbalanced '}'"},
      {"{{ (1, 2", "unterminated tag"},
      {"{{ f(1 2) }}", "unknown function 'f()'"},
      {"{{ range(1 2) }}", "expected ',' or ')'"},
      {"{{ 1 ]] }}", "unbalanced ']'"},
      {"{{ @ }}", "unexpected character '@'"},
      {"{{ 99999999999999999999 }}", "integer literal out of range"},
      {"{{ }}", "unexpected '}}'"},
  };
  for (const Refused& r : cases) {
    INFO(r.source);
    auto parsed = petrel::text::ChatTemplate::parse(r.source);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == petrel::ErrorCode::kFormat);
    CHECK_THAT(parsed.error().message, Catch::Contains(r.names));
  }
}

TEST_CASE("chat_template: hostile nesting is refused at parse, without deep recursion", "[chat_template]") {
  const int deep = 40000;  // far past any limit (and the whole template under 1 MiB): recursion this deep would overflow the stack
  const std::string nested_blocks = chat_template_repeated("{% if true %}", deep) + chat_template_repeated("{% endif %}", deep);
  const std::string cases[] = {
      nested_blocks,
      chat_template_repeated("{% for x in y %}", 65) + chat_template_repeated("{% endfor %}", 65),
      "{{ " + chat_template_repeated("(", deep) + "1" + chat_template_repeated(")", deep) + " }}",
      "{{ " + chat_template_repeated("[", deep) + chat_template_repeated("]", deep) + " }}",
      "{{ " + chat_template_repeated("{'a': ", deep) + "1" + chat_template_repeated("}", deep) + " }}",
      "{{ " + chat_template_repeated("not ", deep) + "x }}",
      "{{ " + chat_template_repeated("- ", deep) + "1 }}",
      "{{ 1" + chat_template_repeated(" + 1", deep) + " }}",  // a left-deep chain built by a loop
      "{{ x" + chat_template_repeated("|trim", deep) + " }}",
      "{{ x" + chat_template_repeated(".a", deep) + " }}",
      "{{ x" + chat_template_repeated("[0]", deep) + " }}",
      "{{ " + chat_template_repeated("range(", deep) + chat_template_repeated(")", deep) + " }}",
      "{{ 1 if " + chat_template_repeated("1 if 1 else ", deep) + "1 else 1 }}",
  };
  for (const std::string& source : cases) {
    INFO(source.substr(0, 60));
    auto parsed = petrel::text::ChatTemplate::parse(source);
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().code == petrel::ErrorCode::kFormat);
    CHECK_THAT(parsed.error().message, Catch::Contains("nested more than"));
  }
  // Up to the limit is fine.
  auto at_limit = petrel::text::ChatTemplate::parse(chat_template_repeated("{% if true %}", 64) + "x" + chat_template_repeated("{% endif %}", 64));
  REQUIRE(at_limit);
  auto rendered = at_limit.value().render({});
  REQUIRE(rendered);
  CHECK(rendered.value() == "x");
}

TEST_CASE("chat_template: work, output and memory bombs end in an Error", "[chat_template]") {
  struct Bomb {
    std::string source;
    petrel::ErrorCode code;
    const char* says;
  };
  const Bomb bombs[] = {
      {"{% for i in range(1000000000) %}x{% endfor %}", petrel::ErrorCode::kInvalidArgument, "steps of work"},
      {"{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
       petrel::ErrorCode::kInvalidArgument, "a limit"},
      {"{% set l = range(10000) %}{% for a in l %}{% for b in l %}{% endfor %}{% endfor %}", petrel::ErrorCode::kInvalidArgument,
       "steps of work"},
      {"{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", petrel::ErrorCode::kInvalidArgument,
       "a limit"},
      {"{% for a in range(10000000) %}{% endfor %}", petrel::ErrorCode::kOutOfMemory, "bytes of values"},
      {"{% set s = 'x' * 16000000 %}{% for c in s %}{% endfor %}", petrel::ErrorCode::kOutOfMemory, "bytes of values"},
      {"{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy{% endfor %}{% endfor %}{% endfor %}",
       petrel::ErrorCode::kOutOfMemory, "a limit"},
      {"{% for a in range(300000) %}yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy{% endfor %}",
       petrel::ErrorCode::kOutOfMemory, "output longer than"},
      {"{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}", petrel::ErrorCode::kOutOfMemory, "output longer than"},
      {"{{ 'x' * 100000000 }}", petrel::ErrorCode::kOutOfMemory, "longer than"},
      {"{{ [1] * 100000000 }}", petrel::ErrorCode::kOutOfMemory, "longer than"},
      {"{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
       petrel::ErrorCode::kOutOfMemory, "longer than"},
      {"{% set ns = namespace(s='x' * 1000000) %}{% for i in range(1000) %}{% set ns.t = ns.s ~ i %}{% endfor %}",
       petrel::ErrorCode::kOutOfMemory, "bytes of values"},
      {"{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = [ns.l] %}{% endfor %}",
       petrel::ErrorCode::kInvalidArgument, "nested more than"},
      {"{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}", petrel::ErrorCode::kInvalidArgument, "cannot be put"},
      {"{% set ns = namespace(a=1) %}{% set ns.a = ns %}", petrel::ErrorCode::kInvalidArgument, "cannot be put"},
      {"{% for x in [1] %}{% set l = [loop] %}{% endfor %}", petrel::ErrorCode::kInvalidArgument, "cannot be put"},
      {"{{ 9223372036854775807 + 1 }}", petrel::ErrorCode::kInvalidArgument, "integer overflow"},
      {"{{ 1 // 0 }}", petrel::ErrorCode::kInvalidArgument, "by zero"},
      {"{{ 'abc'[::0] }}", petrel::ErrorCode::kInvalidArgument, "step cannot be zero"},
      {"{{ undefined_thing + 1 }}", petrel::ErrorCode::kInvalidArgument, "undefined"},
      {"{% for x in 5 %}{% endfor %}", petrel::ErrorCode::kInvalidArgument, "cannot iterate"},
  };
  for (const Bomb& bomb : bombs) {
    INFO(bomb.source);
    const petrel::Error e = chat_template_error(bomb.source);
    if (std::string(bomb.says) == "a limit") {  // whichever of work or memory runs out first
      CHECK_THAT(e.message, Catch::Contains("steps of work") || Catch::Contains("bytes of values") ||
                                Catch::Contains("output longer than"));
    } else {
      CHECK(e.code == bomb.code);
      CHECK_THAT(e.message, Catch::Contains(bomb.says));
    }
  }
  // A template larger than the limit is refused before lexing.
  auto huge = petrel::text::ChatTemplate::parse(std::string(petrel::text::ChatTemplate::kMaxTemplateBytes + 1, 'x'));
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Catch::Contains("bytes, more than"));
  // ... and one just under renders as its text.
  auto large = petrel::text::ChatTemplate::parse(std::string(petrel::text::ChatTemplate::kMaxTemplateBytes, 'x'));
  REQUIRE(large);
  auto text = large.value().render({});
  REQUIRE(text);
  CHECK(text.value().size() == petrel::text::ChatTemplate::kMaxTemplateBytes);
}

TEST_CASE("chat_template: message text is data: bytes that are no UTF-8, NULs and Jinja syntax pass through", "[chat_template]") {
  auto parsed = petrel::text::ChatTemplate::parse(
      "{% for m in messages %}[{{ m.content }}|{{ m.content | length }}|{{ m.content[::-1] | length }}|{{ m.content | trim }}]{% endfor %}");
  REQUIRE(parsed);
  petrel::text::ChatTemplateInputs inputs;
  const std::string raw("a\xff\xfe b\0c", 7);
  inputs.messages = {{"user", raw}, {"user", "{{ x }}{% if %}"}};
  auto rendered = parsed.value().render(inputs);
  REQUIRE(rendered);
  CHECK(rendered.value() == "[" + raw + "|7|7|" + raw + "][{{ x }}{% if %}|15|15|{{ x }}{% if %}]");
}

TEST_CASE("chat_template: numbers read and print as in the C locale whatever LC_NUMERIC the application set",
          "[chat_template]") {
  // A float literal, float() of strings (Python's float refuses "1,5"), and repr of sums.
  auto parsed = petrel::text::ChatTemplate::parse(
      "{{ 1.5 }}|{{ '2.25' | float }}|{{ '1,5' | float(7) }}|{{ 0.1 + 0.2 }}|{{ 1e300 * 10.0 }}|{{ 3 / 4 }}");
  REQUIRE(parsed);
  petrel::text::ChatTemplateInputs inputs;
  auto in_c = parsed.value().render(inputs);
  REQUIRE(in_c);
  petrel::test::CommaRadixLocale comma;
  if (!comma.ok()) {
    WARN("no locale with a ',' radix here: not checked");
    return;
  }
  auto in_comma = parsed.value().render(inputs);
  REQUIRE(in_comma);
  CHECK(in_comma.value() == in_c.value());
  CHECK(in_comma.value().find(',') == std::string::npos);
  auto reparsed = petrel::text::ChatTemplate::parse("{{ 1.5 }}|{{ '2.25' | float }}");  // parsed under the locale
  REQUIRE(reparsed);
  auto again = reparsed.value().render(inputs);
  REQUIRE(again);
  CHECK(in_c.value().rfind(again.value(), 0) == 0);
}
