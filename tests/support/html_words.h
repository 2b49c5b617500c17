// A stand-in for sentence splitting and SentencePiece over a markup's text, for the HTML
// tests and fuzz target: sentences end at "\n\n"; a token is a word with the separators
// before it (none for a sentence's first), then an empty EOS.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/types.h"

namespace petrel::test {

inline AnnotatedText words_as_tokens(const std::string& text, std::string_view separators) {
  AnnotatedText t;
  t.text = text;
  auto is_space = [&](char c) { return separators.find(c) != std::string_view::npos; };
  size_t segment = 0;
  while (segment <= text.size()) {
    size_t segment_end = text.find("\n\n", segment);
    if (segment_end == std::string::npos) segment_end = text.size();
    std::vector<TextRange> tokens;
    size_t i = segment, previous_end = std::string::npos;
    while (i < segment_end) {
      while (i < segment_end && is_space(text[i])) ++i;
      if (i == segment_end) break;
      size_t e = i;
      while (e < segment_end && !is_space(text[e])) ++e;
      tokens.push_back(TextRange{previous_end == std::string::npos ? i : previous_end, e});
      previous_end = e;
      i = e;
    }
    if (!tokens.empty()) {
      tokens.push_back(TextRange{previous_end, previous_end});
      t.sentences.push_back(std::move(tokens));
    }
    segment = segment_end + 2;
  }
  return t;
}

}  // namespace petrel::test
