// Fuzz target: Marian's binary lexical shortlist (lex.*.s2t.bin) through the converter's
// reader (convert::read_binary_shortlist, the bytes overload). Two control bytes, then
// the file:
//   byte 0: bit 0 shared vocabulary; bit 1 write the correct checksum into the file
//           first (else almost every mutation stops at the checksum); bits 2-7 choose
//           eos_id (modulo the target vocabulary);
//   byte 1: target vocabulary size - 1 (separate vocabularies).
// The source vocabulary is the file's own wordToOffsetSize - 1 when that is below
// 2^16 (so mutated files get past the size check), else 7. A bad file must be refused
// with ConvertError; what is read must be a table the model loader accepts (ids in
// range, offsets non-decreasing, EOS always allowed) and keep the reader's promises
// (no duplicates in a list, at most bestNum (+1 when shared) per source, a shared
// vocabulary's source id among its own candidates). Any other exception, a crash or a
// sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "convert/convert_error.h"
#include "convert/shortlist.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_binary_shortlist: broken promise: %s\n", what);
  std::abort();
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Marian's checksum (util::hashMem<uint64_t, uint64_t> from firstNum on, whole words).
void write_checksum(std::vector<uint8_t>& file) {
  uint64_t seed = 0;
  for (size_t at = 16; at + 8 <= file.size(); at += 8)
    seed ^= load_u64(file.data() + at) + 0x9e3779b9ull + (seed << 6) + (seed >> 2);
  for (int i = 0; i < 8; ++i) file[8 + static_cast<size_t>(i)] = static_cast<uint8_t>(seed >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool shared = data[0] & 1, fix_checksum = data[0] & 2;
  std::vector<uint8_t> file(data + 2, data + size);
  if (fix_checksum && file.size() >= 16) write_checksum(file);

  uint32_t source_vocab = 7;
  if (file.size() >= 48) {
    const uint64_t declared = load_u64(file.data() + 32);
    if (declared >= 1 && declared - 1 < (1u << 16)) source_vocab = static_cast<uint32_t>(declared - 1);
  }
  const uint32_t target_vocab = shared ? std::max<uint32_t>(source_vocab, 1) : 1u + data[1];
  const auto eos_id = static_cast<int32_t>((data[0] >> 2) % target_vocab);

  petrel::convert::ShortlistTable t;
  try {
    // nullptr for an empty file, as MappedFile gives it.
    t = petrel::convert::read_binary_shortlist(file.empty() ? nullptr : file.data(), file.size(), "fuzz.bin",
                                               source_vocab, target_vocab, eos_id, shared);
  } catch (const petrel::convert::ConvertError&) {
    return 0;
  }
  const auto n = static_cast<int32_t>(target_vocab);
  require(t.first <= target_vocab && t.best <= target_vocab, "firstNum and bestNum within the vocabulary");
  require(t.offsets.size() == size_t{source_vocab} + 1 && t.offsets[0] == 0, "one offset per source token, from 0");
  require(t.offsets.back() == t.candidates.size(), "offsets end at the candidates' end");
  std::vector<uint32_t> seen(target_vocab, UINT32_MAX);
  for (uint32_t s = 0; s < source_vocab; ++s) {
    require(t.offsets[s] <= t.offsets[s + 1], "offsets non-decreasing");
    require(t.offsets[s + 1] - t.offsets[s] <= uint64_t{t.best} + (shared ? 1 : 0), "at most best per source");
    bool self = false;
    for (uint32_t j = t.offsets[s]; j < t.offsets[s + 1]; ++j) {
      const int32_t id = t.candidates[j];
      require(id >= 0 && id < n, "candidates are target token ids");
      require(seen[static_cast<uint32_t>(id)] != s, "no target twice in one list");
      seen[static_cast<uint32_t>(id)] = s;
      self |= static_cast<uint32_t>(id) == s;
    }
    require(!shared || self, "with a shared vocabulary a source id is its own candidate");
  }
  require(std::is_sorted(t.always.begin(), t.always.end()) &&
              std::adjacent_find(t.always.begin(), t.always.end()) == t.always.end(),
          "always-allowed tokens sorted, unique");
  require(t.always.size() == t.first + (static_cast<uint32_t>(eos_id) >= t.first ? 1u : 0u),
          "always: [0, firstNum) and EOS");
  bool eos = false;
  for (int32_t id : t.always) {
    require(id >= 0 && id < n, "always-allowed tokens are target token ids");
    eos |= id == eos_id;
  }
  require(eos, "EOS is always allowed");
  return 0;
}
