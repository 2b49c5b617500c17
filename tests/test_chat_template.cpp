// text::ChatTemplate against the oracle's renderings (tests/fixtures/chat_templates,
// written by tools/reference/make_chat_template_fixtures.mjs) and against hostile
// templates: every limit must end in an Error, never a hang, a crash or a huge string.
#include <cstdint>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/substring_search.h"
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

// What render() gives for `source` over one user message (or `messages`), its output
// limited to `max_output_bytes`.
petrel::Result<std::string> chat_template_render(const std::string& source,
                                                 size_t max_output_bytes = petrel::text::ChatTemplate::kMaxOutputBytes,
                                                 std::vector<petrel::text::ChatMessage> messages = {{"user", "hi"}}) {
  auto parsed = petrel::text::ChatTemplate::parse(source);
  if (!parsed) return parsed.error();
  petrel::text::ChatTemplateInputs inputs;
  inputs.messages = std::move(messages);
  inputs.max_output_bytes = max_output_bytes;
  return parsed.value().render(inputs);
}

// A render that ran out of its work or value budget (and said so), or finished.
void chat_template_finished_or_hit_a_budget(const petrel::Result<std::string>& rendered) {
  if (rendered) return;
  INFO(rendered.error().message);
  CHECK_THAT(rendered.error().message, Catch::StartsWith("chat template ") &&
                                           (Catch::Contains("steps of work") || Catch::Contains("bytes of values")));
}

// `{% set g0 = 0 %}...{% set g<n-1> = 0 %}`, then `turns` lookups of a name never set.
std::string chat_template_globals_then_lookups(int globals, int turns) {
  std::string source;
  for (int i = 0; i < globals; ++i) source += "{% set g" + std::to_string(i) + " = 0 %}";
  return source + "{% set r = range(" + std::to_string(turns / 1000) + ") %}{% set inner = range(1000) %}" +
         "{% for a in r %}{% for b in inner %}{{ x }}{% endfor %}{% endfor %}done";
}

// A dict literal {'0': 0, '1': 1, ..., '10': 0, ...} of `keys` keys.
std::string chat_template_dict_literal(int keys) {
  std::string source = "{";
  for (int i = 0; i < keys; ++i) source += (i ? ",'" : "'") + std::to_string(i) + "':" + std::to_string(i % 10);
  return source + "}";
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
       petrel::ErrorCode::kOutOfMemory, "output would be longer than"},
      {"{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}", petrel::ErrorCode::kOutOfMemory,
       "output would be longer than"},
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
                                Catch::Contains("output would be longer than"));
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

TEST_CASE("chat_template: integer overflow is an error at its line:column, |abs of INT64_MIN included", "[chat_template]") {
  const char* const overflows[] = {
      "{{ (-9223372036854775807 - 1) | abs }}",
      "{{ -(-9223372036854775807 - 1) }}",
      "{{ (-9223372036854775807 - 1) // -1 }}",
      "{{ 9223372036854775807 * 2 }}",
      "{{ -9223372036854775807 - 2 }}",
  };
  for (const char* source : overflows) {
    INFO(source);
    const petrel::Error e = chat_template_error(source);
    CHECK(e.code == petrel::ErrorCode::kInvalidArgument);
    CHECK(std::regex_search(e.message, std::regex("^chat template 1:[0-9]+: integer overflow")));
  }
  // Python's ints do not overflow where the result fits: x % -1 is 0, abs of INT64_MIN + 1 fits.
  auto fits = chat_template_render("{{ (-9223372036854775807 - 1) % -1 }}|{{ (-9223372036854775807) | abs }}|{{ 7 // -1 }}");
  REQUIRE(fits);
  CHECK(fits.value() == "0|9223372036854775807|-7");
  CHECK_THAT(chat_template_error("{{ 'x' | abs }}").message, Catch::Contains("|abs of a string"));
}

