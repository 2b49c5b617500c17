// A JSON Schema validator for the tests: an oracle for what generation under a schema
// gives, independent of the engine's schema -> grammar conversion. It decides as
// python3-jsonschema 4.10.3's Draft202012Validator with its format checker does (the
// fixture tests/fixtures/json_schema/schemas.json holds that validator's verdicts, which
// tests/test_grammar_gemma.cpp checks it against), over the subset the fixtures use:
// type (a name or a list), properties, required, additionalProperties (a boolean or a
// schema), enum, const, items, prefixItems, minItems, maxItems, minLength and maxLength
// (in code points), minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, oneOf
// (exactly one), local $ref (a JSON pointer into the schema: "#/$defs/...",
// "#/definitions/..."), and format date and uuid (python3-jsonschema's checks). It checks
// no time or date-time format, as python3-jsonschema without rfc3339-validator (Debian's)
// does not, unless JsonSchemaValidatorOptions::check_time_formats asks for its RFC 3339
// check. Annotations (title, description, $schema, ...) pass; any other keyword throws,
// so a schema outside the subset is not validated by halves.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace petrel::test {

struct JsonSchemaValidatorOptions {
  // Check format "time" and "date-time" as python3-jsonschema does with rfc3339-validator
  // installed (RFC 3339's full-time and date-time, the day within its month).
  bool check_time_formats = false;
};

struct JsonSchemaVerdict {
  bool valid = false;
  // Where an invalid instance fails: the instance's JSON pointer and the keyword, e.g.
  // "/tags/1: maxLength 3".
  std::string reason;
};

// Nested schema applications (an instance's containers, $ref and anyOf steps together)
// at most; deeper throws, so a $ref cycle that reads no instance level ends.
constexpr size_t kJsonSchemaValidatorDepth = 256;

// Whether `instance` is valid under `schema`. Throws std::invalid_argument for a schema
// it cannot evaluate (a keyword outside the subset, a malformed keyword, a $ref to
// nothing, nesting past kJsonSchemaValidatorDepth).
JsonSchemaVerdict validate_json_schema(const nlohmann::json& schema, const nlohmann::json& instance,
                                       const JsonSchemaValidatorOptions& options = {});

}  // namespace petrel::test
