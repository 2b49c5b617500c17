// Quality scores (bergamot's free and logistic-regression estimators) and the alignment
// of a translation through a pivot language, checked against their definitions on
// hand-built texts: expected values are computed here from the formulas, not copied.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "text/pivot_alignment.h"
#include "text/quality_estimator.h"

using namespace petrel;
using namespace petrel::text;
using Catch::Matchers::Contains;

namespace {

// A text of one sentence per entry of `sentences`, each a list of token strings (an EOS,
// an empty range at the sentence's end, appended), sentences joined by `gap`.
AnnotatedText annotate(const std::vector<std::vector<std::string>>& sentences, const std::string& gap = " ",
                       bool add_eos = true) {
  AnnotatedText a;
  for (size_t s = 0; s < sentences.size(); ++s) {
    if (s > 0) a.text += gap;
    std::vector<TextRange> tokens;
    for (const std::string& t : sentences[s]) {
      tokens.push_back(TextRange{a.text.size(), a.text.size() + t.size()});
      a.text += t;
    }
    if (add_eos) tokens.push_back(TextRange{a.text.size(), a.text.size()});
    a.sentences.push_back(tokens);
  }
  return a;
}

std::string bytes_of(const AnnotatedText& a, TextRange r) { return a.text.substr(r.begin, r.end - r.begin); }

struct LrParams {
  uint64_t magic = LogisticRegressionQuality::kMagic;
  uint64_t dims = 4;
  std::vector<float> stds{2.0f, 0.5f, 1.5f, 4.0f};
  std::vector<float> means{-1.25f, -2.5f, 1.75f, -1.0f};
  std::vector<float> coefficients{0.75f, -0.5f, 0.25f, 1.125f};
  float intercept = -0.375f;
};

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_float(std::vector<uint8_t>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_le(out, bits, 4);
}

// bergamot's .quality.lr layout (LogisticRegressorQualityEstimator::toAlignedMemory on a
// little-endian host): magic, dims, stds, means, coefficients, intercept.
std::vector<uint8_t> lr_file(const LrParams& p) {
  std::vector<uint8_t> out;
  put_le(out, p.magic, 8);
  put_le(out, p.dims, 8);
  for (float v : p.stds) put_float(out, v);
  for (float v : p.means) put_float(out, v);
  for (float v : p.coefficients) put_float(out, v);
  put_float(out, p.intercept);
  return out;
}

Result<LogisticRegressionQuality> parse(const std::vector<uint8_t>& bytes) {
  return LogisticRegressionQuality::parse(bytes.data(), bytes.size(), "model.quality.lr");
}

// The estimator's definition, in double: log(1 - sigmoid(sum_j c_j (x_j - mu_j) / sigma_j + b)).
double lr_word_score(const LrParams& p, const std::vector<double>& x) {
  double z = p.intercept;
  for (size_t j = 0; j < 4; ++j) z += p.coefficients[j] * (x[j] - p.means[j]) / p.stds[j];
  return std::log(1.0 - 1.0 / (1.0 + std::exp(-z)));
}

}  // namespace

TEST_CASE("free quality: a word's score is its tokens' mean, the sentence's the mean of its words", "[quality]") {
  // "He" "llo" | " won" "der" "ful" | " world" | EOS
  const AnnotatedText target = annotate({{"He", "llo", " won", "der", "ful", " world"}});
  const std::vector<float> scores{-0.5f, -1.5f, -0.25f, -1.0f, -0.75f, -2.0f, -9.0f};
  auto q = free_quality(target, 0, scores);
  REQUIRE(q);
  const WordQuality& w = q.value();
  REQUIRE(w.word_tokens.size() == 3);
  CHECK(w.word_tokens[0].begin == 0);
  CHECK(w.word_tokens[0].end == 2);
  CHECK(w.word_tokens[1].begin == 2);
  CHECK(w.word_tokens[1].end == 5);
  CHECK(w.word_tokens[2].begin == 5);
  CHECK(w.word_tokens[2].end == 6);  // the EOS (index 6) belongs to no word
  REQUIRE(w.words.size() == 3);
  CHECK(bytes_of(target, w.words[0]) == "Hello");
  CHECK(bytes_of(target, w.words[1]) == "wonderful");  // the leading space left out
  CHECK(bytes_of(target, w.words[2]) == "world");
  REQUIRE(w.word_scores.size() == 3);
  // Sums exact in float, so each mean is one correctly rounded division.
  CHECK(w.word_scores[0] == -1.0f);
  CHECK(w.word_scores[1] == -2.0f / 3.0f);
  CHECK(w.word_scores[2] == -2.0f);
  CHECK(w.sentence_score == Approx((-1.0 - 2.0 / 3.0 - 2.0) / 3.0).epsilon(1e-6));
}

