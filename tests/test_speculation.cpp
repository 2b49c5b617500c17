// Speculative decoding (decode/speculation.h, Generator's drafts): prompt lookup's drafts,
// the draft length's adaptation, and the one property that matters: with drafts from
// lookup or a draft model, generation gives exactly the ids, text, stream and callbacks it
// gives without them (greedy, seeded sampling, repetition penalty, stop strings, grammars,
// every KV cache type, a conversation's turns, sliding-window rings that wrap), on every
// kernel path, with f32 and int8 weights.
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "decode/speculation.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "support/test_support.h"

namespace speculation_test {

using namespace petrel;
using namespace petrel::test;

// gemma3_f32 with a small tokenizer and a Gemma chat template (random weights, 128 ids,
// 512 positions, sliding-window layers).
std::string chat_model(DType dtype) {
  return shared_conversion("lm-gemma3_chat", fixture_dir() + "/decoder_only/gemma3_chat", dtype);
}

std::vector<int32_t> proposal(decode::PromptLookup& lookup, const std::vector<int32_t>& sequence, size_t limit) {
  std::vector<int32_t> draft;
  lookup.propose(sequence, limit, draft);
  return draft;
}

TEST_CASE("prompt lookup drafts what followed the latest earlier occurrence of the longest n-gram", "[speculation]") {
  decode::PromptLookup lookup(3);
  // "4 9" followed the last three tokens "1 2 3" once.
  std::vector<int32_t> s = {1, 2, 3, 4, 9, 7, 1, 2, 3};
  REQUIRE(proposal(lookup, s, 2) == std::vector<int32_t>{4, 9});
  // Later occurrences win: "2 3" now last seen before 8.
  s.insert(s.end(), {8, 5, 2, 3});
  REQUIRE(proposal(lookup, s, 1) == std::vector<int32_t>{8});
  // A continuation that reaches the end runs on as the draft itself.
  s = {6, 6, 6};
  decode::PromptLookup periodic(2);
  REQUIRE(proposal(periodic, s, 5) == std::vector<int32_t>(5, 6));
  decode::PromptLookup cycle(4);
  REQUIRE(proposal(cycle, {1, 2, 3, 1, 2, 3}, 7) == std::vector<int32_t>({1, 2, 3, 1, 2, 3, 1}));
  // Nothing matches: no draft; a limit of 0: none either.
  decode::PromptLookup none(3);
  REQUIRE(proposal(none, {1, 2, 3, 4}, 4).empty());
  REQUIRE(proposal(none, {1, 2, 3, 4, 1}, 0).empty());
  REQUIRE(proposal(none, {1, 2, 3, 4, 1}, 4) == std::vector<int32_t>({2, 3, 4, 1}));
}

TEST_CASE("prompt lookup prefers the longest n-gram that matches", "[speculation]") {
  decode::PromptLookup lookup(3);
  // The sequence ends in "1 2 3", which was followed by 40; "2 3" was last followed by 50.
  const std::vector<int32_t> s = {1, 2, 3, 40, 7, 2, 3, 50, 1, 2, 3};
  REQUIRE(proposal(lookup, s, 1) == std::vector<int32_t>{40});
  decode::PromptLookup bigram(2);  // with 2-grams only, the latest "2 3" wins
  REQUIRE(proposal(bigram, s, 1) == std::vector<int32_t>{50});
}

TEST_CASE("the draft length grows with accepted drafts and pauses after rejected ones", "[speculation]") {
  decode::DraftLength length(16);
  REQUIRE(length.next() == 4);
  length.update(4, 4);
  REQUIRE(length.next() == 6);
  length.update(6, 2);
  REQUIRE(length.next() == 5);
  for (size_t i = 0; i < 10; ++i) length.update(length.next(), length.next());
  REQUIRE(length.next() == 16);  // never past the most
  // Drafts that are always wrong: drafting all but stops (the pauses double to 64 steps).
  decode::DraftLength wrong(16);
  size_t drafted_steps = 0;
  for (size_t step = 0; step < 2000; ++step) {
    const size_t k = wrong.next();
    if (k == 0) continue;
    ++drafted_steps;
    wrong.update(k, 0);
  }
  REQUIRE(drafted_steps <= 4 + 7 + 2000 / decode::DraftLength::kMaxPause + 1);
  REQUIRE(drafted_steps >= 2000 / decode::DraftLength::kMaxPause);  // it keeps trying
  // A trial that is accepted ends the pause.
  REQUIRE(wrong.next() <= 1);
  while (wrong.next() == 0) {
  }
  wrong.update(1, 1);
  REQUIRE(wrong.next() == 3);
  decode::DraftLength off(0);
  REQUIRE(off.next() == 0);
}

struct Outcome {
  bool ok = false;
  std::string error;
  TextGeneration out;
  std::string streamed;
  size_t events = 0;
};

Outcome generate(Generator& g, const std::string& prompt, GenerateOptions o, size_t stop_after) {
  Outcome r;
  if (stop_after > 0) {
    o.stream_text = true;
    o.on_token = [&r, stop_after](const TokenEvent& e) {
      r.streamed.append(e.text_delta);
      ++r.events;
      return e.length < stop_after;
    };
  }
  auto result = g.generate_text(prompt, o);
  r.ok = result.has_value();
  if (result) r.out = result.value();
  else r.error = result.error().message;
  return r;
}

void require_equal(const Outcome& a, const Outcome& b) {
  REQUIRE(a.ok == b.ok);
  REQUIRE(a.error == b.error);
  REQUIRE(a.out.ids == b.out.ids);
  REQUIRE(a.out.text == b.out.text);
  REQUIRE(a.out.ended_on_eos == b.out.ended_on_eos);
  REQUIRE(a.out.ended_on_stop == b.out.ended_on_stop);
  REQUIRE(a.streamed == b.streamed);
  REQUIRE(a.events == b.events);
}

struct Case {
  std::string prompt;
  std::function<void(GenerateOptions&)> change;
  size_t stop_after = 0;  // a callback that stops after this many tokens (0: none)
};

std::vector<Case> cases() {
  const std::string repeated = "one two three one two three one two three one two";
  return {
      {"the user", [](GenerateOptions&) {}},
      {repeated, [](GenerateOptions& o) { o.ignore_eos = true; o.max_new_tokens = 90; }},
      {"a b a b a b", [](GenerateOptions& o) { o.do_sample = true; o.temperature = 0.7f; o.seed = 5; o.ignore_eos = true; o.max_new_tokens = 70; }},
      {repeated, [](GenerateOptions& o) { o.do_sample = true; o.top_p = 0.8f; o.top_k = 20; o.seed = 11; o.kv_cache_f16 = true; o.ignore_eos = true; }},
      {"zzz zzz zzz", [](GenerateOptions& o) { o.ignore_eos = true; o.kv_cache_int8 = true; o.max_new_tokens = 60; }},
      {"the the the", [](GenerateOptions& o) { o.ignore_eos = true; o.stop = {"e t", "xq"}; o.max_new_tokens = 50; }},
      {"Q:", [](GenerateOptions& o) { o.grammar = "root ::= [a-z]+ \".\""; o.max_new_tokens = 12; }},
      {repeated, [](GenerateOptions& o) { o.do_sample = true; o.repetition_penalty = 1.3f; o.seed = 3; o.ignore_eos = true; }},
      {repeated, [](GenerateOptions& o) { o.ignore_eos = true; o.max_new_tokens = 40; }, 9},
      // 300 prompt tokens and 150 new ones: the sliding-window rings (window + 128 slots) wrap.
      {std::string(300, 'a'), [](GenerateOptions& o) { o.ignore_eos = true; o.max_new_tokens = 150; }},
  };
}

TEST_CASE("speculative decoding gives exactly the output of plain decoding", "[speculation]") {
  const std::vector<Case> all = cases();
  for (const DType dtype : {DType::kF32, DType::kInt8}) {
    auto model = load_model(chat_model(dtype));
    // The other weights' file drafts (the same tokens, other numbers: drafts both right and wrong).
    auto other = load_model(chat_model(dtype == DType::kF32 ? DType::kInt8 : DType::kF32));
    for (const std::string& isa : model_test_isas()) {
      for (const size_t threads : thread_counts({1, 2})) {
        INFO(to_string(dtype) << " weights, " << isa << ", " << threads << " threads");
        TranslatorOptions t;
        t.isa = isa;
        t.threads = threads;
        auto plain = Generator::create(model, t);
        auto spec = Generator::create(model, t);
        REQUIRE(plain);
        REQUIRE(spec);
        GenerateTimings lookup_counts, draft_counts;
        for (size_t c = 0; c < all.size(); c += 1) {
          GenerateOptions o;
          o.max_new_tokens = 24;
          o.do_sample = false;
          all[c].change(o);
          const Outcome want = generate(plain.value(), all[c].prompt, o, all[c].stop_after);
          REQUIRE(want.ok);
          for (const size_t ngram : {1, 3}) {
            for (const size_t most : {1, 5, 64}) {
              INFO("case " << c << ", lookup " << ngram << ", max draft " << most);
              GenerateOptions s = o;
              s.lookup_ngram = ngram;
              s.max_draft_tokens = most;
              require_equal(generate(spec.value(), all[c].prompt, s, all[c].stop_after), want);
              const GenerateTimings& t = spec.value().last_timings();
              lookup_counts.drafted_tokens += t.drafted_tokens;
              lookup_counts.accepted_tokens += t.accepted_tokens;
              REQUIRE(t.accepted_tokens <= t.drafted_tokens);
            }
          }
          INFO("case " << c << ", draft model");
          REQUIRE(spec.value().set_draft_model(other));
          require_equal(generate(spec.value(), all[c].prompt, o, all[c].stop_after), want);
          GenerateOptions both = o;
          both.lookup_ngram = 2;
          require_equal(generate(spec.value(), all[c].prompt, both, all[c].stop_after), want);
          draft_counts.drafted_tokens += spec.value().last_timings().drafted_tokens;
          draft_counts.accepted_tokens += spec.value().last_timings().accepted_tokens;
          draft_counts.draft_model_tokens += spec.value().last_timings().draft_model_tokens;
          REQUIRE(spec.value().set_draft_model(nullptr));
        }
        // Both ways a draft ends were taken: tokens accepted, and tokens rejected.
        REQUIRE(lookup_counts.accepted_tokens > 0);
        REQUIRE(lookup_counts.accepted_tokens < lookup_counts.drafted_tokens);
        REQUIRE(draft_counts.accepted_tokens > 0);
        REQUIRE(draft_counts.draft_model_tokens > 0);
      }
    }
  }
}

TEST_CASE("speculative decoding keeps a conversation's caches as plain decoding does", "[speculation]") {
  auto model = load_model(chat_model(DType::kInt8));
  auto plain_g = Generator::create(model);
  auto spec_g = Generator::create(model);
  REQUIRE(plain_g);
  REQUIRE(spec_g);
  auto plain = Conversation::create(plain_g.value(), "be brief");
  auto spec = Conversation::create(spec_g.value(), "be brief");
  REQUIRE(plain);
  REQUIRE(spec);
  GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 30;
  o.ignore_eos = true;
  GenerateOptions s = o;
  s.lookup_ngram = 2;
  size_t accepted = 0;
  for (const std::string message : {"hello hello hello", "and again: hello hello", "one more time"}) {
    INFO(message);
    auto a = plain.value().reply(message, o);
    auto b = spec.value().reply(message, s);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(b.value().ids == a.value().ids);
    REQUIRE(b.value().text == a.value().text);
    REQUIRE(b.value().reused_tokens == a.value().reused_tokens);  // the same tokens cached after each turn
    accepted += spec_g.value().last_timings().accepted_tokens;
  }
  REQUIRE(accepted > 0);
}

TEST_CASE("ids in, ids out: generate() with drafts equals generate() without", "[speculation]") {
  auto model = load_model(chat_model(DType::kF32));
  auto g = Generator::create(model);
  REQUIRE(g);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 7) % 11);
  GenerateOptions o;
  o.do_sample = false;
  o.ignore_eos = true;
  o.max_new_tokens = 100;
  auto want = g.value().generate({prompt, {5}}, o);
  REQUIRE(want);
  o.lookup_ngram = 4;
  auto got = g.value().generate({prompt, {5}}, o);
  REQUIRE(got);
  REQUIRE(got.value()[0].ids == want.value()[0].ids);
  REQUIRE(got.value()[1].ids == want.value()[1].ids);
  REQUIRE(g.value().last_timings().accepted_tokens > 0);
}

