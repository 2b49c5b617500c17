// Fuzz target: a lexical shortlist (Marian's lex.s2t text) against a fixed vocabulary,
// through the converter's reader (convert::read_lexical_shortlist). The first two
// bytes choose --shortlist-first (0..255) and --shortlist-best (1..256); the rest is
// the file. A bad file must be refused with ConvertError; what is read must be a
// table the model loader accepts (ids in range, offsets non-decreasing, EOS always
// allowed). Any other exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert_error.h"
#include "convert/shortlist.h"

namespace {

// The oracle fixture's vocabulary ("</s>", "w1".."w46", "<pad>") plus multi-byte tokens.
const std::vector<std::string>& vocabulary() {
  static const std::vector<std::string> vocab = [] {
    std::vector<std::string> v = {"</s>"};
    for (int i = 1; i <= 46; ++i) v.push_back("w" + std::to_string(i));
    v.insert(v.end(), {"<pad>", "\xe2\x96\x81Haus", "\xc3\x9f", "NULL"});
    return v;
  }();
  return vocab;
}

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_shortlist: broken promise: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t first = data[0], best = 1u + data[1];
  const std::vector<std::string>& vocab = vocabulary();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data + 2), size - 2));
  petrel::convert::ShortlistTable t;
  try {
    t = petrel::convert::read_lexical_shortlist(in, "fuzz.s2t", vocab, first, best, /*eos_id=*/0);
  } catch (const petrel::convert::ConvertError&) {
    return 0;
  }
  const auto n = static_cast<int32_t>(vocab.size());
  require(t.offsets.size() == vocab.size() + 1 && t.offsets[0] == 0, "one offset per source token, from 0");
  for (size_t s = 0; s < vocab.size(); ++s)
    require(t.offsets[s] <= t.offsets[s + 1] && t.offsets[s + 1] - t.offsets[s] <= best, "at most best per source");
  require(t.offsets.back() == t.candidates.size(), "offsets end at the candidates' end");
  for (int32_t id : t.candidates) require(id >= 0 && id < n, "candidates are token ids");
  bool eos = false;
  for (int32_t id : t.always) {
    require(id >= 0 && id < n, "always-allowed tokens are token ids");
    eos |= id == 0;
  }
  require(eos, "EOS is always allowed");
  return 0;
}
