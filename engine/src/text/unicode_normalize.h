// Unicode normalization forms (UAX #15) of UTF-8 text, as Hugging Face tokenizer.json
// normalizers ("NFC", "NFD", "NFKC", "NFKD") apply them: Unicode 15.0 data
// (core/unicode_normalization_tables.h, tools/unicode/make_unicode_text_tables.py),
// conformance-tested against the standard's NormalizationTest.txt. Like HF's tokenizers
// (unicode-normalization crate), without the stream-safe limit: a run of combining marks
// of any length is reordered, in O(n log n).
#pragma once

#include <string>
#include <string_view>

namespace petrel::text {

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };

// `utf8` in the given form, into `out` (replaced). `utf8` should be valid UTF-8 (a
// malformed sequence reads as U+FFFD). Time: linear in the text, but for the sorting
// of combining-mark runs (n log n in a run's length).
void normalize(std::string_view utf8, NormalizationForm form, std::string& out);

}  // namespace petrel::text