TEST_CASE("chat_template: the output limit is the caller's, at most kMaxOutputBytes", "[chat_template]") {
  const std::string source = "ab{% for i in range(9) %}{{ 'ab' }}{% endfor %}";  // 20 bytes
  auto exact = chat_template_render(source, 20);
  REQUIRE(exact);
  CHECK(exact.value() == chat_template_repeated("ab", 10));
  for (const size_t limit : {size_t{0}, size_t{1}, size_t{19}}) {
    INFO(limit);
    auto refused = chat_template_render(source, limit);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == petrel::ErrorCode::kOutOfMemory);
    CHECK_THAT(refused.error().message, Catch::StartsWith("chat template 1:") &&
                                            Catch::Contains("the output would be longer than " + std::to_string(limit) + " bytes"));
  }
  // A value written whole past the limit, and a value built longer than the output limit (allowed:
  // only the output is the caller's), written in part.
  auto value = chat_template_render("{{ 'x' * 1000 }}", 999);
  REQUIRE_FALSE(value);
  CHECK_THAT(value.error().message, Catch::Contains("1:1: the output would be longer than 999 bytes"));
  auto built = chat_template_render("{% set s = 'x' * 1000 %}{{ s[:10] }}", 10);
  REQUIRE(built);
  CHECK(built.value() == "xxxxxxxxxx");
  // The default is the ceiling; a larger limit means the ceiling.
  CHECK(petrel::text::ChatTemplateInputs{}.max_output_bytes == petrel::text::ChatTemplate::kMaxOutputBytes);
  auto empty = chat_template_render("", 0);
  REQUIRE(empty);
  CHECK(empty.value().empty());
}

TEST_CASE("chat_template: what an operation would build is refused before it is built", "[chat_template]") {
  struct Refused {
    const char* source;
    const char* says;
  };
  // Each of these would take hundreds of megabytes or gigabytes if built first.
  const Refused cases[] = {
      {"{{ [0] * 16777216 }}", "bytes of values"},                             // 1.2 GB of values
      {"{{ [0, 0] * 9000000 }}", "a repeated list longer than 16777216 items"},  //
      {"{{ 'ab' * 9000000 }}", "a repeated string longer than 16777216 bytes"},
      {"{{ range(5000000) | length }}", "bytes of values"},
      {"{% for i in range(9223372036854775807) %}{% endfor %}", "steps of work"},
      {"{% for i in range(-9223372036854775807 - 1, 9223372036854775807, 3) %}{% endfor %}", "steps of work"},
      {"{% set s = 'ab' * 1000000 %}{% for c in s %}{% endfor %}", "bytes of values"},  // a Value per character
      {"{% set s = 'ab' * 1000000 %}{{ s | list | length }}", "bytes of values"},
      {"{% set s = 'a ' * 1000000 %}{{ s.split() | length }}", "bytes of values"},  // 1,000,000 parts
      {"{% set s = 'ab' * 1000000 %}{{ s.split('b') | length }}", "bytes of values"},
      {"{% set s = 'x' * 10000000 %}{{ (s ~ s) | length }}", "a string longer than 16777216 bytes"},
      {"{% set s = 'x' * 10000000 %}{{ (s + s) | length }}", "a string longer than 16777216 bytes"},
      {"{% set s = 'x' * 1000000 %}{{ s.replace('x', 'yy' * 10) | length }}", "a string longer than 16777216 bytes"},
      {"{% set s = 'x' * 1000000 %}{{ s | replace('', 'yyyyyyyyyyyyyyyyyyyy') | length }}", "a string longer than 16777216 bytes"},
      {"{% set l = range(300000) | list %}{{ (l + l + l + l) | length }}", "bytes of values"},
      {"{% set l = range(1000000) %}{% for i in l if true %}{% endfor %}", "bytes of values"},  // the loop filter's list
      {"{% set l = range(600000) %}{{ l | map('string') | list | length }}", "bytes of values"},
      {"{% set l = range(1000000) %}{{ l | select('odd') | list | length }}{{ l | reject('odd') | list | length }}", "bytes of values"},
      {"{% set l = range(1200000) %}{{ l | reverse | length }}", "bytes of values"},
      {"{% set l = range(1200000) %}{{ l[::-1] | length }}", "bytes of values"},
      {"{% set s = 'x' * 16777216 %}{{ s | tojson | length }}", "a string longer than 16777216 bytes"},
      {"{% set s = '\\x01' * 5000000 %}{{ [s] | string | length }}", "a string longer than 16777216 bytes"},  // repr: \x01 is 4 bytes
      {"{% set l = [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] * 200000 %}"
       "{{ l | tojson(indent=64) | length }}",
       "a string longer than 16777216 bytes"},
  };
  for (const Refused& r : cases) {
    INFO(r.source);
    const petrel::Error e = chat_template_error(r.source);
    CHECK_THAT(e.message, Catch::StartsWith("chat template 1:") && Catch::Contains(r.says));
    CHECK(e.code == (std::string(r.says) == "steps of work" ? petrel::ErrorCode::kInvalidArgument : petrel::ErrorCode::kOutOfMemory));
  }
}

