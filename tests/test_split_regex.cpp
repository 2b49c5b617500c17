// text::SplitRegex, the pre-tokenizer regex of tokenizer.json tokenizers: the matches of
// JavaScript's RegExp and of Oniguruma 6.9.8 itself, what HF's tokenizers runs
// (tests/fixtures/split_regex/oracle.json, made by tools/reference/make_split_regex_fixtures.py
// with Node and Debian's libonig5) for the Qwen2, Llama 3, GPT-2, o200k and DeepSeek
// patterns over real text in 27 locales and hand-made edge cases, and Oniguruma's for
// patterns probing the rest of the syntax and for 400 random patterns of the supported
// syntax (whose repeated parts cannot match empty: split_regex.h); Oniguruma semantics
// where JS differs; linear work on adversarial inputs (VM steps
// counted, not time); refusals of what it does not support.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "text/split_regex.h"

namespace {

using petrel::text::SplitRegex;
using SplitMatches = std::vector<std::pair<uint32_t, uint32_t>>;

SplitRegex split_regex_compiled(const std::string& pattern) {
  auto re = SplitRegex::compile(pattern);
  if (!re) FAIL(pattern << ": " << re.error().message);
  return std::move(re).value();
}

SplitMatches split_regex_matches(const std::string& pattern, const std::string& text) {
  SplitMatches m;
  split_regex_compiled(pattern).find_all(text, m);
  return m;
}

std::vector<std::string> split_regex_pieces(const std::string& pattern, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& [b, e] : split_regex_matches(pattern, text)) out.push_back(text.substr(b, e - b));
  return out;
}

std::string split_regex_fnv(const SplitMatches& matches) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const auto& [b, e] : matches) {
    for (const uint32_t v : {b, e}) {
      for (int i = 0; i < 4; ++i) h = (h ^ ((v >> (8 * i)) & 0xffu)) * 0x100000001B3ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string split_regex_error(const std::string& pattern) {
  auto re = SplitRegex::compile(pattern);
  if (re) return "";
  CHECK(re.error().code == petrel::ErrorCode::kInvalidArgument);
  return re.error().message;
}

const std::string kSplitQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kSplitGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

TEST_CASE("SplitRegex gives JavaScript's matches for real pre-tokenizer patterns on real text", "[split_regex]") {
  std::ifstream in(petrel::test::fixture_dir() + "/split_regex/oracle.json");
  REQUIRE(in);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const auto& texts = fixture.at("texts");
  size_t compared = 0, equal = 0;
  for (const auto& p : fixture.at("patterns")) {
    const std::string name = p.at("name");
    const SplitRegex re = split_regex_compiled(p.at("pattern").get<std::string>());
    const std::string hashes = fixture.at("hashes").at(name);
    REQUIRE(hashes.size() == texts.size() * 17 - 1);
    SplitMatches m;
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i];
      re.find_all(text, m);
      ++compared;
      if (split_regex_fnv(m) == hashes.substr(17 * i, 16)) {
        ++equal;
      } else if (++mismatches <= 3) {
        std::string pieces;
        for (const auto& [b, e] : m) pieces += "[" + text.substr(b, e - b) + "]";
        FAIL_CHECK(name << " differs on text " << i << ": " << text << "\n  ours: " << pieces);
      }
    }
    for (const auto& edge : fixture.at("edge_cases")) {
      const std::string text = edge.at("text");
      re.find_all(text, m);
      SplitMatches want;
      for (const auto& pair : edge.at("matches").at(name)) want.emplace_back(pair[0], pair[1]);
      ++compared;
      if (m == want) {
        ++equal;
      } else {
        FAIL_CHECK(name << " differs on edge case \"" << text << "\"");
      }
    }
  }
  INFO(equal << " of " << compared << " (pattern, text) pairs equal");
  CHECK(compared == fixture.at("patterns").size() * (texts.size() + fixture.at("edge_cases").size()));
  CHECK(equal == compared);
}

