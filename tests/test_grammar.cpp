// GBNF grammars (text/gbnf.h), their matcher and token masks (text/gbnf_matcher.h), and
// generation under a grammar (GenerateOptions::grammar). The oracles: std::regex on
// random regular grammars written both ways, and each token's bytes fed one at a time for
// the masks.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "model_access.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "support/hf_test_support.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"
#include "text/gbnf.h"
#include "text/gbnf_matcher.h"
#include "text/hf_text.h"
#include "text/hf_tokenizer.h"

// Everything here is in a named namespace: in a unity batch, another test file's helpers
// of the same names (matches, refusal) live in the same translation unit.
namespace petrel_grammar_test {

namespace {

using petrel::text::GbnfMatcher;
using petrel::text::parse_gbnf;

GbnfMatcher matcher_of(const std::string& grammar) {
  auto g = parse_gbnf(grammar);
  if (!g) FAIL(g.error().message);
  auto m = GbnfMatcher::create(std::move(g.value()));
  if (!m) FAIL(m.error().message);
  return std::move(m.value());
}

// Whether the grammar takes `text` whole (every byte, and complete at the end).
bool matches(GbnfMatcher& m, const std::string& text) {
  const GbnfMatcher::State start = m.state();
  auto ok = m.accept(text);
  REQUIRE(ok);
  const bool whole = ok.value() && m.complete();
  m.set_state(start);
  return whole;
}

std::string refusal(const std::string& grammar) {
  auto g = parse_gbnf(grammar);
  if (g) return "(accepted)";
  CHECK(g.error().code == petrel::ErrorCode::kInvalidArgument);
  return g.error().message;
}

const char* const kJsonGrammar = R"(# JSON, bounded so that output ends
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

}  // namespace

TEST_CASE("GBNF: llama.cpp's syntax is accepted and means what its README says", "[grammar]") {
  auto json = matcher_of(kJsonGrammar);
  CHECK(matches(json, R"({"a": [1, 2.5e3, "x\u00e9y", true, null], "b": {}})"));
  CHECK(matches(json, "{}"));
  CHECK_FALSE(matches(json, R"({"a" 1})"));
  CHECK_FALSE(matches(json, R"({"a": 01})"));
  CHECK_FALSE(matches(json, "{"));

  auto escapes = matcher_of("root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\\"\\[\\]\" [\\]\\[]");
  CHECK(matches(escapes, "A\xc3\xa9\xf0\x9f\x98\x80\t\n\r\\\"[]]"));
  auto classes = matcher_of("root ::= [a-cx] [^a-z] . \"ab\"* \"c\"+ \"d\"? \"e\"{2} \"f\"{1,} \"g\"{0,2}  # comment\n");
  CHECK(matches(classes, "x\xe4\xb8\xad\xe4\xb8\xad" "ababccceeffg"));
  CHECK(matches(classes, "a1\ncee" "f"));
  CHECK_FALSE(matches(classes, "aa\ncee" "f"));  // [^a-z]
  CHECK_FALSE(matches(classes, "a1\nceeef"));    // e{2}
  CHECK_FALSE(matches(classes, "a1\nceefggg"));  // g{0,2}
  // Groups across lines, alternation at the top level, references before definitions.
  auto groups = matcher_of("root ::= (\n  item\n  | \"-\" item\n)+ end | \"?\"\nitem ::= [0-9]\nend ::= \".\"\n");
  CHECK(matches(groups, "1-23."));
  CHECK(matches(groups, "?"));
  CHECK_FALSE(matches(groups, "1-."));
  // A repetition repeats the whole literal before it; an empty alternative.
  auto literal = matcher_of("root ::= \"ab\"{2} x\nx ::= \"c\" |");
  CHECK(matches(literal, "abab"));
  CHECK(matches(literal, "ababc"));
  CHECK_FALSE(matches(literal, "abb"));
}

TEST_CASE("GBNF: what is refused names the line:column and the rule", "[grammar]") {
  CHECK(refusal("root ::= \"a\" \\") == "grammar 1:14: unexpected '\\'");
  CHECK(refusal("root ::= \"a\"\nx ::= \"\\q\"") == "grammar 2:8: unknown escape '\\q'");
  CHECK(refusal("root ::= \"abc") == "grammar 1:10: the literal is not closed (no '\"')");
  CHECK(refusal("root ::= [abc") == "grammar 1:10: the character class is not closed (no ']')");
  CHECK(refusal("root ::= [z-a]") == "grammar 1:11: the range's end comes before its start");
  CHECK(refusal("root ::= x\n") == "grammar 1:10: rule 'x' is used but never defined");
  CHECK(refusal("a ::= \"x\"\n") == "grammar 2:1: the grammar has no rule 'root'");
  CHECK(refusal("root ::= \"a\"\nroot ::= \"b\"") == "grammar 2:1: rule 'root' is defined twice (first at 1:1)");
  CHECK(refusal("root ::= * \"a\"") == "grammar 1:10: '*' repeats nothing (no item before it)");
  CHECK(refusal("root ::= \"a\"{1001}") == "grammar 1:13: a repetition count above 1000");
  CHECK(refusal("root ::= \"a\"{3,2}") == "grammar 1:13: {m,n} with n smaller than m");
  CHECK(refusal("root ::= (\"a\"") == "grammar 1:10: the '(' is never closed");
  CHECK(refusal("root ::= \"a\")") == "grammar 1:13: ')' without a '(' before it");
  CHECK(refusal("root = \"a\"") == "grammar 1:6: expected '::=', found '='");
  CHECK(refusal("root ::= <[12]>") == "grammar 1:10: unexpected '<'");
  CHECK(refusal("  \xc3\xa9 ::= \"a\"") == "grammar 1:3: expected a rule name, found '\xc3\xa9'");
  CHECK(refusal("root ::= \"\\U00110000\"") == "grammar 1:11: \\U: not a Unicode scalar value");
  // Left recursion: direct, indirect, through a rule that can be empty, through a
  // repetition of something that can be empty.
  CHECK(refusal("root ::= root \"a\" | \"b\"") ==
        "grammar 1:1: left recursion: rule 'root' can reach itself without consuming a character (root -> root)");
  CHECK(refusal("root ::= a\na ::= b \"x\"\nb ::= root | \"y\"") ==
        "grammar 1:1: left recursion: rule 'root' can reach itself without consuming a character (root -> a -> b -> root)");
  CHECK(refusal("root ::= e root \"a\" | \"b\"\ne ::= \"x\"?") ==
        "grammar 1:1: left recursion: rule 'root' can reach itself without consuming a character (root -> root)");
  CHECK(refusal("root ::= (\"a\"?)*") ==
        "grammar 1:16: left recursion: rule 'root/1:16' can reach itself without consuming a character "
        "(root/1:16 -> root/1:16)");
  // Right recursion and recursion after a character are fine.
  CHECK(refusal("root ::= \"a\" root | \"b\"") == "(accepted)");
  CHECK(refusal("root ::= \"(\" root? \")\"") == "(accepted)");
}

namespace {

// A random regular grammar written as GBNF and as an ECMAScript regex, over a, b, c, d.
struct RandomGrammar {
  std::mt19937& rng;
  std::vector<std::string> rules;  // "name ::= body" lines
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  // Returns (gbnf, regex, nullable).
  std::tuple<std::string, std::string, bool> atom(int depth) {
    switch (depth > 2 ? pick(3) : pick(6)) {
      case 0: {
        std::string s;
        for (int i = 0, n = 1 + pick(3); i < n; ++i) s += static_cast<char>('a' + pick(4));
        return {"\"" + s + "\"", "(?:" + s + ")", false};
      }
      case 1: {
        std::string set;
        for (int i = 0, n = 1 + pick(3); i < n; ++i) set += static_cast<char>('a' + pick(4));
        const bool negated = pick(3) == 0;
        if (pick(2) == 0) set = "a-c";
        return {"[" + std::string(negated ? "^" : "") + set + "]", "[" + std::string(negated ? "^" : "") + set + "]", false};
      }
      case 2:
        return {".", "[\\s\\S]", false};
      case 3: {  // a group of alternatives
        auto [g1, r1, n1] = sequence(depth + 1);
        auto [g2, r2, n2] = sequence(depth + 1);
        return {"(" + g1 + " | " + g2 + ")", "(?:" + r1 + "|" + r2 + ")", n1 || n2};
      }
      case 4: {  // a rule
        auto [g, r, n] = sequence(depth + 1);
        const std::string name = "r" + std::to_string(rules.size());
        rules.push_back(name + " ::= " + g);
        return {name, "(?:" + r + ")", n};
      }
      default: {  // a repetition
        auto [g, r, n] = atom(depth + 1);
        const int kind = pick(6);
        const int m = pick(3), k = m + pick(3);
        // (never x* of a nullable x: left recursion; the regex's quantified group in
        // (?:...): "x+?" is GBNF's optional x+, not ECMAScript's lazy x+)
        const std::string unit_gbnf = g, unit_regex = r;  // (a lambda cannot capture structured bindings in C++17)
        auto quantified = [&](const std::string& q, bool nullable) {
          return std::tuple<std::string, std::string, bool>{unit_gbnf + q, "(?:" + unit_regex + q + ")", nullable};
        };
        if (n && (kind == 0 || kind == 1 || kind == 4)) return quantified("?", true);
        switch (kind) {
          case 0: return quantified("*", true);
          case 1: return quantified("+", n);
          case 2: return quantified("?", true);
          case 3: return quantified("{" + std::to_string(m) + "}", n || m == 0);
          case 4: return quantified("{" + std::to_string(m) + ",}", n || m == 0);
          default: return quantified("{" + std::to_string(m) + "," + std::to_string(k) + "}", n || m == 0);
        }
      }
    }
  }
  std::tuple<std::string, std::string, bool> sequence(int depth) {
    std::string g, r;
    bool nullable = true;
    for (int i = 0, n = 1 + pick(3); i < n; ++i) {
      auto [ga, ra, na] = atom(depth);
      g += (i ? " " : "") + ga;
      r += ra;
      nullable = nullable && na;
    }
    return {g, r, nullable};
  }
};

}  // namespace

TEST_CASE("GBNF matcher: random regular grammars against std::regex", "[grammar]") {
  std::mt19937 rng(58);
  int grammars = 0, accepted = 0;
  for (int round = 0; round < 300; ++round) {
    RandomGrammar random{rng, {}};
    auto [g, r, n] = random.sequence(0);
    (void)n;
    std::string text = "root ::= " + g + "\n";
    for (const std::string& rule : random.rules) text += rule + "\n";
    auto parsed = parse_gbnf(text);
    INFO(text);
    REQUIRE(parsed);
    auto m = GbnfMatcher::create(std::move(parsed.value()));
    REQUIRE(m);
    const std::regex re(r, std::regex::ECMAScript);
    ++grammars;
    for (int s = 0; s < 60; ++s) {
      std::string candidate;
      for (int i = 0, len = random.pick(9); i < len; ++i) candidate += static_cast<char>('a' + random.pick(4));
      INFO(candidate);
      const bool expected = std::regex_match(candidate, re);
      CHECK(matches(m.value(), candidate) == expected);
      accepted += expected;
    }
  }
  CHECK(grammars == 300);
  CHECK(accepted > 500);  // the comparison saw both outcomes
}

namespace {

// allowed_tokens against feeding each token's bytes one at a time.
void check_masks(GbnfMatcher& m, const petrel::text::GbnfVocabulary& v, std::mt19937& rng, int states, size_t& allowed_seen) {
  std::vector<uint8_t> allowed(v.vocab_size);
  for (int s = 0; s < states; ++s) {
    auto count = m.allowed_tokens(v, allowed.data());
    REQUIRE(count);
    std::vector<uint8_t> by_stacks(v.vocab_size);
    auto count_by_stacks = m.allowed_tokens_by_stacks(v, by_stacks.data());
    REQUIRE(count_by_stacks);
    CHECK(count_by_stacks.value() == count.value());
    CHECK(by_stacks == allowed);
    const GbnfMatcher::State here = m.state();
    size_t brute = 0;
    std::vector<int32_t> possible;
    for (size_t id = 0; id < v.vocab_size; ++id) {
      const std::string_view bytes = v.token(static_cast<int32_t>(id));
      bool ok = false;
      if (!bytes.empty()) {
        auto taken = m.accept(bytes);
        REQUIRE(taken);
        ok = taken.value();
        m.set_state(here);
      }
      INFO("token " << id);
      REQUIRE(allowed[id] == (ok ? 1 : 0));
      brute += ok;
      if (ok) possible.push_back(static_cast<int32_t>(id));
    }
    CHECK(count.value() == brute);
    allowed_seen += brute;
    if (possible.empty()) break;
    auto taken = m.accept(v.token(possible[std::uniform_int_distribution<size_t>(0, possible.size() - 1)(rng)]));
    REQUIRE(taken);
    REQUIRE(taken.value());
  }
}

}  // namespace

TEST_CASE("GBNF token masks equal each token's bytes fed one at a time", "[grammar]") {
  std::mt19937 rng(7);
  // Tokens over bytes that make characters across tokens: é = C3 A9, 中 = E4 B8 AD, and
  // bytes no character has.
  const std::vector<std::string> pieces = {"a", "b", "{", "}", "\"", ":", ",", " ", "1", "\xc3", "\xa9", "\xe4",
                                           "\xb8", "\xad", "\xff", "\xc3\xa9", "\xe4\xb8\xad", "\\", "n", "0"};
  std::vector<std::string> tokens;
  std::vector<uint8_t> excluded;
  for (int i = 0; i < 600; ++i) {
    std::string t;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) t += pieces[rng() % pieces.size()];
    tokens.push_back(t);
    excluded.push_back(rng() % 50 == 0);
  }
  tokens.push_back("");  // empty: never allowed
  excluded.push_back(0);
  auto v = petrel::text::make_gbnf_vocabulary(tokens, excluded);
  REQUIRE(v);
  for (size_t id = 0; id < tokens.size(); ++id)
    CHECK(v.value().token(static_cast<int32_t>(id)) == (excluded[id] ? "" : tokens[id]));
  size_t seen = 0;
  for (const char* grammar : {kJsonGrammar, "root ::= ([ab] | \"\xc3\xa9\" | \"\xe4\xb8\xad\")* \"}\"",
                              "root ::= [^\\x00-\\x7f]{1,6} (\" \" | \"1\")+ \"\\\\n\"", "root ::= x\nx ::= \"{\" x? \"}\""}) {
    auto m = matcher_of(grammar);
    for (int run = 0; run < 6; ++run) {
      m = matcher_of(grammar);
      check_masks(m, v.value(), rng, 12, seen);
    }
  }
  CHECK(seen > 100);
}

