// A translation as bergamot-translator's Response holds it (TextTranslation::sentences):
// token byte ranges, alignments and quality scores, against bergamot 0.4.9 itself
// (tests/fixtures/markup, made by tools/reference/make_markup_fixtures.py from its WASM
// build; fields read from its memory are checked there against the PyTorch reference).
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"
#include "petrel/translator.h"
#include "support/bergamot_fixture.h"
#include "support/native_fixture.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using json = nlohmann::json;

namespace {

// bergamot's contiguous token bounds [t0, t1, ..., tn] (token k = [t_k, t_k+1)) of ranges
// that must tile their sentence.
std::vector<size_t> bounds_of(const std::vector<TextRange>& tokens) {
  std::vector<size_t> bounds;
  for (size_t k = 0; k < tokens.size(); ++k) {
    if (k > 0) CHECK(tokens[k].begin == tokens[k - 1].end);
    bounds.push_back(tokens[k].begin);
  }
  if (!tokens.empty()) bounds.push_back(tokens.back().end);
  return bounds;
}

}  // namespace

TEST_CASE("plain-text translations hold bergamot's sentences, token ranges, alignments and quality scores",
          "[bergamot][quality][marian-native]") {
  for (const std::string model_name : {"transformer", "ssru"}) {
    INFO("model " << model_name);
    const json fixture = markup_fixture(model_name + "_float32");
    auto model = load_model(native_model(model_name));
    auto batch = BatchTranslator::create(model);
    REQUIRE(batch);
    BatchOptions paragraphs;  // bergamot's ssplit-mode paragraph, a request's sentences in one batch
    paragraphs.split_sentences = true;
    paragraphs.split_mode = SentenceSplit::kParagraphPerLine;
    paragraphs.limit_by_longest_sentence = true;
    size_t compared = 0, quality_compared = 0, aligned = 0;
    double worst_word_score = 0, worst_alignment = 0;
    for (size_t i = 0; i < fixture["requests"].size(); ++i) {
      const json& request = fixture["requests"][i];
      const json& want = fixture["responses"][i];
      if (request["html"].get<bool>() || request["expect_error"].get<bool>()) continue;
      INFO("request " << i << ": " << request["text"].get<std::string>());
      TranslateOptions o = firefox_options();
      o.alignment = request["alignment"].get<bool>();
      o.quality_scores = request["qualityScores"].get<bool>();
      std::vector<Result<TextTranslation>> got;
      REQUIRE(batch.value().translate_text({request["text"].get<std::string>()}, o, paragraphs,
                                           [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
      REQUIRE(got.size() == 1);
      REQUIRE(got[0]);
      const TextTranslation& t = got[0].value();
      REQUIRE(t.hypotheses.size() == 1);
      CHECK(t.hypotheses[0].text == want["text"].get<std::string>());
      REQUIRE(t.sentences.size() == want["sentences"].size());
      for (size_t k = 0; k < t.sentences.size(); ++k) {
        const SentenceTranslation& s = t.sentences[k];
        const json& sentence = want["sentences"][k];
        CHECK(std::vector<size_t>{s.source.begin, s.source.end} == sentence["source"].get<std::vector<size_t>>());
        CHECK(std::vector<size_t>{s.target.begin, s.target.end} == sentence["target"].get<std::vector<size_t>>());
        CHECK(bounds_of(s.source_tokens) == want["source_tokens"][k].get<std::vector<size_t>>());
        CHECK(bounds_of(s.target_tokens) == want["target_tokens"][k].get<std::vector<size_t>>());
        ++compared;
        if (o.alignment) {
          const auto& rows = want["alignments"][k];
          REQUIRE(s.alignment.size() == rows.size());
          for (size_t r = 0; r < rows.size(); ++r) {
            REQUIRE(s.alignment[r].size() == rows[r].size());
            for (size_t c = 0; c < rows[r].size(); ++c)
              worst_alignment = std::max(worst_alignment, std::fabs(s.alignment[r][c] - rows[r][c].get<double>()));
          }
          ++aligned;
        }
        if (o.quality_scores) {
          REQUIRE(s.quality);
          const json& q = want["quality"][k];
          CHECK(std::fabs(s.quality->score - q["sentence_score"].get<double>()) < 1e-3);
          const auto word_scores = q["word_scores"].get<std::vector<double>>();
          REQUIRE(s.quality->word_scores.size() == word_scores.size());
          for (size_t w = 0; w < word_scores.size(); ++w)
            worst_word_score = std::max(worst_word_score, std::fabs(s.quality->word_scores[w] - word_scores[w]));
          std::vector<std::vector<size_t>> word_tokens;
          for (const TextRange& r : s.quality->word_tokens) word_tokens.push_back({r.begin, r.end});
          CHECK(word_tokens == q["word_token_ranges"].get<std::vector<std::vector<size_t>>>());
          ++quality_compared;
        }
      }
    }
    CHECK(compared >= 30);
    CHECK(quality_compared >= 30);
    CHECK(aligned >= 8);
    CHECK(worst_word_score < 1e-3);  // bergamot's scores to 3 decimals
    CHECK(worst_alignment < 1e-5);
  }
}

TEST_CASE("token scores add up to the hypothesis' score, and the sentence view holds them",
          "[bergamot][quality][marian-native]") {
  auto model = load_model(native_model("transformer"));
  auto translator = Translator::create(model);
  REQUIRE(translator);
  TranslateOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  o.length_penalty = 1.0;
  o.token_scores = true;
  auto got = translator.value().translate_text({"Open the file in a new window", "Save all changes?"}, o);
  REQUIRE(got);
  for (const TextTranslation& t : got.value()) {
    REQUIRE(!t.hypotheses.empty());
    for (const TextHypothesis& h : t.hypotheses) {
      REQUIRE(h.token_scores.size() == h.ids.size() + (h.ended_on_eos ? 1 : 0));
      double sum = 0;
      for (const TokenScore& s : h.token_scores) {
        CHECK(s.log_probability <= 0);
        CHECK(s.logit >= s.log_probability);  // log-probability = logit - log-sum-exp, and exp(logit) <= sum
        sum += s.log_probability;
      }
      // score = log-probability / length^1
      CHECK(std::fabs(sum / static_cast<double>(h.token_scores.size()) - h.score) < 1e-4);
    }
    // The sentence view holds the best hypothesis' scores.
    REQUIRE(t.sentences.size() == 1);
    CHECK(t.sentences[0].token_scores.size() == t.hypotheses[0].token_scores.size());
  }
}

TEST_CASE("sentence-split texts keep each sentence's ranges in the input and in the joined translation",
          "[bergamot][marian-native]") {
  auto model = load_model(native_model("transformer"));
  auto batch = BatchTranslator::create(model);
  REQUIRE(batch);
  TranslateOptions o = firefox_options();
  o.quality_scores = true;
  BatchOptions b;
  b.split_sentences = true;
  const std::string text = "  Open the file.  Save all changes! Close the window.  ";
  std::vector<Result<TextTranslation>> got;
  REQUIRE(batch.value().translate_text({text}, o, b,
                                       [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
  REQUIRE(got.size() == 1);
  REQUIRE(got[0]);
  const TextTranslation& t = got[0].value();
  REQUIRE(t.sentences.size() == 3);
  const std::string& target = t.hypotheses.at(0).text;
  const std::vector<std::string> sources = {"Open the file.", "Save all changes!", "Close the window."};
  for (size_t k = 0; k < 3; ++k) {
    const SentenceTranslation& s = t.sentences[k];
    CHECK(text.substr(s.source.begin, s.source.end - s.source.begin) == sources[k]);
    CHECK(s.source_tokens.front().begin == s.source.begin);
    CHECK(s.target.end <= target.size());
    if (k > 0) CHECK(s.target.begin >= t.sentences[k - 1].target.end);
    // The sentence's target tokens tile its target bytes, and its translation alone is there.
    CHECK(s.target_tokens.front().begin == s.target.begin);
    CHECK(s.target_tokens.back().end == s.target.end);
    REQUIRE(s.quality);
    for (const TextRange& w : s.quality->words) {
      CHECK(w.begin >= s.target.begin);
      CHECK(w.end <= s.target.end);
    }
  }
}

TEST_CASE("HTML translations equal bergamot's on real markup, quality markup included",
          "[bergamot][html][marian-native]") {
  for (const std::string model_name : {"transformer", "ssru"}) {
    INFO("model " << model_name);
    const json fixture = markup_fixture(model_name + "_float32");
    auto model = load_model(native_model(model_name));
    auto batch = BatchTranslator::create(model);
    REQUIRE(batch);
    size_t translated = 0, equal = 0, source_equal = 0, refused_by_bergamot = 0, repaired = 0;
    for (size_t i = 0; i < fixture["requests"].size(); ++i) {
      const json& request = fixture["requests"][i];
      const json& want = fixture["responses"][i];
      if (!request["html"].get<bool>()) continue;
      INFO("request " << i << ": " << request["text"].get<std::string>());
      TranslateOptions o = firefox_options();
      o.html = true;
      o.alignment = request["alignment"].get<bool>();
      o.quality_scores = request["qualityScores"].get<bool>();
      std::vector<Result<TextTranslation>> got;
      BatchOptions as_bergamot;  // a request's sentences limited as one batch
      as_bergamot.limit_by_longest_sentence = true;
      REQUIRE(batch.value().translate_text({request["text"].get<std::string>()}, o, as_bergamot,
                                           [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
      REQUIRE(got.size() == 1);
      if (request["expect_error"].get<bool>()) {  // bergamot aborted: Petrel repairs the markup
        ++refused_by_bergamot;
        repaired += got[0] ? 1 : 0;
        continue;
      }
      REQUIRE(got[0]);
      ++translated;
      const TextTranslation& t = got[0].value();
      const bool same = same_markup(t.hypotheses.at(0).text, want["text"].get<std::string>());
      equal += same;
      source_equal += t.source_html == want["source"].get<std::string>();
      if (!same && std::getenv("DEBUG_HTML"))
        std::fprintf(stderr, "request %zu differs:\n  input:    %s\n  petrel:   %s\n  bergamot: %s\n", i,
                     request["text"].get<std::string>().c_str(), t.hypotheses[0].text.c_str(),
                     want["text"].get<std::string>().c_str());
    }
    INFO(equal << " of " << translated << " equal; sources " << source_equal << "; repaired " << repaired << " of "
               << refused_by_bergamot);
    CHECK(translated >= 300);
    CHECK(equal * 100 >= translated * 98);
    CHECK(source_equal * 100 >= translated * 98);
    CHECK(repaired == refused_by_bergamot);
  }
}

TEST_CASE("translation through a pivot equals bergamot's translateViaPivoting: texts, markup, scores, alignments",
          "[bergamot][pivot][marian-native]") {
  const json fixture = markup_fixture("pivot-transformer-ssru_float32");
  auto first = BatchTranslator::create(load_model(native_model("transformer")));
  auto second = BatchTranslator::create(load_model(native_model("ssru")));
  REQUIRE(first);
  REQUIRE(second);
  BatchOptions as_bergamot;  // ssplit-mode paragraph, a request's sentences in one batch
  as_bergamot.split_sentences = true;
  as_bergamot.split_mode = SentenceSplit::kParagraphPerLine;
  as_bergamot.limit_by_longest_sentence = true;
  size_t translated = 0, equal = 0, aligned = 0, alignments_equal = 0;
  for (size_t i = 0; i < fixture["requests"].size(); ++i) {
    const json& request = fixture["requests"][i];
    const json& want = fixture["responses"][i];
    if (request["expect_error"].get<bool>()) continue;
    INFO("request " << i << ": " << request["text"].get<std::string>());
    TranslateOptions o = firefox_options();
    o.html = request["html"].get<bool>();
    o.alignment = request["alignment"].get<bool>();
    o.quality_scores = request["qualityScores"].get<bool>();
    std::vector<Result<TextTranslation>> got;
    REQUIRE(translate_via_pivot(first.value(), second.value(), {request["text"].get<std::string>()}, o, as_bergamot,
                                [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
    REQUIRE(got.size() == 1);
    REQUIRE(got[0]);
    const TextTranslation& t = got[0].value();
    ++translated;
    const bool same = same_markup(t.hypotheses.at(0).text, want["text"].get<std::string>());
    equal += same;
    if (!same && std::getenv("DEBUG_HTML"))
      std::fprintf(stderr, "pivot request %zu differs:\n  petrel:   %s\n  bergamot: %s\n", i, t.hypotheses[0].text.c_str(),
                   want["text"].get<std::string>().c_str());
    if (o.alignment && same && !o.html) {  // plain text: compare the composed matrices (NaN where bergamot's are)
      ++aligned;
      bool all = t.sentences.size() == want["alignments"].size();
      for (size_t k = 0; all && k < t.sentences.size(); ++k) {
        const auto& rows = want["alignments"][k];
        all = t.sentences[k].alignment.size() == rows.size();
        for (size_t r = 0; all && r < rows.size(); ++r)
          for (size_t c = 0; all && c < rows[r].size(); ++c) {
            const float got_value = t.sentences[k].alignment[r].at(c);
            all = rows[r][c].is_string() ? std::isnan(got_value) : std::fabs(got_value - rows[r][c].get<double>()) < 1e-5;
          }
      }
      alignments_equal += all;
    }
  }
  INFO(equal << " of " << translated << " equal; alignments " << alignments_equal << " of " << aligned);
  CHECK(translated >= 350);
  CHECK(equal * 100 >= translated * 98);
  CHECK(alignments_equal == aligned);
}

TEST_CASE("int8 HTML translations against bergamot's int8shiftAlphaAll: the markup holds, texts differ where int8 rounds",
          "[bergamot][html][int8][marian-native]") {
  for (const std::string model_name : {"transformer", "ssru"}) {
    INFO("model " << model_name);
    const json fixture = markup_fixture(model_name + "_int8shiftAlphaAll");
    const json float32 = markup_fixture(model_name + "_float32");
    TranslatorOptions as_alphas;  // bergamot's int8shiftAlphaAll: the file's activation scales
    as_alphas.activation_scales = ActivationScales::kFile;
    auto batch = BatchTranslator::create(load_model(native_int8_model(model_name)), as_alphas);
    REQUIRE(batch);
    BatchOptions as_bergamot;
    as_bergamot.limit_by_longest_sentence = true;
    size_t translated = 0, equal = 0, bergamot_int8_as_f32 = 0, sources = 0;
    for (size_t i = 0; i < fixture["requests"].size(); ++i) {
      const json& request = fixture["requests"][i];
      if (!request["html"].get<bool>() || request["expect_error"].get<bool>()) continue;
      TranslateOptions o = firefox_options();
      o.html = true;
      o.quality_scores = request["qualityScores"].get<bool>();
      std::vector<Result<TextTranslation>> got;
      REQUIRE(batch.value().translate_text({request["text"].get<std::string>()}, o, as_bergamot,
                                           [&](size_t, Result<TextTranslation>&& r) { got.push_back(std::move(r)); }));
      REQUIRE(got.size() == 1);
      REQUIRE(got[0]);
      ++translated;
      const std::string want = fixture["responses"][i]["text"].get<std::string>();
      equal += same_markup(got[0].value().hypotheses.at(0).text, want);
      bergamot_int8_as_f32 += same_markup(float32["responses"][i]["text"].get<std::string>(), want);
      sources += got[0].value().source_html == fixture["responses"][i]["source"].get<std::string>();
    }
    WARN(model_name << " int8: HTML equal to bergamot int8shiftAlphaAll " << equal << "/" << translated
                    << " (bergamot's own int8 equals its float32 on " << bergamot_int8_as_f32 << ")");
    CHECK(sources == translated);  // the markup side does not depend on the numbers
    // The fixture models are tiny and barely trained: one int8 rounding flips a fragment's
    // text (bergamot's own int8 output equals its float32 on under a third). Petrel's int8
    // is at least as close to bergamot's int8 as that; a broken path gives next to nothing.
    CHECK(equal >= bergamot_int8_as_f32);
    CHECK(equal * 100 >= translated * 25);
  }
}
