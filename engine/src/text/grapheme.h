// Extended grapheme clusters (Unicode's UAX #29, rules GB3..GB13 of Unicode 15.0, the
// tables of core/grapheme_tables.h), as Rust's unicode-segmentation finds them for
// Hugging Face tokenizers' Precompiled normalizer. GB9c (Unicode 15.1's Indic conjunct
// rule) is not applied: it joins only three-byte letters, so no cluster it makes is
// under Precompiled's six-byte limit, and the clusters that follow start where they
// would anyway.
#pragma once

#include <cstddef>
#include <string_view>

namespace petrel::text {

// The end of the extended grapheme cluster that starts at byte `start` (< text.size())
// of valid UTF-8 text: the next boundary after it.
size_t grapheme_cluster_end(std::string_view text, size_t start);

}  // namespace petrel::text
