// Generator::generate_text_batch: several requests stepped together give each one what
// generate_text gives it alone, id for id and text for text (greedy, sampled with seeds,
// stop strings, grammars, callbacks that stop early, every KV cache type), on every
// kernel path, with f32 and int8 weights; a request's error is its own and equal to
// the one it gets alone; more sequences than one step's rows run in several products.
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "models/decoder_only.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "support/test_support.h"

namespace generate_batch_test {

using namespace petrel;
using namespace petrel::test;

// gemma3_f32 with a small tokenizer and a Gemma chat template (random weights, 128 ids,
// 512 positions, two sliding-window layers).
std::string chat_model(DType dtype) {
  return shared_conversion("lm-gemma3_chat", fixture_dir() + "/decoder_only/gemma3_chat", dtype);
}

struct Outcome {
  bool ok = false;
  std::string error;  // code and message
  TextGeneration out;
  std::string streamed;  // the deltas, joined
  size_t events = 0;
};

// Each request's options, with a streaming callback that records what it is given
// (and may stop early) added to its copy.
std::vector<TextRequest> with_callbacks(std::vector<TextRequest> requests, std::vector<Outcome>& outcomes,
                                        const std::vector<size_t>& stop_after) {
  outcomes.assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    if (stop_after[i] == 0) continue;
    GenerateOptions& o = requests[i].options;
    o.stream_text = true;
    o.on_token = [&outcomes, i, limit = stop_after[i]](const TokenEvent& e) {
      outcomes[i].streamed.append(e.text_delta);
      ++outcomes[i].events;
      return e.length < limit;
    };
  }
  return requests;
}

void record(const Result<TextGeneration>& r, Outcome& o) {
  o.ok = r.has_value();
  if (r) o.out = r.value();
  else o.error = std::to_string(static_cast<int>(r.error().code)) + ": " + r.error().message;
}

std::vector<TextRequest> varied_requests() {
  auto req = [](std::string prompt, std::function<void(GenerateOptions&)> change) {
    TextRequest r;
    r.prompt = std::move(prompt);
    r.options.max_new_tokens = 24;
    r.options.do_sample = false;
    change(r.options);
    return r;
  };
  return {
      req("the user", [](GenerateOptions&) {}),
      req("hello there", [](GenerateOptions& o) { o.ignore_eos = true; o.max_new_tokens = 40; }),
      req("a", [](GenerateOptions& o) { o.do_sample = true; o.temperature = 1.3f; o.seed = 5; o.ignore_eos = true; }),
      req("Tell me", [](GenerateOptions& o) { o.do_sample = true; o.top_p = 0.8f; o.top_k = 20; o.seed = 11; o.kv_cache_f16 = true; }),
      req("zzz", [](GenerateOptions& o) { o.ignore_eos = true; o.kv_cache_int8 = true; o.max_new_tokens = 60; }),
      req("the the", [](GenerateOptions& o) { o.ignore_eos = true; o.stop = {"e", "xq"}; o.max_new_tokens = 50; }),
      req("Q:", [](GenerateOptions& o) { o.grammar = "root ::= [a-z]+ \".\""; o.max_new_tokens = 12; }),
      req("user", [](GenerateOptions& o) { o.do_sample = true; o.repetition_penalty = 1.5f; o.seed = 3; o.ignore_eos = true; }),
      req("bad", [](GenerateOptions& o) { o.temperature = -1.0f; o.do_sample = true; }),            // refused
      req(std::string(700, 'x'), [](GenerateOptions&) {}),                                          // too long
      req("stop me", [](GenerateOptions& o) { o.ignore_eos = true; o.max_new_tokens = 30; }),
  };
}

void require_equal(const Outcome& batch, const Outcome& alone) {
  REQUIRE(batch.ok == alone.ok);
  REQUIRE(batch.error == alone.error);
  if (!alone.ok) return;
  REQUIRE(batch.out.ids == alone.out.ids);
  REQUIRE(batch.out.text == alone.out.text);
  REQUIRE(batch.out.ended_on_eos == alone.out.ended_on_eos);
  REQUIRE(batch.out.ended_on_stop == alone.out.ended_on_stop);
  REQUIRE(batch.out.prompt_tokens == alone.out.prompt_tokens);
  REQUIRE(batch.streamed == alone.streamed);
  REQUIRE(batch.events == alone.events);
}