TEST_CASE("free quality: the last token is left out whatever it is, and only ASCII whitespace starts a word",
          "[quality]") {
  SECTION("a sentence cut at the length limit: its last token is still taken as EOS") {
    const AnnotatedText target = annotate({{"a", " b", " c"}}, " ", /*add_eos=*/false);
    auto q = free_quality(target, 0, {-1.0f, -2.0f, -100.0f});
    REQUIRE(q);
    REQUIRE(q.value().word_tokens.size() == 2);
    CHECK(q.value().word_scores[1] == -2.0f);
    CHECK(bytes_of(target, q.value().words[1]) == "b");
    CHECK(q.value().sentence_score == -1.5f);
  }
  SECTION("tab, newline, CR, VT and FF start words; NBSP and other bytes >= 0x80 do not") {
    const AnnotatedText target =
        annotate({{"x", "\ty", "\nz", "\rw", "\vv", "\fu", "\xc2\xa0t", "\xe2\x80\x83s", "r"}});
    auto q = free_quality(target, 0, std::vector<float>(10, -1.0f));
    REQUIRE(q);
    const auto& words = q.value().word_tokens;
    REQUIRE(words.size() == 6);
    CHECK(words[5].begin == 5);
    CHECK(words[5].end == 9);  // "\fu" NBSP"t" EM-SPACE"s" "r"
  }
  SECTION("a first token starting with whitespace makes an empty first word: 0/0, as bergamot") {
    const AnnotatedText target = annotate({{" a", "b"}});
    auto q = free_quality(target, 0, {-1.0f, -3.0f, 0.0f});
    REQUIRE(q);
    const WordQuality& w = q.value();
    REQUIRE(w.word_tokens.size() == 2);
    CHECK(w.word_tokens[0].begin == 0);
    CHECK(w.word_tokens[0].end == 0);
    CHECK(std::isnan(w.word_scores[0]));
    CHECK(w.word_scores[1] == -2.0f);
    CHECK(std::isnan(w.sentence_score));
    CHECK(w.words[0].begin <= w.words[0].end);  // bergamot's range would be inverted
    CHECK(bytes_of(target, w.words[1]) == "ab");
  }
  SECTION("fewer than two tokens: no words, and the sentence's score is 0/0") {
    const AnnotatedText only_eos = annotate({{}});
    auto q = free_quality(only_eos, 0, {-0.5f});
    REQUIRE(q);
    CHECK(q.value().word_tokens.empty());
    CHECK(q.value().word_scores.empty());
    CHECK(std::isnan(q.value().sentence_score));
    const AnnotatedText nothing = annotate({{}}, " ", /*add_eos=*/false);
    auto e = free_quality(nothing, 0, {});
    REQUIRE(e);
    CHECK(e.value().words.empty());
  }
}

TEST_CASE("free quality: a later sentence's words are its own token indices and the text's bytes", "[quality]") {
  const AnnotatedText target = annotate({{"One", "."}, {"Two", " more", "s", "."}}, "  ");
  auto q = free_quality(target, 1, {-1.0f, -2.0f, -4.0f, -8.0f, 0.0f});
  REQUIRE(q);
  const WordQuality& w = q.value();
  REQUIRE(w.word_tokens.size() == 2);
  CHECK(w.word_tokens[1].begin == 1);
  CHECK(w.word_tokens[1].end == 4);
  CHECK(bytes_of(target, w.words[0]) == "Two");
  CHECK(bytes_of(target, w.words[1]) == "mores.");
  CHECK(w.word_scores[1] == -14.0f / 3.0f);
}

