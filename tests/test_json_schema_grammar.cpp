// JSON Schema -> GBNF (text/json_schema_grammar.h) and the JSON reader under it
// (text/json_value.h). The oracle: Debian's python3-jsonschema, whose verdicts on 20
// schemas' instances tools/reference/make_json_schema_fixtures.py wrote to
// tests/fixtures/json_schema/schemas.json; the grammar must take an instance (compact, and
// indented as the grammar's whitespace allows) exactly when the validator does, except
// where the fixture records why llama.cpp's semantics differ.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "petrel/generator.h"
#include "support/build_paths.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"
#include "text/gbnf.h"
#include "text/gbnf_matcher.h"
#include "text/json_schema_grammar.h"
#include "text/json_value.h"

namespace {

using petrel::ErrorCode;
using petrel::text::GbnfMatcher;
using petrel::text::JsonDocument;
using petrel::text::JsonKind;
using petrel::text::json_schema_to_gbnf;
using petrel::text::parse_json;

GbnfMatcher schema_matcher(const std::string& schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf) FAIL(gbnf.error().message);
  auto g = petrel::text::parse_gbnf(gbnf.value());
  if (!g) FAIL(g.error().message + "\n" + gbnf.value().substr(0, 4000));
  auto m = GbnfMatcher::create(std::move(g.value()));
  if (!m) FAIL(m.error().message);
  return std::move(m.value());
}

// Whether the grammar takes `text` whole.
bool schema_takes(GbnfMatcher& m, const std::string& text) {
  const GbnfMatcher::State start = m.state();
  auto ok = m.accept(text);
  if (!ok) FAIL(ok.error().message);
  const bool whole = ok.value() && m.complete();
  m.set_state(start);
  return whole;
}

std::string read_schema_fixture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string& fixture_member(const JsonDocument& d, uint32_t object, const char* key) {
  const uint32_t v = d.find(object, key);
  REQUIRE(v != UINT32_MAX);
  return d.node(v).text;
}

struct SchemaRefusal {
  ErrorCode code;
  std::string message;
};
SchemaRefusal schema_refusal(const std::string& schema) {
  auto g = json_schema_to_gbnf(schema);
  if (g) return {ErrorCode::kInternal, "(accepted)"};
  return {g.error().code, g.error().message};
}

}  // namespace

TEST_CASE("JSON schema: the grammar takes what python3-jsonschema validates", "[json_schema]") {
  auto doc = parse_json(read_schema_fixture(petrel::test::fixture_dir() + "/json_schema/schemas.json"));
  REQUIRE(doc);
  const JsonDocument& d = doc.value();
  const uint32_t schemas = d.find(d.root(), "schemas");
  REQUIRE(schemas != UINT32_MAX);
  REQUIRE(d.node(schemas).count == 20);
  size_t checked = 0, differing = 0;
  for (uint32_t i = 0; i < d.node(schemas).count; ++i) {
    const uint32_t s = d.child(schemas, i);
    const std::string& name = fixture_member(d, s, "name");
    INFO("schema " << name);
    GbnfMatcher m = schema_matcher(fixture_member(d, s, "schema_text"));
    const uint32_t instances = d.find(s, "instances");
    CHECK(d.node(instances).count >= 10);
    size_t valid = 0, invalid = 0;
    for (uint32_t k = 0; k < d.node(instances).count; ++k) {
      const uint32_t inst = d.child(instances, k);
      const std::string& text = fixture_member(d, inst, "text");
      const bool python = d.node(d.find(inst, "valid")).boolean;
      const bool expected = d.node(d.find(inst, "grammar")).boolean;
      // The grammar departs from the validator only where the fixture says why.
      if (expected != python) {
        CHECK(d.find(inst, "note") != UINT32_MAX);
        ++differing;
      }
      (python ? valid : invalid) += 1;
      INFO("instance " << text);
      CHECK(schema_takes(m, text) == expected);
      const uint32_t pretty = d.find(inst, "pretty");
      if (pretty != UINT32_MAX) {
        INFO("indented:\n" << d.node(pretty).text);
        CHECK(schema_takes(m, d.node(pretty).text) == expected);
      }
      ++checked;
    }
    CHECK(valid >= 1);
    CHECK(invalid >= 1);
  }
  CHECK(checked >= 200);
  CHECK(differing <= 10);  // the recorded departures, not a rule of thumb
}

