#include "text/quality_estimator.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "core/bytes.h"
#include "core/checked.h"

namespace petrel::text {

namespace {

// C isspace in the "C" locale, on the byte as bergamot reads it (a plain char: bytes
// >= 0x80 are negative there and never space, glibc and musl alike).
bool is_c_space_byte(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// bergamot reads target.text.at(range.begin): a token that begins at the text's end
// (an empty token there) would throw std::out_of_range; it starts no word here.
bool token_starts_with_space(const std::string& text, size_t begin) {
  return begin < text.size() && is_c_space_byte(static_cast<unsigned char>(text[begin]));
}

Error quality_out_of_memory(const char* what) {
  return Error{ErrorCode::kOutOfMemory, std::string("quality scores: out of memory for ") + what};
}

Result<const std::vector<TextRange>*> quality_sentence(const AnnotatedText& target, size_t sentence,
                                                       size_t score_count) {
  if (sentence >= target.sentences.size())
    return Error{ErrorCode::kInvalidArgument, "quality scores: sentence " + std::to_string(sentence) +
                                                  " of a target text of " + std::to_string(target.sentences.size()) +
                                                  " sentences"};
  const std::vector<TextRange>& tokens = target.sentences[sentence];
  if (score_count != tokens.size())
    return Error{ErrorCode::kInvalidArgument, "quality scores: sentence " + std::to_string(sentence) + " has " +
                                                  std::to_string(tokens.size()) + " tokens but " +
                                                  std::to_string(score_count) + " token scores"};
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].begin > tokens[i].end || tokens[i].end > target.text.size())
      return Error{ErrorCode::kInvalidArgument,
                   "quality scores: sentence " + std::to_string(sentence) + " token " + std::to_string(i) +
                       " is bytes [" + std::to_string(tokens[i].begin) + ", " + std::to_string(tokens[i].end) +
                       ") of a " + std::to_string(target.text.size()) + "-byte text"};
  }
  return &tokens;
}

// mapWords, on a checked sentence.
std::vector<TextRange> quality_map_words(const std::string& text, const std::vector<TextRange>& tokens) {
  std::vector<TextRange> words;
  if (tokens.size() < 2) return words;
  words.reserve(tokens.size());
  words.push_back(TextRange{0, 0});
  // The last token is taken as EOS and belongs to no word.
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (token_starts_with_space(text, tokens[i].begin)) {
      words.back().end = i;
      words.push_back(TextRange{i, i});
    }
  }
  words.back().end = tokens.size() - 1;
  return words;
}

// getWordByteRanges: from the first token's start (one leading whitespace byte skipped)
// to the start of the token after the word. bergamot would give an inverted range for an
// empty first word that starts with whitespace; it is cut to empty here.
std::vector<TextRange> quality_word_bytes(const std::string& text, const std::vector<TextRange>& tokens,
                                          const std::vector<TextRange>& words) {
  std::vector<TextRange> bytes;
  bytes.reserve(words.size());
  for (const TextRange& w : words) {
    size_t begin = tokens[w.begin].begin;
    const size_t end = tokens[w.end].begin;
    if (token_starts_with_space(text, begin)) ++begin;
    bytes.push_back(TextRange{begin < end ? begin : end, end});
  }
  return bytes;
}

// sum / count in float, as std::accumulate(..., float(0)) / size() (0/0 = NaN).
float float_mean(const float* values, size_t count) {
  float sum = 0.0f;
  for (size_t i = 0; i < count; ++i) sum += values[i];
  return sum / static_cast<float>(count);
}

Error lr_format_error(const std::string& name, const std::string& what) {
  return Error{ErrorCode::kFormat, name + ": quality estimation model: " + what};
}

}  // namespace

Result<std::vector<TextRange>> quality_word_tokens(const AnnotatedText& target, size_t sentence, size_t score_count) {
  auto tokens = quality_sentence(target, sentence, score_count);
  if (!tokens) return tokens.error();
  try {
    return quality_map_words(target.text, *tokens.value());
  } catch (const std::bad_alloc&) {
    return quality_out_of_memory("a sentence's words");
  }
}

namespace {

// What both estimators share: the sentence checked, its words (token runs and their bytes),
// score_words(q) filling q.word_scores, and the sentence's score as their mean.
template <class ScoreWords>
Result<WordQuality> scored_words(const AnnotatedText& target, size_t sentence, const std::vector<float>& token_scores,
                                 const ScoreWords& score_words) {
  auto checked = quality_sentence(target, sentence, token_scores.size());
  if (!checked) return checked.error();
  const std::vector<TextRange>& tokens = *checked.value();
  try {
    WordQuality q;
    q.word_tokens = quality_map_words(target.text, tokens);
    q.words = quality_word_bytes(target.text, tokens, q.word_tokens);
    q.word_scores.reserve(q.word_tokens.size());
    score_words(q);
    q.sentence_score = float_mean(q.word_scores.data(), q.word_scores.size());
    return q;
  } catch (const std::bad_alloc&) {
    return quality_out_of_memory("a sentence's words");
  }
}

}  // namespace

Result<WordQuality> free_quality(const AnnotatedText& target, size_t sentence, const std::vector<float>& token_scores) {
  return scored_words(target, sentence, token_scores, [&](WordQuality& q) {
    for (const TextRange& w : q.word_tokens)
      q.word_scores.push_back(float_mean(token_scores.data() + w.begin, w.end - w.begin));
  });
}