TEST_CASE("generate_text_batch gives each request what generate_text gives it alone", "[generate_batch]") {
  const std::vector<TextRequest> base = varied_requests();
  // Streaming on some (one stops itself after 5 tokens), none on the others.
  std::vector<size_t> stop_after(base.size(), 0);
  stop_after[1] = 1000;
  stop_after[5] = 1000;
  stop_after[10] = 5;
  for (const DType dtype : {DType::kF32, DType::kInt8}) {
    auto model = load_model(chat_model(dtype));
    for (const std::string& isa : model_test_isas()) {
      for (const size_t threads : thread_counts({1, 2})) {
        INFO(to_string(dtype) << " weights, " << isa << ", " << threads << " threads");
        TranslatorOptions t;
        t.isa = isa;
        t.threads = threads;
        auto g = Generator::create(model, t);
        REQUIRE(g);
        std::vector<Outcome> alone, batch;
        const std::vector<TextRequest> alone_requests = with_callbacks(base, alone, stop_after);
        for (size_t i = 0; i < base.size(); ++i)
          record(g.value().generate_text(alone_requests[i].prompt, alone_requests[i].options), alone[i]);
        const std::vector<TextRequest> batch_requests = with_callbacks(base, batch, stop_after);
        const auto results = g.value().generate_text_batch(batch_requests);
        REQUIRE(results.size() == base.size());
        for (size_t i = 0; i < base.size(); ++i) {
          INFO("request " << i);
          record(results[i], batch[i]);
          require_equal(batch[i], alone[i]);
        }
        // The cases mean what they say: the refused ones were refused, the others ran.
        REQUIRE(!alone[8].ok);
        REQUIRE(!alone[9].ok);
        REQUIRE(alone[10].out.ids.size() == 5);
        REQUIRE(alone[5].out.ended_on_stop);
        size_t ran = 0;
        for (const Outcome& o : alone) ran += o.ok && !o.out.ids.empty();
        REQUIRE(ran == base.size() - 2);
      }
    }
  }
}

TEST_CASE("generate_text_batch steps more sequences than one product's rows", "[generate_batch]") {
  auto model = load_model(chat_model(DType::kInt8));
  auto g = Generator::create(model);
  REQUIRE(g);
  const size_t count = models::DecoderOnly::kPrefillChunk + 9;
  const std::string letters = "abcdefghijklmnopqrstuvwxyz";
  std::vector<TextRequest> requests(count);
  for (size_t i = 0; i < count; ++i) {
    requests[i].prompt = std::string(1, letters[i % 26]) + " " + letters.substr(i % 20, 1 + i % 6);
    requests[i].options.max_new_tokens = 3 + i % 5;
    requests[i].options.ignore_eos = true;
    requests[i].options.do_sample = i % 3 == 0;
    requests[i].options.seed = i;
  }
  const auto results = g.value().generate_text_batch(requests);
  REQUIRE(results.size() == count);
  for (size_t i = 0; i < count; i += subset_stride()) {
    INFO("request " << i);
    auto alone = g.value().generate_text(requests[i].prompt, requests[i].options);
    REQUIRE(alone);
    REQUIRE(results[i]);
    REQUIRE(results[i].value().ids == alone.value().ids);
    REQUIRE(results[i].value().ids.size() == requests[i].options.max_new_tokens);
  }
}

TEST_CASE("generate_continuously: requests joining between steps get what they get alone", "[generate_batch]") {
  auto model = load_model(chat_model(DType::kInt8));
  for (const std::string& isa : model_test_isas()) {
    INFO(isa);
    TranslatorOptions t;
    t.isa = isa;
    auto g = Generator::create(model, t);
    REQUIRE(g);
    const std::vector<TextRequest> requests = varied_requests();
    // Which call of the source gives which requests: two at first, the rest a few steps
    // apart, one while nothing runs (the source is then asked with idle set).
    const std::vector<std::vector<size_t>> joins = {{0, 1}, {}, {2, 3}, {}, {}, {4}, {5, 6, 7}, {8, 9}, {10}};
    size_t call = 0, idle_calls = 0;
    std::vector<Outcome> together(requests.size());
    std::vector<size_t> results_per_id(requests.size(), 0);
    const BatchSource source = [&](bool idle) {
      idle_calls += idle;
      std::vector<std::pair<size_t, TextRequest>> out;
      if (call < joins.size())
        for (const size_t i : joins[call]) out.emplace_back(i, requests[i]);
      ++call;
      return out;
    };
    const BatchSink sink = [&](size_t id, Result<TextGeneration>&& result) {
      REQUIRE(id < requests.size());
      ++results_per_id[id];
      record(result, together[id]);
    };
    REQUIRE(g.value().generate_continuously(source, sink));
    REQUIRE(call >= joins.size());
    REQUIRE(idle_calls >= 2);  // the first call, and the last one that ended it
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i);
      REQUIRE(results_per_id[i] == 1);
      Outcome alone;
      record(g.value().generate_text(requests[i].prompt, requests[i].options), alone);
      require_equal(together[i], alone);
    }
  }
}

TEST_CASE("generate_text_batch answers an empty list of requests with an empty list", "[generate_batch]") {
  auto lm = load_model(chat_model(DType::kInt8));
  auto g = Generator::create(lm);
  REQUIRE(g);
  REQUIRE(g.value().generate_text_batch({}).empty());
}

TEST_CASE("a batch request's prompt is encoded without special tokens when asked (a rendered chat)", "[generate_batch]") {
  auto g = Generator::create(load_model(chat_model(DType::kInt8)));
  REQUIRE(g);
  TextRequest with, without;
  with.prompt = without.prompt = "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n";
  with.options.max_new_tokens = without.options.max_new_tokens = 4;
  without.special_tokens = false;
  const auto out = g.value().generate_text_batch({with, without});
  REQUIRE(out[0]);
  REQUIRE(out[1]);
  // The tokenizer adds a BOS before the template's own, or not.
  REQUIRE(out[0].value().prompt_tokens == out[1].value().prompt_tokens + 1);
}

}  // namespace generate_batch_test