TEST_CASE("SplitRegex gives Oniguruma's matches: the real patterns and the rest of the syntax", "[split_regex]") {
  std::ifstream in(petrel::test::fixture_dir() + "/split_regex/oracle.json");
  REQUIRE(in);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const auto& onig = fixture.at("onig");
  std::vector<std::string> texts = fixture.at("texts");
  for (const auto& t : onig.at("extra_texts")) texts.push_back(t);
  std::vector<std::pair<std::string, std::string>> patterns;
  for (const auto& p : fixture.at("patterns")) patterns.emplace_back(p.at("name"), p.at("pattern"));
  for (const auto& p : onig.at("patterns")) patterns.emplace_back(p.at("name"), p.at("pattern"));
  size_t compared = 0, equal = 0, skipped = 0;
  for (const auto& [name, pattern] : patterns) {
    const SplitRegex re = split_regex_compiled(pattern);
    const std::string hashes = onig.at("hashes").at(name);
    REQUIRE(hashes.size() == texts.size() * 17 - 1);
    SplitMatches m;
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string want = hashes.substr(17 * i, 16);
      if (want[0] == '-') {  // a code point new in Unicode 15.0 (Oniguruma's data is 14.0)
        ++skipped;
        continue;
      }
      re.find_all(texts[i], m);
      ++compared;
      if (split_regex_fnv(m) == want) {
        ++equal;
      } else if (++mismatches <= 3) {
        std::string pieces;
        for (const auto& [b, e] : m) pieces += "[" + texts[i].substr(b, e - b) + "]";
        FAIL_CHECK(name << " differs on text " << i << ": " << texts[i] << "\n  ours: " << pieces);
      }
    }
    for (const auto& edge : onig.at("edge_cases")) {
      const std::string text = edge.at("text");
      re.find_all(text, m);
      SplitMatches want;
      for (const auto& pair : edge.at("matches").at(name)) want.emplace_back(pair[0], pair[1]);
      ++compared;
      if (m == want) {
        ++equal;
      } else {
        std::string pieces;
        for (const auto& [b, e] : m) pieces += "[" + text.substr(b, e - b) + "]";
        FAIL_CHECK(name << " differs on edge case \"" << text << "\"\n  ours: " << pieces);
      }
    }
  }
  INFO(equal << " of " << compared << " (pattern, text) pairs equal, " << skipped << " skipped");
  CHECK(compared == patterns.size() * (texts.size() + onig.at("edge_cases").size()) - skipped);
  CHECK(equal == compared);
}

TEST_CASE("SplitRegex gives Oniguruma's matches for random patterns of its syntax", "[split_regex]") {
  std::ifstream in(petrel::test::fixture_dir() + "/split_regex/oracle.json");
  REQUIRE(in);
  const nlohmann::json onig = nlohmann::json::parse(in).at("onig");
  const std::vector<std::string> texts = onig.at("random_texts");
  size_t compared = 0, equal = 0, reported = 0;
  for (const auto& p : onig.at("random_patterns")) {
    const std::string pattern = p.at("pattern");
    const std::string hashes = p.at("hashes");
    const SplitRegex re = split_regex_compiled(pattern);
    SplitMatches m;
    for (size_t i = 0; i < texts.size(); ++i) {
      re.find_all(texts[i], m);
      ++compared;
      if (split_regex_fnv(m) == hashes.substr(17 * i, 16)) {
        ++equal;
      } else if (++reported <= 20) {
        std::string pieces;
        for (const auto& [b, e] : m) pieces += "[" + texts[i].substr(b, e - b) + "]";
        FAIL_CHECK(pattern << " differs on \"" << texts[i] << "\"\n  ours: " << pieces);
      }
    }
  }
  INFO(equal << " of " << compared << " equal");
  CHECK(equal == compared);
}

