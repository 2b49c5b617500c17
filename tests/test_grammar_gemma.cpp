// JSON schemas on a Gemma-3-shaped model with Gemma 3's real tokenizer (issue #58): for
// each of the fixture's 20 schemas (tests/fixtures/json_schema/schemas.json), generation
// from a random-weight model whose vocabulary is Gemma 3's 262,144 tokens must end with
// EOS and give JSON that an independent validator takes. A random model is the hardest
// case for a grammar: it goes wherever the grammar lets it. The validator
// (support/json_schema_validator.h) is first checked against python3-jsonschema's
// verdicts, which the fixture records.
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "petrel/generator.h"
#include "support/json_schema_validator.h"
#include "support/test_support.h"

namespace grammar_gemma_test {

using json = nlohmann::json;

// Gemma 3's tokenizer.json holds 262,144 tokens: the model's vocab_size here (the real
// checkpoints' 262,208 rows add 64 that no token names).
constexpr uint64_t kGemmaVocab = 262144;
constexpr uint64_t kHidden = 64, kFeedForward = 128, kLayers = 4, kHeads = 4, kKvHeads = 2, kHeadDim = 16;

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return json::parse(in);
}

const json& fixture_schemas() {
  static const json schemas = read_json_file(petrel::test::fixture_dir() + "/json_schema/schemas.json")["schemas"];
  return schemas;
}

// gemma3_f32's architecture (q/k norms, post-block norms, sliding-window layers beside a
// full one, tied embeddings) at small widths, with Gemma 3's real tokenizer: random
// weights, converted once per run (shared_file). The sliding window (16) is shorter than
// most outputs, so the ring of window slots wraps. Nothing when xz may be skipped and is
// missing.
std::optional<std::string> gemma_shaped_lm() {
  const std::string tokenizer_dir = petrel::test::fixture_dir() + "/hf_tokenizer/gemma3";
  const auto tokenizer_config = petrel::test::xz_decompress(tokenizer_dir + "/tokenizer_config.json.xz");
  if (!tokenizer_config) return std::nullopt;
  return petrel::test::shared_file("grammar-gemma3-lm.petrel", [&](const std::string& out) {
    petrel::test::TempDir dir;
    const std::string fixture = petrel::test::fixture_dir() + "/decoder_only/gemma3_f32";
    json config = read_json_file(fixture + "/config.json");
    config["hidden_size"] = kHidden;
    config["intermediate_size"] = kFeedForward;
    config["num_hidden_layers"] = kLayers;
    config["num_attention_heads"] = kHeads;
    config["num_key_value_heads"] = kKvHeads;
    config["head_dim"] = kHeadDim;
    config["query_pre_attn_scalar"] = kHeadDim;
    config["vocab_size"] = kGemmaVocab;
    config["max_position_embeddings"] = 32768;
    config["sliding_window"] = 16;
    config["_sliding_window_pattern"] = kLayers;
    config["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"};
    const auto text_file = [&](const std::string& name, const std::string& text) {
      petrel::test::write_bytes(dir.file(name), std::vector<uint8_t>(text.begin(), text.end()));
    };
    text_file("config.json", config.dump(2));
    text_file("generation_config.json", read_json_file(fixture + "/generation_config.json").dump(2));  // EOS 1 and 106
    text_file("tokenizer_config.json", *tokenizer_config);
    const auto tokenizer_json = petrel::test::xz_decompress(tokenizer_dir + "/tokenizer.json.xz");
    REQUIRE(tokenizer_json);
    text_file("tokenizer.json", *tokenizer_json);

    // HF's initialization (normal, sd 0.02) for the matrices; norms near Gemma's 1 + 0.
    std::mt19937 rng(58);
    std::map<std::string, petrel::test::RawTensor> tensors;
    const auto add = [&](const std::string& name, std::vector<uint64_t> shape, float sd) {
      petrel::test::RawTensor t;
      size_t count = 1;
      for (const uint64_t d : shape) count *= static_cast<size_t>(d);
      t.shape = std::move(shape);
      t.values.resize(count);
      for (float& v : t.values) v = petrel::test::normal_float(rng, sd);
      tensors[name] = std::move(t);
    };
    add("model.embed_tokens.weight", {kGemmaVocab, kHidden}, 0.02f);
    add("model.norm.weight", {kHidden}, 0.1f);
    for (uint64_t l = 0; l < kLayers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                               "post_feedforward_layernorm"})
        add(p + norm + ".weight", {kHidden}, 0.1f);
      add(p + "self_attn.q_norm.weight", {kHeadDim}, 0.1f);
      add(p + "self_attn.k_norm.weight", {kHeadDim}, 0.1f);
      add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, 0.02f);
      add(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.02f);
      add(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, 0.02f);
      add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, 0.02f);
      add(p + "mlp.gate_proj.weight", {kFeedForward, kHidden}, 0.02f);
      add(p + "mlp.up_proj.weight", {kFeedForward, kHidden}, 0.02f);
      add(p + "mlp.down_proj.weight", {kHidden, kFeedForward}, 0.02f);
    }
    petrel::test::write_checkpoint(dir.file("model.safetensors"), tensors);
    petrel::convert::ConvertOptions o;
    o.checkpoint_dir = dir.path();
    o.output_path = out;
    o.linear_dtype = petrel::DType::kF32;
    // The tied table is the output projection, the step's largest product (262,144 x 64):
    // int8 reads a quarter of f32's bytes.
    o.embedding_dtype = petrel::DType::kInt8;
    petrel::convert::convert_checkpoint(o);
  });
}