TEST_CASE("GBNF token masks on Gemma 3's vocabulary", "[grammar]") {
  auto files = petrel::test::hf::fixture_files(petrel::test::fixture_dir() + "/hf_tokenizer/gemma3");
  if (!files) return;
  auto loaded = petrel::test::hf::load_fixture_tokenizer(petrel::test::fixture_dir() + "/hf_tokenizer/gemma3");
  REQUIRE(loaded);
  const petrel::text::HfTokenizer& tokenizer = *loaded->tokenizer;
  auto bytes = petrel::text::hf_token_bytes(tokenizer, tokenizer.vocab_size());
  REQUIRE(bytes);
  // The tokens' bytes are what decoding gives, byte-fallback pieces included.
  auto space = tokenizer.token_id("\xe2\x96\x81the");
  REQUIRE(space);
  CHECK(bytes.value().bytes[static_cast<size_t>(*space)] == " the");
  auto byte_token = tokenizer.token_id("<0xC3>");
  REQUIRE(byte_token);
  CHECK(bytes.value().bytes[static_cast<size_t>(*byte_token)] == "\xc3");
  CHECK(bytes.value().excluded[2] == 1);  // <bos>
  auto v = petrel::text::make_gbnf_vocabulary(bytes.value().bytes, bytes.value().excluded);
  REQUIRE(v);
  std::mt19937 rng(3);
  size_t seen = 0;
  auto m = matcher_of(kJsonGrammar);
  check_masks(m, v.value(), rng, 1, seen);  // the start: '{' and what begins with it
  m = matcher_of(kJsonGrammar);
  auto taken = m.accept("{\"name\": \"");
  REQUIRE(taken);
  REQUIRE(taken.value());
  check_masks(m, v.value(), rng, 2, seen);  // in a string: nearly every token
  CHECK(seen > 100000);
}