TEST_CASE("SplitRegex follows Oniguruma where JavaScript differs", "[split_regex]") {
  // \s: U+0085 is white space, U+FEFF is not.
  CHECK(split_regex_pieces(R"(\s+)", "a\xc2\x85 b\xef\xbb\xbf") == std::vector<std::string>{"\xc2\x85 "});
  // (?i): simple case folding closed over: s ~ S ~ U+017F, k ~ K ~ U+212A.
  CHECK(split_regex_pieces("(?i:'s|'k)", "'s 'S '\xc5\xbf 'K '\xe2\x84\xaa 'x") ==
        std::vector<std::string>{"'s", "'S", "'\xc5\xbf", "'K", "'\xe2\x84\xaa"});
  // Oniguruma's multi-character folds are not supported: it also matches U+00DF here.
  CHECK(split_regex_pieces("(?i)ss|x", "SS sS \xc3\x9f X") == std::vector<std::string>{"SS", "sS", "X"});
  // Oniguruma: an isolated (?i) reaches to the group's end, its later alternatives too: a(?i:b|c).
  CHECK(split_regex_pieces("a(?i)b|c", "aB C ab Ab aC") == std::vector<std::string>{"aB", "ab", "aC"});
  CHECK(split_regex_pieces("(?i:[^a-z])+", "ABC1-2") == std::vector<std::string>{"1-2"});
  // $ is a line end, ^ a line start (not after a final \n); \z \Z \A.
  CHECK(split_regex_pieces(R"(\s+$)", "a  \nb  ") == std::vector<std::string>{"  ", "  "});
  CHECK(split_regex_pieces(R"(\s+$)", "a  \n") == std::vector<std::string>{"  \n"});
  CHECK(split_regex_pieces(R"([ ]+$)", "a  \nb  ") == std::vector<std::string>{"  ", "  "});
  CHECK(split_regex_pieces("^x", "x\nx\n") == std::vector<std::string>{"x", "x"});
  CHECK(split_regex_matches("^", "a\n") == SplitMatches{{0, 0}});
  CHECK(split_regex_matches(R"(\Z)", "ab\n") == SplitMatches{{2, 2}, {3, 3}});
  CHECK(split_regex_matches(R"(\z)", "ab\n") == SplitMatches{{3, 3}});
  CHECK(split_regex_matches(R"(\A.)", "ab") == SplitMatches{{0, 1}});
  // \d is Nd, \w is L M Nd Pc (Unicode, not ASCII); . is anything but \n.
  CHECK(split_regex_pieces(R"(\d+)", "x\xd9\xa3\xd9\xa4 12") == std::vector<std::string>{"\xd9\xa3\xd9\xa4", "12"});
  CHECK(split_regex_pieces(R"(\w+)", "na\xc3\xafve_1 \xe2\x80\xbf") == std::vector<std::string>{"na\xc3\xafve_1", "\xe2\x80\xbf"});  // U+203F is Pc
  CHECK(split_regex_pieces(".+", "a\r\nb") == std::vector<std::string>{"a\r", "b"});
  // Empty matches: one code point on; none right at the previous match's end (Rust's rule).
  CHECK(split_regex_matches("a*", "ab\xc3\xa9") == SplitMatches{{0, 1}, {2, 2}, {4, 4}});
  CHECK(split_regex_matches("", "") == SplitMatches{{0, 0}});
  CHECK(split_regex_matches("x", "").empty());
}

TEST_CASE("SplitRegex: priority, laziness, counted repetition, classes, escapes", "[split_regex]") {
  CHECK(split_regex_pieces("ab|abc", "abc") == std::vector<std::string>{"ab"});
  CHECK(split_regex_pieces("abc|ab", "abc") == std::vector<std::string>{"abc"});
  CHECK(split_regex_pieces("a+?", "aaa") == std::vector<std::string>{"a", "a", "a"});
  CHECK(split_regex_pieces("a*?b", "aab") == std::vector<std::string>{"aab"});
  CHECK(split_regex_pieces("a??a", "aa") == std::vector<std::string>{"a", "a"});
  CHECK(split_regex_pieces("a{2,3}", "aaaaaaa") == std::vector<std::string>{"aaa", "aaa"});
  CHECK(split_regex_pieces("a{2,3}?", "aaaaa") == std::vector<std::string>{"aa", "aa"});
  CHECK(split_regex_pieces("a{2}", "aaaaa") == std::vector<std::string>{"aa", "aa"});
  CHECK(split_regex_pieces("a{2,}", "aaaaa a") == std::vector<std::string>{"aaaaa"});
  CHECK(split_regex_pieces("a{,2}b", "aaab") == std::vector<std::string>{"aab"});
  CHECK(split_regex_pieces("x{a}", "x{a}") == std::vector<std::string>{"x{a}"});  // not an interval: literal
  CHECK(split_regex_pieces(R"([\p{Lu}\d-]+)", "ABc-9d") == std::vector<std::string>{"AB", "-9"});
  CHECK(split_regex_pieces(R"([^[a-c][x]]+)", "abxyz") == std::vector<std::string>{"yz"});
  CHECK(split_regex_pieces(R"([]a]+)", "]a]b") == std::vector<std::string>{"]a]"});
  CHECK(split_regex_pieces(R"([a-z&&[^aeiou]]+)", "hello") == std::vector<std::string>{"h", "ll"});
  CHECK(split_regex_pieces(R"([&&a]|[a&&]|[^a&&])", "ab") == std::vector<std::string>{"a", "b"});  // as Oniguruma
  CHECK(split_regex_pieces(R"([a-c&&b-d&&c-e])", "abcde") == std::vector<std::string>{"c"});
  CHECK(split_regex_pieces(R"(\x{1F600}|\u00e9|\x41|\t)", "A\t\xc3\xa9\xf0\x9f\x98\x80") ==
        std::vector<std::string>{"A", "\t", "\xc3\xa9", "\xf0\x9f\x98\x80"});
  CHECK(split_regex_pieces(R"(\p{^L}+|\P{Letter}+)", "ab12cd") == std::vector<std::string>{"12"});
  CHECK(split_regex_pieces(R"(\p{Decimal_Number}\p{ Lu })", "1A 2b") == std::vector<std::string>{"1A"});
  CHECK(split_regex_pieces(R"((?<name>a)(?#comment)b(?=c))", "abc abd") == std::vector<std::string>{"ab"});
  CHECK(split_regex_pieces(R"(a(?![bc]|d))", "ab ac ad ae a") == std::vector<std::string>{"a", "a"});
  CHECK(SplitRegex::compile(
            R"((?i:ab|[^\x{1F600}-\x{1F64F}\p{^Lu}]){2,5}?|^\s*$|\A(?:x(?=y))+\z|(?<n>\u00e9)(?#c)\Z|[a-c[x-z]\d\w\h])")
            .has_value());  // the fuzz seed hand-syntax.bin
  CHECK(split_regex_pieces("(a|b)*c", "ababc") == std::vector<std::string>{"ababc"});
  CHECK(split_regex_pieces("(a*)*b", "aab") == std::vector<std::string>{"aab"});
  // A loop whose body can match empty ends on an empty iteration (Oniguruma's empty check).
  CHECK(split_regex_pieces("a(?:x|.?\?)*", "axx1b a") == std::vector<std::string>{"axx", "a"});
  CHECK(split_regex_pieces("a(?:b|(?:.(?:.)?)?)*", "aAxA1") == std::vector<std::string>{"aAxA1"});
  CHECK(split_regex_pieces(kSplitGpt2, "I'm  fine\n") ==
        std::vector<std::string>{"I", "'m", " ", " fine", "\n"});
  CHECK(split_regex_pieces(kSplitQwen2, "Hi  there!!\r\n\r\n  x 12") ==
        std::vector<std::string>{"Hi", " ", " there", "!!\r\n\r\n", " ", " x", " ", "1", "2"});
}