TEST_CASE("quality scores refuse a sentence, a score count or a token outside the text, by name", "[quality]") {
  AnnotatedText target = annotate({{"a", " b"}});
  auto out_of_range = free_quality(target, 1, {0.0f, 0.0f, 0.0f});
  REQUIRE_FALSE(out_of_range);
  CHECK(out_of_range.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(out_of_range.error().message, Contains("sentence 1") && Contains("1 sentences"));
  auto count = free_quality(target, 0, {0.0f, 0.0f});
  REQUIRE_FALSE(count);
  CHECK_THAT(count.error().message, Contains("3 tokens but 2 token scores"));
  target.sentences[0][1].end = 99;
  auto outside = free_quality(target, 0, {0.0f, 0.0f, 0.0f});
  REQUIRE_FALSE(outside);
  CHECK_THAT(outside.error().message, Contains("token 1 is bytes [1, 99) of a 3-byte text"));
  const LrParams p;
  auto lr = parse(lr_file(p));
  REQUIRE(lr);
  auto lr_count = lr.value().score(target, 0, {0.0f});
  REQUIRE_FALSE(lr_count);
  CHECK(lr_count.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("an LR file in bergamot's layout scores each word log(1 - sigmoid) of its standardised features",
          "[quality]") {
  const LrParams p;
  auto lr = parse(lr_file(p));
  REQUIRE(lr);
  for (size_t j = 0; j < 4; ++j) {
    CHECK(lr.value().stds()[j] == p.stds[j]);
    CHECK(lr.value().means()[j] == p.means[j]);
    CHECK(lr.value().coefficients()[j] == p.coefficients[j]);
  }
  CHECK(lr.value().intercept() == p.intercept);

  // Words: [-0.5 -1.5] [-0.25 -1 -0.75] [-2]; EOS -9 left out.
  const AnnotatedText target = annotate({{"He", "llo", " won", "der", "ful", " world"}});
  const std::vector<float> scores{-0.5f, -1.5f, -0.25f, -1.0f, -0.75f, -2.0f, -9.0f};
  auto q = lr.value().score(target, 0, scores);
  REQUIRE(q);
  const WordQuality& w = q.value();
  REQUIRE(w.word_scores.size() == 3);
  const double overall = (-0.5 - 1.5 - 0.25 - 1.0 - 0.75 - 2.0) / 6.0;
  const std::vector<std::vector<double>> features{
      {-1.0, -1.5, 2, overall}, {-2.0 / 3.0, -1.0, 3, overall}, {-2.0, -2.0, 1, overall}};
  double sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double expected = lr_word_score(p, features[i]);
    CHECK(w.word_scores[i] == Approx(expected).epsilon(1e-5));
    CHECK(w.word_scores[i] < 0.0f);
    sum += expected;
  }
  CHECK(w.sentence_score == Approx(sum / 3).epsilon(1e-5));
  CHECK(bytes_of(target, w.words[1]) == "wonderful");

  // An empty first word: every feature 0 but the overall mean.
  const AnnotatedText leading = annotate({{" a", "b"}});
  auto e = lr.value().score(leading, 0, {-1.0f, -3.0f, 0.0f});
  REQUIRE(e);
  REQUIRE(e.value().word_scores.size() == 2);
  CHECK(e.value().word_scores[0] == Approx(lr_word_score(p, {0, 0, 0, -2.0})).epsilon(1e-5));
  CHECK(e.value().word_scores[1] == Approx(lr_word_score(p, {-2.0, -3.0, 2, -2.0})).epsilon(1e-5));
}

TEST_CASE("an LR file's every truncation, extension and bad field is refused by name", "[quality]") {
  const LrParams good;
  const std::vector<uint8_t> bytes = lr_file(good);
  REQUIRE(bytes.size() == LogisticRegressionQuality::kFileBytes);
  auto expect_refused = [](const std::vector<uint8_t>& b, const std::string& what) {
    auto r = parse(b);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kFormat);
    CHECK_THAT(r.error().message, Contains("model.quality.lr") && Contains(what));
  };
  for (size_t n = 0; n < bytes.size(); ++n) {
    CAPTURE(n);
    expect_refused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)),
                   n < 16 ? "header" : "dims 4 declares 68 bytes");
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  expect_refused(longer, "the file has 69");
  CHECK(parse(bytes));

  LrParams p = good;
  p.magic = __builtin_bswap64(LogisticRegressionQuality::kMagic);  // a big-endian writer's file
  expect_refused(lr_file(p), "magic is 0x80b1541d6f33cc78");
  p = good;
  p.dims = 0;
  expect_refused(lr_file(p), "dims is 0");
  p.dims = 3;  // consistent sizes, but not bergamot's 4 features
  p.stds.pop_back(), p.means.pop_back(), p.coefficients.pop_back();
  expect_refused(lr_file(p), "dims is 3");
  p = good;
  p.dims = uint64_t{1} << 62;  // 3 x dims overflows
  expect_refused(lr_file(p), "more than 2^64");

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < 4; ++j) {
    p = good;
    p.stds[j] = nan;
    expect_refused(lr_file(p), "stds[" + std::to_string(j) + "] is NaN");
    p = good;
    p.means[j] = -inf;
    expect_refused(lr_file(p), "means[" + std::to_string(j) + "] is infinite");
    p = good;
    p.coefficients[j] = nan;
    expect_refused(lr_file(p), "coefficients[" + std::to_string(j) + "] is NaN");
    p = good;
    p.stds[j] = 0.0f;
    expect_refused(lr_file(p), "stds[" + std::to_string(j) + "] is 0");
  }
  p = good;
  p.intercept = inf;
  expect_refused(lr_file(p), "intercept is infinite");
  p = good;
  p.coefficients[2] = 3e38f;
  p.stds[2] = 1e-3f;
  expect_refused(lr_file(p), "coefficients[2] / stds[2]");
}