TEST_CASE("The tokens' bytes are what decoding each token gives", "[grammar][hf_tokenizer]") {
  for (const char* name : {"gemma3", "qwen3", "llama3"}) {
    const std::string dir = petrel::test::fixture_dir() + "/hf_tokenizer/" + name;
    if (!petrel::test::hf::fixture_files(dir)) return;
    auto loaded = petrel::test::hf::load_fixture_tokenizer(dir);
    REQUIRE(loaded);
    const petrel::text::HfTokenizer& tokenizer = *loaded->tokenizer;
    auto bytes = petrel::text::hf_token_bytes(tokenizer, tokenizer.vocab_size() + 3);
    REQUIRE(bytes);
    size_t compared = 0;
    for (size_t id = 0; id < tokenizer.vocab_size(); ++id) {
      const int32_t token = static_cast<int32_t>(id);
      INFO(name << " token " << id);
      CHECK(bytes.value().excluded[id] == (tokenizer.is_special(token) || bytes.value().bytes[id].empty() ? 1 : 0));
      if (bytes.value().excluded[id] || !petrel::detail::is_valid_utf8(bytes.value().bytes[id])) continue;
      auto decoded = tokenizer.decode_ids(&token, 1, true);  // whole characters decode as themselves
      REQUIRE(decoded);
      std::string expected = bytes.value().bytes[id];
      if (tokenizer.tables().clean_up_spaces) petrel::text::clean_up_tokenization(expected);  // Llama 3's
      CHECK(decoded.value() == expected);
      ++compared;
    }
    CHECK(compared > tokenizer.vocab_size() / 2);
    for (size_t id = tokenizer.vocab_size(); id < tokenizer.vocab_size() + 3; ++id) CHECK(bytes.value().excluded[id] == 1);
  }
}

