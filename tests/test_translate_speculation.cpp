// Speculative decoding for translation (decode/speculative_steps.h): greedy translations
// with drafts from prompt lookup or a draft model are the plain ones, id for id, score for
// score, event for event -- on the real en-de model (attention decoder) and the
// Firefox-shaped student (SSRU decoder layers, a shortlist, Marian's length factor), every
// kernel path, f32 and int8 weights; the combinations it does not run are refused by name.
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "petrel/petrel.h"
#include "support/test_support.h"

namespace translate_speculation_test {

using namespace petrel;
using namespace petrel::test;

// Greedy search carrying each token's scores: what the speculative runs must reproduce.
TranslateOptions greedy_with_scores() {
  TranslateOptions o;
  o.beam_size = 1;
  o.token_scores = true;
  return o;
}

void require_same(const std::vector<Translation>& got, const std::vector<Translation>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    INFO("input " << s);
    REQUIRE(got[s].hypotheses.size() == want[s].hypotheses.size());
    for (size_t h = 0; h < want[s].hypotheses.size(); ++h) {
      const Hypothesis &a = got[s].hypotheses[h], &b = want[s].hypotheses[h];
      REQUIRE(a.ids == b.ids);
      REQUIRE(a.score == b.score);
      REQUIRE(a.ended_on_eos == b.ended_on_eos);
      REQUIRE(a.token_scores.size() == b.token_scores.size());
      for (size_t t = 0; t < a.token_scores.size(); ++t) {
        REQUIRE(a.token_scores[t].log_probability == b.token_scores[t].log_probability);
        REQUIRE(a.token_scores[t].logit == b.token_scores[t].logit);
      }
    }
  }
}

TEST_CASE("speculative translation equals plain greedy translation", "[speculation][translate]") {
  for (const DType dtype : {DType::kF32, DType::kInt8}) {
    auto model = load_model(en_de_model_path(dtype));
    // The other weights' file drafts: the same vocabulary, other numbers.
    auto other = load_model(en_de_model_path(dtype == DType::kF32 ? DType::kInt8 : DType::kF32));
    const auto inputs = en_de_test_inputs(*model, 16);
    const std::vector<std::string> isas = model_test_isas();
    for (const std::string& isa : isas) {
      // Every setting on the best path; one of each kind on the others (their arithmetic
      // is what differs, the speculation is not).
      const bool best = isa == isas.back();
      for (const size_t threads : thread_counts(best ? std::initializer_list<size_t>{1, 2} : std::initializer_list<size_t>{1})) {
        INFO(to_string(dtype) << " weights, " << isa << ", " << threads << " threads");
        auto t = Translator::create(model, {isa, threads});
        REQUIRE(t);
        const TranslateOptions o = greedy_with_scores();
        auto plain = t.value().translate(inputs, o);
        REQUIRE(plain);
        size_t drafted = 0, accepted = 0;
        for (const size_t ngram : best ? std::vector<size_t>{1, 3} : std::vector<size_t>{2}) {
          for (const size_t most : best ? std::vector<size_t>{2, 64} : std::vector<size_t>{64}) {
            INFO("lookup " << ngram << ", max draft " << most);
            TranslateOptions s = o;
            s.lookup_ngram = ngram;
            s.max_draft_tokens = most;
            auto got = t.value().translate(inputs, s);
            REQUIRE(got);
            require_same(got.value(), plain.value());
            drafted += t.value().last_timings().drafted_tokens;
            accepted += t.value().last_timings().accepted_tokens;
          }
        }
        REQUIRE(accepted > 0);
        REQUIRE(accepted < drafted);
        REQUIRE(t.value().set_draft_model(other));
        auto drafted_by_model = t.value().translate(inputs, o);
        REQUIRE(drafted_by_model);
        require_same(drafted_by_model.value(), plain.value());
        REQUIRE(t.value().last_timings().accepted_tokens > 0);
        REQUIRE(t.value().last_timings().draft_model_tokens > 0);
        // The draft reading this model's encoder states (the same encoder here, in other numbers).
        REQUIRE(t.value().set_draft_model(other, /*shares_encoder=*/true));
        auto shared = t.value().translate(inputs, o);
        REQUIRE(shared);
        require_same(shared.value(), plain.value());
        REQUIRE(t.value().last_timings().accepted_tokens > 0);
        // Forced tokens (a target prefix) and a length limit the search ends at.
        TranslateOptions forced = o;
        forced.target_prefix = {inputs[0][0], inputs[0][1]};
        forced.max_new_tokens = 9;
        auto want = t.value().translate(inputs, forced);
        REQUIRE(t.value().set_draft_model(nullptr));
        auto plain_forced = t.value().translate(inputs, forced);
        REQUIRE(want);
        REQUIRE(plain_forced);
        require_same(want.value(), plain_forced.value());
        forced.lookup_ngram = 2;
        auto looked_up = t.value().translate(inputs, forced);
        REQUIRE(looked_up);
        require_same(looked_up.value(), plain_forced.value());
      }
    }
  }
}

