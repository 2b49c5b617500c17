// Many inputs at once (BatchTranslator): results come in input order whatever the
// packing and the number of workers, equal to translating each input alone; empty
// inputs give empty outputs in place; a too-long input is refused alone, or translated
// sentence by sentence with splitting. On the real en-de model and an oracle fixture.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <thread>
#include <fstream>

#include "convert/convert.h"
#include "batch_testing.h"
#include "petrel/batch_translator.h"
#include "petrel/petrel.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<const Model> en_de() { return load_model(en_de_model_path()); }

std::vector<std::string> test_sentences(size_t count) {
  std::ifstream in(fixture_dir() + "/en-de/test.en");
  std::vector<std::string> out;
  std::string line;
  while (out.size() < count && std::getline(in, line)) out.push_back(line);
  return out;
}

TranslateOptions greedy() {
  TranslateOptions o;
  o.beam_size = 1;
  return o;
}

}  // namespace

TEST_CASE("batch: text results in input order, as each input alone, whatever the workers", "[bulk][batch]") {
  auto model = en_de();
  // Under a subset 24 sentences: still several windows of 20 and batches of 7.
  std::vector<std::string> texts = test_sentences(subset_stride() > 1 ? 24 : 60);
  texts.insert(texts.begin() + 5, "");
  texts.insert(texts.begin() + 9, "   ");
  auto single = Translator::create(model);
  REQUIRE(single.has_value());
  std::vector<std::string> alone;
  for (const auto& t : texts) {
    if (t.find_first_not_of(' ') == std::string::npos) {
      alone.emplace_back();
      continue;
    }
    auto r = single.value().translate_text({t}, greedy());
    REQUIRE(r.has_value());
    alone.push_back(r.value()[0].hypotheses[0].text);
  }
  for (size_t workers : {1, 3}) {
    auto batch = BatchTranslator::create(model, {}, workers);
    REQUIRE(batch.has_value());
    BatchOptions b;
    b.max_batch_size = 7;
    b.max_batch_tokens = 120;
    b.window = 20;
    std::vector<size_t> order;
    std::vector<std::string> got;
    Status s = batch.value().translate_text(texts, greedy(), b, [&](size_t i, Result<TextTranslation>&& r) {
      order.push_back(i);
      REQUIRE(r.has_value());
      got.push_back(r.value().hypotheses.at(0).text);
    });
    REQUIRE(s.has_value());
    INFO(workers << " workers");
    std::vector<size_t> expected_order(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) expected_order[i] = i;
    CHECK(order == expected_order);
    REQUIRE(got.size() == alone.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("input " << i << ": " << texts[i]);
      CHECK(got[i] == alone[i]);
    }
    CHECK(batch.value().last_totals().inputs == texts.size());
    CHECK(batch.value().last_totals().sentences == texts.size() - 2);
  }
}

TEST_CASE("batch: a paragraph is split into sentences and reassembled, too long is refused alone", "[bulk][batch]") {
  auto model = en_de();
  const std::vector<std::string> parts = {"You need to specify a command.", "Unable to correct missing packages.",
                                          "The file could not be saved."};
  auto single = Translator::create(model);
  REQUIRE(single.has_value());
  std::vector<std::string> alone;
  for (const auto& p : parts) {
    auto r = single.value().translate_text({p}, greedy());
    REQUIRE(r.has_value());
    alone.push_back(r.value()[0].hypotheses[0].text);
  }
  // More tokens than the model's 512 positions (600: 4 per sentence), in short sentences.
  constexpr int kLongSentences = 150;
  std::string long_text;
  for (int i = 0; i < kLongSentences; ++i) long_text += "Open the file. ";
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch.has_value());
  BatchOptions split;
  split.split_sentences = true;
  std::vector<Result<TextTranslation>> results;
  auto collect = [&](size_t, Result<TextTranslation>&& r) { results.push_back(std::move(r)); };
  REQUIRE(batch.value().translate_text({parts[0] + " " + parts[1] + "  " + parts[2], long_text, "Open file"}, greedy(),
                                       split, collect)
              .has_value());
  REQUIRE(results.size() == 3);
  REQUIRE(results[0].has_value());
  // The text between the sentences stays as it was (one space, then two).
  CHECK(results[0].value().hypotheses[0].text == alone[0] + " " + alone[1] + "  " + alone[2]);
  CHECK(results[1].has_value());
  CHECK(results[2].has_value());
  CHECK(batch.value().last_totals().sentences == 3 + kLongSentences + 1);

  results.clear();
  REQUIRE(batch.value().translate_text({"Open file", long_text, "Save"}, greedy(), BatchOptions{}, collect).has_value());
  REQUIRE(results.size() == 3);
  CHECK(results[0].has_value());
  REQUIRE_FALSE(results[1].has_value());
  CHECK_THAT(results[1].error().message, Contains("input 2 has") && Contains("at most 512") && Contains("split"));
  CHECK(results[2].has_value());
}