TEST_CASE("chat_template: every error message starts with 'chat template' once and names line:column", "[chat_template]") {
  const char* const sources[] = {
      "{{ x | frobnicate }}",
      "\n  {{ 1 // 0 }}",
      "{% for i in range(1000000000) %}{% endfor %}",
      "{{ [0] * 16777216 }}",
      "{% for a in range(1000) %}\n{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
      "{{ raise_exception('chat template') }}",
      "{% set ns = namespace() %}{% set ns.a = ns %}",
      "{{ 'abc'.split('') }}",
  };
  for (const char* source : sources) {
    INFO(source);
    const petrel::Error e = chat_template_error(source);
    CHECK(std::regex_search(e.message, std::regex("^chat template [0-9]+:[0-9]+: ")));
    CHECK(e.message.find("chat template", 1) == (std::string(source).find("raise_exception") != std::string::npos
                                                     ? e.message.find("raise_exception: chat template") + 17
                                                     : std::string::npos));
  }
  CHECK(chat_template_error("\n  {{ 1 // 0 }}").message == "chat template 2:8: integer division or modulo by zero");  // at the operator
}

TEST_CASE("chat_template: dicts and namespaces keep insertion order and Python's semantics past a few keys",
          "[chat_template]") {
  // 40 keys with duplicates: the last value wins at the first key's place.
  std::string literal = "{";
  std::string expected_repr = "{";
  for (int i = 0; i < 40; ++i) {
    literal += "'k" + std::to_string(i) + "': " + std::to_string(i) + ", ";
    expected_repr += std::string(i ? ", " : "") + "'k" + std::to_string(i) + "': " + std::to_string(i % 10 == 3 ? 1000 + i : i);
  }
  for (int i = 3; i < 40; i += 10) literal += "'k" + std::to_string(i) + "': " + std::to_string(1000 + i) + ", ";
  literal += "}";
  expected_repr += "}";
  std::string reversed = "{";
  for (int i = 39; i >= 0; --i) reversed += "'k" + std::to_string(i) + "': " + std::to_string(i % 10 == 3 ? 1000 + i : i) + ", ";
  reversed += "}";
  auto rendered = chat_template_render("{% set d = " + literal + " %}{{ d }}|{{ d | length }}|{{ d['k13'] }}|{{ d.k39 }}|"
                                       "{{ 'k0' in d }}{{ 'k40' in d }}{{ d.get('k5') }}{{ d.get('x', 7) }}|{{ d == " + reversed +
                                       " }}{{ d == {'k0': 0} }}|{{ d | first }}{{ d | last }}|{{ d.keys() | list | length }}");
  REQUIRE(rendered);
  CHECK(rendered.value() == expected_repr + "|40|1013|39|TrueFalse57|TrueFalse|k0k39|40");
  // A namespace's attributes, assigned and replaced past the few a scan would serve.
  std::string sets, reads, expected;
  for (int i = 0; i < 30; ++i) sets += "{% set ns.a" + std::to_string(i) + " = " + std::to_string(i) + " %}";
  for (int i = 0; i < 30; i += 2) sets += "{% set ns.a" + std::to_string(i) + " = ns.a" + std::to_string(i) + " * 10 %}";
  for (int i = 0; i < 30; ++i) {
    reads += "{{ ns.a" + std::to_string(i) + " }},";
    expected += std::to_string(i % 2 == 0 ? 10 * i : i) + ",";
  }
  auto ns = chat_template_render("{% set ns = namespace(z=1) %}" + sets + reads + "{{ ns.z }}");
  REQUIRE(ns);
  CHECK(ns.value() == expected + "1");
}