// One generation's settings: greedy, or sampling at a temperature with a seed.
struct Decoding {
  bool sample = false;
  float temperature = 1.0f;
  uint64_t seed = 0;
};

std::string decoding_name(const Decoding& d) {
  if (!d.sample) return "greedy";
  std::ostringstream s;
  s << "temperature " << d.temperature << ", seed " << d.seed;
  return s.str();
}

struct SchemaFigures {
  size_t outputs = 0, tokens = 0, longest_tokens = 0, longest_bytes = 0;
};

}  // namespace grammar_gemma_test

TEST_CASE("JSON schema validator: python3-jsonschema's verdict on each of the fixture's instances", "[json_schema]") {
  using namespace grammar_gemma_test;
  const json& schemas = fixture_schemas();
  REQUIRE(schemas.size() == 20);
  size_t checked = 0, valid = 0;
  for (const json& s : schemas) {
    const json schema = json::parse(s["schema_text"].get<std::string>());
    for (const json& instance : s["instances"]) {
      const std::string text = instance["text"].get<std::string>();
      INFO("schema " << s["name"].get<std::string>() << ", instance " << text);
      const petrel::test::JsonSchemaVerdict verdict = petrel::test::validate_json_schema(schema, json::parse(text));
      INFO(verdict.reason);
      CHECK(verdict.valid == instance["valid"].get<bool>());
      CHECK(verdict.valid == verdict.reason.empty());
      ++checked;
      valid += verdict.valid;
    }
  }
  CHECK(checked == 400);
  CHECK(valid >= 20);
  CHECK(checked - valid >= 20);
}

