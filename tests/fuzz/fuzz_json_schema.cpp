// Fuzz target: JSON schemas (text/json_schema_grammar.h) and the JSON reader under them
// (text/json_value.h). The input is a schema and an output: two bytes (little-endian)
// give the schema's length (taken modulo what follows plus one), then the schema, then
// the output's bytes. parse_json must accept or refuse the text with kInvalidArgument and
// a "JSON byte N: " message whose N lies within the text; json_schema_to_gbnf must return
// GBNF or refuse with kInvalidArgument / kUnsupported and a "JSON schema" message
// (kOutOfMemory aside); GBNF it returns must compile, and the compiled grammar's
// matcher takes the output byte by byte. Anything else, a crash, a hang or a sanitizer
// report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "text/gbnf.h"
#include "text/gbnf_matcher.h"
#include "text/json_schema_grammar.h"
#include "text/json_value.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t rest = size - 2;
  const size_t schema_size = (static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8) % (rest + 1);
  const std::string_view schema(reinterpret_cast<const char*>(data) + 2, schema_size);
  const std::string_view output(reinterpret_cast<const char*>(data) + 2 + schema_size, rest - schema_size);

  auto json = petrel::text::parse_json(schema);
  if (!json) {
    const petrel::Error& e = json.error();
    require(e.code == petrel::ErrorCode::kInvalidArgument || e.code == petrel::ErrorCode::kOutOfMemory,
            "refused JSON is kInvalidArgument");
    if (e.code == petrel::ErrorCode::kInvalidArgument) {
      require(starts_with(e.message, "JSON byte "), "a JSON error names its byte offset");
      const size_t offset = std::strtoull(e.message.c_str() + 10, nullptr, 10);
      require(offset <= schema.size(), "the offset lies within the text");
    }
  }

  auto gbnf = petrel::text::json_schema_to_gbnf(schema);
  if (!gbnf) {
    const petrel::Error& e = gbnf.error();
    require(e.code == petrel::ErrorCode::kInvalidArgument || e.code == petrel::ErrorCode::kUnsupported ||
                e.code == petrel::ErrorCode::kOutOfMemory,
            "a refused schema is kInvalidArgument or kUnsupported");
    require(e.code == petrel::ErrorCode::kOutOfMemory || starts_with(e.message, "JSON schema"),
            "a refusal says it is the schema's");
    require(json.has_value() || e.code != petrel::ErrorCode::kUnsupported, "text that is not JSON is not 'unsupported'");
    return 0;
  }
  require(json.has_value(), "a converted schema is JSON");
  auto parsed = petrel::text::parse_gbnf(gbnf.value());
  if (!parsed) {
    require(parsed.error().code == petrel::ErrorCode::kOutOfMemory, "the converter's GBNF compiles");
    return 0;
  }
  auto matcher = petrel::text::GbnfMatcher::create(std::move(parsed.value()));
  if (!matcher) return 0;
  petrel::text::GbnfMatcher& m = matcher.value();
  for (size_t i = 0; i < output.size() && i < 4096; ++i) {
    auto taken = m.accept(static_cast<uint8_t>(output[i]));
    if (!taken) return 0;
  }
  (void)m.complete();
  return 0;
}
