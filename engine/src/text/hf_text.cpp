#include "text/hf_text.h"

#include <cstdint>
#include <utility>

#include "text/spm_normalizer.h"

namespace petrel::text {
namespace {

// Python's str.isspace() (what str.strip() removes), for one code point.
bool python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the well-formed UTF-8 character of `length` bytes at p.
uint32_t code_point(const char* p, size_t length) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  switch (length) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
    case 3: return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
    default: return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
  }
}

// Length of the whitespace character starting at text[at], or 0.
size_t space_at(std::string_view text, size_t at) {
  const size_t n = utf8::valid_length(text.data() + at, text.size() - at);
  return n > 0 && python_space(code_point(text.data() + at, n)) ? n : 0;
}

}  // namespace

std::string_view python_lstrip(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t n = space_at(text, at);
    if (n == 0) break;
    at += n;
  }
  return text.substr(at);
}

std::string_view python_rstrip(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the lead byte of the last character (at most 4)
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
    const size_t n = space_at(text.substr(0, end), start);
    if (n == 0 || start + n != end) break;
    end = start;
  }
  return text.substr(0, end);
}

void space_symbols_to_spaces(std::string& text) {
  for (size_t at = text.find(kSpaceSymbol); at != std::string::npos; at = text.find(kSpaceSymbol, at + 1))
    text.replace(at, kSpaceSymbol.size(), " ");
}

void clean_up_tokenization(std::string& text) {  // the base class's replacements, in its order
  static constexpr std::pair<std::string_view, std::string_view> kCleanUp[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [before, after] : kCleanUp)
    for (size_t at = text.find(before); at != std::string::npos; at = text.find(before, at + after.size()))
      text.replace(at, before.size(), after);
}

}  // namespace petrel::text
