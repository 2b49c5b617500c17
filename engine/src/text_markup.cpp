#include "text_markup.h"

#include <optional>
#include <utility>

#include "model_access.h"
#include "text/html_markup.h"
#include "text/pivot_alignment.h"
#include "text_sentences.h"

namespace petrel::detail {
namespace {

// Puts `markup` back into `t`, the translation of markup.text() sentence by sentence.
Status restore_markup(const text::HtmlMarkup& markup, const TranslateOptions& options, TextTranslation& t) {
  const std::string& plain = markup.text();
  AnnotatedText source{plain, {}}, target;
  std::vector<std::vector<std::vector<float>>> alignments;
  text::QualityMarkup quality;
  const std::string translated = t.hypotheses.empty() ? std::string() : t.hypotheses[0].text;
  if (!t.sentences.empty() && t.hypotheses.empty())
    return Error{ErrorCode::kInternal, "markup: sentences without a translation"};
  // The target is the source's text between sentences around each sentence's
  // translation (bergamot's faithful concatenation).
  size_t source_at = 0;
  for (SentenceTranslation& s : t.sentences) {
    if (s.source_tokens.empty() || s.source.begin < source_at || s.target.end > translated.size())
      return Error{ErrorCode::kInternal, "markup: a sentence's ranges are out of order"};
    target.text.append(plain, source_at, s.source.begin - source_at);
    std::vector<TextRange> pieces(s.source_tokens.begin(), s.source_tokens.end() - 1);  // its EOS left out
    auto tokens = text::bergamot_token_ranges(pieces, s.source);
    if (!tokens) return tokens.error();
    source.sentences.push_back(std::move(tokens.value()));
    const size_t shift = target.text.size();
    target.text.append(translated, s.target.begin, s.target.end - s.target.begin);
    std::vector<TextRange> target_tokens;
    for (const TextRange& r : s.target_tokens)
      target_tokens.push_back({r.begin - s.target.begin + shift, r.end - s.target.begin + shift});
    target.sentences.push_back(std::move(target_tokens));
    alignments.push_back(s.alignment);
    if (options.quality_scores) {
      if (!s.quality) return Error{ErrorCode::kInternal, "markup: a sentence without its quality scores"};
      text::WordQuality q;
      q.word_tokens = s.quality->word_tokens;
      q.word_scores = s.quality->word_scores;
      q.sentence_score = s.quality->score;
      quality.push_back(std::move(q));
    }
    source_at = s.source.end;
  }
  target.text.append(plain, source_at, std::string::npos);
  Status restored = markup.restore(source, target, alignments, options.quality_scores ? &quality : nullptr);
  if (!restored) return restored;

  // The sentences now point into the markup on both sides.
  for (size_t k = 0; k < t.sentences.size(); ++k) {
    SentenceTranslation& s = t.sentences[k];
    s.source_tokens = source.sentences[k];
    s.target_tokens = target.sentences[k];
    s.source = {s.source_tokens.front().begin, s.source_tokens.back().end};
    s.target = {s.target_tokens.front().begin, s.target_tokens.back().end};
    if (s.quality) {  // a word's bytes: its tokens' in the markup
      s.quality->words.clear();
      for (const TextRange& w : s.quality->word_tokens)
        s.quality->words.push_back(w.end > w.begin ? TextRange{s.target_tokens[w.begin].begin, s.target_tokens[w.end - 1].end}
                                                   : TextRange{});
    }
    if (!options.alignment) s.alignment.clear();
  }
  t.source_html = std::move(source.text);
  if (t.hypotheses.empty()) t.hypotheses.emplace_back();
  TextHypothesis& best = t.hypotheses[0];
  best.text = std::move(target.text);
  if (!options.alignment) best.alignment.clear();
  return Status::ok();
}

}  // namespace

Status translate_markup(const TranslatePlain& translate_plain, const std::vector<std::string>& texts,
                        const TranslateOptions& options, const BatchOptions& batching,
                        const BatchTranslator::TextSink& deliver) {
  if (options.n_best > 1)
    return Error{ErrorCode::kInvalidArgument, "html: markup is put back into the best translation only (n_best 1)"};
  return without_exceptions([&]() -> Status {
    std::vector<std::optional<text::HtmlMarkup>> markups;
    std::vector<Error> errors(texts.size(), Error{ErrorCode::kInternal, ""});
    std::vector<std::string> plain;
    markups.reserve(texts.size());
    plain.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto parsed = text::HtmlMarkup::parse(texts[i]);
      if (parsed) {
        plain.push_back(parsed.value().text());
        markups.emplace_back(std::move(parsed.value()));
      } else {
        errors[i] = input_error(i, Error{parsed.error().code, "html: " + parsed.error().message});
        plain.emplace_back();
        markups.emplace_back();
      }
    }
    TranslateOptions inner = options;
    inner.html = false;
    inner.alignment = true;  // the markup follows the alignments
    BatchOptions lines = batching;
    lines.split_sentences = true;
    if (lines.split_mode == SentenceSplit::kText) lines.split_mode = SentenceSplit::kParagraphPerLine;  // breaks at blocks
    return translate_plain(plain, inner, lines, [&](size_t i, Result<TextTranslation>&& r) {
      if (!markups[i]) return deliver(i, std::move(errors[i]));
      if (!r) return deliver(i, std::move(r));
      TextTranslation t = std::move(r.value());
      Status restored = restore_markup(*markups[i], options, t);
      if (!restored) return deliver(i, input_error(i, restored.error()));
      deliver(i, std::move(t));
    });
  });
}

}  // namespace petrel::detail
