// Fuzz target: a quality estimation model (bergamot's `.quality.lr`) through
// text::LogisticRegressionQuality::parse. A bad file must be refused with a kFormat
// Error naming the file; a file read must hold the parameters its bytes hold (finite,
// no zero std) and score fixed sentences: one score per word, each NaN or <= 0 (a log
// of a probability). Any exception, a crash or a sanitizer report is a finding.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "text/quality_estimator.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_quality_model: broken promise: %s\n", what);
  std::abort();
}

float float_at(const uint8_t* data, size_t offset) {
  uint32_t bits = uint32_t{data[offset]} | uint32_t{data[offset + 1]} << 8 | uint32_t{data[offset + 2]} << 16 |
                  uint32_t{data[offset + 3]} << 24;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// "Ein kleiner Test." as "Ein" " klein" "er" " Test" "." EOS, with a sentence of only EOS.
petrel::AnnotatedText target() {
  petrel::AnnotatedText t;
  t.text = "Ein kleiner Test. ";
  t.sentences = {{{0, 3}, {3, 9}, {9, 11}, {11, 16}, {16, 17}, {17, 17}}, {{18, 18}}};
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.quality.lr";
  auto lr = petrel::text::LogisticRegressionQuality::parse(data, size, name);
  if (!lr) {
    require(lr.error().code == petrel::ErrorCode::kFormat, "a bad file is a kFormat error");
    require(lr.error().message.rfind(name + ": ", 0) == 0, "the error names the file");
    return 0;
  }
  using Q = petrel::text::LogisticRegressionQuality;
  const Q& model = lr.value();
  require(size == Q::kFileBytes, "only a file of 4 features is read");
  for (size_t j = 0; j < Q::kFeatures; ++j) {
    require(model.stds()[j] == float_at(data, 16 + 4 * j), "stds as stored");
    require(model.means()[j] == float_at(data, 32 + 4 * j), "means as stored");
    require(model.coefficients()[j] == float_at(data, 48 + 4 * j), "coefficients as stored");
    require(std::isfinite(model.stds()[j]) && model.stds()[j] != 0.0f, "stds finite, not 0");
    require(std::isfinite(model.means()[j]) && std::isfinite(model.coefficients()[j]), "parameters finite");
  }
  require(model.intercept() == float_at(data, 64), "intercept as stored");

  const petrel::AnnotatedText text = target();
  const std::vector<std::vector<float>> score_sets{{-0.25f, -1.5f, -0.125f, -3.0f, -0.5f, -0.01f},
                                                   {0.0f, -80.0f, -1e-6f, -20.0f, -7.0f, 0.0f},
                                                   {12.5f, 3.0f, -40.0f, 9.0f, 1.0f, 2.0f}};
  for (const auto& scores : score_sets) {
    auto q = model.score(text, 0, scores);
    require(q.has_value(), "a well-formed sentence is scored");
    require(q.value().word_tokens.size() == 3 && q.value().word_scores.size() == 3 && q.value().words.size() == 3,
            "three words, one score and one byte range each");
    for (float s : q.value().word_scores) require(std::isnan(s) || s <= 0.0f, "a word's score is a log probability");
  }
  auto empty = model.score(text, 1, {0.0f});
  require(empty.has_value() && empty.value().word_scores.empty(), "a sentence of only EOS has no words");
  return 0;
}
