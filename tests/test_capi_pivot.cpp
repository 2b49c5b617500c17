// petrel_translate_responses_via_pivot: bergamot's Response per text through two models, as
// the C++ API's translate_via_pivot gives it, and the models and options it refuses.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"
#include "petrel/petrel.h"
#include "support/native_fixture.h"
#include "support/test_support.h"

using namespace petrel::test;

namespace {

// What a response sink was handed for one text.
struct PivotResponse {
  bool delivered = false;
  petrel_status status = PETREL_OK;
  std::string text, source, error;
  struct Sentence {
    size_t ranges[4] = {0, 0, 0, 0};
    float quality = 0;
    std::vector<std::pair<size_t, size_t>> word_ranges;
    std::vector<float> word_scores;
    size_t rows = 0, columns = 0;
    std::vector<float> alignment;  // row-major
  };
  std::vector<Sentence> sentences;
};

void record_response(void* data, size_t i, petrel_status status, const petrel_response* r, const char* error) {
  auto& all = *static_cast<std::vector<PivotResponse>*>(data);
  CHECK(i < all.size());  // no exception may cross the C API: CHECK, not REQUIRE, in here
  if (i >= all.size()) return;
  PivotResponse& out = all[i];
  out.delivered = true;
  out.status = status;
  if (status != PETREL_OK) {
    out.error = error;
    return;
  }
  out.text = petrel_response_text(r);
  out.source = petrel_response_source(r);
  for (size_t k = 0; k < petrel_response_sentences(r); ++k) {
    PivotResponse::Sentence s;
    CHECK(petrel_response_sentence(r, k, s.ranges) == 1);
    s.quality = petrel_response_sentence_quality(r, k);
    for (size_t w = 0; w < petrel_response_words(r, k); ++w) {
      size_t range[2] = {0, 0};
      float score = 0;
      CHECK(petrel_response_word(r, k, w, range, &score) == 1);
      s.word_ranges.emplace_back(range[0], range[1]);
      s.word_scores.push_back(score);
    }
    const float* cells = petrel_response_alignment(r, k, &s.rows, &s.columns);
    if (cells != nullptr) s.alignment.assign(cells, cells + s.rows * s.columns);
    out.sentences.push_back(std::move(s));
  }
}

bool same_float(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// bergamot's settings (Firefox's): greedy, max-length-factor 2, no shortlist; paragraphs.
petrel_options firefox_c_options() {
  petrel_options o;
  petrel_options_init(&o);
  o.beam_size = 1;
  o.max_length_factor = 2.0;
  o.use_shortlist = -1;
  return o;
}

petrel_batch_options paragraph_batching() {
  petrel_batch_options b;
  petrel_batch_options_init(&b);
  b.split_sentences = 1;
  b.split_mode = PETREL_SPLIT_PARAGRAPH_PER_LINE;
  b.limit_by_longest_sentence = 1;
  return b;
}

}  // namespace

TEST_CASE("C API: petrel_translate_responses_via_pivot gives translate_via_pivot's texts, ranges, scores, alignments",
          "[pivot][marian-native]") {
  const std::string first_path = native_model("transformer"), second_path = native_model("ssru");
  petrel_model* first = nullptr;
  petrel_model* second = nullptr;
  REQUIRE(petrel_model_load(first_path.c_str(), &first) == PETREL_OK);
  REQUIRE(petrel_model_load(second_path.c_str(), &second) == PETREL_OK);
  auto first_cpp = petrel::BatchTranslator::create(load_model(first_path));
  auto second_cpp = petrel::BatchTranslator::create(load_model(second_path));
  REQUIRE(first_cpp);
  REQUIRE(second_cpp);
  const petrel_batch_options b = paragraph_batching();
  petrel::BatchOptions cb;
  cb.split_sentences = true;
  cb.split_mode = petrel::SentenceSplit::kParagraphPerLine;
  cb.limit_by_longest_sentence = true;

  for (const bool html : {false, true}) {
    INFO("html " << html);
    const std::vector<std::string> texts =
        html ? std::vector<std::string>{"<p>Open <b>the file</b> now. Save it.</p>", "<b>broken &amp; <i>nested</b>", ""}
             : std::vector<std::string>{"Open the file now. Save it.", "The window is closed.", "", "Print the page"};
    std::vector<const char*> c_texts;
    for (const std::string& t : texts) c_texts.push_back(t.c_str());
    petrel_options o = firefox_c_options();
    o.html = html ? 1 : 0;
    o.quality_scores = 1;
    o.alignment = 1;
    std::vector<PivotResponse> seen(texts.size());
    REQUIRE(petrel_translate_responses_via_pivot(first, second, nullptr, c_texts.data(), c_texts.size(), &o, &b,
                                                 record_response, &seen) == PETREL_OK);

    petrel::TranslateOptions co;
    co.beam_size = 1;
    co.max_length_factor = 2.0;
    co.use_shortlist = false;
    co.html = html;
    co.quality_scores = co.alignment = true;
    size_t checked = 0, sentences = 0;
    REQUIRE(petrel::translate_via_pivot(
        first_cpp.value(), second_cpp.value(), texts, co, cb, [&](size_t i, petrel::Result<petrel::TextTranslation>&& r) {
          INFO("text " << i << ": " << texts[i]);
          REQUIRE(r);
          const petrel::TextTranslation& t = r.value();
          const PivotResponse& got = seen.at(i);
          REQUIRE(got.delivered);
          REQUIRE(got.status == PETREL_OK);
          CHECK(got.text == (t.hypotheses.empty() ? std::string() : t.hypotheses[0].text));
          CHECK(got.source == (html ? t.source_html : texts[i]));
          REQUIRE(got.sentences.size() == t.sentences.size());
          for (size_t k = 0; k < t.sentences.size(); ++k) {
            const petrel::SentenceTranslation& s = t.sentences[k];
            const PivotResponse::Sentence& g = got.sentences[k];
            CHECK(g.ranges[0] == s.source.begin);
            CHECK(g.ranges[1] == s.source.end);
            CHECK(g.ranges[2] == s.target.begin);
            CHECK(g.ranges[3] == s.target.end);
            REQUIRE(s.quality);
            CHECK(same_float(g.quality, s.quality->score));
            REQUIRE(g.word_scores.size() == s.quality->word_scores.size());
            for (size_t w = 0; w < g.word_scores.size(); ++w) {
              CHECK(same_float(g.word_scores[w], s.quality->word_scores[w]));
              CHECK(g.word_ranges[w] == std::make_pair(s.quality->words[w].begin, s.quality->words[w].end));
            }
            // The alignment composed through the pivot: [target token][source token].
            REQUIRE(!s.alignment.empty());
            CHECK(g.rows == s.alignment.size());
            CHECK(g.columns == s.source_tokens.size());
            REQUIRE(g.alignment.size() == g.rows * g.columns);
            bool cells_equal = true;
            for (size_t row = 0; row < g.rows; ++row)
              for (size_t c = 0; c < g.columns; ++c)
                cells_equal = cells_equal && same_float(g.alignment[row * g.columns + c], s.alignment[row].at(c));
            CHECK(cells_equal);
            ++sentences;
          }
          ++checked;
        }));
    CHECK(checked == texts.size());
    CHECK(sentences >= texts.size());  // the first text has two
    CHECK(seen[0].sentences.size() == 2);
    CHECK(seen[2].text.empty());  // an empty text: an empty translation
    if (html) CHECK(seen[0].text.find("<b>") != std::string::npos);
  }
  petrel_model_free(first);
  petrel_model_free(second);
}

TEST_CASE("C API: petrel_translate_responses_via_pivot refuses NULL models, n_best > 1 and models it cannot pivot through",
          "[pivot][marian-native]") {
  const std::string first_path = native_model("transformer"), second_path = native_model("ssru");
  petrel_model* first = nullptr;
  petrel_model* second = nullptr;
  REQUIRE(petrel_model_load(first_path.c_str(), &first) == PETREL_OK);
  REQUIRE(petrel_model_load(second_path.c_str(), &second) == PETREL_OK);
  const char* texts[] = {"Open the file."};
  petrel_options o = firefox_c_options();
  const petrel_batch_options b = paragraph_batching();
  std::vector<PivotResponse> seen(1);
  auto last_error = [] { return std::string(petrel_last_error()); };
  using Catch::Matchers::Contains;

  CHECK(petrel_translate_responses_via_pivot(nullptr, second, nullptr, texts, 1, &o, &b, record_response, &seen) ==
        PETREL_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Contains("petrel_translate_responses_via_pivot: NULL argument"));
  CHECK(petrel_translate_responses_via_pivot(first, nullptr, nullptr, texts, 1, &o, &b, record_response, &seen) ==
        PETREL_INVALID_ARGUMENT);
  CHECK(petrel_translate_responses_via_pivot(first, second, nullptr, texts, 1, &o, &b, nullptr, &seen) ==
        PETREL_INVALID_ARGUMENT);
  CHECK(petrel_translate_responses_via_pivot(first, second, nullptr, nullptr, 1, &o, &b, record_response, &seen) ==
        PETREL_INVALID_ARGUMENT);

  // n_best > 1: the second model translates the first's best translation.
  petrel_options two_best = o;
  two_best.beam_size = 2;
  two_best.n_best = 2;
  CHECK(petrel_translate_responses_via_pivot(first, second, nullptr, texts, 1, &two_best, &b, record_response, &seen) ==
        PETREL_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Contains("n_best"));

  // A language model, and a translation model whose tokenizer gives no token bytes
  // (opus-mt's), on either side; the refusal names the argument.
  petrel_model* language_model = nullptr;
  petrel_model* no_ranges = nullptr;
  const std::string lm_path =
      shared_conversion("lm-gemma3_f32", fixture_dir() + "/decoder_only/gemma3_f32", petrel::DType::kF32);
  REQUIRE(petrel_model_load(lm_path.c_str(), &language_model) == PETREL_OK);
  REQUIRE(petrel_model_load(en_de_model_path().c_str(), &no_ranges) == PETREL_OK);
  CHECK(petrel_translate_responses_via_pivot(language_model, second, nullptr, texts, 1, &o, &b, record_response,
                                             &seen) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Contains("first_model is a language model"));
  CHECK(petrel_translate_responses_via_pivot(first, language_model, nullptr, texts, 1, &o, &b, record_response,
                                             &seen) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Contains("second_model is a language model"));
  CHECK(petrel_translate_responses_via_pivot(first, no_ranges, nullptr, texts, 1, &o, &b, record_response, &seen) ==
        PETREL_UNSUPPORTED);
  CHECK_THAT(last_error(), Contains("second_model's tokenizer does not give the byte ranges"));
  CHECK(petrel_translate_responses_via_pivot(no_ranges, second, nullptr, texts, 1, &o, &b, record_response, &seen) ==
        PETREL_UNSUPPORTED);
  CHECK_THAT(last_error(), Contains("first_model's tokenizer"));
  CHECK(!seen[0].delivered);  // nothing reached the sink

  // And it goes on translating after the refusals.
  REQUIRE(petrel_translate_responses_via_pivot(first, second, nullptr, texts, 1, &o, &b, record_response, &seen) ==
          PETREL_OK);
  CHECK(seen[0].delivered);
  CHECK(seen[0].status == PETREL_OK);
  CHECK(!seen[0].text.empty());
  petrel_model_free(language_model);
  petrel_model_free(no_ranges);
  petrel_model_free(first);
  petrel_model_free(second);
}

TEST_CASE("C API: petrel_batch_options_init writes only the caller's struct", "[marian-native]") {
  // An app built before shortlist_of_input existed has a shorter struct: neither the old
  // entry point nor the sized one may write past it.
  const size_t old_size = offsetof(petrel_batch_options, shortlist_of_input);
  std::vector<unsigned char> bytes(sizeof(petrel_batch_options) + 16, 0xAB);
  auto* b = reinterpret_cast<petrel_batch_options*>(bytes.data());
  (petrel_batch_options_init)(b);  // the exported function, not the macro
  CHECK(b->struct_size == old_size);
  CHECK(b->max_batch_size == 8);
  for (size_t i = old_size; i < bytes.size(); ++i) CHECK(bytes[i] == 0xAB);
  petrel_batch_options current;
  petrel_batch_options_init(&current);  // the macro: this header's size
  CHECK(current.struct_size == sizeof(petrel_batch_options));
  CHECK(current.shortlist_of_input == 0);
}

TEST_CASE("C API: shortlist_of_input decodes a request's sentences over one shortlist, as the C++ API does",
          "[marian-native][shortlist]") {
  // The Firefox-shaped student with its shortlist: several sentences in one text.
  const std::string path =
      shared_conversion("firefox-student", source_dir() + "/tools/firefox-student", petrel::DType::kF32);
  const std::vector<std::string> texts = {
      "Open the file. Unable to correct the missing packages. Save the changes before closing the window?",
      "The window could not be opened. Click here to read more about the printer settings."};
  auto model = petrel::Model::load(path);
  REQUIRE(model);
  auto batch = petrel::BatchTranslator::create(model.value());
  REQUIRE(batch);
  petrel_model* c_model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &c_model) == PETREL_OK);
  std::vector<std::string> per_mode[2];
  for (int of_input : {0, 1}) {
    INFO("shortlist_of_input " << of_input);
    petrel::TranslateOptions o;
    o.beam_size = 1;
    o.max_length_factor = 2.0;
    o.use_shortlist = true;
    petrel::BatchOptions b;
    b.split_sentences = true;
    b.split_mode = petrel::SentenceSplit::kParagraphPerLine;
    b.limit_by_longest_sentence = true;
    b.shortlist_of_input = of_input != 0;
    std::vector<std::string> expected(texts.size());
    REQUIRE(batch.value().translate_text(texts, o, b, [&](size_t i, petrel::Result<petrel::TextTranslation>&& r) {
      REQUIRE(r);
      expected[i] = r.value().hypotheses.at(0).text;
    }));
    petrel_options co = firefox_c_options();
    co.use_shortlist = 1;
    petrel_batch_options cb = paragraph_batching();
    cb.shortlist_of_input = of_input;
    std::vector<PivotResponse> got(texts.size());
    std::vector<const char*> pointers;
    for (const std::string& t : texts) pointers.push_back(t.c_str());
    REQUIRE(petrel_translate_responses(c_model, nullptr, pointers.data(), pointers.size(), &co, &cb, record_response,
                                       &got) == PETREL_OK);
    for (size_t i = 0; i < texts.size(); ++i) {
      REQUIRE(got[i].status == PETREL_OK);
      CHECK(got[i].text == expected[i]);
    }
    per_mode[of_input] = expected;
  }
  CHECK(per_mode[0] != per_mode[1]);  // the texts were chosen so that the union changes a translation
  petrel_model_free(c_model);
}