TEST_CASE("batch: token ids, with the oracle's outputs in order", "[batch]") {
  const auto e = expected_for("post_swish_concat_tied");
  auto model = load_model(fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel");
  std::vector<std::vector<int32_t>> inputs;
  for (int repeat = 0; repeat < 10; ++repeat)
    for (const auto& i : e["inputs"]) inputs.push_back(i.get<std::vector<int32_t>>());
  inputs.push_back({});
  auto batch = BatchTranslator::create(model, {}, 2);
  REQUIRE(batch.has_value());
  TranslateOptions o = greedy();
  o.max_new_tokens = e["max_new_tokens"];
  o.length_penalty = 1.0;
  BatchOptions b;
  b.max_batch_size = 4;
  size_t next = 0;
  REQUIRE(batch.value()
              .translate(inputs, o, b,
                         [&](size_t i, Result<Translation>&& r) {
                           REQUIRE(i == next++);
                           REQUIRE(r.has_value());
                           if (i == inputs.size() - 1) {
                             CHECK(r.value().hypotheses.at(0).ids.empty());
                             return;
                           }
                           CHECK(r.value().hypotheses.at(0).ids ==
                                 e["greedy"][i % 3]["ids"].get<std::vector<int32_t>>());
                         })
              .has_value());
  CHECK(next == inputs.size());
  o.on_token = [](const TokenEvent&) { return true; };
  auto refused = batch.value().translate(inputs, o, b, [](size_t, Result<Translation>&&) {});
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Contains("streaming"));
}