// A random walk through a grammar: at each step one of the bytes it can take (printable
// ASCII, whitespace and the bytes of U+00E9 and U+4E2D), stopping at random once the
// output is complete. A random model is the hardest case for a grammar: whatever it
// picks, the output must end, within the bounds, as JSON.
std::string random_walk(GbnfMatcher& m, std::mt19937& rng) {
  static const std::string candidates = [] {
    std::string c = " \n\t\xc3\xa9\xe4\xb8\xad";
    for (char b = 0x21; b < 0x7f; ++b) c += b;
    return c;
  }();
  const GbnfMatcher::State start = m.state();
  std::string out;
  std::vector<char> allowed;
  for (;;) {
    if (m.complete() && rng() % 4 == 0) break;
    allowed.clear();
    for (const char b : candidates) {
      const GbnfMatcher::State here = m.state();
      auto ok = m.accept(static_cast<uint8_t>(b));
      if (!ok) FAIL(ok.error().message);
      if (ok.value()) {
        allowed.push_back(b);
        m.set_state(here);
      }
    }
    if (allowed.empty()) break;
    const char b = allowed[rng() % allowed.size()];
    REQUIRE(m.accept(static_cast<uint8_t>(b)).value());
    out += b;
    REQUIRE(out.size() < 200000);
  }
  CHECK(m.complete());
  m.set_state(start);
  return out;
}

TEST_CASE("JSON schema: random walks through each fixture's grammar end as JSON", "[json_schema]") {
  auto doc = parse_json(read_schema_fixture(petrel::test::fixture_dir() + "/json_schema/schemas.json"));
  REQUIRE(doc);
  const JsonDocument& d = doc.value();
  const uint32_t schemas = d.find(d.root(), "schemas");
  std::mt19937 rng(58);
  for (uint32_t i = 0; i < d.node(schemas).count; ++i) {
    const uint32_t s = d.child(schemas, i);
    INFO("schema " << fixture_member(d, s, "name"));
    GbnfMatcher m = schema_matcher(fixture_member(d, s, "schema_text"));
    for (int walk = 0; walk < 10; ++walk) {
      const std::string out = random_walk(m, rng);
      INFO(out);
      auto parsed = parse_json(out);
      CHECK(parsed.has_value());
    }
  }
}