TEST_CASE("chat_template: variables in nested loops shadow and come back as Jinja scopes them", "[chat_template]") {
  auto rendered = chat_template_render(
      "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% for j in [1] %}{{ x }}{% set x = 3 %}{{ x }}{% endfor %}"
      "{{ x }}{% endfor %}{{ x }}|{% for x in [7, 8] %}{{ x }}{% endfor %}{{ x }}|{{ loop is defined }}");
  REQUIRE(rendered);
  CHECK(rendered.value() == "2321|781|False");
}

TEST_CASE("chat_template: indexing, slicing and reversing a string walk the code points its character list holds",
          "[chat_template]") {
  // Any bytes (valid UTF-8 or not): s[i], s[a:b:c] and s|reverse must be what the same
  // operations on s|list (a forward walk) give.
  const std::string source =
      "{% set s = messages[0].content %}{% set l = s | list %}{% set n = l | length %}"
      "{{ s | length == n }}{{ s | reverse == l | reverse | join }}{{ s | first == l | first }}{{ s | last == l | last }}|"
      "{% for i in range(-n - 2, n + 2) %}{% if s[i] != l[i] %}X{{ i }} {% endif %}{% endfor %}|"
      "{% for a in [none, -9, -3, -1, 0, 1, 2, 5, 11] %}{% for b in [none, -7, -2, 0, 1, 4, 9, 40] %}"
      "{% for c in [none, -5, -2, -1, 1, 2, 3] %}{% if s[a:b:c] != l[a:b:c] | join %}X{{ a }},{{ b }},{{ c }} {% endif %}"
      "{% endfor %}{% endfor %}{% endfor %}";
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x91\x8b", "\x80", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f", "\xed\xa0\x80", " "};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int length = static_cast<int>(rng() % 14);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % (sizeof alphabet / sizeof alphabet[0])];
    INFO("trial " << trial);
    auto rendered = chat_template_render(source, petrel::text::ChatTemplate::kMaxOutputBytes, {{"user", text}});
    REQUIRE(rendered);
    CHECK(rendered.value() == "TrueTrueTrueTrue||");
  }
}

TEST_CASE("chat_template: tojson writes bytes that are no UTF-8 as U+FFFD", "[chat_template]") {
  auto rendered = chat_template_render("{{ messages[0].content | tojson }}", petrel::text::ChatTemplate::kMaxOutputBytes,
                                       {{"user", "a\xff" "b\xc3\xa9\n\xe2\x82"}});
  REQUIRE(rendered);
  CHECK(rendered.value() == "\"a\xef\xbf\xbd" "b\xc3\xa9\\n\xef\xbf\xbd\"");
}

