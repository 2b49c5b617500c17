// GBNF token masks (text/gbnf_matcher.h) over Gemma 3's vocabulary (262,144 ids, the real
// tokenizer of tests/fixtures/hf_tokenizer/gemma3): the cost of one step's mask in the
// states a JSON grammar passes through — the start (one token family fits), after a key's
// colon (any value may start), inside a string (nearly every token fits: the worst case),
// inside a number — each a state met before (the matcher keeps the masks of recent
// states: a copy); a whole JSON document's tokens from a fresh matcher (every state and
// automaton transition met for the first time in the document: the cost per step as a
// generation pays it); the walk without the automaton; and what is built once per model
// and per grammar. With PETREL_BENCH_MODEL (a Gemma 3 model file with its tokenizer), also
// greedy generation with and without the grammar: the time per generated token.
//
//   petrel_grammar_bench [--benchmark_filter=...]
//   PETREL_BENCH_MODEL=gemma-3-270m-int8.petrel petrel_grammar_bench --benchmark_filter=generate
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.h"
#include "petrel/generator.h"
#include "petrel/model.h"
#include "decode/sampling.h"
#include "text/gbnf.h"
#include "text/gbnf_matcher.h"

using namespace petrel;

namespace {

const char* const kJsonGrammar = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

const bench::HfFixture& gemma() {
  static const bench::HfFixture f = bench::load_hf_fixture(std::string(PETREL_HF_FIXTURES_DIR) + "/gemma3");
  return f;
}

const text::TokenBytes& token_bytes() {
  static const text::TokenBytes b = text::hf_token_bytes(*gemma().tokenizer, gemma().tokenizer->vocab_size()).value();
  return b;
}

const text::GbnfVocabulary& vocabulary() {
  static const text::GbnfVocabulary v = text::make_gbnf_vocabulary(token_bytes().bytes, token_bytes().excluded).value();
  return v;
}

void mask(benchmark::State& state, const std::string& prefix) {
  const text::GbnfVocabulary& v = vocabulary();
  auto m = text::GbnfMatcher::create(text::parse_gbnf(kJsonGrammar).value()).value();
  if (!m.accept(prefix).value()) {
    state.SkipWithError("the prefix does not follow the grammar");
    return;
  }
  std::vector<uint8_t> allowed(v.vocab_size);
  std::vector<float> logits(v.vocab_size, 0.0f);
  size_t count = m.allowed_tokens(v, allowed.data()).value();  // the first: stacks met for the first time
  for (auto _ : state) {
    count = m.allowed_tokens(v, allowed.data()).value();
    decode::mask_logits(logits.data(), logits.size(), allowed.data());
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["allowed"] = static_cast<double>(count);
  state.counters["vocab"] = static_cast<double>(v.vocab_size);
}

// The document a constrained generation would write, token by token (Gemma 3's tokens).
const char* const kDocument = R"({"name": "Petrel", "version": [1, 8, 0], "tags": ["inference", "c++", "wasm"],
 "limits": {"max_batch": 64, "max_beam": 8, "ratio": 0.125, "enabled": true, "notes": null},
 "authors": [{"name": "A. N. Other", "email": "other@example.org"}, {"name": "Zoë Ünal", "email": "z@example.org"}],
 "description": "A small engine for translation and generation models, written to run on devices.\nIt reads one file."})";