TEST_CASE("JSON schema: what the grammar bounds", "[json_schema]") {
  // A string without maxLength: at most kSchemaDefaultMaxLength characters.
  GbnfMatcher s = schema_matcher(R"({"type":"string"})");
  CHECK(schema_takes(s, "\"" + std::string(petrel::text::kSchemaDefaultMaxLength, 'a') + "\""));
  CHECK_FALSE(schema_takes(s, "\"" + std::string(petrel::text::kSchemaDefaultMaxLength + 1, 'a') + "\""));
  // A \u escape of a surrogate only as a pair, which is one character (as the validator
  // counts it); a lone surrogate is no character.
  CHECK(schema_takes(s, R"("\ud83d\ude00 \u00e9 \uFFFF")"));
  CHECK_FALSE(schema_takes(s, R"("\ud83d")"));
  CHECK_FALSE(schema_takes(s, R"("\ude00")"));
  CHECK_FALSE(schema_takes(s, R"("\ud83d\u0041")"));
  GbnfMatcher one = schema_matcher(R"({"type":"string","maxLength":1})");
  CHECK(schema_takes(one, R"("\uD83D\uDE00")"));
  CHECK_FALSE(schema_takes(one, R"("ab")"));
  // Integers: at most 16 digits, as llama.cpp.
  GbnfMatcher i = schema_matcher(R"({"type":"integer"})");
  CHECK(schema_takes(i, "-9999999999999999"));
  CHECK_FALSE(schema_takes(i, "12345678901234567"));
  GbnfMatcher r = schema_matcher(R"({"type":"integer","minimum":5})");
  CHECK(schema_takes(r, "9999999999999999"));
  CHECK_FALSE(schema_takes(r, "10000000000000000"));
  CHECK_FALSE(schema_takes(r, "4"));
  // Numbers: an exponent of at most two digits, so no number overflows a double.
  GbnfMatcher n = schema_matcher(R"({"type":"number"})");
  CHECK(schema_takes(n, "-9999999999999999.9999999999999999e+99"));
  CHECK(schema_takes(n, "1E-07"));
  CHECK_FALSE(schema_takes(n, "1e100"));
  CHECK_FALSE(schema_takes(n, "9e204261"));
  // An array without maxItems: at most kSchemaDefaultMaxItems elements.
  GbnfMatcher a = schema_matcher(R"({"type":"array","items":{"type":"integer"}})");
  std::string items = "[0";
  for (size_t k = 1; k < petrel::text::kSchemaDefaultMaxItems; ++k) items += ",0";
  CHECK(schema_takes(a, items + "]"));
  CHECK_FALSE(schema_takes(a, items + ",0]"));
  // Additional properties: at most kSchemaMaxExtraProperties keys.
  GbnfMatcher o = schema_matcher(R"({"type":"object","additionalProperties":{"type":"null"}})");
  std::string object = "{";
  for (size_t k = 0; k < petrel::text::kSchemaMaxExtraProperties; ++k)
    object += (k ? ",\"k" : "\"k") + std::to_string(k) + "\":null";
  CHECK(schema_takes(o, object + "}"));
  CHECK_FALSE(schema_takes(o, object + ",\"x\":null}"));
  // A free value nests at most kSchemaFreeValueDepth containers.
  GbnfMatcher v = schema_matcher("{}");
  const size_t depth = petrel::text::kSchemaFreeValueDepth;
  CHECK(schema_takes(v, std::string(depth, '[') + std::string(depth, ']')));
  CHECK_FALSE(schema_takes(v, std::string(depth + 1, '[') + std::string(depth + 1, ']')));
  // Whitespace: one run after a token, of at most two newlines and 20 spaces or tabs.
  GbnfMatcher w = schema_matcher(R"({"type":"array","items":{"type":"integer"}})");
  CHECK(schema_takes(w, "[ 1 ,\n\n" + std::string(20, ' ') + "2 ]\n"));
  CHECK_FALSE(schema_takes(w, "[\n" + std::string(21, ' ') + "1]"));
  CHECK_FALSE(schema_takes(w, "[  1]"));
  CHECK_FALSE(schema_takes(w, " [1]"));
}