TEST_CASE("Generation under a grammar follows it and ends with EOS", "[grammar][decoder_only]") {
  using namespace petrel;
  auto model = test::load_model(test::tiny_lm("chat", test::tiny_lm_chat_template()));
  auto generator = Generator::create(model);
  REQUIRE(generator);
  // Bounded: at most 3 + 4 x 4 + 1 characters, so a random model must reach EOS.
  const std::string grammar = "root ::= [a-z]{1,3} (\" \" word){0,4} \".\"\nword ::= [a-z] [a-z]? [a-z]?\n";
  const std::regex oracle("[a-z]{1,3}( [a-z]{1,3}){0,4}\\.");
  const auto& eos = model->info().lm.eos_ids;
  int outputs = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    GenerateOptions o;
    o.grammar = grammar;
    o.max_new_tokens = 40;
    o.do_sample = seed > 0;
    o.temperature = 1.5f;
    o.seed = seed;
    auto out = generator.value().generate_text("the user", o);
    REQUIRE(out);
    INFO(out.value().text);
    CHECK(out.value().ended_on_eos);
    REQUIRE_FALSE(out.value().ids.empty());
    CHECK(std::find(eos.begin(), eos.end(), out.value().ids.back()) != eos.end());
    CHECK(std::regex_match(out.value().text, oracle));
    ++outputs;
    // The ids path gives the same tokens, and so does the same call again (the compiled
    // grammar and its masks are kept by the Generator).
    const auto* tokenizer = dynamic_cast<const text::HfTokenizer*>(detail::ModelAccess::tokenizer(*model));
    REQUIRE(tokenizer != nullptr);
    auto prompt = tokenizer->encode_text("the user", true);
    REQUIRE(prompt);
    auto ids = generator.value().generate({prompt.value()}, o);
    REQUIRE(ids);
    CHECK(ids.value()[0].ids == out.value().ids);
    CHECK(ids.value()[0].ended_on_eos);
  }
  CHECK(outputs == 12);

  GenerateOptions bad;
  bad.grammar = "root ::= \"a\" |\n  oops";
  auto refused = generator.value().generate_text("the", bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == ErrorCode::kInvalidArgument);
  CHECK(refused.error().message == "grammar 2:3: rule 'oops' is used but never defined");
  GenerateOptions with_ignore;
  with_ignore.grammar = grammar;
  with_ignore.ignore_eos = true;
  CHECK_FALSE(generator.value().generate_text("the", with_ignore));
  // No token can make a character the tokenizer lacks.
  GenerateOptions impossible;
  impossible.grammar = "root ::= \"\xe4\xb8\xad\"";
  auto stuck = generator.value().generate_text("the", impossible);
  REQUIRE_FALSE(stuck);
  CHECK(stuck.error().message == "step 0: grammar: no token of the vocabulary can continue the output, and it is not complete");
}