TEST_CASE("petrel-run --input, --json-lines, --stream, and a line too long for the model", "[batch][cli]") {
  TempDir tmp;
  const std::string model = tmp.file("en-de.petrel");
  {
    convert::ConvertOptions o;
    o.checkpoint_dir = source_dir() + "/tools/en-de-model";
    o.output_path = model;
    convert::convert_checkpoint(o);
  }
  std::string long_line;
  for (int i = 0; i < 200; ++i) long_line += "Open the file, ";
  std::ofstream(tmp.file("in.txt")) << "You need to specify a command.\n\nOpen file. Save changes?\n" << long_line << "\n";
  int status = 0;
  // Plain output: a line per input, the failed one empty, exit status 1, the error on stderr.
  std::string out = run_command(petrel_run_command() + " " + model + " --beam 1 --input " + tmp.file("in.txt"), &status, true);
  CHECK(status != 0);
  std::vector<std::string> lines;
  for (size_t at = 0; at < out.size();) {
    size_t end = out.find('\n', at);
    lines.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  REQUIRE(lines.size() == 4);
  CHECK_FALSE(lines[0].empty());
  CHECK(lines[1].empty());
  CHECK(lines[2].find(' ') != std::string::npos);  // two sentences, joined
  CHECK(lines[3].empty());
  out = run_command(petrel_run_command() + " " + model + " --beam 1 --input " + tmp.file("in.txt") + " --quiet", &status);
  CHECK_THAT(out, Contains("in.txt line 4 has a sentence of") && Contains("at most 512"));

  // --json-lines: an object per input in order, then the totals.
  out = run_command(petrel_run_command() + " " + model + " --beam 1 --json-lines --no-split < " + tmp.file("in.txt"), &status,
                    true);
  std::vector<nlohmann::json> objects;
  for (size_t at = 0; at < out.size();) {
    size_t end = out.find('\n', at);
    objects.push_back(nlohmann::json::parse(out.substr(at, end - at)));
    at = end + 1;
  }
  REQUIRE(objects.size() == 5);
  for (size_t i = 0; i < 4; ++i) CHECK(objects[i]["index"] == i);
  CHECK(objects[0]["hypotheses"][0]["text"] == lines[0]);
  CHECK(objects[3].contains("error"));
  CHECK(objects[4]["summary"]["inputs"] == 4);
  CHECK(objects[4]["summary"]["failed"] == 1);

  // --stream prints the same translation as it is produced.
  out = run_command(petrel_run_command() + " " + model + " --beam 1 --stream --text 'You need to specify a command.'", &status,
                    true);
  REQUIRE(status == 0);
  CHECK(out == lines[0] + "\n");
  // Beam search into a pipe: each input's best translation, one line each, never a
  // hypothesis that a better one replaced (that was the last text shown) and no
  // terminal redraws (found by review).
  std::ofstream(tmp.file("beam.txt")) << "Save changes?\nDo you want to delete this folder?\nOpen the file\n";
  const std::string plain = run_command(petrel_run_command() + " " + model + " --beam 4 --input " + tmp.file("beam.txt"), &status, true);
  REQUIRE(status == 0);
  out = run_command(petrel_run_command() + " " + model + " --beam 4 --stream --input " + tmp.file("beam.txt"), &status, true);
  REQUIRE(status == 0);
  CHECK(out == plain);
}

namespace {
struct Collected {
  std::vector<size_t> order;
  std::vector<std::string> texts;
  std::vector<int> statuses;
};
void collect_text(void* data, size_t index, petrel_status status, const char* text, double) {
  auto* c = static_cast<Collected*>(data);
  c->order.push_back(index);
  c->texts.emplace_back(text);
  c->statuses.push_back(status);
}
}  // namespace

TEST_CASE("C API: petrel_translate_many delivers in input order, errors per input", "[bulk][batch][capi]") {
  auto model_path = [] {
    static TempDir tmp;
    convert::ConvertOptions o;
    o.checkpoint_dir = source_dir() + "/tools/en-de-model";
    o.output_path = tmp.file("en-de.petrel");
    convert::convert_checkpoint(o);
    return o.output_path;
  }();
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(model_path.c_str(), &model) == PETREL_OK);
  std::string long_line;
  for (int i = 0; i < 200; ++i) long_line += "Open the file, ";
  auto texts = test_sentences(20);
  texts.push_back(long_line);
  texts.push_back("");
  std::vector<const char*> pointers;
  for (const auto& t : texts) pointers.push_back(t.c_str());
  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = 1;
  petrel_batch_options batching;
  petrel_batch_options_init(&batching);
  batching.workers = 2;
  batching.max_batch_size = 5;
  Collected got;
  REQUIRE(petrel_translate_many(model, nullptr, pointers.data(), pointers.size(), &options, &batching, collect_text,
                                &got) == PETREL_OK);
  REQUIRE(got.order.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) CHECK(got.order[i] == i);
  CHECK(got.statuses[20] == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(got.texts[20], Contains("input 21 has"));
  CHECK(got.statuses[21] == PETREL_OK);
  CHECK(got.texts[21].empty());
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  for (size_t i = 0; i < 20; i += 7) {
    char* one = nullptr;
    REQUIRE(petrel_translate_text(session, pointers[i], &options, &one) == PETREL_OK);
    CHECK(got.texts[i] == one);
    petrel_string_free(one);
  }
  batching.struct_size = 3;
  CHECK(petrel_translate_many(model, nullptr, pointers.data(), 1, &options, &batching, collect_text, &got) ==
        PETREL_INVALID_ARGUMENT);
  petrel_session_free(session);
  petrel_model_free(model);
}

namespace {
// Installs a batch observer (batch_testing.h) for one test, removed however it ends.
struct ObserverScope {
  explicit ObserverScope(std::function<void(size_t)> observer) { detail::set_batch_observer(std::move(observer)); }
  ~ObserverScope() { detail::set_batch_observer(nullptr); }
};
}  // namespace

TEST_CASE("batch: whatever a worker throws becomes its batch's inputs' error, the others translate",
          "[bulk][batch][threads]") {
  auto model = en_de();
  const std::vector<std::string> texts = test_sentences(12);
  for (size_t workers : {1, 3}) {
    INFO("workers " << workers);
    auto batch = BatchTranslator::create(model, {}, workers);
    REQUIRE(batch.has_value());
    std::atomic<size_t> started{0};
    ObserverScope scope([&](size_t) {
      if (started++ == 1) throw std::runtime_error("injected fault");  // the second batch
    });
    BatchOptions b;
    b.max_batch_size = 3;
    std::vector<std::optional<Result<TextTranslation>>> got(texts.size());
    Status s = batch.value().translate_text(texts, greedy(), b, [&](size_t i, Result<TextTranslation>&& r) {
      got[i] = std::move(r);
    });
    REQUIRE(s);
    size_t failed = 0;
    for (const auto& r : got) {
      REQUIRE(r.has_value());
      if (!*r) {
        ++failed;
        CHECK(r->error().code == ErrorCode::kInternal);
        CHECK_THAT(r->error().message, Contains("injected fault"));
      }
    }
    CHECK(failed == 3);  // one batch of 3 inputs
  }
}

TEST_CASE("batch: a sink that throws cancels the batches not yet started", "[batch][threads]") {
  auto model = en_de();
  std::vector<std::string> texts(40, "Open the file.");
  for (size_t workers : {1, 2}) {
    INFO("workers " << workers);
    auto batch = BatchTranslator::create(model, {}, workers);
    REQUIRE(batch.has_value());
    // Batches after the first two wait until the sink has thrown, so what starts after
    // that depends on the cancelling alone, not on how the threads are scheduled.
    std::atomic<size_t> started{0};
    std::atomic<bool> thrown{false};
    ObserverScope scope([&](size_t) {
      if (started++ < 2) return;
      for (int waited = 0; !thrown && waited < 10000; ++waited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    BatchOptions b;
    b.max_batch_size = 1;
    b.window = texts.size();  // all 40 batches are ready to start
    size_t delivered = 0;
    CHECK_THROWS_WITH(batch.value().translate_text(texts, greedy(), b,
                                                   [&](size_t, Result<TextTranslation>&&) {
                                                     ++delivered;
                                                     thrown = true;
                                                     throw std::runtime_error("the app's sink failed");
                                                   }),
                      "the app's sink failed");
    CHECK(delivered == 1);
    // Each worker finishes the batch it holds; none starts after the sink threw.
    CHECK(started.load() <= 2 + workers);
  }
}

TEST_CASE("batch: inputs are taken a window at a time, totals are a value", "[bulk][batch]") {
  auto model = en_de();
  const std::vector<std::string> texts = test_sentences(12);
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch.has_value());
  std::vector<std::string> events;  // "B": a batch starts, "D<i>": input i delivered
  ObserverScope scope([&](size_t) { events.push_back("B"); });
  BatchOptions b;
  b.max_batch_size = 2;
  b.window = 4;
  REQUIRE(batch.value().translate_text(texts, greedy(), b, [&](size_t i, Result<TextTranslation>&& r) {
    REQUIRE(r.has_value());
    events.push_back("D" + std::to_string(i));
  }));
  // Every input of a window is delivered before the next window's first batch starts.
  size_t delivered = 0, batches = 0;
  for (const std::string& e : events) {
    if (e == "B") {
      const size_t window = batches / 2;  // two batches per window of four
      CHECK(delivered >= 4 * window);
      CHECK(delivered < 4 * (window + 1));
      ++batches;
    } else {
      ++delivered;
    }
  }
  CHECK(batches == 6);
  const BatchTotals first = batch.value().last_totals();
  CHECK(first.inputs == texts.size());
  REQUIRE(batch.value().translate_text({"Open file"}, greedy(), b, [](size_t, Result<TextTranslation>&&) {}));
  CHECK(first.inputs == texts.size());  // a copy: the next call does not change it
  CHECK(batch.value().last_totals().inputs == 1);
}

namespace {

// Every field a search produces, compared exactly.
void check_same(const Translation& got, const Translation& expected) {
  REQUIRE(got.hypotheses.size() == expected.hypotheses.size());
  for (size_t h = 0; h < got.hypotheses.size(); ++h) {
    const Hypothesis &a = got.hypotheses[h], &b = expected.hypotheses[h];
    CHECK(a.ids == b.ids);
    CHECK(a.score == b.score);
    CHECK(a.ended_on_eos == b.ended_on_eos);
    CHECK(a.alignment == b.alignment);
    REQUIRE(a.token_scores.size() == b.token_scores.size());
    for (size_t t = 0; t < a.token_scores.size(); ++t) {
      CHECK(a.token_scores[t].log_probability == b.token_scores[t].log_probability);
      CHECK(a.token_scores[t].logit == b.token_scores[t].logit);
    }
  }
}

// Translates `inputs` (token ids) through `batch`, every result required.
std::vector<Translation> translate_ids(BatchTranslator& batch, const std::vector<std::vector<int32_t>>& inputs,
                                       const TranslateOptions& options, const BatchOptions& b) {
  std::vector<Translation> out(inputs.size());
  REQUIRE(batch.translate(inputs, options, b, [&](size_t i, Result<Translation>&& r) {
    REQUIRE(r.has_value());
    out[i] = std::move(r.value());
  }));
  return out;
}

std::vector<std::vector<int32_t>> tokenized(const Model& model, const std::vector<std::string>& texts) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& t : texts) {
    auto r = tokenize(model, t);
    REQUIRE(r.has_value());
    out.push_back(r.value().ids);
  }
  return out;
}

}  // namespace

TEST_CASE("batch: a cache hit gives what translating gives, for every option that changes the output",
          "[batch]") {
  auto model = en_de();
  const auto inputs = tokenized(*model, test_sentences(3));
  auto cache = TranslationCache::create();
  // Each variant changes one option that changes a translation; translated with a cache
  // that already holds the other variants' translations of the same inputs, each must
  // give exactly what a translation without a cache gives (bergamot's cache keyed on
  // the sentence alone returned the other settings' results, firefox-translations #288).
  std::vector<std::pair<const char*, std::function<void(TranslateOptions&)>>> variants = {
      {"greedy", [](TranslateOptions&) {}},
      {"beam 3", [](TranslateOptions& o) { o.beam_size = 3; }},
      {"beam 3, n-best 2", [](TranslateOptions& o) { o.beam_size = 3; o.n_best = 2; }},
      {"max_new_tokens 3", [](TranslateOptions& o) { o.max_new_tokens = 3; }},
      {"max_length_factor 0.5", [](TranslateOptions& o) { o.max_length_factor = 0.5; }},
      {"min_new_tokens 30", [](TranslateOptions& o) { o.min_new_tokens = 30; }},
      {"beam 3, length penalty 0.2", [](TranslateOptions& o) { o.beam_size = 3; o.length_penalty = 0.2; }},
      {"beam 3, length penalty 0.2, stop at K finished",
       [](TranslateOptions& o) { o.beam_size = 3; o.length_penalty = 0.2; o.beam_stop = BeamStop::kFirstK; }},
      {"f16 KV cache", [](TranslateOptions& o) { o.kv_cache_f16 = true; }},
      {"target prefix", [](TranslateOptions& o) { o.target_prefix = {42}; }},
      {"alignment", [](TranslateOptions& o) { o.alignment = true; }},
      {"alignment of layer 0", [](TranslateOptions& o) { o.alignment = true; o.alignment_layer = 0; }},
      {"alignment of head 1", [](TranslateOptions& o) { o.alignment = true; o.alignment_head = 1; }},
      {"token scores", [](TranslateOptions& o) { o.token_scores = true; }},
  };
  for (const std::string& isa : model_test_isas()) {
    TranslatorOptions t;
    t.isa = isa;
    auto batch = BatchTranslator::create(model, t);
    REQUIRE(batch.has_value());
    for (const auto& [name, change] : variants) {
      INFO(isa << ", " << name);
      TranslateOptions o = greedy();
      change(o);
      const auto uncached = translate_ids(batch.value(), inputs, o, {});
      BatchOptions with_cache;
      with_cache.cache = cache;
      const auto before = cache->stats();
      const auto first = translate_ids(batch.value(), inputs, o, with_cache);   // stores
      const auto second = translate_ids(batch.value(), inputs, o, with_cache);  // finds
      CHECK(cache->stats().misses - before.misses == inputs.size());
      CHECK(cache->stats().hits - before.hits == inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        check_same(first[i], uncached[i]);
        check_same(second[i], uncached[i]);
      }
    }
  }
  // Another model's translation of the same ids is never taken for this one's.
  auto other = load_model(en_de_model_path(DType::kF32));
  auto batch = BatchTranslator::create(other);
  REQUIRE(batch.has_value());
  BatchOptions with_cache;
  with_cache.cache = cache;
  const auto before = cache->stats();
  const auto got = translate_ids(batch.value(), inputs, greedy(), with_cache);
  CHECK(cache->stats().hits == before.hits);
  const auto uncached = translate_ids(batch.value(), inputs, greedy(), {});
  for (size_t i = 0; i < inputs.size(); ++i) check_same(got[i], uncached[i]);
}

TEST_CASE("batch: cached sentences of texts, the length basis in the key, a bounded cache", "[batch]") {
  auto model = en_de();
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch.has_value());
  TranslateOptions o = greedy();
  auto translate_texts = [&](const std::vector<std::string>& texts, const BatchOptions& b) {
    std::vector<std::string> out;
    REQUIRE(batch.value().translate_text(texts, o, b, [&](size_t, Result<TextTranslation>&& r) {
      REQUIRE(r.has_value());
      out.push_back(r.value().hypotheses.at(0).text);
    }));
    return out;
  };
  BatchOptions split;
  split.split_sentences = true;
  const std::string short_sentence = "Open the file.";
  const std::string longer = short_sentence + " Unable to correct missing packages in the list of sources.";
  SECTION("a sentence's translation is reused in another text") {
    BatchOptions b = split;
    b.cache = TranslationCache::create();
    const auto uncached = translate_texts({longer, short_sentence}, split);
    CHECK(translate_texts({longer}, b) == std::vector<std::string>{uncached[0]});
    CHECK(b.cache->stats().entries == 2);
    CHECK(translate_texts({short_sentence}, b) == std::vector<std::string>{uncached[1]});
    CHECK(b.cache->stats().hits == 1);
  }
  SECTION("with limit_by_longest_sentence a sentence's limit depends on its text: part of the key") {
    BatchOptions b = split;
    b.limit_by_longest_sentence = true;
    o.max_length_factor = 1.0;
    const auto uncached = translate_texts({longer, short_sentence}, b);
    b.cache = TranslationCache::create();
    CHECK(translate_texts({longer}, b) == std::vector<std::string>{uncached[0]});
    CHECK(translate_texts({short_sentence}, b) == std::vector<std::string>{uncached[1]});
    CHECK(b.cache->stats().hits == 0);
  }
  SECTION("the least recently used entries go when the capacity would be passed") {
    BatchOptions b = split;
    b.cache = TranslationCache::create(2000);
    const std::vector<std::string> texts = test_sentences(12);
    const auto uncached = translate_texts(texts, split);
    CHECK(translate_texts(texts, b) == uncached);
    const auto stats = b.cache->stats();
    CHECK(stats.bytes <= 2000);
    CHECK(stats.entries > 0);
    CHECK(stats.entries < texts.size());
    CHECK(translate_texts(texts, b) == uncached);
    b.cache->clear();
    CHECK(b.cache->stats().entries == 0);
    CHECK(b.cache->stats().bytes == 0);
  }
}

