#include "text_sentences.h"

#include <fstream>
#include <iterator>

#include "model_access.h"
#include "text/quality_estimator.h"

namespace petrel {
namespace {

class LogisticRegressionModel final : public QualityModel {
 public:
  explicit LogisticRegressionModel(text::LogisticRegressionQuality lr) : lr(std::move(lr)) {}
  text::LogisticRegressionQuality lr;
};

// Marian's word scores (Hypothesis::tracebackWordScores): differences of the search's
// float running totals, so each equals bergamot's to the last bit.
std::vector<float> path_differences(const std::vector<TokenScore>& scores, bool logits) {
  std::vector<float> out;
  out.reserve(scores.size());
  float path = 0;
  for (const TokenScore& s : scores) {
    const float next = path + (logits ? s.logit : s.log_probability);
    out.push_back(next - path);
    path = next;
  }
  return out;
}

TextRange shifted(TextRange r, size_t by) { return {r.begin + by, r.end + by}; }

}  // namespace

Result<std::shared_ptr<const QualityModel>> parse_quality_model(const void* data, size_t size,
                                                                const std::string& name) {
  return detail::without_exceptions([&]() -> Result<std::shared_ptr<const QualityModel>> {
    auto lr = text::LogisticRegressionQuality::parse(static_cast<const uint8_t*>(data), size, name);
    if (!lr) return lr.error();
    return std::shared_ptr<const QualityModel>(std::make_shared<LogisticRegressionModel>(std::move(lr.value())));
  });
}

Result<std::shared_ptr<const QualityModel>> load_quality_model(const std::string& path) {
  return detail::without_exceptions([&]() -> Result<std::shared_ptr<const QualityModel>> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Error{ErrorCode::kIo, path + ": cannot open the quality model"};
    // The file is a few dozen bytes: read at most one byte more than the format allows.
    std::string bytes(text::LogisticRegressionQuality::kFileBytes + 1, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<size_t>(in.gcount()));
    return parse_quality_model(bytes.data(), bytes.size(), path);
  });
}

namespace detail {

bool has_token_ranges(const Model& model) {
  const text::Tokenizer* tokenizer = ModelAccess::tokenizer(model);
  if (tokenizer == nullptr) return false;
  std::vector<TextRange> ranges;
  return static_cast<bool>(tokenizer->decode_with_ranges({}, ranges));
}

Status check_text_options(const Model& model, const TranslateOptions& options) {
  if ((options.quality_scores || options.html) && !has_token_ranges(model))
    return Error{ErrorCode::kUnsupported, std::string(options.html ? "html" : "quality_scores") +
                                              ": this model's tokenizer does not give the byte ranges of its tokens "
                                              "(a Marian C++ model's does)"};
  return Status::ok();
}

Result<SentenceTranslation> sentence_translation(const Model& model, const TokenizedText& tokens, size_t source_offset,
                                                 const Hypothesis& best, size_t target_offset,
                                                 const TranslateOptions& options) {
  const text::Tokenizer* tokenizer = ModelAccess::tokenizer(model);
  if (tokenizer == nullptr) return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer"};
  if (tokens.ranges.size() != tokens.ids.size())
    return Error{ErrorCode::kUnsupported, "this model's tokenizer does not give the byte ranges of its tokens"};
  SentenceTranslation out;
  for (const TextRange& r : tokens.ranges) out.source_tokens.push_back(shifted(r, source_offset));
  out.source = {source_offset, out.source_tokens.empty() ? source_offset : out.source_tokens.back().end};
  if (!out.source_tokens.empty()) out.source.begin = out.source_tokens.front().begin;

  std::vector<int32_t> ids = best.ids;
  if (best.ended_on_eos) ids.push_back(model.info().eos_id);
  std::vector<TextRange> ranges;
  auto text = tokenizer->decode_with_ranges(ids, ranges);
  if (!text) return text.error();
  for (const TextRange& r : ranges) out.target_tokens.push_back(shifted(r, target_offset));
  out.target = {target_offset, target_offset + text.value().size()};
  out.alignment = best.alignment;
  out.token_scores = best.token_scores;

  if (options.quality_scores) {
    if (out.token_scores.size() != ranges.size())
      return Error{ErrorCode::kInternal, "quality scores: token scores and target tokens differ in number"};
    AnnotatedText target{std::move(text.value()), {ranges}};
    const auto* lr = dynamic_cast<const LogisticRegressionModel*>(options.quality_model.get());
    const std::vector<float> scores = path_differences(out.token_scores, lr == nullptr);
    auto words = lr != nullptr ? lr->lr.score(target, 0, scores) : text::free_quality(target, 0, scores);
    if (!words) return words.error();
    SentenceQuality q;
    q.score = words.value().sentence_score;
    q.word_scores = std::move(words.value().word_scores);
    q.word_tokens = std::move(words.value().word_tokens);
    for (const TextRange& r : words.value().words) q.words.push_back(shifted(r, target_offset));
    out.quality = std::move(q);
  }
  return out;
}

}  // namespace detail
}  // namespace petrel