TEST_CASE("every language-model fixture decodes the same ids with prompt lookup", "[speculation]") {
  for (const std::string name : {"gemma3_f32", "gemma3_bf16", "llama3", "qwen2", "qwen3"}) {
    for (const DType dtype : {DType::kF32, DType::kInt8}) {
      auto model = load_model(shared_conversion("lm-" + name, fixture_dir() + "/decoder_only/" + name, dtype));
      const size_t vocab = model->info().vocab_size;
      std::vector<int32_t> prompt;
      for (size_t i = 0; i < 60; ++i) prompt.push_back(static_cast<int32_t>(1 + (i * 5) % 13 % vocab));
      for (const std::string& isa : model_test_isas()) {
        INFO(name << ", " << to_string(dtype) << " weights, " << isa);
        TranslatorOptions t;
        t.isa = isa;
        auto g = Generator::create(model, t);
        REQUIRE(g);
        GenerateOptions o;
        o.do_sample = false;
        o.ignore_eos = true;
        o.max_new_tokens = 64;
        auto want = g.value().generate({prompt}, o);
        REQUIRE(want);
        o.lookup_ngram = 3;
        auto got = g.value().generate({prompt}, o);
        REQUIRE(got);
        REQUIRE(got.value()[0].ids == want.value()[0].ids);
        REQUIRE(g.value().last_timings().drafted_tokens > 0);
      }
    }
  }
}