TEST_CASE("JSON schema validator: python3-jsonschema's quirks", "[json_schema]") {
  using grammar_gemma_test::json;
  // Each verdict is python3-jsonschema 4.10.3's (Draft202012Validator with its format
  // checker, Python 3.11), asked for each of these.
  struct Case {
    const char* schema;
    const char* instance;
    bool valid;
  };
  const Case cases[] = {
      // date: CPython 3.11's date.fromisoformat, which takes the ISO week forms and the
      // basic form, and ignores what follows a 10-character date it parsed.
      {R"({"format":"date"})", R"("2024-02-29")", true},
      {R"({"format":"date"})", R"("2023-02-29")", false},
      {R"({"format":"date"})", R"("20240101")", true},
      {R"({"format":"date"})", R"("20240101xx")", true},
      {R"({"format":"date"})", R"("2020-W53")", true},
      {R"({"format":"date"})", R"("2021-W53")", false},
      {R"({"format":"date"})", R"("2024W011")", true},
      {R"({"format":"date"})", R"("2024-W01x1")", false},
      {R"({"format":"date"})", R"("0000-01-01")", false},
      {R"({"format":"date"})", R"("2024-1-01")", false},
      {R"({"format":"date"})", "7", true},
      // uuid: uuid.UUID() and '-' at 8, 13, 18, 23.
      {R"({"format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")", true},
      {R"({"format":"uuid"})", R"("123e4567-e89b-12d3-a456-42661417400g")", false},
      {R"({"format":"uuid"})", R"("123e4567e89b-12d3-a456-4266-14174000")", false},
      {R"({"format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000}")", true},
      // time and date-time: not checked without rfc3339-validator (Debian's).
      {R"({"format":"time"})", R"("25:00")", true},
      {R"({"format":"date-time"})", R"("x")", true},
      // enum: booleans are not 0 and 1 at the top, but are inside containers.
      {R"({"enum":[1]})", "true", false},
      {R"({"enum":[true]})", "1", false},
      {R"({"enum":[1]})", "1.0", true},
      {R"({"enum":[[1]]})", "[true]", true},
      {R"({"const":[1]})", "[true]", false},
      {R"({"const":{"a":[1.0]}})", R"({"a":[1]})", true},
      // integer: a float with no fraction is one; bounds compare int with float exactly.
      {R"({"type":"integer"})", "7.0", true},
      {R"({"type":"integer"})", "true", false},
      {R"({"type":"number","maximum":9007199254740992})", "9007199254740993", false},
      {R"({"type":"number","exclusiveMinimum":0.5})", "0.5", false},
      // Lengths in code points.
      {R"({"maxLength":2})", "\"\xe4\xb8\xad\xe6\x96\x87\"", true},
      {R"({"minLength":3})", "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"", false},
      // Keywords apply to their types only; $ref beside other keywords.
      {R"({"minLength":3,"minimum":5})", "[]", true},
      {R"({"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":1})", R"("ab")", false},
      {R"({"$defs":{"a/b":{"type":"string"}},"$ref":"#/$defs/a~1b"})", R"("ab")", true},
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "1", false},
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "1.5", true},
      {R"({"prefixItems":[{"type":"integer"}],"items":false})", "[1]", true},
      {R"({"prefixItems":[{"type":"integer"}],"items":false})", "[1,2]", false},
      {R"({"properties":{"a":{}},"additionalProperties":false})", R"({"a":1,"b":2})", false},
  };
  for (const Case& c : cases) {
    INFO(c.schema << " on " << c.instance);
    CHECK(petrel::test::validate_json_schema(json::parse(c.schema), json::parse(c.instance)).valid == c.valid);
  }
  // With rfc3339-validator's check (as the grammar's formats are RFC 3339's).
  petrel::test::JsonSchemaValidatorOptions rfc3339;
  rfc3339.check_time_formats = true;
  const json time_format = {{"format", "time"}}, date_time = {{"format", "date-time"}};
  CHECK(petrel::test::validate_json_schema(time_format, "12:30:00Z", rfc3339).valid);
  CHECK(petrel::test::validate_json_schema(time_format, "23:59:59.123-05:00", rfc3339).valid);
  CHECK_FALSE(petrel::test::validate_json_schema(time_format, "12:30", rfc3339).valid);
  CHECK_FALSE(petrel::test::validate_json_schema(time_format, "24:00:00Z", rfc3339).valid);
  CHECK(petrel::test::validate_json_schema(date_time, "2024-02-29t00:00:00z", rfc3339).valid);
  CHECK_FALSE(petrel::test::validate_json_schema(date_time, "2100-02-29T00:00:00Z", rfc3339).valid);
  // A keyword outside the subset, a $ref to nothing and a $ref cycle are refused.
  CHECK_THROWS_AS(petrel::test::validate_json_schema(json::parse(R"({"pattern":"a"})"), "a"), std::invalid_argument);
  CHECK_THROWS_AS(petrel::test::validate_json_schema(json::parse(R"({"$ref":"#/$defs/x"})"), 1), std::invalid_argument);
  CHECK_THROWS_AS(petrel::test::validate_json_schema(json::parse(R"({"$ref":"#"})"), 1), std::invalid_argument);
}

TEST_CASE("JSON schemas on a Gemma-3-shaped model with Gemma 3's tokenizer: valid JSON, ended by EOS",
          "[json_schema][grammar][gemma]") {
  using namespace grammar_gemma_test;
  const auto path = gemma_shaped_lm();
  if (!path) return;  // PETREL_TEST_SKIP=xz and no xz
  const auto model = petrel::test::load_model(*path);
  REQUIRE(model->info().vocab_size == kGemmaVocab);
  auto generator = petrel::Generator::create(model);
  REQUIRE(generator);
  const json& schemas = fixture_schemas();
  REQUIRE(schemas.size() == 20);
  // Per schema: greedy, and a sample at the model's own temperature and one at a hotter
  // one, each with a seed of its own (40 seeds over the schemas). With sd-0.02 weights the
  // logits are near equal, so sampling goes nearly uniformly wherever the grammar lets it.
  const auto decodings_of = [](size_t schema) {
    return std::vector<Decoding>{{false, 1.0f, 0}, {true, 1.0f, 1 + schema}, {true, 3.0f, 101 + schema}};
  };
  constexpr size_t kDecodings = 3;
  // Every output must end by the grammar's bounds, not by this limit. No bound of the
  // grammar is this small for every schema (free values nest 6 deep, with up to 32 keys of
  // up to 512 characters each), so this is what the outputs need, measured: the longest
  // is free_object's greedy one, 4958 tokens (36 KB); a random model runs each string of
  // no maxLength to the grammar's 512 characters, about 100-150 of Gemma's tokens. An
  // output cut here fails ended_on_eos, so a limit too small fails rather than passes.
  constexpr size_t kMaxNewTokens = 8000;
  // Every stride-th (schema, decoding) pair, shifted per schema so that a subset still
  // sees every decoding.
  const size_t stride = petrel::test::subset_stride();
  petrel::test::JsonSchemaValidatorOptions validator_options;
  validator_options.check_time_formats = true;  // the grammar's time and date-time are RFC 3339's
  std::vector<SchemaFigures> figures(schemas.size());
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < schemas.size(); ++i) {
    const json& s = schemas[i];
    const std::string name = s["name"].get<std::string>();
    const std::string schema_text = s["schema_text"].get<std::string>();
    const json schema = json::parse(schema_text);
    const std::vector<Decoding> decodings = decodings_of(i);
    for (size_t k = 0; k < kDecodings; ++k) {
      if ((i + k) % stride != 0) continue;
      const Decoding& d = decodings[k];
      petrel::GenerateOptions o;
      o.json_schema = schema_text;
      o.max_new_tokens = kMaxNewTokens;
      o.do_sample = d.sample;
      o.temperature = d.temperature;
      o.seed = d.seed;
      auto out = generator.value().generate_text("Reply with JSON:", o);
      INFO("schema " << name << ", " << decoding_name(d));
      if (!out) FAIL(out.error().message);
      const petrel::TextGeneration& g = out.value();
      INFO(g.ids.size() << " tokens: " << g.text);
      CHECK(g.ended_on_eos);
      CHECK(g.ids.size() < kMaxNewTokens);
      // Each output is checked whole, and every schema and decoding runs: one bad output
      // does not hide the others'.
      std::optional<json> parsed;
      std::string parse_error;
      try {
        parsed = json::parse(g.text);
      } catch (const json::exception& e) {
        parse_error = e.what();
      }
      INFO("nlohmann::json::parse: " << parse_error);
      CHECK(parsed.has_value());
      if (parsed) {
        const petrel::test::JsonSchemaVerdict verdict =
            petrel::test::validate_json_schema(schema, *parsed, validator_options);
        INFO(verdict.reason);
        CHECK(verdict.valid);
      }
      SchemaFigures& f = figures[i];
      ++f.outputs;
      f.tokens += g.ids.size();
      f.longest_tokens = std::max(f.longest_tokens, g.ids.size());
      f.longest_bytes = std::max(f.longest_bytes, g.text.size());
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream table;
  size_t outputs = 0, tokens = 0;
  for (size_t i = 0; i < schemas.size(); ++i) {
    const SchemaFigures& f = figures[i];
    if (f.outputs == 0) continue;
    outputs += f.outputs;
    tokens += f.tokens;
    table << "\n  " << schemas[i]["name"].get<std::string>() << ": " << f.outputs << " outputs, " << f.tokens
          << " tokens, longest " << f.longest_tokens << " tokens, " << f.longest_bytes << " bytes";
  }
  CHECK(outputs * stride >= schemas.size() * kDecodings);
  WARN("JSON schemas on a Gemma-3-shaped model: " << outputs << " outputs, " << tokens << " tokens in " << seconds
                                                  << " s" << table.str());
}
