// Translation through a pivot language (translate_via_pivot), as bergamot-translator's
// translateViaPivoting: the second model reads the first's translation sentence by
// sentence, and the alignments are composed through the pivot text (text/pivot_alignment.h).
#include <optional>
#include <utility>

#include "model_access.h"
#include "petrel/batch_translator.h"
#include "text/pivot_alignment.h"
#include "text_markup.h"
#include "text_sentences.h"

namespace petrel {
namespace {

Error pivot_error(size_t input, ErrorCode code, const std::string& what) {
  return detail::input_error(input, {code, "pivot: " + what});
}

TextRange shifted(TextRange r, size_t from, size_t to) { return {r.begin - from + to, r.end - from + to}; }

// Joins the two hops of input `i` (its text `input`): the first hop's translation is the
// pivot text P; the second model read P's sentences one per line, line k starting at
// line_starts[k] of what it read.
Result<TextTranslation> combine(size_t i, const std::string& input, TextTranslation&& first, TextTranslation&& second,
                                const std::vector<size_t>& line_starts, const TranslateOptions& options) {
  if (first.sentences.empty()) return std::move(first);  // nothing was translated (an empty text)
  if (second.sentences.size() != first.sentences.size() || second.hypotheses.empty())
    return pivot_error(i, ErrorCode::kInternal,
                       std::to_string(first.sentences.size()) + " sentences, " + std::to_string(second.sentences.size()) +
                           " of them translated by the second model (one translated to nothing)");
  TextTranslation out;
  out.input = std::move(first.input);
  const std::string second_text = std::move(second.hypotheses[0].text);
  TextHypothesis best = std::move(second.hypotheses[0]);
  best.text.clear();
  for (size_t k = 0; k < first.sentences.size(); ++k) {
    SentenceTranslation& one = first.sentences[k];
    SentenceTranslation& two = second.sentences[k];
    SentenceTranslation s;
    s.source = one.source;
    s.source_tokens = std::move(one.source_tokens);
    // The translation: each sentence's with the input's text between sentences, as
    // BatchTranslator joins them.
    if (k > 0) best.text.append(input, first.sentences[k - 1].source.end, one.source.begin - first.sentences[k - 1].source.end);
    const size_t at = best.text.size();
    best.text.append(second_text, two.target.begin, two.target.end - two.target.begin);
    s.target = {at, best.text.size()};
    for (const TextRange& r : two.target_tokens) s.target_tokens.push_back(shifted(r, two.target.begin, at));
    if (options.alignment) {
      // The second hop's source tokens in P (bergamot records them as its Annotation does).
      std::vector<TextRange> pieces;
      for (size_t q = 0; q + 1 < two.source_tokens.size(); ++q)  // its EOS left out
        pieces.push_back(shifted(two.source_tokens[q], line_starts[k], one.target.begin));
      auto pivot_as_source = text::bergamot_token_ranges(pieces, one.target);
      if (!pivot_as_source) return pivot_error(i, pivot_as_source.error().code, pivot_as_source.error().message);
      auto composed = text::compose_pivot_alignment(one.target_tokens, pivot_as_source.value(), one.alignment,
                                                    two.alignment, s.source_tokens.size());
      if (!composed) return pivot_error(i, composed.error().code, composed.error().message);
      s.alignment = std::move(composed.value());
    }
    s.token_scores = std::move(two.token_scores);
    s.quality = std::move(two.quality);
    if (s.quality)
      for (TextRange& w : s.quality->words) w = shifted(w, two.target.begin, at);
    out.sentences.push_back(std::move(s));
  }
  best.alignment.clear();  // rows over the pivot's tokens: the sentences hold the composed ones
  out.hypotheses.push_back(std::move(best));
  return out;
}

Status translate_plain_via_pivot(BatchTranslator& first, BatchTranslator& second, const std::vector<std::string>& texts,
                                 const TranslateOptions& options, const BatchOptions& batching,
                                 const BatchTranslator::TextSink& deliver) {
  TranslateOptions first_options = options;  // quality is the second model's
  first_options.quality_scores = false;
  first_options.quality_model = nullptr;
  std::vector<std::optional<Result<TextTranslation>>> firsts(texts.size());
  Status s = first.translate_text(texts, first_options, batching,
                                  [&](size_t i, Result<TextTranslation>&& r) { firsts[i] = std::move(r); });
  if (!s) return s;
  // The second model reads each translation's sentences, one per line (never split again).
  std::vector<std::string> pivots(texts.size());
  std::vector<std::vector<size_t>> line_starts(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!*firsts[i]) continue;
    const TextTranslation& t = firsts[i]->value();
    std::optional<Error> problem;
    for (const SentenceTranslation& sentence : t.sentences) {
      if (!pivots[i].empty()) pivots[i] += '\n';
      line_starts[i].push_back(pivots[i].size());
      const std::string line = t.hypotheses.at(0).text.substr(sentence.target.begin, sentence.target.end - sentence.target.begin);
      if (line.find('\n') != std::string::npos)
        problem = pivot_error(i, ErrorCode::kUnsupported, "a sentence of the first translation holds a line break");
      pivots[i] += line;
    }
    if (problem) {
      pivots[i].clear();
      firsts[i] = std::move(*problem);
    }
  }
  BatchOptions lines = batching;
  lines.split_sentences = true;
  lines.split_mode = SentenceSplit::kSentencePerLine;
  return second.translate_text(pivots, options, lines, [&](size_t i, Result<TextTranslation>&& r) {
    if (!*firsts[i]) return deliver(i, firsts[i]->error());
    if (!r) return deliver(i, pivot_error(i, r.error().code, r.error().message));
    deliver(i, combine(i, texts[i], std::move(firsts[i]->value()), std::move(r.value()), line_starts[i], options));
  });
}

}  // namespace

Status translate_via_pivot(BatchTranslator& first, BatchTranslator& second, const std::vector<std::string>& texts,
                           const TranslateOptions& options, const BatchOptions& batching,
                           const BatchTranslator::TextSink& deliver) {
  if (options.n_best > 1)
    return Error{ErrorCode::kInvalidArgument, "pivot: the second model translates the first's best translation (n_best 1)"};
  for (const auto& [translator, which] : {std::pair{&first, "first"}, std::pair{&second, "second"}}) {
    const Model& model = *translator->model();
    if (!model.info().has_text_tokenizer || !detail::has_token_ranges(model))
      return Error{ErrorCode::kUnsupported, std::string("pivot: the ") + which +
                                                " model's tokenizer does not give the byte ranges of its tokens (a "
                                                "Marian C++ model's does)"};
  }
  return detail::without_exceptions([&]() -> Status {
    auto plain = [&](const std::vector<std::string>& t, const TranslateOptions& o, const BatchOptions& b,
                     const BatchTranslator::TextSink& sink) { return translate_plain_via_pivot(first, second, t, o, b, sink); };
    if (options.html) return detail::translate_markup(plain, texts, options, batching, deliver);
    return plain(texts, options, batching, deliver);
  });
}

}  // namespace petrel
