// Quality scores of a translated sentence, as bergamot-translator computes them
// (src/translator/quality_estimator.cpp, response.cpp's getWordByteRanges).
//
// Both estimators read one score per target token: Marian's Hypothesis::
// tracebackWordScores, the difference of the search's accumulated path scores,
// fl(path[t]) - fl(path[t-1]). With `skip-cost: true` (Firefox's setting when no quality
// model is loaded) the path accumulates raw logits; with a quality model bergamot's JS
// turns skip-cost off, and the path accumulates log-softmax values.
//
// Words: a sentence's tokens but the last (taken as EOS, whatever it is) are grouped into
// words; a token whose first byte in the target text is an ASCII space (C isspace: space,
// \t \n \v \f \r) starts a new word. When the first token starts with whitespace, the
// first word is empty (its free score is 0/0 = NaN, as bergamot's). A sentence with fewer
// than two scores has no words, and its sentence score is 0/0 = NaN.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel::text {

// One sentence's quality: bergamot's Response::SentenceQualityScore (wordScores,
// wordRanges, sentenceScore) with the byte ranges bergamot's getWordByteRanges gives.
// Both ranges are kept: HTML markup wraps tokens (word_tokens), an API user reads bytes.
struct WordQuality {
  std::vector<TextRange> word_tokens;  // per word, its tokens [begin, end): indices into the sentence
  std::vector<TextRange> words;        // per word, its bytes in the target text, leading whitespace byte left out
  std::vector<float> word_scores;
  float sentence_score = 0;  // the mean of word_scores (NaN when there are none)
};

// The words of target sentence `sentence` (bergamot's mapWords) as token ranges, given
// `score_count` scores for it; score_count must equal the sentence's token count.
Result<std::vector<TextRange>> quality_word_tokens(const AnnotatedText& target, size_t sentence, size_t score_count);

// The unsupervised estimator (UnsupervisedQualityEstimator): a word's score is the mean
// of its tokens' scores, the sentence's the mean of its words'. `token_scores` holds one
// score per token of the sentence, its EOS included.
Result<WordQuality> free_quality(const AnnotatedText& target, size_t sentence, const std::vector<float>& token_scores);

// The supervised estimator (LogisticRegressorQualityEstimator), read from bergamot's
// `.quality.lr` file: little-endian (bergamot writes its host's order; every platform it
// ships on is little-endian)
//   uint64 magic = 0x78cc336f1d54b180, uint64 dims,
//   float32 stds[dims], float32 means[dims], float32 coefficients[dims], float32 intercept
// and nothing after. dims must be 4: bergamot holds the parameters in std::array<float, 4>
// and computes 4 features, so any other count is undefined behaviour there.
//
// Per word, features x = (mean of its token scores, their minimum, its token count, the
// mean of all the sentence's word tokens' scores); the word's score is
// log(1 - sigmoid(z)), z = sum_j x_j * (c_j / std_j) - sum_j (c_j / std_j) * mean_j + intercept,
// computed in float in bergamot's order; the sentence's score is their mean.
class LogisticRegressionQuality {
 public:
  static constexpr uint64_t kMagic = 0x78cc336f1d54b180ULL;
  static constexpr size_t kFeatures = 4;
  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t kFileBytes = kHeaderBytes + (3 * kFeatures + 1) * 4;

  // Reads the file's bytes; `name` names it in errors (kFormat: a size, the magic, a
  // parameter that is not finite, a zero std).
  static Result<LogisticRegressionQuality> parse(const uint8_t* data, size_t size, const std::string& name);

  Result<WordQuality> score(const AnnotatedText& target, size_t sentence, const std::vector<float>& token_scores) const;

  // A word's score from its features: bergamot's predict, one row.
  float predict(const std::array<float, kFeatures>& features) const;

  const std::array<float, kFeatures>& stds() const { return stds_; }
  const std::array<float, kFeatures>& means() const { return means_; }
  const std::array<float, kFeatures>& coefficients() const { return coefficients_; }
  float intercept() const { return intercept_; }

 private:
  std::array<float, kFeatures> stds_{}, means_{}, coefficients_{};
  float intercept_ = 0;
  std::array<float, kFeatures> coefficients_by_stds_{};  // c_j / std_j
  float constant_factor_ = 0;                            // sum_j (c_j / std_j) * mean_j
};

}  // namespace petrel::text
