// String rules of Hugging Face's slow tokenizers that more than one tokenizer follows:
// Python's str.strip() (Unicode whitespace, not just ASCII), the base class's
// clean_up_tokenization, and "▁" as a space. Shared by the Marian and Fairseq tokenizers.
#pragma once

#include <string>
#include <string_view>

namespace petrel::text {

// Python's str.lstrip() / str.rstrip() without arguments; malformed UTF-8 is never space.
std::string_view python_lstrip(std::string_view text);
std::string_view python_rstrip(std::string_view text);
inline std::string_view python_strip(std::string_view text) { return python_rstrip(python_lstrip(text)); }

// Every "▁" (kSpaceSymbol) in `text` replaced by a space, in place.
void space_symbols_to_spaces(std::string& text);

// PreTrainedTokenizerBase.clean_up_tokenization (" ." -> "." ...), in place.
void clean_up_tokenization(std::string& text);

}  // namespace petrel::text