void document(benchmark::State& state, bool by_stacks) {
  const text::GbnfVocabulary& v = vocabulary();
  const auto ids = gemma().tokenizer->encode_text(kDocument, false).value();
  std::vector<uint8_t> allowed(v.vocab_size);
  std::vector<float> logits(v.vocab_size, 0.0f);
  size_t steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto m = text::GbnfMatcher::create(text::parse_gbnf(kJsonGrammar).value()).value();
    state.ResumeTiming();
    for (const int32_t id : ids) {
      const size_t count = (by_stacks ? m.allowed_tokens_by_stacks(v, allowed.data()) : m.allowed_tokens(v, allowed.data())).value();
      if (allowed[static_cast<size_t>(id)] == 0 || count == 0) {
        state.SkipWithError("the document's token is not allowed");
        return;
      }
      decode::mask_logits(logits.data(), logits.size(), allowed.data());
      if (!m.accept(v.token(id)).value()) {
        state.SkipWithError("the document's token was refused");
        return;
      }
      ++steps;
    }
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["ms/step"] = benchmark::Counter(static_cast<double>(steps) * 1e-3,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// What generate() constrains the output with.
enum class Constraint { kNone, kJsonGrammar, kPersonSchema };

// tests/fixtures/json_schema's "person" schema (the one bench/llama_cpp_grammar.mjs gives llama.cpp).
constexpr const char* kPersonSchema =
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, )"
    R"("age": {"type": "integer", "minimum": 0, "maximum": 150}, "nickname": {"type": "string"}, )"
    R"("active": {"type": "boolean"}}, "required": ["name", "age"]})";

// Greedy generation from PETREL_BENCH_MODEL: 64 tokens without a grammar (ignore_eos), and
// under the JSON grammar or the person schema (until it completes, at most 64): ms per
// generated token.
void generate(benchmark::State& state, Constraint constraint) {
  const char* path = std::getenv("PETREL_BENCH_MODEL");
  if (path == nullptr) {
    state.SkipWithError("set PETREL_BENCH_MODEL to a Gemma 3 model file with its tokenizer");
    return;
  }
  static std::shared_ptr<const Model> model;
  if (!model) {
    auto loaded = Model::load(path);
    if (!loaded) {
      state.SkipWithError(loaded.error().message.c_str());
      return;
    }
    model = std::move(loaded.value());
  }
  auto generator = Generator::create(model, {});
  if (!generator) {
    state.SkipWithError(generator.error().message.c_str());
    return;
  }
  GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 64;
  if (constraint == Constraint::kJsonGrammar) o.grammar = kJsonGrammar;
  if (constraint == Constraint::kPersonSchema) o.json_schema = kPersonSchema;
  o.ignore_eos = constraint == Constraint::kNone;
  double ms = 0, first_ms = 0;
  size_t tokens = 0, first_tokens = 0;
  std::string text;
  for (auto _ : state) {
    auto out = generator.value().generate_text("Write a JSON object describing a petrel:", o);
    if (!out) {
      state.SkipWithError(out.error().message.c_str());
      return;
    }
    ms += generator.value().last_timings().generate_ms;
    tokens += generator.value().last_timings().generated_tokens;
    if (first_tokens == 0) {  // the first call meets every state for the first time
      first_ms = ms;
      first_tokens = tokens;
      text = out.value().text;
    }
  }
  state.counters["tokens"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
  state.counters["ms/token"] = ms / static_cast<double>(tokens);
  state.counters["first_ms/token"] = first_ms / static_cast<double>(first_tokens);
  for (char& c : text)
    if (c == '\n') c = ' ';
  state.SetLabel(text.substr(0, 48));
}

void build_vocabulary(benchmark::State& state) {
  const text::TokenBytes& b = token_bytes();
  for (auto _ : state) benchmark::DoNotOptimize(text::make_gbnf_vocabulary(b.bytes, b.excluded).value());
}

void build_token_bytes(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(text::hf_token_bytes(*gemma().tokenizer, gemma().tokenizer->vocab_size()).value());
}

void compile_grammar(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(text::GbnfMatcher::create(text::parse_gbnf(kJsonGrammar).value()).value());
}

}  // namespace

BENCHMARK_CAPTURE(mask, json_start, std::string())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, json_value, std::string("{\"name\": "))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, json_in_string, std::string("{\"name\": \"Pet"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, json_in_number, std::string("{\"name\": [1, 23"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(mask, json_after_value, std::string("{\"name\": true"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(document, json_fresh_matcher, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(document, json_by_stacks, true)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(generate, without_grammar, Constraint::kNone)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(generate, json_grammar, Constraint::kJsonGrammar)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(generate, person_schema, Constraint::kPersonSchema)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(build_token_bytes)->Unit(benchmark::kMillisecond);
BENCHMARK(build_vocabulary)->Unit(benchmark::kMillisecond);
BENCHMARK(compile_grammar)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