Result<LogisticRegressionQuality> LogisticRegressionQuality::parse(const uint8_t* data, size_t size,
                                                                   const std::string& name) {
  if (size < kHeaderBytes)
    return lr_format_error(name, std::to_string(size) + " bytes, fewer than the " + std::to_string(kHeaderBytes) +
                                     "-byte header (magic, dims)");
  const uint64_t magic = detail::load_le64(data);
  if (magic != kMagic) {
    char hex[19];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(magic));
    return lr_format_error(name, std::string("magic is ") + hex + ", not 0x78cc336f1d54b180");
  }
  const uint64_t dims = detail::load_le64(data + 8);
  if (dims == 0) return lr_format_error(name, "dims is 0");
  // header + (3 dims + 1) floats, checked before anything is read or allocated.
  detail::CheckedSize floats(dims);
  floats *= 3;
  floats += detail::CheckedSize(1);
  detail::CheckedSize expected = floats * 4;
  expected += detail::CheckedSize(kHeaderBytes);
  if (!expected.ok() || expected.value() != size)
    return lr_format_error(name,
                           "dims " + std::to_string(dims) + " declares " +
                               (expected.ok() ? std::to_string(expected.value()) : std::string("more than 2^64")) +
                               " bytes (16-byte header, 3 x dims + 1 float32), the file has " + std::to_string(size));
  if (dims != kFeatures)
    return lr_format_error(name, "dims is " + std::to_string(dims) + "; the estimator computes " +
                                     std::to_string(kFeatures) + " features per word");

  LogisticRegressionQuality lr;
  const uint8_t* p = data + kHeaderBytes;
  auto read = [&](const char* field, size_t index, bool indexed, float* out) -> Status {
    const uint32_t bits = detail::load_le32(p);
    p += 4;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v))
      return lr_format_error(name, std::string(field) + (indexed ? "[" + std::to_string(index) + "]" : std::string()) +
                                       " is " + (std::isnan(v) ? "NaN" : "infinite"));
    *out = v;
    return Status::ok();
  };
  struct Field {
    const char* name;
    std::array<float, kFeatures>* values;
  };
  const Field fields[] = {{"stds", &lr.stds_}, {"means", &lr.means_}, {"coefficients", &lr.coefficients_}};
  for (const Field& f : fields) {
    for (size_t i = 0; i < kFeatures; ++i) {
      Status s = read(f.name, i, true, &(*f.values)[i]);
      if (!s) return s.error();
    }
  }
  Status s = read("intercept", 0, false, &lr.intercept_);
  if (!s) return s.error();
  for (size_t i = 0; i < kFeatures; ++i) {
    if (lr.stds_[i] == 0.0f) return lr_format_error(name, "stds[" + std::to_string(i) + "] is 0");
  }
  // bergamot's constructor: the standardisation folded into the coefficients, in float.
  for (size_t i = 0; i < kFeatures; ++i) {
    lr.coefficients_by_stds_[i] = lr.coefficients_[i] / lr.stds_[i];
    lr.constant_factor_ += lr.coefficients_by_stds_[i] * lr.means_[i];
    if (!std::isfinite(lr.coefficients_by_stds_[i]) || !std::isfinite(lr.constant_factor_))
      return lr_format_error(name, "coefficients[" + std::to_string(i) + "] / stds[" + std::to_string(i) +
                                       "] (times means[" + std::to_string(i) + "]) overflows float");
  }
  return lr;
}

float LogisticRegressionQuality::predict(const std::array<float, kFeatures>& features) const {
  float z = 0.0f;
  for (size_t j = 0; j < kFeatures; ++j) z += features[j] * coefficients_by_stds_[j];
  return std::log(1.0f - (1.0f / (1.0f + std::exp(-(z - constant_factor_ + intercept_)))));
}

Result<WordQuality> LogisticRegressionQuality::score(const AnnotatedText& target, size_t sentence,
                                                     const std::vector<float>& token_scores) const {
  return scored_words(target, sentence, token_scores, [&](WordQuality& q) {
    // extractFeatures: features of an empty word stay 0 (but the overall mean).
    enum { kMean, kMin, kTokens, kOverallMean };
    std::vector<std::array<float, kFeatures>> features(q.word_tokens.size(), std::array<float, kFeatures>{});
    float overall = 0.0f;
    for (size_t w = 0; w < q.word_tokens.size(); ++w) {
      const TextRange& range = q.word_tokens[w];
      if (range.begin == range.end) continue;
      float min_score = std::numeric_limits<float>::max();
      for (size_t i = range.begin; i < range.end; ++i) {
        overall += token_scores[i];
        features[w][kMean] += token_scores[i];
        // std::min<float>(score, min_score): min_score when it is less, else the score.
        min_score = min_score < token_scores[i] ? min_score : token_scores[i];
      }
      const auto count = static_cast<float>(range.end - range.begin);
      features[w][kMean] /= count;
      features[w][kMin] = min_score;
      features[w][kTokens] = count;
    }
    if (!q.word_tokens.empty()) {
      overall /= static_cast<float>(q.word_tokens.back().end);
      for (auto& f : features) f[kOverallMean] = overall;
    }
    for (const auto& f : features) q.word_scores.push_back(predict(f));
  });
}

}  // namespace petrel::text
