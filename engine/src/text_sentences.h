// A text translation's sentences as bergamot's Response holds them (SentenceTranslation):
// token byte ranges on both sides, alignments, token scores and quality scores.
#pragma once

#include <cstddef>

#include "petrel/translator.h"

namespace petrel::detail {

// Sentence `tokens` (its source tokenization, ranges relative to the sentence, which
// starts at byte `source_offset` of the input) translated as `best`, whose text starts at byte `target_offset` of the hypothesis'
// text. Fails with kUnsupported when the model's tokenizer gives no byte ranges.
Result<SentenceTranslation> sentence_translation(const Model& model, const TokenizedText& tokens, size_t source_offset,
                                                 const Hypothesis& best, size_t target_offset,
                                                 const TranslateOptions& options);

// Whether the model's tokenizer tells its tokens' bytes (TextTranslation::sentences).
bool has_token_ranges(const Model& model);

// The error for asking of a text translation what the model cannot give (quality scores,
// HTML: both need its tokens' bytes), or ok.
Status check_text_options(const Model& model, const TranslateOptions& options);

}  // namespace petrel::detail
