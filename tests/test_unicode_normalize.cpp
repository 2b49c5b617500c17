// Unicode normalization (text/unicode_normalize): the standard's conformance file,
// NormalizationTest.txt of Unicode 15.0 (tests/fixtures/unicode/NormalizationTest.txt.xz,
// its comments stripped by tools/unicode/make_unicode_text_tables.py from Debian's
// unicode-data): every line's five columns and every invariant of the file's header for
// all four forms, and every code point not in part 1 unchanged by every form.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "support/test_support.h"
#include "text/unicode_normalize.h"

namespace {

using petrel::text::NormalizationForm;

std::string normalize_test_utf8(char32_t c) {
  std::string out;
  petrel::detail::append_utf8(out, c);
  return out;
}

// "0044 0307" -> UTF-8.
std::string normalize_test_column(const std::string& hex) {
  std::istringstream in(hex);
  std::string word, out;
  while (in >> word) out += normalize_test_utf8(static_cast<char32_t>(std::stoul(word, nullptr, 16)));
  return out;
}

std::string normalize_test_run(const std::string& text, NormalizationForm form) {
  std::string out;
  petrel::text::normalize(text, form, out);
  return out;
}

}  // namespace

TEST_CASE("NormalizationTest.txt: every line and invariant, all four forms", "[unicode_normalize]") {
  const auto file = petrel::test::xz_decompress(petrel::test::fixture_dir() + "/unicode/NormalizationTest.txt.xz");
  if (!file) {
    WARN("xz is not installed and PETREL_TEST_SKIP=xz: NormalizationTest.txt is skipped");
    return;
  }
  std::istringstream in(*file);
  std::string line, part;
  std::vector<bool> in_part1(0x110000, false);
  size_t lines = 0, failures = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '@') {
      part = line;
      continue;
    }
    std::vector<std::string> c;
    std::istringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ';') && c.size() < 5) c.push_back(normalize_test_column(field));
    REQUIRE(c.size() == 5);
    if (part == "@Part1") {
      const petrel::detail::CodePoint cp = petrel::detail::utf8_decode(c[0], 0);
      in_part1[cp.value] = true;
    }
    ++lines;
    // The header's invariants.
    const auto nfc = [](const std::string& s) { return normalize_test_run(s, NormalizationForm::kNFC); };
    const auto nfd = [](const std::string& s) { return normalize_test_run(s, NormalizationForm::kNFD); };
    const auto nfkc = [](const std::string& s) { return normalize_test_run(s, NormalizationForm::kNFKC); };
    const auto nfkd = [](const std::string& s) { return normalize_test_run(s, NormalizationForm::kNFKD); };
    const bool ok = c[1] == nfc(c[0]) && c[1] == nfc(c[1]) && c[1] == nfc(c[2]) && c[3] == nfc(c[3]) &&
                    c[3] == nfc(c[4]) &&  //
                    c[2] == nfd(c[0]) && c[2] == nfd(c[1]) && c[2] == nfd(c[2]) && c[4] == nfd(c[3]) &&
                    c[4] == nfd(c[4]) &&  //
                    c[3] == nfkc(c[0]) && c[3] == nfkc(c[1]) && c[3] == nfkc(c[2]) && c[3] == nfkc(c[3]) &&
                    c[3] == nfkc(c[4]) &&  //
                    c[4] == nfkd(c[0]) && c[4] == nfkd(c[1]) && c[4] == nfkd(c[2]) && c[4] == nfkd(c[3]) &&
                    c[4] == nfkd(c[4]);
    if (!ok && ++failures <= 10) FAIL_CHECK(part << ": " << line);
  }
  CHECK(lines > 19000);
  CHECK(failures == 0);
  // Part 1 lists every code point that some form changes: any other is unchanged.
  // (Every code point; every Nth under PETREL_TEST_SUBSET=N, for sanitizers and emulators.)
  const char32_t stride = static_cast<char32_t>(petrel::test::subset_stride());
  size_t others = 0, changed = 0;
  for (char32_t c = 0; c < 0x110000; c += stride) {
    if (in_part1[c] || (c >= 0xD800 && c <= 0xDFFF)) continue;
    const std::string s = normalize_test_utf8(c);
    ++others;
    for (const NormalizationForm f : {NormalizationForm::kNFC, NormalizationForm::kNFD, NormalizationForm::kNFKC,
                                      NormalizationForm::kNFKD}) {
      if (normalize_test_run(s, f) != s && ++changed <= 10) FAIL_CHECK("U+" << std::hex << static_cast<uint32_t>(c));
    }
  }
  CHECK(others > 1000000 / stride);
  CHECK(changed == 0);
}

TEST_CASE("Normalization: long runs of combining marks are sorted stably in n log n", "[unicode_normalize]") {
  // a, then 200000 marks alternating below (220) and above (230), each class keeping its order.
  std::string text = "a";
  std::string want_below, want_above;
  for (int i = 0; i < 100000; ++i) {
    text += "\xcc\x81\xcc\xa3";  // U+0301 (230), U+0323 (220)
    want_below += "\xcc\xa3";
    want_above += "\xcc\x81";
  }
  CHECK(normalize_test_run(text, NormalizationForm::kNFD) == "a" + want_below + want_above);
  // NFC: a + U+0323 -> U+1EA1, then a + U+0301 blocked? No: U+1EA1 + U+0301 has no composite.
  const std::string nfc = normalize_test_run(text, NormalizationForm::kNFC);
  CHECK(nfc == "\xe1\xba\xa1" + want_below.substr(2) + want_above);
  CHECK(normalize_test_run("", NormalizationForm::kNFKC).empty());
  CHECK(normalize_test_run("plain ASCII\n", NormalizationForm::kNFKD) == "plain ASCII\n");
  // Hangul: syllables decompose and compose algorithmically.
  CHECK(normalize_test_run("\xea\xb0\x81", NormalizationForm::kNFD) == "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8");
  CHECK(normalize_test_run("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", NormalizationForm::kNFC) == "\xea\xb0\x81");
  // Compatibility: the ligature fi, full-width A, superscript two.
  CHECK(normalize_test_run("\xef\xac\x81 \xef\xbc\xa1 \xc2\xb2", NormalizationForm::kNFKC) == "fi A 2");
}