TEST_CASE("speculative decoding's options and draft models are checked", "[speculation]") {
  auto model = load_model(chat_model(DType::kF32));
  auto g = Generator::create(model);
  REQUIRE(g);
  GenerateOptions o;
  o.lookup_ngram = kMaxLookupNgram + 1;
  auto r = g.value().generate_text("hi", o);
  REQUIRE(!r);
  CHECK(r.error().message.find("lookup_ngram") != std::string::npos);
  o.lookup_ngram = 2;
  o.max_draft_tokens = kMaxDraftTokens + 1;
  r = g.value().generate_text("hi", o);
  REQUIRE(!r);
  CHECK(r.error().message.find("max_draft_tokens") != std::string::npos);
  // Batches refuse lookup by name.
  TextRequest request;
  request.prompt = "hi";
  request.options.lookup_ngram = 2;
  auto batch = g.value().generate_text_batch({request});
  REQUIRE(batch.size() == 1);
  REQUIRE(!batch[0]);
  CHECK(batch[0].error().message.find("lookup_ngram") != std::string::npos);
  // Another vocabulary cannot draft: named, the Generator unchanged.
  auto llama = load_model(shared_conversion("lm-llama3", fixture_dir() + "/decoder_only/llama3", DType::kF32));
  Status refused = g.value().set_draft_model(llama);
  REQUIRE(!refused);
  CHECK(refused.error().message.find("cannot draft for") != std::string::npos);
  auto translation = load_model(shared_conversion("firefox-student", source_dir() + "/tools/firefox-student", DType::kF32));
  refused = g.value().set_draft_model(translation);
  REQUIRE(!refused);
  CHECK(refused.error().message.find("not a decoder-only model") != std::string::npos);
  REQUIRE(g.value().generate_text("hi", GenerateOptions{}));
}

}  // namespace speculation_test