TEST_CASE("batch: a cancelled call delivers every input not yet delivered as cancelled", "[batch][threads]") {
  auto model = en_de();
  const std::vector<std::string> texts = test_sentences(12);
  for (size_t workers : {1, 2}) {
    INFO("workers " << workers);
    auto batch = BatchTranslator::create(model, {}, workers);
    REQUIRE(batch.has_value());
    std::vector<std::string> uncached;
    REQUIRE(batch.value().translate_text(texts, greedy(), {}, [&](size_t, Result<TextTranslation>&& r) {
      REQUIRE(r.has_value());
      uncached.push_back(r.value().hypotheses.at(0).text);
    }));
    std::atomic<bool> cancel{false};
    BatchOptions b;
    b.max_batch_size = 2;
    b.cancel = &cancel;
    SECTION("before the call: nothing is translated") {
      cancel = true;
      size_t batches = 0, cancelled = 0;
      ObserverScope scope([&](size_t) { ++batches; });
      REQUIRE(batch.value().translate_text(texts, greedy(), b, [&](size_t, Result<TextTranslation>&& r) {
        REQUIRE(!r.has_value());
        CHECK(r.error().code == ErrorCode::kCancelled);
        ++cancelled;
      }));
      CHECK(batches == 0);
      CHECK(cancelled == texts.size());
    }
    SECTION("from the sink after the fourth input, and from within a running batch") {
      // The third batch raises the flag as it starts: it stops after one step.
      std::atomic<size_t> started{0};
      ObserverScope scope([&](size_t) {
        if (++started == 3) cancel = true;
      });
      std::vector<size_t> order;
      size_t translated = 0;
      REQUIRE(batch.value().translate_text(texts, greedy(), b, [&](size_t i, Result<TextTranslation>&& r) {
        order.push_back(i);
        if (r.has_value()) {
          CHECK(translated == i);  // every translated input comes before every cancelled one
          CHECK(r.value().hypotheses.at(0).text == uncached[i]);
          ++translated;
        } else {
          CHECK(r.error().code == ErrorCode::kCancelled);
          CHECK_THAT(r.error().message, Contains("input " + std::to_string(i + 1)));
        }
        if (i == 3) cancel = true;
      }));
      CHECK(order.size() == texts.size());
      CHECK(translated <= 4);
      CHECK(started.load() <= 3 + workers);
    }
  }
}