TEST_CASE("pivot: a 2x3x2 composition equals the hand-computed product through shared bytes", "[pivot]") {
  // Pivot text "abcdef": the first hop produced "abc" "def" EOS; the second read "ab" "cde" "f" EOS.
  const std::vector<TextRange> as_target{{0, 3}, {3, 6}, {6, 6}};
  const std::vector<TextRange> as_source{{0, 2}, {2, 5}, {5, 6}, {6, 6}};
  const SoftAlignment p1{{0.75f, 0.25f}, {0.125f, 0.875f}, {0.5f, 0.5f}};                   // [q][s]
  const SoftAlignment p2{{0.5f, 0.25f, 0.125f, 0.125f}, {0.0625f, 0.375f, 0.5f, 0.0625f}};  // [t][q']
  auto r = transfer_through_characters(as_target, as_source, p2);
  REQUIRE(r);
  for (size_t t = 0; t < 2; ++t) {
    // "abc" holds all of "ab" and 1 of the 3 bytes of "cde"; "def" 2 of them and all of "f".
    const std::vector<double> expected{p2[t][0] + p2[t][1] / 3.0, 2.0 * p2[t][1] / 3.0 + p2[t][2], p2[t][3]};
    REQUIRE(r.value()[t].size() == 3);
    for (size_t q = 0; q < 3; ++q) CHECK(r.value()[t][q] == Approx(expected[q]).epsilon(1e-6));
  }
  auto out = compose_pivot_alignment(as_target, as_source, p1, p2, 2);
  REQUIRE(out);
  REQUIRE(out.value().size() == 2);
  for (size_t t = 0; t < 2; ++t) {
    const std::vector<double> rq{p2[t][0] + p2[t][1] / 3.0, 2.0 * p2[t][1] / 3.0 + p2[t][2], p2[t][3]};
    double row = 0;
    REQUIRE(out.value()[t].size() == 2);
    for (size_t s = 0; s < 2; ++s) {
      double expected = 0;
      for (size_t q = 0; q < 3; ++q) expected += p1[q][s] * rq[q];
      CHECK(out.value()[t][s] == Approx(expected).epsilon(1e-6));
      row += out.value()[t][s];
    }
    CHECK(row == Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("pivot: identical tokenisations give the plain matrix product, bit for bit", "[pivot]") {
  const std::vector<TextRange> pivot{{0, 4}, {4, 9}, {9, 9}};
  const SoftAlignment p1{{0.1f, 0.6f, 0.3f}, {0.7f, 0.2f, 0.1f}, {0.05f, 0.05f, 0.9f}};
  const SoftAlignment p2{{0.3f, 0.3f, 0.4f}, {0.9f, 0.05f, 0.05f}};
  auto out = compose_pivot_alignment(pivot, pivot, p1, p2, 3);
  REQUIRE(out);
  for (size_t t = 0; t < 2; ++t) {
    for (size_t s = 0; s < 3; ++s) {
      float expected = 0.0f;
      for (size_t q = 0; q < 3; ++q) expected += p1[q][s] * p2[t][q];
      CHECK(out.value()[t][s] == expected);
    }
  }
}

TEST_CASE("pivot: second-hop tokens left over spread evenly, and tokens that do not touch share nothing", "[pivot]") {
  SECTION("the first hop's pivot ends first: the rest of the second's goes to every pivot token") {
    const std::vector<TextRange> as_target{{0, 3}, {3, 3}};
    const std::vector<TextRange> as_source{{0, 2}, {2, 3}, {3, 4}, {4, 4}};
    const SoftAlignment p2{{0.25f, 0.25f, 0.375f, 0.125f}};
    auto r = transfer_through_characters(as_target, as_source, p2);
    REQUIRE(r);
    CHECK(r.value()[0][0] == Approx(0.25 + 0.25 + 0.375 / 2 + 0.125 / 2));
    CHECK(r.value()[0][1] == Approx(0.375 / 2 + 0.125 / 2));
  }
  SECTION("a first-hop token before the second's first shares 0 bytes (bergamot's size_t would wrap)") {
    const std::vector<TextRange> as_target{{0, 1}, {1, 5}, {5, 5}};
    const std::vector<TextRange> as_source{{2, 5}, {5, 5}};
    const SoftAlignment p2{{0.75f, 0.25f}};
    auto r = transfer_through_characters(as_target, as_source, p2);
    REQUIRE(r);
    CHECK(r.value()[0][0] == 0.0f);
    CHECK(r.value()[0][1] == 0.75f);
    CHECK(r.value()[0][2] == 0.25f);
  }
  SECTION("an empty second-hop token met by a longer first-hop one: 0 * p / 0 = NaN, as bergamot") {
    const std::vector<TextRange> as_target{{0, 3}, {3, 4}, {4, 4}};
    const std::vector<TextRange> as_source{{0, 3}, {3, 3}};
    const SoftAlignment p2{{0.5f, 0.5f}};
    auto r = transfer_through_characters(as_target, as_source, p2);
    REQUIRE(r);
    CHECK(r.value()[0][0] == 0.5f);
    CHECK(std::isnan(r.value()[0][1]));
    CHECK(r.value()[0][2] == 0.0f);  // the loop ended with the second hop's tokens
  }
}

TEST_CASE("pivot: every sentence composed on its own, with shapes and ranges checked by name", "[pivot]") {
  const AnnotatedText source = annotate({{"Hallo", " Welt"}, {"Ja"}});
  const AnnotatedText pivot_as_target = annotate({{"Hello", " world"}, {"Yes"}});
  AnnotatedText pivot_as_source = annotate({{"Hel", "lo", " world"}, {"Yes"}});
  const std::vector<SoftAlignment> p1{{{0.8f, 0.1f, 0.1f}, {0.1f, 0.8f, 0.1f}, {0.0f, 0.0f, 1.0f}},
                                      {{0.9f, 0.1f}, {0.2f, 0.8f}}};
  const std::vector<SoftAlignment> p2{{{0.5f, 0.25f, 0.125f, 0.125f}, {0.25f, 0.25f, 0.25f, 0.25f}},
                                      {{0.5f, 0.5f}, {0.0f, 1.0f}, {1.0f, 0.0f}}};
  auto all = compose_pivot_alignments(source, pivot_as_target, pivot_as_source, p1, p2);
  REQUIRE(all);
  REQUIRE(all.value().size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    auto one = compose_pivot_alignment(pivot_as_target.sentences[i], pivot_as_source.sentences[i], p1[i], p2[i],
                                       source.sentences[i].size());
    REQUIRE(one);
    CHECK(all.value()[i] == one.value());
  }
  CHECK(all.value()[1].size() == 3);
  CHECK(all.value()[1][0].size() == 2);

  auto fewer = compose_pivot_alignments(source, pivot_as_target, pivot_as_source, p1, {p2[0]});
  REQUIRE_FALSE(fewer);
  CHECK(fewer.error().code == ErrorCode::kInvalidArgument);
  CHECK_THAT(fewer.error().message, Contains("sentence counts differ"));
  SoftAlignment short_row = p2[0];
  short_row[1].pop_back();
  auto ragged = compose_pivot_alignments(source, pivot_as_target, pivot_as_source, p1, {short_row, p2[1]});
  REQUIRE_FALSE(ragged);
  CHECK_THAT(ragged.error().message,
             Contains("second hop's alignment row 1 has 3 values, not 4") && Contains("(sentence 0)"));
  auto wrong_rows =
      compose_pivot_alignment(pivot_as_target.sentences[0], pivot_as_source.sentences[0], p1[1], p2[0], 3);
  REQUIRE_FALSE(wrong_rows);
  CHECK_THAT(wrong_rows.error().message, Contains("first hop's alignment has 2 rows, not 3"));
  pivot_as_source.sentences[0][1] = TextRange{5, 3};
  auto inverted = compose_pivot_alignments(source, pivot_as_target, pivot_as_source, p1, p2);
  REQUIRE_FALSE(inverted);
  CHECK_THAT(inverted.error().message, Contains("second hop's source token 1 is bytes [5, 3)"));
}

TEST_CASE("pivot: a composition of more cells than allowed is refused before it is built", "[pivot]") {
  // 8192 target tokens x 4096 source tokens = 2^25 cells, from inputs of 12,288 values.
  const std::vector<TextRange> pivot{{0, 0}};
  const SoftAlignment p1{std::vector<float>(4096, 1.0f / 4096)};
  const SoftAlignment p2(8192, std::vector<float>{1.0f});
  auto out = compose_pivot_alignment(pivot, pivot, p1, p2, 4096);
  REQUIRE_FALSE(out);
  CHECK(out.error().code == ErrorCode::kOutOfMemory);
  CHECK_THAT(out.error().message, Contains("8192 x 4096"));
}

TEST_CASE("pivot: bergamot's token ranges run each piece to where the next begins, then an empty EOS", "[pivot]") {
  auto tokens = bergamot_token_ranges({{10, 12}, {13, 15}, {15, 18}}, TextRange{10, 20});
  REQUIRE(tokens);
  const std::vector<std::pair<size_t, size_t>> expected{{10, 13}, {13, 15}, {15, 18}, {18, 18}};
  REQUIRE(tokens.value().size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(tokens.value()[i].begin == expected[i].first);
    CHECK(tokens.value()[i].end == expected[i].second);
  }
  auto none = bergamot_token_ranges({}, TextRange{4, 9});
  REQUIRE(none);
  REQUIRE(none.value().size() == 1);
  CHECK(none.value()[0].begin == 9);
  CHECK(none.value()[0].end == 9);
}

TEST_CASE("quality and pivot at scale: a megabyte LR file declaring huge sizes, a 100,000-token sentence",
          "[.][linear][quality][pivot]") {
  // 1 MB of parameters behind a header whose dims disagree with them, and one that agrees.
  LrParams p;
  p.dims = uint64_t{1} << 40;
  std::vector<uint8_t> big = lr_file(p);
  big.resize(size_t{1} << 20, 0x41);
  auto huge = parse(big);
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Contains("dims 1099511627776 declares"));
  const uint64_t consistent = ((uint64_t{1} << 20) - 20) / 12;
  p.dims = consistent;
  big = lr_file(p);
  big.resize(20 + 12 * consistent, 0);
  auto many = parse(big);
  REQUIRE_FALSE(many);
  CHECK_THAT(many.error().message, Contains("dims is " + std::to_string(consistent)));

  // 100,000 tokens: words of 1, 2 and 3 tokens in turn.
  std::vector<std::string> pieces;
  std::vector<float> scores;
  size_t words = 0;
  while (pieces.size() + 3 <= 100000) {
    const size_t len = 1 + words % 3;
    for (size_t k = 0; k < len; ++k) {
      pieces.push_back(k == 0 && words > 0 ? " w" : "x");
      scores.push_back(-static_cast<float>(k + 1));
    }
    ++words;
  }
  const AnnotatedText target = annotate({pieces});
  scores.push_back(0.0f);  // EOS
  auto q = free_quality(target, 0, scores);
  REQUIRE(q);
  REQUIRE(q.value().word_scores.size() == words);
  for (size_t w = 0; w < words; ++w) {
    const float expected[] = {-1.0f, -1.5f, -2.0f};
    REQUIRE(q.value().word_scores[w] == expected[w % 3]);
  }
  auto lr = parse(lr_file(LrParams{}));
  REQUIRE(lr);
  auto scored = lr.value().score(target, 0, scores);
  REQUIRE(scored);
  CHECK(scored.value().word_scores.size() == words);

  // The two-pointer walk over 100,000-token pivots, one target token.
  std::vector<TextRange> as_target, as_source;
  for (size_t i = 0; i < 100000; ++i) as_target.push_back(TextRange{2 * i, 2 * i + 2});
  for (size_t i = 0; i < 200000; ++i) as_source.push_back(TextRange{i, i + 1});
  const SoftAlignment p2{std::vector<float>(200000, 1.0f / 200000)};
  auto r = transfer_through_characters(as_target, as_source, p2);
  REQUIRE(r);
  double sum = 0;
  for (float v : r.value()[0]) sum += v;
  CHECK(sum == Approx(1.0).epsilon(1e-4));
}
