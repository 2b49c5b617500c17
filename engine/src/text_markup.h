// HTML translation (TranslateOptions::html): markup taken out of each input, the text
// translated sentence by sentence, the markup put back (text/html_markup.h), as
// bergamot-translator does for Firefox.
#pragma once

#include <string>
#include <vector>

#include "petrel/batch_translator.h"

namespace petrel::detail {

// BatchTranslator::translate_text for options.html.
Status translate_markup(BatchTranslator& batch, const std::vector<std::string>& texts, const TranslateOptions& options,
                        const BatchOptions& batching, const BatchTranslator::TextSink& deliver);

}  // namespace petrel::detail
