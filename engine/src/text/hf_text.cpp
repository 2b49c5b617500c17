#include "text/hf_text.h"

#include <cstdint>
#include <utility>

#include "core/unicode.h"
#include "core/utf8.h"
#include "text/spm_normalizer.h"

namespace petrel::text {
namespace {

// Length of the whitespace character (Python's str.isspace(), what str.strip()
// removes) starting at text[at], or 0; malformed UTF-8 is never space.
size_t space_at(std::string_view text, size_t at) {
  const detail::CodePoint c = detail::utf8_decode(text, at);  // malformed: U+FFFD, no space
  return detail::is_python_space(c.value) ? c.length : 0;
}

// Python's str.replace(before, after) in one pass: non-overlapping occurrences, left
// to right (replacing in place would move the rest of the text for each one).
void replace_all(std::string& text, std::string_view before, std::string_view after) {
  size_t at = text.find(before);
  if (at == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (; at != std::string::npos; at = text.find(before, from)) {
    out.append(text, from, at - from);
    out.append(after);
    from = at + before.size();
  }
  out.append(text, from, std::string::npos);
  text.swap(out);
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

void space_symbols_to_spaces(std::string& text) { replace_all(text, kSpaceSymbol, " "); }

void clean_up_tokenization(std::string& text) {  // the base class's replacements, in its order
  static constexpr std::pair<std::string_view, std::string_view> kCleanUp[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [before, after] : kCleanUp) replace_all(text, before, after);
}

}  // namespace petrel::text
