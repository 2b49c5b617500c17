// JSON Schema (text) -> GBNF grammar text (gbnf.h) whose sentences are JSON texts that
// the schema accepts, with llama.cpp's subset and semantics (common/json-schema-to-grammar.cpp).
//
// Supported: `type` (object, array, string, number, integer, boolean, null, or a list of
// them), `properties`, `required`, `additionalProperties` (false, true or a schema),
// `enum`, `const`, `items`, `prefixItems`, `minItems`/`maxItems`, `minLength`/`maxLength`,
// `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (integers), `anyOf`/`oneOf`,
// local `$ref` (a JSON pointer into the document: "#/$defs/x", "#/definitions/x", "#"),
// string `format` date, time, date-time and uuid (llama.cpp's rules, but for a date's
// day, which is the calendar's: no 2023-02-29 or 04-31, no year 0000). The annotations
// title, description, $schema, $id, $comment, examples, default, deprecated, readOnly,
// writeOnly, and $defs/definitions are accepted and do not constrain. Any other keyword is
// refused by name with the JSON pointer where it stands: a keyword is never ignored.
//
// As llama.cpp's converter does, and so stricter than the schema:
//  * an object lists its required properties first, then its optional ones, each group in
//    the order of `properties`, then any additional ones; an object with `properties` and
//    no `additionalProperties` takes no other key;
//  * a value is written as llama.cpp writes it: an integer has at most 16 digits, a
//    number's fraction at most 16 digits (and its exponent at most 2, not llama.cpp's 16:
//    so a number never overflows a double), a `const`/`enum`
//    value exactly as compact JSON; whitespace is at most one run after a token: a space,
//    or one or two newlines and up to 20 spaces or tabs;
//  * `oneOf` is read as `anyOf` (a value matching two alternatives is not refused);
//  * without `type`, the type is told by the keywords (`properties` -> object, ...);
//  * a string's \u escape of a surrogate comes only as a pair (llama.cpp takes a lone one).
// `prefixItems` means what JSON Schema says (llama.cpp: exactly the tuple): the prefix's
// schemas, then `items` for the elements after it (any value when absent, none when
// false), minItems/maxItems counting them all; an exact tuple is `"items": false` with
// minItems. Additional property keys are strings that are none of `properties` (a trie
// of the names; a name JSON escapes is refused beside them).
// And bounded, so that a constrained model's output always ends: a string without
// maxLength has at most kSchemaDefaultMaxLength characters (a maxLength or minLength over
// kSchemaMaxLength is cut to it or refused), an array without maxItems at most
// kSchemaDefaultMaxItems elements, additional properties at most kSchemaMaxExtraProperties
// keys, and a free value (`{}`, `true`, an object without properties) nests at most
// kSchemaFreeValueDepth containers. Recursion through `$ref` (a tree) becomes recursion
// between rules: its depth is the schema's and is not bounded here.
//
// The conversion works off an explicit list of sub-schemas to visit (each its own rule),
// so nothing recurses on the input; a `$ref` target gets one rule however often it is
// referenced, which is how a cycle of references becomes a cycle of rules.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "petrel/status.h"

namespace petrel::text {

constexpr size_t kSchemaDefaultMaxLength = 512;
constexpr size_t kSchemaMaxLength = 1000;       // GBNF's largest repetition count
constexpr size_t kSchemaDefaultMaxItems = 128;
constexpr size_t kSchemaMaxItems = 1000;
constexpr size_t kSchemaMaxExtraProperties = 32;
constexpr size_t kSchemaFreeValueDepth = 6;
constexpr int kSchemaMaxIntegerDigits = 16;

// Errors: the schema's JSON (parse_json's "JSON byte N: ..."), kInvalidArgument for a
// malformed schema and kUnsupported for a keyword or form outside the subset, each
// "JSON schema \"/pointer\": what". The text returned compiles with parse_gbnf (it is
// compiled once here to make sure): a cycle of $ref that reads no character, and a
// grammar past GBNF's limits, are errors.
Result<std::string> json_schema_to_gbnf(std::string_view schema);

}  // namespace petrel::text