TEST_CASE("SplitRegex refuses what it does not support, naming it", "[split_regex]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"((a)\1)", "backreference"},
      {R"((?<n>a)\k<n>)", "backreference"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {"a(?=bc)", "lookahead"},
      {"a(?!b+)", "lookahead"},
      {"(?>a)", "atomic"},
      {"a*+", "possessive"},
      {"a++", "possessive"},
      {"(a", "'(' without its ')'"},
      {"a)", "unbalanced ')'"},
      {"[a-", "class without its ']'"},
      {"[z-a]", "out of order"},
      {"[[:alpha:]]", "POSIX"},
      {"*a", "nothing to repeat"},
      {"a{100001}", "repeat count"},
      {R"(\p{Han})", "property"},
      {R"(\bword)", "word boundary"},
      {R"(\q)", "escape"},
      {"(?x)a", "option"},
      {"^*", "assertion"},
      {"\xff", "UTF-8"},
      {R"(\x80)", "raw byte"},
  };
  for (const auto& [pattern, what] : cases) {
    const std::string message = split_regex_error(pattern);
    INFO(pattern << " -> " << message);
    CHECK_THAT(message, Catch::Matchers::Contains(what));
    CHECK_THAT(message, Catch::Matchers::Contains("offset"));
  }
  CHECK_THAT(split_regex_error("(a{1000}){2000}"), Catch::Matchers::Contains("instructions"));
  CHECK_THAT(split_regex_error(std::string(5000, '(') + std::string(5000, ')')), Catch::Matchers::Contains("nesting"));
  CHECK_THAT(split_regex_error(std::string(70000, 'a')), Catch::Matchers::Contains("64 KiB"));
  CHECK(split_regex_error("[" + std::string(60000, 'a') + "]").empty());
  // 60000 literals parse (each folded once: cached), then have too many instructions.
  CHECK_THAT(split_regex_error("(?i)" + std::string(60000, 'k')), Catch::Matchers::Contains("1024 instructions"));
  std::string stacked = "a";  // each level: a group and 5 quantifiers (? *? *? *? *): 2250 levels of syntax tree
  for (int i = 0; i < 450; ++i) stacked = "(" + stacked + ")?*?*?*?*";
  CHECK_THAT(split_regex_error(stacked), Catch::Matchers::Contains("groups and quantifiers"));
}