TEST_CASE("speculative translation with SSRU decoder layers and a shortlist equals plain", "[speculation][translate]") {
  for (const DType dtype : {DType::kF32, DType::kInt8}) {
    auto model = load_model(shared_conversion("firefox-student", source_dir() + "/tools/firefox-student", dtype));
    const auto inputs = en_de_test_inputs(*model, 24);
    for (const std::string& isa : model_test_isas()) {
      INFO(to_string(dtype) << " weights, " << isa);
      auto t = Translator::create(model, {isa, 1});
      REQUIRE(t);
      TranslateOptions o = greedy_with_scores();
      auto plain = t.value().translate(inputs, o);
      REQUIRE(plain);
      o.lookup_ngram = 2;
      auto got = t.value().translate(inputs, o);
      REQUIRE(got);
      require_same(got.value(), plain.value());
      REQUIRE(t.value().last_timings().accepted_tokens > 0);
      // An SSRU draft cannot be rewound: refused by name.
      const Status refused = t.value().set_draft_model(model);
      REQUIRE(!refused);
      CHECK(refused.error().message.find("SSRU") != std::string::npos);
    }
  }
}

TEST_CASE("speculative translation streams the events plain translation streams", "[speculation][translate]") {
  auto model = load_model(en_de_model_path(DType::kInt8));
  auto t = Translator::create(model);
  REQUIRE(t);
  const std::vector<std::string> texts = {"Open the file %s in a new window.", "The file %s could not be opened: %s",
                                          "Print the file."};
  auto run = [&](size_t ngram) {
    std::vector<std::string> events;
    TranslateOptions o;
    o.beam_size = 1;
    o.lookup_ngram = ngram;
    o.stream_text = true;
    o.on_token = [&](const TokenEvent& e) {
      events.push_back(std::to_string(e.input) + ":" + std::to_string(e.length) + ":" + std::string(e.text) +
                       (e.final ? "!" : ""));
      return true;
    };
    auto r = t.value().translate_text(texts, o);
    REQUIRE(r);
    return events;
  };
  // Each input's events, in order (a batch interleaves the inputs' steps; speculative
  // decoding runs them one after another).
  auto by_input = [&](const std::vector<std::string>& events) {
    std::vector<std::vector<std::string>> out(texts.size());
    for (const std::string& e : events) out[static_cast<size_t>(e[0] - '0')].push_back(e);
    return out;
  };
  const auto plain = run(0);
  REQUIRE(plain.size() > texts.size());
  REQUIRE(by_input(run(2)) == by_input(plain));
}

TEST_CASE("speculative translation's limits are refused by name", "[speculation][translate]") {
  auto model = load_model(en_de_model_path(DType::kInt8));
  auto t = Translator::create(model);
  REQUIRE(t);
  const auto inputs = en_de_test_inputs(*model, 2);
  TranslateOptions o;
  o.lookup_ngram = 2;
  o.beam_size = 4;
  auto r = t.value().translate(inputs, o);
  REQUIRE(!r);
  CHECK(r.error().message.find("lookup_ngram") != std::string::npos);
  CHECK(r.error().message.find("beam_size 4") != std::string::npos);
  o.beam_size = 1;
  o.alignment = true;
  r = t.value().translate(inputs, o);
  REQUIRE(!r);
  CHECK(r.error().message.find("alignment") != std::string::npos);
  o.alignment = false;
  o.lookup_ngram = kMaxLookupNgram + 1;
  r = t.value().translate(inputs, o);
  REQUIRE(!r);
  CHECK(r.error().message.find("lookup_ngram") != std::string::npos);
  // A draft model with another vocabulary, or a language model, is refused; a draft model
  // set with beam search asked for is refused at the call.
  auto student = load_model(shared_conversion("firefox-student", source_dir() + "/tools/firefox-student", DType::kF32));
  Status refused = t.value().set_draft_model(student);
  REQUIRE(!refused);
  CHECK(refused.error().message.find("cannot draft for") != std::string::npos);
  auto lm = load_model(shared_conversion("lm-gemma3_f32", fixture_dir() + "/decoder_only/gemma3_f32", DType::kF32));
  refused = t.value().set_draft_model(lm);
  REQUIRE(!refused);
  CHECK(refused.error().message.find("not a translation") != std::string::npos);
  REQUIRE(t.value().set_draft_model(load_model(en_de_model_path(DType::kF32))));
  TranslateOptions beam;
  beam.beam_size = 4;
  r = t.value().translate(inputs, beam);
  REQUIRE(!r);
  CHECK(r.error().message.find("the draft model") != std::string::npos);
}

}  // namespace translate_speculation_test