TEST_CASE("batch: priority inputs are translated and delivered before any later input is read", "[batch]") {
  auto model = en_de();
  const std::vector<std::string> texts = test_sentences(10);
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch.has_value());
  for (size_t priority : {size_t{0}, size_t{3}}) {
    INFO("priority inputs " << priority);
    std::vector<std::string> events;  // "B<size>": a batch starts, "D<i>": input i delivered
    ObserverScope scope([&](size_t size) { events.push_back("B" + std::to_string(size)); });
    BatchOptions b;
    b.max_batch_size = 8;
    b.priority_inputs = priority;
    std::vector<std::string> got;
    REQUIRE(batch.value().translate_text(texts, greedy(), b, [&](size_t i, Result<TextTranslation>&& r) {
      REQUIRE(r.has_value());
      got.push_back(r.value().hypotheses.at(0).text);
      events.push_back("D" + std::to_string(i));
    }));
    if (priority == 0) {
      CHECK(events.front() == "B8");
    } else {  // the first three alone, delivered before the others' first batch
      CHECK(std::vector<std::string>(events.begin(), events.begin() + 5) ==
            std::vector<std::string>{"B3", "D0", "D1", "D2", "B7"});
    }
    CHECK(got.size() == texts.size());
  }
}

TEST_CASE("batch: quality scores and html from a model whose tokenizer gives no byte ranges are refused by name",
          "[batch]") {
  auto model = en_de();  // a Hugging Face Marian model: SentencePiece pieces, no byte ranges
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch.has_value());
  auto single = Translator::create(model);
  REQUIRE(single.has_value());
  for (const char* option : {"quality_scores", "html"}) {
    INFO(option);
    TranslateOptions o = greedy();
    (std::string(option) == "html" ? o.html : o.quality_scores) = true;
    size_t delivered = 0;
    Status s = batch.value().translate_text({"Open the file."}, o, {},
                                            [&](size_t, Result<TextTranslation>&&) { ++delivered; });
    REQUIRE(!s);
    CHECK(s.error().code == ErrorCode::kUnsupported);
    CHECK_THAT(s.error().message, Contains(std::string(option) + ": this model's tokenizer does not give the byte ranges"));
    CHECK(delivered == 0);
    auto r = single.value().translate_text({"Open the file."}, o);
    REQUIRE(!r);
    CHECK_THAT(r.error().message, Contains(std::string(option) + ":"));
  }
}