TEST_CASE("SplitRegex does linear work on adversarial inputs", "[split_regex]") {
  const std::vector<std::string> patterns = {
      kSplitQwen2,
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      kSplitGpt2,
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"(\s+$)",
      R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)",
      "(?:'|\\p{L}?\?)+|(?:\\s|x?\?)+",  // loops whose bodies can match empty (registers)
  };
  // Each input of n bytes and of 2n: the work may at most grow 2.2 times.
  const std::vector<std::pair<std::string, std::string>> units = {
      {"spaces", " "}, {"letters", "a"}, {"upper letters", "A"}, {"digits", "7"}, {"apostrophes", "'"},
      {"alternating classes", "a1 ,"}, {"space-letter", " a"}, {"newlines", "\r\n"}, {"spaces then x", ""},
      {"apostrophe s", "'s"}, {"CJK", "\xe4\xb8\xad"}, {"tabs and spaces", "\t "},
  };
  // 512 KiB, then 1 MiB; under PETREL_TEST_SUBSET=N (sanitizers, emulators) 1/N^2 of that
  // (20 KiB at N = 5, 1.3 KiB at 20): steps are counted, not timed, so a quadratic matcher
  // still quadruples its steps when the text doubles.
  const size_t stride = petrel::test::subset_stride();
  const size_t n = (size_t{1} << 19) / (stride * stride);
  for (const auto& pattern : patterns) {
    const SplitRegex re = split_regex_compiled(pattern);
    for (const auto& named_unit : units) {
      const std::string& name = named_unit.first;
      const std::string& unit = named_unit.second;  // (a lambda cannot capture a structured binding before C++20)
      auto input = [&](size_t bytes) {
        if (unit.empty()) return std::string(bytes - 1, ' ') + "x";
        std::string s;
        while (s.size() < bytes) s += unit;
        return s;
      };
      SplitMatches m;
      const uint64_t small = re.find_all_counting_steps(input(n), m);
      const uint64_t large = re.find_all_counting_steps(input(2 * n), m);
      INFO(pattern << " on " << name << ": " << small << " then " << large << " steps");
      CHECK(static_cast<double>(large) <= 2.2 * static_cast<double>(small));
      // O(text x program): at most each instruction visited and stepped once per byte.
      CHECK(large <= 2 * (2 * n) * re.program_size());
    }
  }
}

TEST_CASE("SplitRegex's programs have at most 1024 instructions, and find_all_within stops at its steps", "[split_regex]") {
  // At the limit: compiles and matches; one more instruction is refused.
  const SplitRegex at_limit = split_regex_compiled("a{1023}");
  CHECK(at_limit.program_size() == 1024);
  CHECK(split_regex_matches("a{1023}", "b" + std::string(2100, 'a')) == SplitMatches{{1, 1024}, {1024, 2047}});
  CHECK_THAT(split_regex_error("a{1024}"), Catch::Matchers::Contains("more than 1024 instructions"));
  // 21 bytes that compiled to 800k instructions, every one a thread alive at each code point.
  CHECK_THAT(split_regex_error("(?:(?:.?){1000}){400}"), Catch::Matchers::Contains("more than 1024 instructions"));

  // A program at the limit with every thread alive at each code point (no "x" ends a
  // match): its steps, as counted, are the budget it needs; one step less stops it.
  const SplitRegex busy = split_regex_compiled("(?:.?){511}x");
  CHECK(busy.program_size() == 1024);
  const std::string text(4096, 'y');
  SplitMatches all, some;
  const uint64_t needed = busy.find_all_counting_steps(text, all);
  CHECK(all.empty());
  CHECK(needed > 1024 * text.size() + 16384);  // 8 times what HfTokenizer allows a call on this text
  uint64_t steps = needed;
  CHECK(busy.find_all_within(text, some, UINT64_MAX, steps) == SplitRegex::Within::kDone);
  CHECK(steps == 0);
  CHECK(some == all);
  steps = needed - 1;
  CHECK(busy.find_all_within(text, some, UINT64_MAX, steps) == SplitRegex::Within::kTooManySteps);
  CHECK(steps == 0);
  // A pattern that rescans is stopped by the bytes it scans, its steps to spare.
  steps = UINT64_MAX / 2;
  CHECK(split_regex_compiled("a*b|a").find_all_within(std::string(4096, 'a'), some, 16 * 4096, steps) ==
        SplitRegex::Within::kRescans);
}