TEST_CASE("GBNF: megabyte grammars parse in linear time and deep nesting is refused cleanly", "[.][linear]") {
  // 1 MB of rules, each referring to the next.
  std::string many = "root ::= r0\n";
  size_t i = 0;
  while (many.size() < (size_t{1} << 20)) {
    many += "r" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1) + " | [a-z] \"y\"\n";
    ++i;
  }
  many += "r" + std::to_string(i) + " ::= \"z\"\n";
  auto m = matcher_of(many);
  CHECK(matches(m, "xxxay"));
  CHECK_FALSE(matches(m, "xxxa"));
  // 1 MB of groups and repetitions in one rule, matched by as many characters.
  std::string groups = "root ::= ";
  size_t items = 0;
  for (; groups.size() < (size_t{1} << 20); ++items) groups += "(\"a\" | [b-c]{1,2}) ";
  auto g = matcher_of(groups + "\"d\"");
  CHECK(matches(g, std::string(items, 'a') + "d"));
  CHECK(matches(g, "bc" + std::string(items - 1, 'a') + "d"));
  CHECK_FALSE(matches(g, std::string(items - 1, 'a') + "d"));
  // Thousands of optional items in a row are as many live stacks at once: a clean error.
  std::string optional = "root ::= ";
  for (int k = 0; k < 5000; ++k) optional += "\"a\"? ";
  auto optional_grammar = parse_gbnf(optional);
  REQUIRE(optional_grammar);
  auto too_many = GbnfMatcher::create(std::move(optional_grammar.value()));
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().message ==
        "grammar: more than 4096 parser stacks at once (as many ways to go on: optional items in a row, or an ambiguous "
        "grammar)");
  // Groups 100,000 deep.
  const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  CHECK(refusal(deep) == "grammar 1:266: groups nested more than 256 deep");
  // A literal of a megabyte, matched whole.
  const std::string long_text(size_t{1} << 20, 'q');
  auto literal = matcher_of("root ::= \"" + long_text + "\"");
  CHECK(matches(literal, long_text));
  CHECK_FALSE(matches(literal, long_text.substr(1)));
  // Output nested deeper than the matcher's limit: a clean error.
  auto nest = matcher_of("root ::= \"(\" root? \")\"");
  auto taken = nest.accept(std::string(petrel::text::kMaxGbnfStackDepth + 10, '('));
  REQUIRE_FALSE(taken);
  CHECK(taken.error().message == "grammar: the output nests more than 4096 rules deep");
  // A grammar too large for the expansion limit.
  std::string wide = "root ::= ";
  for (int k = 0; k < 5000; ++k) wide += "\"a\"{1000} ";
  CHECK(refusal(wide).find("the grammar expands to more than 4194304 items") != std::string::npos);
}