TEST_CASE("JSON schema: refusals name the keyword and where it stands", "[json_schema]") {
  struct Case {
    const char* schema;
    ErrorCode code;
    const char* message;
  };
  const Case cases[] = {
      {R"({"properties":{"a":{"type":"string","pattern":"^x$"}}})", ErrorCode::kUnsupported,
       R"(JSON schema "/properties/a/pattern": "pattern" is not supported)"},
      {R"({"allOf":[{"type":"string"}]})", ErrorCode::kUnsupported, R"(JSON schema "/allOf": "allOf" is not supported)"},
      {R"({"items":{"not":{}}})", ErrorCode::kUnsupported, R"(JSON schema "/items/not": "not" is not supported)"},
      {R"({"type":"object","minProperties":1})", ErrorCode::kUnsupported,
       R"(JSON schema "/minProperties": "minProperties" is not supported)"},
      {R"({"properties":{"a~b/c":{"uniqueItems":true}}})", ErrorCode::kUnsupported,
       R"(JSON schema "/properties/a~0b~1c/uniqueItems": "uniqueItems" is not supported)"},
      {R"({"$ref":"#/$defs/missing"})", ErrorCode::kInvalidArgument,
       R"(JSON schema "/$ref": $ref "#/$defs/missing" points to nothing in the schema)"},
      {R"({"$ref":"https://example.com/s.json"})", ErrorCode::kUnsupported,
       R"(JSON schema "/$ref": $ref "https://example.com/s.json" is not supported: only local references ("#/..."))"},
      {R"({"$ref":"#/$defs/a","type":"string","$defs":{"a":{}}})", ErrorCode::kUnsupported,
       R"(JSON schema "/type": "type" cannot be combined with "$ref")"},
      {"[]", ErrorCode::kInvalidArgument, R"(JSON schema "": a schema must be an object or a boolean)"},
      {"5", ErrorCode::kInvalidArgument, R"(JSON schema "": a schema must be an object or a boolean)"},
      {"false", ErrorCode::kInvalidArgument, R"(JSON schema "": the schema false accepts no value)"},
      {R"({"properties":{"a":3}})", ErrorCode::kInvalidArgument,
       R"(JSON schema "/properties/a": a schema must be an object or a boolean)"},
      {R"({"type":"string","format":"email"})", ErrorCode::kUnsupported,
       R"(JSON schema "/format": format "email" is not supported (date, time, date-time, uuid are))"},
      {R"({"type":"number","minimum":0})", ErrorCode::kUnsupported,
       R"(JSON schema "/minimum": "minimum" is supported for integers only, not numbers)"},
      {R"({"type":"string","minimum":1})", ErrorCode::kInvalidArgument,
       R"(JSON schema "/minimum": "minimum" constrains integers, and "type" allows none)"},
      {R"({"type":"strng"})", ErrorCode::kInvalidArgument,
       R"(JSON schema "/type": "type" names object, array, string, integer, number, boolean or null)"},
      {R"({"type":"integer","minimum":5,"maximum":4})", ErrorCode::kInvalidArgument,
       R"(JSON schema "": no integer is within its minimum and maximum)"},
      {R"({"type":"integer","minimum":1e17})", ErrorCode::kUnsupported,
       R"(JSON schema "/minimum": no integer of at most 16 digits is allowed)"},
      {R"({"type":"string","minLength":2000})", ErrorCode::kUnsupported, R"(JSON schema "/minLength": a minLength over 1000)"},
      {R"({"type":"array","items":[{"type":"string"}]})", ErrorCode::kUnsupported,
       R"(JSON schema "/items": "items" as an array (write "prefixItems"))"},
      {R"({"properties":{"a":{}},"required":["b"]})", ErrorCode::kUnsupported,
       R"(JSON schema "/required/0": required property "b" is not in "properties")"},
      {R"({"enum":[1,2],"type":"string"})", ErrorCode::kInvalidArgument,
       R"(JSON schema "/enum": no value of "enum" has a type that "type" allows)"},
      {R"({"enum":["a"],"maxLength":3})", ErrorCode::kUnsupported,
       R"(JSON schema "/maxLength": "maxLength" cannot be combined with "enum")"},
      {R"({"anyOf":[]})", ErrorCode::kInvalidArgument, R"(JSON schema "/anyOf": "anyOf" must be a non-empty array of schemas)"},
      {R"({"type":"object","properties":{"a\"b":{}},"additionalProperties":true})", ErrorCode::kUnsupported,
       R"(JSON schema "/properties/a\"b": additional properties beside a property name that JSON escapes)"},
      {R"({"$ref":"#"})", ErrorCode::kInvalidArgument,
       "JSON schema: a cycle of $ref that reads no character (grammar 2:1: left recursion: rule 'ref' can reach "
       "itself without consuming a character (ref -> ref))"},
      {R"({"type":"string",)", ErrorCode::kInvalidArgument, "JSON schema: JSON byte 17: the text ends inside a container"},
      {R"({"type":"string"} x)", ErrorCode::kInvalidArgument, "JSON schema: JSON byte 18: text after the value"},
  };
  for (const Case& c : cases) {
    INFO(c.schema);
    const SchemaRefusal r = schema_refusal(c.schema);
    CHECK(r.message == c.message);
    CHECK(r.code == c.code);
  }
  // The depth limit: the JSON reader's, with the offset of the container too deep.
  std::string deep;
  for (size_t k = 0; k < 200; ++k) deep += R"({"properties":{"a":)";
  deep += "{}";
  for (size_t k = 0; k < 200; ++k) deep += "}}";
  const SchemaRefusal r = schema_refusal(deep);
  CHECK(r.code == ErrorCode::kInvalidArgument);
  CHECK(r.message == "JSON schema: JSON byte " + std::to_string(64 * 19) +
                         ": containers nested deeper than the limit of 128");
}

