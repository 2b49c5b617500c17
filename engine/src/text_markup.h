// HTML translation (TranslateOptions::html): markup taken out of each input, the text
// translated sentence by sentence, the markup put back (text/html_markup.h), as
// bergamot-translator does for Firefox.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "petrel/batch_translator.h"

namespace petrel::detail {

// How the text of the markup is translated: BatchTranslator::translate_text, or through a pivot.
using TranslatePlain = std::function<Status(const std::vector<std::string>& texts, const TranslateOptions& options,
                                            const BatchOptions& batching, const BatchTranslator::TextSink& deliver)>;

// translate_text for options.html: each input's markup taken out, its text translated by
// `translate_plain` (alignments on, split into sentences at blocks and lines), put back.
Status translate_markup(const TranslatePlain& translate_plain, const std::vector<std::string>& texts,
                        const TranslateOptions& options, const BatchOptions& batching,
                        const BatchTranslator::TextSink& deliver);

}  // namespace petrel::detail