namespace speculation_test {

TEST_CASE("petrel-run --lookup / --draft: the same output, the statistics in --json, bad flags refused", "[speculation][cli]") {
  if (!can_run_programs()) return;
  const std::string model = chat_model(DType::kF32), draft = chat_model(DType::kInt8);
  const std::string run = petrel_run_command() + " " + model +
                          " --prompt 'one two three one two three one two' --max-new-tokens 40 --ignore-eos --json";
  int status = 0;
  const std::string plain = run_command(run, &status);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto ids = [](const std::string& json) {
    const size_t at = json.find("\"ids\":");
    REQUIRE(at != std::string::npos);
    return json.substr(at, json.find(']', at) - at);
  };
  for (const std::string& flags : std::vector<std::string>{" --lookup 3", " --lookup 1 --max-draft 2", " --draft " + draft}) {
    const std::string out = run_command(run + flags, &status);
    INFO(flags << ": " << out);
    REQUIRE(WEXITSTATUS(status) == 0);
    CHECK(ids(out) == ids(plain));
    CHECK(out.find("\"speculation\":") != std::string::npos);
    CHECK(out.find("\"acceptance_rate\":") != std::string::npos);
    CHECK(out.find("\"tokens_per_verification\":") != std::string::npos);
  }
  CHECK(plain.find("\"speculation\":") == std::string::npos);
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {" --lookup 9", "--lookup"},
           {" --max-draft 4", "--max-draft bounds the drafts"},
           {" --lookup 2 --max-draft 65", "--max-draft"},
           {" --draft " + fixture_dir() + "/nothing.petrel", "nothing.petrel"}}) {
    const std::string out = run_command(run + flags, &status);
    INFO(flags << ": " << out);
    CHECK(WEXITSTATUS(status) != 0);
    CHECK(out.find(message) != std::string::npos);
  }
}

}  // namespace speculation_test
