// Fuzz target: GBNF grammars (text/gbnf.h) and their matcher (text/gbnf_matcher.h). The
// input is a grammar and an output: two bytes (little-endian) give the grammar's length
// (taken modulo what follows plus one), then the grammar, then the output's bytes.
// parse_gbnf must accept or refuse the grammar with kInvalidArgument and a "grammar
// line:column: " message (kOutOfMemory aside); a compiled grammar's matcher takes the
// output byte by byte, and a refused byte must leave the state as it was; at every step
// the token mask over a small vocabulary must equal each token's bytes fed one at a time.
// A limit reached is an error, never a crash. Anything else, a crash, a hang or a
// sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/gbnf.h"
#include "text/gbnf_matcher.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz target: broken promise: %s\n", what);
  std::abort();
}

const petrel::text::GbnfVocabulary& vocabulary() {
  static const petrel::text::GbnfVocabulary v = [] {
    const std::vector<std::string> tokens = {"a", "b", "ab", "{", "}", "\"", "\\", " ", "0", "12", "\xc3", "\xa9",
                                             "\xc3\xa9", "\xe4\xb8", "\xad", "\xe4\xb8\xad", "\xff", "x\"", "[", "]", ""};
    auto made = petrel::text::make_gbnf_vocabulary(tokens, std::vector<uint8_t>(tokens.size(), 0));
    require(made.has_value(), "the vocabulary is made");
    return made.value();
  }();
  return v;
}

void check_mask(petrel::text::GbnfMatcher& m) {
  const petrel::text::GbnfVocabulary& v = vocabulary();
  std::vector<uint8_t> allowed(v.vocab_size);
  auto count = m.allowed_tokens(v, allowed.data());
  if (!count) return;  // a limit: an error is the promise
  const petrel::text::GbnfMatcher::State here = m.state();
  for (size_t id = 0; id < v.vocab_size; ++id) {
    const std::string_view bytes = v.token(static_cast<int32_t>(id));
    bool ok = false;
    if (!bytes.empty()) {
      auto taken = m.accept(bytes);
      if (!taken) return;
      ok = taken.value();
      m.set_state(here);
    }
    require(allowed[id] == (ok ? 1 : 0), "the mask is each token's bytes fed one at a time");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t rest = size - 2;
  const size_t grammar_size = (static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8) % (rest + 1);
  const std::string_view grammar(reinterpret_cast<const char*>(data) + 2, grammar_size);
  const std::string_view output(reinterpret_cast<const char*>(data) + 2 + grammar_size, rest - grammar_size);

  auto parsed = petrel::text::parse_gbnf(grammar);
  if (!parsed) {
    const petrel::Error& e = parsed.error();
    require(e.code == petrel::ErrorCode::kInvalidArgument || e.code == petrel::ErrorCode::kOutOfMemory,
            "a refused grammar is kInvalidArgument");
    require(e.message.compare(0, 8, "grammar ") == 0 || e.message.compare(0, 9, "grammar: ") == 0,
            "a refusal names the grammar's line:column");
    return 0;
  }
  auto matcher = petrel::text::GbnfMatcher::create(std::move(parsed.value()));
  if (!matcher) return 0;
  petrel::text::GbnfMatcher& m = matcher.value();
  check_mask(m);
  for (size_t i = 0; i < output.size() && i < 256; ++i) {
    const petrel::text::GbnfMatcher::State before = m.state();
    auto taken = m.accept(static_cast<uint8_t>(output[i]));
    if (!taken) return 0;
    if (!taken.value()) {
      require(m.state().stacks == before.stacks && m.state().partial.need == before.partial.need,
              "a refused byte leaves the state as it was");
      continue;
    }
    if ((i & 7) == 0) check_mask(m);
  }
  return 0;
}
