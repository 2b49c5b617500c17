// Fuzz target: the tokenizer.json text primitives. The input is a pattern and a text: two
// bytes (little-endian) give the pattern's length (taken modulo what follows plus one),
// then the pattern, then the text. text::SplitRegex::compile must accept or refuse it
// with kInvalidArgument; a compiled pattern's find_all over the text (as given, and made
// valid UTF-8) must return matches in order, not overlapping, within the text, on code
// point boundaries of valid text, and do at most O(text x program) work per search.
// text::normalize of the text (made valid) in all four forms must give UTF-8 that is
// stable: NFC(NFC(x)) = NFC(x), NFD(NFC(x)) = NFD(x), and so on. Anything else, a crash,
// a hang or a sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "text/split_regex.h"
#include "text/unicode_normalize.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

bool is_boundary(std::string_view text, uint32_t at) {
  return at == text.size() || (static_cast<unsigned char>(text[at]) & 0xC0) != 0x80;
}

void check_matches(const petrel::text::SplitRegex& re, std::string_view text, bool valid) {
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  re.find_all(text, matches);
  uint32_t last = 0;
  bool have_last = false;
  for (const auto& [begin, end] : matches) {
    require(begin <= end && end <= text.size(), "a match lies within the text");
    require(!have_last || begin >= last, "matches are in order and do not overlap");
    require(!have_last || begin > last || begin < end, "no empty match right at the previous match's end");
    if (valid) require(is_boundary(text, begin) && is_boundary(text, end), "matches end on code point boundaries");
    last = end;
    have_last = true;
  }
}

std::string normalized(std::string_view text, petrel::text::NormalizationForm form) {
  std::string out;
  petrel::text::normalize(text, form, out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using petrel::text::NormalizationForm;
  if (size < 2) return 0;
  const size_t rest = size - 2;
  const size_t pattern_size = (static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8) % (rest + 1);
  const std::string_view pattern(reinterpret_cast<const char*>(data) + 2, pattern_size);
  std::string_view text(reinterpret_cast<const char*>(data) + 2 + pattern_size, rest - pattern_size);

  auto re = petrel::text::SplitRegex::compile(pattern);
  if (!re) {
    require(re.error().code == petrel::ErrorCode::kInvalidArgument, "a refused pattern is kInvalidArgument");
    require(!re.error().message.empty(), "a refusal says why");
  } else {
    // A search costs O(program x text); find_all may rescan (a pattern like a*b|a), so
    // bound program x text^2 to keep each input under a second.
    const size_t program = re.value().program_size();
    while (!text.empty() && static_cast<double>(program) * static_cast<double>(text.size()) *
                                    static_cast<double>(text.size()) > 4e9) {
      text = text.substr(0, text.size() / 2);
    }
    check_matches(re.value(), text, petrel::detail::is_valid_utf8(text));
    check_matches(re.value(), petrel::detail::to_valid_utf8(text), true);
  }

  const std::string valid = petrel::detail::to_valid_utf8(text);
  const std::string nfc = normalized(valid, NormalizationForm::kNFC);
  const std::string nfd = normalized(valid, NormalizationForm::kNFD);
  const std::string nfkc = normalized(valid, NormalizationForm::kNFKC);
  const std::string nfkd = normalized(valid, NormalizationForm::kNFKD);
  for (const std::string* s : {&nfc, &nfd, &nfkc, &nfkd}) require(petrel::detail::is_valid_utf8(*s), "normalized text is UTF-8");
  require(normalized(nfc, NormalizationForm::kNFC) == nfc, "NFC is stable");
  require(normalized(nfd, NormalizationForm::kNFD) == nfd, "NFD is stable");
  require(normalized(nfkc, NormalizationForm::kNFKC) == nfkc, "NFKC is stable");
  require(normalized(nfkd, NormalizationForm::kNFKD) == nfkd, "NFKD is stable");
  require(normalized(nfc, NormalizationForm::kNFD) == nfd, "NFD(NFC(x)) = NFD(x)");
  require(normalized(nfd, NormalizationForm::kNFC) == nfc, "NFC(NFD(x)) = NFC(x)");
  require(normalized(nfkc, NormalizationForm::kNFKD) == nfkd, "NFKD(NFKC(x)) = NFKD(x)");
  return 0;
}