TEST_CASE("substring_search: SubstringFinder finds what std::string::find finds, every match left to right",
          "[chat_template][substring_search]") {
  using petrel::detail::SubstringFinder;
  size_t failures = 0;
  const auto check = [&](const std::string& pattern, const std::string& text) {
    const SubstringFinder finder(pattern);
    for (size_t from = 0; from <= text.size() + 1 && failures < 10; ++from) {
      const size_t expected = from > text.size() ? std::string::npos : text.find(pattern, from);
      const size_t found = finder.find(text, from);
      if (found != expected) {
        INFO("pattern '" << pattern << "' text '" << text << "' from " << from);
        CHECK(found == expected);
        ++failures;
      }
    }
    // Every non-overlapping match, left to right.
    std::vector<size_t> expected_all, found_all;
    for (size_t at = text.find(pattern); at != std::string::npos && at <= text.size();
         at = text.find(pattern, at + std::max<size_t>(pattern.size(), 1)))
      expected_all.push_back(at);
    for (size_t at = finder.find(text); at != std::string::npos; at = finder.find(text, at + std::max<size_t>(pattern.size(), 1)))
      found_all.push_back(at);
    if (found_all != expected_all && failures++ < 10) {
      INFO("all matches of '" << pattern << "' in '" << text << "'");
      CHECK(found_all == expected_all);
    }
  };
  // Every pattern of up to 6 bytes and text of up to 10 over {a, b}: the empty pattern,
  // patterns longer than the text, periodic ones, overlapping candidates, every start.
  std::vector<std::string> words{""};
  for (size_t i = 0; i < words.size() && words[i].size() < 10; ++i) {
    words.push_back(words[i] + 'a');
    words.push_back(words[i] + 'b');
  }
  for (const std::string& pattern : words)
    if (pattern.size() <= 6)
      for (const std::string& text : words) check(pattern, text);
  // Random periodic patterns (a period repeated, then cut or changed at one byte) and
  // texts made of their pieces, over 2, 3 and 256 byte values.
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3000 && failures < 10; ++trial) {
    const unsigned alphabet = trial % 3 == 0 ? 2 : trial % 3 == 1 ? 3 : 256;
    const auto byte = [&] { return static_cast<char>(alphabet == 256 ? rng() % 256 : 'a' + rng() % alphabet); };
    std::string period;
    for (unsigned i = 0, n = 1 + rng() % 5; i < n; ++i) period += byte();
    std::string pattern;
    for (unsigned i = 0, n = rng() % 40; i < n; ++i) pattern += period[i % period.size()];
    if (!pattern.empty() && rng() % 2) pattern[rng() % pattern.size()] = byte();
    std::string text;
    while (text.size() < 200) {
      switch (rng() % 3) {
        case 0: text += pattern; break;
        case 1: text += pattern.substr(0, pattern.empty() ? 0 : rng() % pattern.size()); break;
        default: text += byte(); break;
      }
    }
    check(pattern, text);
  }
  CHECK(failures == 0);
}

TEST_CASE("substring_search: megabyte texts against the patterns that make a naive search quadratic", "[.][linear]") {
  using petrel::detail::SubstringFinder;
  const std::string as(4u << 20, 'a');
  for (const size_t m : {size_t{2}, size_t{100}, size_t{5000}, size_t{100000}}) {
    INFO(m);
    CHECK(SubstringFinder(std::string(m - 1, 'a') + "b").find(as) == std::string::npos);
    CHECK(SubstringFinder("b" + std::string(m - 1, 'a')).find(as) == std::string::npos);
    CHECK(SubstringFinder(std::string(m / 2, 'a') + "b" + std::string(m / 2, 'a')).find(as) == std::string::npos);
    // Every non-overlapping match of a periodic pattern, left to right.
    const std::string unit = std::string(m - 1, 'a') + "b";
    std::string text;
    while (text.size() < (4u << 20)) text += unit;
    const std::string pattern = unit + unit;
    const SubstringFinder finder(pattern);
    size_t matches = 0;
    for (size_t at = finder.find(text); at != std::string::npos; at = finder.find(text, at + pattern.size())) {
      CHECK(at == matches * pattern.size());
      ++matches;
    }
    CHECK(matches == text.size() / pattern.size());
  }
}

TEST_CASE("chat_template: lookups among 10,000 globals are charged what they cost", "[.][linear]") {
  // Before variables were hashed, each lookup scanned every global (1,000,000 lookups: 10^10 comparisons).
  for (const int globals : {1000, 10000}) {
    INFO(globals);
    auto rendered = chat_template_render(chat_template_globals_then_lookups(globals, 1000000));
    chat_template_finished_or_hit_a_budget(rendered);
    if (rendered) CHECK(rendered.value() == "done");
  }
}