TEST_CASE("petrel-run --grammar: the output follows the file's grammar, a bad grammar is refused by line", "[grammar][cli]") {
  using namespace petrel::test;
  if (!can_run_programs()) return;
  const std::string model = tiny_lm("chat", tiny_lm_chat_template());
  TempDir tmp;
  std::ofstream(tmp.file("words.gbnf")) << "root ::= [a-z]{1,3} (\" \" [a-z]{1,3}){0,4} \".\"\n";
  std::ofstream(tmp.file("bad.gbnf")) << "root ::= \"a\" |\n  oops";
  const std::regex oracle("[a-z]{1,3}( [a-z]{1,3}){0,4}\\.\n");
  const std::string run = petrel_run_command() + " " + model + " --max-new-tokens 40 --grammar ";
  int status = 0;
  for (const char* flags : {" --prompt 'the user'", " --prompt 'the user' --sample --seed 3 --temperature 1.5"}) {
    const std::string out = run_command(run + tmp.file("words.gbnf") + flags, &status, true);
    INFO(flags << ": " << out);
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(std::regex_match(out, oracle));
  }
  const std::string bad = run_command(run + tmp.file("bad.gbnf") + " --prompt 'the user'", &status);
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(bad.find("grammar 2:") != std::string::npos);
  const std::string missing = run_command(run + tmp.file("none.gbnf") + " --prompt 'the user'", &status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(missing.find("--grammar: cannot read") != std::string::npos);
}

TEST_CASE("C API: petrel_generate_options.grammar, and a struct from before it", "[grammar]") {
  using namespace petrel::test;
  const std::string path = tiny_lm("chat", tiny_lm_chat_template());
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  const std::regex oracle("[a-z]{1,3}( [a-z]{1,3}){0,4}\\.");
  petrel_generate_options o;
  petrel_generate_options_init(&o);
  o.max_new_tokens = 40;
  o.grammar = "root ::= [a-z]{1,3} (\" \" [a-z]{1,3}){0,4} \".\"";
  petrel_result* result = nullptr;
  REQUIRE(petrel_generate_text(session, "the user", &o, &result) == PETREL_OK);
  const std::string text = petrel_result_text(result, 0, 0);
  INFO(text);
  CHECK(std::regex_match(text, oracle));
  petrel_result_free(result);
  o.grammar = "root ::= \"a\" |\n  oops";
  CHECK(petrel_generate_text(session, "the user", &o, &result) == PETREL_INVALID_ARGUMENT);
  CHECK(std::string(petrel_last_error()).find("grammar 2:") != std::string::npos);
  // An app built before the field: its struct ends at stop_count, and no grammar is read.
  petrel_generate_options old;
  petrel_generate_options_init_sized(&old, offsetof(petrel_generate_options, grammar));
  old.max_new_tokens = 4;
  REQUIRE(petrel_generate_text(session, "the user", &old, &result) == PETREL_OK);
  petrel_result_free(result);
  petrel_session_free(session);
  petrel_model_free(model);
}

}  // namespace petrel_grammar_test