TEST_CASE("JSON schema: $ref cycles are rules, annotations pass, types combine", "[json_schema]") {
  // A list through $ref to itself: a cycle of rules, not an expansion.
  GbnfMatcher list = schema_matcher(
      R"({"$defs":{"cell":{"anyOf":[{"type":"null"},{"type":"object","properties":{"head":{"type":"integer"},)"
      R"("tail":{"$ref":"#/$defs/cell"}},"required":["head","tail"]}]}},"$ref":"#/$defs/cell","title":"a list"})");
  CHECK(schema_takes(list, "null"));
  CHECK(schema_takes(list, R"({"head":1,"tail":{"head":2,"tail":null}})"));
  CHECK_FALSE(schema_takes(list, R"({"head":1,"tail":{"head":2}})"));
  // The annotations are accepted and do not constrain.
  GbnfMatcher annotated = schema_matcher(
      R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t","description":"d",)"
      R"("examples":[1],"default":2,"$comment":"c","deprecated":false,"readOnly":true,"writeOnly":false,"type":"integer"})");
  CHECK(schema_takes(annotated, "42"));
  CHECK_FALSE(schema_takes(annotated, "\"42\""));
  // A JSON pointer with escapes and an array index.
  GbnfMatcher pointer = schema_matcher(R"({"$defs":{"a/b":{"anyOf":[{"type":"boolean"},{"type":"null"}]}},)"
                                       R"("$ref":"#/$defs/a~1b/anyOf/1"})");
  CHECK(schema_takes(pointer, "null"));
  CHECK_FALSE(schema_takes(pointer, "true"));
  // Boolean schemas: true takes anything, false properties and items take nothing.
  GbnfMatcher none = schema_matcher(R"({"properties":{"a":false,"b":true}})");
  CHECK(schema_takes(none, R"({"b":[1,{"c":"d"}]})"));
  CHECK_FALSE(schema_takes(none, R"({"a":1})"));
}

TEST_CASE("JSON reader: values, escapes and surrogates", "[json_schema]") {
  auto doc = parse_json(" {\"a\":[1,2.5e3,-0,true,false,null,\"x\\u00e9\\ud83d\\ude00\\n\\/\"],\"b\":{}} ");
  REQUIRE(doc);
  const JsonDocument& d = doc.value();
  const uint32_t a = d.find(d.root(), "a");
  REQUIRE(d.node(a).kind == JsonKind::kArray);
  REQUIRE(d.node(a).count == 7);
  int64_t v = 0;
  CHECK((d.integer_value(d.child(a, 0), &v) && v == 1));
  CHECK((d.integer_value(d.child(a, 1), &v) && v == 2500));
  CHECK(d.node(d.child(a, 2)).text == "-0");
  CHECK(d.node(d.child(a, 3)).boolean);
  CHECK(d.node(d.child(a, 5)).kind == JsonKind::kNull);
  CHECK(d.node(d.child(a, 6)).text == "x\xc3\xa9\xf0\x9f\x98\x80\n/");
  CHECK(d.node(d.find(d.root(), "b")).count == 0);
  CHECK(d.node(a).offset == 6);
}

TEST_CASE("JSON reader: each error names its byte offset", "[json_schema]") {
  struct Case {
    std::string text;
    size_t offset;
    const char* what;
  };
  const std::vector<Case> cases = {
      {"", 0, "no value"},
      {"  ", 2, "no value"},
      {"[1,]", 3, "expected a value"},
      {"{\"a\":1,\"a\":2}", 7, "a duplicate key"},
      {"\"\\ud800\"", 1, "a high surrogate escape without its low surrogate"},
      {"\"\\ud800\\u0041\"", 1, "a high surrogate escape without its low surrogate"},
      {"\"\\udc00\"", 1, "a lone low surrogate escape"},
      {"\"\\u12g4\"", 5, "a \\u escape needs four hex digits"},
      {"\"\\q\"", 1, "an unknown escape"},
      {"01", 1, "text after the value"},
      {"1.", 0, "a malformed number (no digit after '.')"},
      {"1e+", 0, "a malformed number (no digit in the exponent)"},
      {"-", 0, "a malformed number"},
      {"\"ab", 0, "a string is not closed"},
      {"\"a\x01\"", 2, "a control character in a string must be escaped"},
      {"\"a\xff\"", 2, "text that is not UTF-8"},
      {"\"\xed\xa0\x80\"", 1, "text that is not UTF-8"},
      {"[1 2]", 3, "expected ',' or ']'"},
      {"{\"a\":1 \"b\":2}", 7, "expected ',' or '}'"},
      {"{\"a\" 1}", 5, "expected ':' after a key"},
      {"{1:2}", 1, "expected a key (a string)"},
      {"[}", 1, "a '}' that closes nothing open"},
      {"[1", 2, "the text ends inside a container"},
      {"tru", 0, "expected a value"},
      {"1 x", 2, "text after the value"},
      {std::string(129, '['), 128, "containers nested deeper than the limit of 128"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto r = parse_json(c.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK(r.error().message == "JSON byte " + std::to_string(c.offset) + ": " + c.what);
  }
  CHECK(parse_json(std::string(128, '[') + std::string(128, ']')));
}

TEST_CASE("JSON schema: a megabyte schema of many properties", "[.][linear]") {
  std::string schema = R"({"type":"object","properties":{)";
  std::string required = "[", instance = "{";
  // Booleans but for the optional ones at the end: the matcher keeps a node per distinct
  // stack it meets, and an instance of all these properties meets a few per property.
  const size_t count = 29000, optional = 100;
  for (size_t k = 0; k < count; ++k) {
    const std::string name = "property_" + std::to_string(100000 + k);
    const bool required_one = k + optional < count;
    schema += (k ? ",\"" : "\"") + name + (required_one ? R"(":{"type":"boolean"})" : R"(":{"type":"integer","maximum":99})");
    if (required_one) {  // the last ones optional (each optional one is a path a matcher follows)
      required += (k ? ",\"" : "\"") + name + "\"";
      instance += (k ? ",\"" : "\"") + name + "\":" + (k % 3 ? "true" : "false");
    }
  }
  schema += "},\"required\":" + required + "]}";
  REQUIRE(schema.size() > (size_t{1} << 20));
  auto gbnf = json_schema_to_gbnf(schema);
  REQUIRE(gbnf);
  auto g = petrel::text::parse_gbnf(gbnf.value());
  REQUIRE(g);
  // A rule per property (its key and value), the object's, a few primitives and
  // optional-property chains: linear in the properties, nothing per pair of them.
  CHECK(g.value().rule_count() >= count);
  CHECK(g.value().rule_count() < count + 2 * optional + 800);
  auto made = GbnfMatcher::create(std::move(g.value()));
  REQUIRE(made);
  GbnfMatcher& m = made.value();
  // The matcher keeps a node per distinct stack it meets (a few per character of a
  // property's key), so a whole instance of 29,000 properties is past its limit of
  // nodes: the first thousand properties are matched here, and the whole object with
  // a smaller schema below.
  const std::string head = instance.substr(0, instance.find("\"property_101000\""));
  const GbnfMatcher::State start = m.state();
  auto ok = m.accept(head);
  REQUIRE(ok);
  CHECK(ok.value());
  CHECK_FALSE(m.complete());
  m.set_state(start);
  std::string wrong = head;
  wrong.replace(wrong.find("true"), 4, "1");
  ok = m.accept(wrong);
  REQUIRE(ok);
  CHECK_FALSE(ok.value());
}

TEST_CASE("JSON schema: an object of a thousand properties, whole", "[json_schema]") {
  std::string schema = R"({"type":"object","properties":{)", required = "[", instance = "{";
  for (size_t k = 0; k < 1000; ++k) {
    const std::string name = "p" + std::to_string(k);
    schema += (k ? ",\"" : "\"") + name + R"(":{"type":"integer","minimum":0,"maximum":999})";
    if (k % 10 != 0) required += (required.size() > 1 ? ",\"" : "\"") + name + "\"";
  }
  schema += "},\"required\":" + required + "]}";
  for (size_t k = 1; k < 1000; ++k)
    if (k % 10 != 0) instance += (instance.size() > 1 ? ",\"p" : "\"p") + std::to_string(k) + "\":" + std::to_string(k);
  GbnfMatcher m = schema_matcher(schema);
  CHECK(schema_takes(m, instance + "}"));
  CHECK(schema_takes(m, instance + ",\"p0\":0,\"p990\":999}"));
  CHECK_FALSE(schema_takes(m, instance + ",\"p990\":999,\"p0\":0}"));
  CHECK_FALSE(schema_takes(m, instance + ",\"p0\":1000}"));
  CHECK_FALSE(schema_takes(m, instance.substr(0, instance.rfind(',')) + "}"));
}

TEST_CASE("JSON schema: 100000 nested arrays are a clean error", "[.][linear]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const SchemaRefusal r = schema_refusal(deep);
  CHECK(r.code == ErrorCode::kInvalidArgument);
  CHECK(r.message == "JSON schema: JSON byte 128: containers nested deeper than the limit of 128");
  std::string deep_schema;
  for (size_t k = 0; k < 100000; ++k) deep_schema += "{\"items\":";
  const SchemaRefusal s = schema_refusal(deep_schema);
  CHECK(s.message == "JSON schema: JSON byte " + std::to_string(9 * 128) + ": containers nested deeper than the limit of 128");
}

TEST_CASE("JSON schema: a huge enum", "[.][linear]") {
  std::string schema = R"({"enum":[)";
  const size_t count = 100000;
  for (size_t k = 0; k < count; ++k) schema += (k ? ",\"v" : "\"v") + std::to_string(k) + "\"";
  schema += "]}";
  GbnfMatcher m = schema_matcher(schema);
  CHECK(schema_takes(m, "\"v0\""));
  CHECK(schema_takes(m, "\"v99999\""));
  CHECK(schema_takes(m, "\"v31415\" "));
  CHECK_FALSE(schema_takes(m, "\"v100000\""));
  CHECK_FALSE(schema_takes(m, "\"v\""));
}

namespace {

// The tests' tiny random-weight Gemma-shaped model with a tokenizer that has JSON's marks.
std::string json_capable_lm() {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                                     "\xe2\x96\x81", "\n"};
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) tokens.emplace_back(1, c);
  for (const char* p : {"{", "}", "\"", ":", ",", "[", "]", ".", "-", "+", "E"}) tokens.emplace_back(p);
  return petrel::test::tiny_lm("json", petrel::test::tiny_lm_chat_template(),
                               petrel::test::gemma_style_tokenizer_json(tokens, {{"t", "r"}, {"tr", "u"}, {"r", "e"}}));
}

}  // namespace

TEST_CASE("Generation under a JSON Schema gives JSON the schema accepts, ended by EOS", "[json_schema][grammar]") {
  auto model = petrel::test::load_model(json_capable_lm());
  auto generator = petrel::Generator::create(model);
  REQUIRE(generator);
  const std::string schema = R"({"type": "object", "properties": {
      "n": {"type": "integer", "minimum": 0, "maximum": 99},
      "ok": {"type": "boolean"},
      "colour": {"enum": ["red", "green"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}},
    "required": ["n", "ok", "colour"], "additionalProperties": false})";
  for (uint64_t seed = 0; seed < 8; ++seed) {
    petrel::GenerateOptions o;
    o.json_schema = schema;
    o.max_new_tokens = 120;
    o.do_sample = seed > 0;
    o.temperature = 1.5f;
    o.seed = seed;
    auto out = generator.value().generate_text("the user", o);
    REQUIRE(out);
    INFO("seed " << seed << ": " << out.value().text);
    CHECK(out.value().ended_on_eos);
    const nlohmann::json j = nlohmann::json::parse(out.value().text);  // throws if it is not JSON
    REQUIRE(j.is_object());
    REQUIRE(j["n"].is_number_integer());
    CHECK(j["n"].get<int>() >= 0);
    CHECK(j["n"].get<int>() <= 99);
    CHECK(j["ok"].is_boolean());
    CHECK((j["colour"] == "red" || j["colour"] == "green"));
    for (const auto& [key, value] : j.items()) {
      CHECK((key == "n" || key == "ok" || key == "colour" || key == "tags"));
      if (key == "tags") {
        REQUIRE(value.is_array());
        CHECK(value.size() <= 2);
        for (const auto& tag : value) CHECK(tag.get<std::string>().size() <= 3);
      }
    }
  }
  petrel::GenerateOptions both;
  both.json_schema = schema;
  both.grammar = "root ::= \"a\"";
  auto refused = generator.value().generate_text("the", both);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("grammar and json_schema") != std::string::npos);
  petrel::GenerateOptions unsupported;
  unsupported.json_schema = R"({"type": "string", "pattern": "^a+$"})";
  refused = generator.value().generate_text("the", unsupported);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == petrel::ErrorCode::kUnsupported);
  CHECK(refused.error().message.find("\"pattern\" is not supported") != std::string::npos);
}