TEST_CASE("chat_template: dict literals are built in linear time; a 90,000-key one is refused at parse", "[.][linear]") {
  // 360,000 tokens: past kMaxTokens, so refused before anything is built for it.
  auto huge = petrel::text::ChatTemplate::parse("{% set d = " + chat_template_dict_literal(90000) + " %}{{ d | length }}");
  REQUIRE_FALSE(huge);
  CHECK(huge.error().code == petrel::ErrorCode::kFormat);
  CHECK_THAT(huge.error().message, Catch::Matches("chat template 1:[0-9]+: more than 65536 tokens .*"));
  // 16,000 keys (64,000 tokens), built 20 times: a quadratic duplicate check made 2.6e9 comparisons.
  const std::string literal = chat_template_dict_literal(16000);
  auto once = chat_template_render("{% set d = " + literal + " %}{{ d | length }} {{ d['15999'] }} {{ '8000' in d }}");
  INFO((once ? std::string() : once.error().message));
  REQUIRE(once);
  CHECK(once.value() == "16000 9 True");
  chat_template_finished_or_hit_a_budget(
      chat_template_render("{% for i in range(20) %}{% set d = " + literal + " %}{% endfor %}{{ d | length }}"));
  // Equality of two large dicts (the same keys, in another order) costs a lookup per key.
  std::string reversed = "{";
  for (int i = 7999; i >= 0; --i) reversed += "'" + std::to_string(i) + "':" + std::to_string(i % 10) + (i ? "," : "}");
  auto equal = chat_template_render("{% set d = " + chat_template_dict_literal(8000) + " %}{% set e = " + reversed +
                                    " %}{{ d == e }}{% for i in range(500) %}{% if d != e %}x{% endif %}{% endfor %}");
  INFO((equal ? std::string() : equal.error().message));
  REQUIRE(equal);
  CHECK(equal.value() == "True");
}

TEST_CASE("chat_template: a template of more than kMaxTokens tokens is refused, after the errors its first ones hold",
          "[chat_template]") {
  const std::string many = "{{ [" + chat_template_repeated("1,", 40000) + "1] }}";
  auto refused = petrel::text::ChatTemplate::parse(many);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == petrel::ErrorCode::kFormat);
  CHECK_THAT(refused.error().message, Catch::StartsWith("chat template 1:") && Catch::Contains("more than 65536 tokens"));
  CHECK_THAT(petrel::text::ChatTemplate::parse(chat_template_repeated("{{ x }}", 30000)).error().message,
             Catch::Contains("more than 65536 tokens"));
  // An error before the limit is the one told.
  CHECK_THAT(petrel::text::ChatTemplate::parse("{{ x | nope }}" + many).error().message, Catch::Contains("1:8: unknown filter 'nope'"));
  // Text is one token however long, and real templates have a few hundred tokens.
  auto text = petrel::text::ChatTemplate::parse(chat_template_repeated("{{ x }}", 16000) + std::string(500000, 't'));
  REQUIRE(text);
}

