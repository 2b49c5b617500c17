// What HTML translation costs over translating the same text (TranslateOptions::html):
// the real markup fragments of tests/fixtures/markup (gettext Pango markup, /usr/share/doc
// HTML) translated as markup and as their plain text, one fragment per call, with
// bergamot's settings (greedy, max-length-factor 2, each line a paragraph).
//
//   PETREL_BENCH_MODEL=model.petrel build/release/bench/petrel_markup_bench
//
// The model must give its tokens' byte ranges (a Marian C++ model converted from its
// .bin and .spm, e.g. bench/make_firefox_tiny_standin.py's). BM_html / BM_plain is the
// markup's cost; BM_markup_parse times taking the markup out alone.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"
#include "text/html_markup.h"

namespace {

using namespace petrel;

struct Fragments {
  std::vector<std::string> html, plain;
};

const Fragments& fragments() {
  static const Fragments f = [] {
    Fragments out;
    std::ifstream in(std::string(PETREL_MARKUP_FIXTURES_DIR) + "/transformer_float32.json");
    const nlohmann::json fixture = nlohmann::json::parse(in);
    for (const auto& request : fixture["requests"]) {
      if (!request["html"].get<bool>() || request["expect_error"].get<bool>()) continue;
      const std::string text = request["text"].get<std::string>();
      auto markup = text::HtmlMarkup::parse(text);
      if (!markup) continue;
      out.html.push_back(text);
      out.plain.push_back(markup.value().text());
    }
    return out;
  }();
  return f;
}

BatchTranslator& translator() {
  static BatchTranslator batch = [] {
    const char* path = std::getenv("PETREL_BENCH_MODEL");
    if (path == nullptr) throw std::runtime_error("set PETREL_BENCH_MODEL to a .petrel Marian model");
    auto model = Model::load(path);
    if (!model) throw std::runtime_error(model.error().message);
    auto b = BatchTranslator::create(model.value());
    if (!b) throw std::runtime_error(b.error().message);
    return std::move(b.value());
  }();
  return batch;
}

void translate_each(benchmark::State& state, const std::vector<std::string>& texts, bool html) {
  TranslateOptions o;
  o.beam_size = 1;
  o.max_length_factor = 2.0;
  o.html = html;
  BatchOptions b;
  b.split_sentences = true;
  b.split_mode = SentenceSplit::kParagraphPerLine;
  b.limit_by_longest_sentence = true;
  size_t failed = 0;
  for (auto _ : state) {
    for (const std::string& text : texts) {
      Status s = translator().translate_text({text}, o, b, [&](size_t, Result<TextTranslation>&& r) {
        failed += r ? 0 : 1;
        benchmark::DoNotOptimize(r);
      });
      failed += s ? 0 : 1;
    }
  }
  if (failed > 0) state.SkipWithError("a translation failed");
  state.counters["fragments/s"] = benchmark::Counter(static_cast<double>(texts.size() * state.iterations()),
                                                     benchmark::Counter::kIsRate);
}

void BM_plain(benchmark::State& state) { translate_each(state, fragments().plain, false); }
void BM_html(benchmark::State& state) { translate_each(state, fragments().html, true); }

// Taking the markup out alone (HtmlMarkup::parse).
void BM_markup_parse(benchmark::State& state) {
  for (auto _ : state) {
    for (const std::string& text : fragments().html) {
      auto markup = text::HtmlMarkup::parse(text);
      benchmark::DoNotOptimize(markup);
    }
  }
  state.counters["fragments/s"] = benchmark::Counter(static_cast<double>(fragments().html.size() * state.iterations()),
                                                     benchmark::Counter::kIsRate);
}

BENCHMARK(BM_plain)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_html)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_markup_parse)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