TEST_CASE("chat_template: in, replace and split on megabyte strings search in linear time", "[.][linear]") {
  const std::string setup = "{% set s = 'a' * 2097152 %}{% set p = 'a' * 1000 ~ 'b' %}{% set h = 'a' * 1048576 %}";
  auto searched = chat_template_render(setup + "{{ p in s }} {{ p in (s ~ 'b') }} {{ p not in s }}");
  REQUIRE(searched);
  CHECK(searched.value() == "False True True");
  chat_template_finished_or_hit_a_budget(
      chat_template_render(setup + "{% for i in range(100) %}{% if p in s %}x{% endif %}{% endfor %}done"));
  auto replaced = chat_template_render(setup + "{{ h.replace(p, 'x') == h }} {{ (h | replace(p, 'x')) == h }} {{ h.split(p) | length }}");
  REQUIRE(replaced);
  CHECK(replaced.value() == "True True 1");
  // With matches: 1,000 periods of 'a' * 999 ~ 'b'.
  auto matched = chat_template_render(
      "{% set u = 'a' * 999 ~ 'b' %}{% set t = u * 1000 %}{{ t.replace(u, 'x') }}|{{ t | replace(u, 'yz', 3) | length }}|"
      "{{ t.split(u) | length }}|{{ t.split(u, 2) | last | length }}|{{ (t ~ 'a').split('b') | last }}");
  REQUIRE(matched);
  CHECK(matched.value() == std::string(1000, 'x') + "|" + std::to_string(6 + 997 * 1000) + "|1001|998000|a");
  for (const char* op : {"h.replace(p, 'x')", "h | replace(p, 'x')", "h.split(p)"}) {
    INFO(op);
    chat_template_finished_or_hit_a_budget(
        chat_template_render(setup + "{% for i in range(1000) %}{% set r = " + op + " %}{% endfor %}done"));
  }
}

TEST_CASE("chat_template: megabyte values are refused before they are built, or built within the budget", "[.][linear]") {
  const petrel::Error list = chat_template_error("{{ [0] * 16777216 }}");
  CHECK(list.code == petrel::ErrorCode::kOutOfMemory);
  CHECK_THAT(list.message, Catch::Contains("bytes of values"));
  const petrel::Error parts = chat_template_error("{{ ('a' * 16777216).split('a') }}");  // 16,777,217 parts
  CHECK(parts.code == petrel::ErrorCode::kOutOfMemory);
  CHECK_THAT(parts.message, Catch::Contains("bytes of values"));
  // 16 MiB of output from a 25-byte template: the default limit allows it, the caller's may not.
  const std::string spaced = "{{ 'a ' * 8388608 }}";
  auto full = chat_template_render(spaced);
  REQUIRE(full);
  CHECK(full.value().size() == petrel::text::ChatTemplate::kMaxOutputBytes);
  auto limited = chat_template_render(spaced, 1 << 20);
  REQUIRE_FALSE(limited);
  CHECK(limited.error().code == petrel::ErrorCode::kOutOfMemory);
  CHECK_THAT(limited.error().message, Catch::Contains("1:1: the output would be longer than 1048576 bytes"));
  auto past_ceiling = chat_template_render("{% set s = 'a' * 16777216 %}{{ s }}{{ s }}", SIZE_MAX);
  REQUIRE_FALSE(past_ceiling);
  CHECK_THAT(past_ceiling.error().message, Catch::Contains("the output would be longer than 16777216 bytes"));
  // Slicing or reversing a 4 MB string needs no table of its code points (8 bytes each).
  auto reversed = chat_template_render("{% set s = 'ab' * 2000000 %}{{ s[::-1][:4] }}{{ (s | reverse)[-3:] }}{{ s[1::2] | length }}");
  REQUIRE(reversed);
  CHECK(reversed.value() == "babaaba2000000");
  // The caller's messages count against the value budget too (5 x 15 MB), and each is a string (at most 16 MiB).
  const std::vector<petrel::text::ChatMessage> five(5, {"user", std::string(15000000, 'x')});
  auto messages = chat_template_render("{{ messages | length }}", petrel::text::ChatTemplate::kMaxOutputBytes, five);
  REQUIRE_FALSE(messages);
  CHECK(messages.error().code == petrel::ErrorCode::kOutOfMemory);
  CHECK_THAT(messages.error().message, Catch::StartsWith("chat template: rendering builds more than"));
  auto long_message = chat_template_render("{{ messages | length }}", petrel::text::ChatTemplate::kMaxOutputBytes,
                                           {{"user", std::string((16u << 20) + 1, 'x')}});
  REQUIRE_FALSE(long_message);
  CHECK(long_message.error().message == "chat template: a string longer than 16777216 bytes");
}
