#include "convert/shortlist.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "convert/config_reader.h"
#include "convert/convert_error.h"
#include "convert/mapped_file.h"
#include "core/string_hash.h"

namespace petrel::convert {

ShortlistTable read_lexical_shortlist(const std::string& path, const std::vector<std::string>& vocab, uint32_t first,
                                      uint32_t best, int32_t eos_id) {
  std::ifstream in = open_regular_file(path, " the shortlist file");
  return read_lexical_shortlist(in, path, vocab, first, best, eos_id);
}

ShortlistTable read_lexical_shortlist(std::istream& in, const std::string& path, const std::vector<std::string>& vocab,
                                      uint32_t first, uint32_t best, int32_t eos_id) {
  detail::StringMap<std::string, int32_t> ids;
  ids.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], static_cast<int32_t>(i));

  ShortlistTable t;
  t.first = first;
  t.best = best;
  // Per source id: (probability, target); a pair seen twice keeps its larger probability.
  std::vector<std::vector<std::pair<float, int32_t>>> targets(vocab.size());
  std::string line, target, source, extra;
  while (std::getline(in, line)) {
    ++t.lines;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    double probability = 0;
    if (!(fields >> target >> source >> probability) || (fields >> extra))
      throw ConvertError(path + ":" + std::to_string(t.lines) + ": expected 'TARGET SOURCE PROBABILITY'");
    if (!(probability >= 0 && probability <= 1))
      throw ConvertError(path + ":" + std::to_string(t.lines) + ": probability " + std::to_string(probability) +
                         " is not in [0, 1]");
    auto s = ids.find(source), g = ids.find(target);
    if (source == "NULL" || target == "NULL" || s == ids.end() || g == ids.end()) {
      ++t.skipped;
      continue;
    }
    targets[static_cast<size_t>(s->second)].push_back({static_cast<float>(probability), g->second});
  }
  if (in.bad()) throw ConvertError(path + ": read error");

  t.offsets.push_back(0);
  std::vector<size_t> kept_for(vocab.size(), SIZE_MAX);  // target -> the source that kept it last
  for (size_t source_id = 0; source_id < targets.size(); ++source_id) {
    auto& list = targets[source_id];
    // Most likely first, ties by lower id; a target listed twice keeps its first
    // (most likely) entry.
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const size_t start = t.candidates.size();
    for (const auto& [probability, id] : list) {
      if (t.candidates.size() - start == best) break;
      if (kept_for[static_cast<size_t>(id)] == source_id) continue;
      kept_for[static_cast<size_t>(id)] = source_id;
      t.candidates.push_back(id);
    }
    t.offsets.push_back(static_cast<uint32_t>(t.candidates.size()));
  }
  for (uint32_t id = 0; id < first && id < vocab.size(); ++id) t.always.push_back(static_cast<int32_t>(id));
  if (std::find(t.always.begin(), t.always.end(), eos_id) == t.always.end()) t.always.push_back(eos_id);
  std::sort(t.always.begin(), t.always.end());
  return t;
}

// ---------------------------------------------------------------------------------------
// Marian's binary shortlist. Facts from browsermt/marian-dev (commit 2781d735):
//  * Layout (src/data/shortlist.h, BinaryShortlistGenerator::Header; shortlist.cpp,
//    BinaryShortlistGenerator::load(const void*, size_t, bool)): six u64 {magic
//    0xF11A48D5013417F5, checksum, firstNum, bestNum, wordToOffsetSize, shortListsSize},
//    then u64 wordToOffset[wordToOffsetSize], then u32 shortLists[shortListsSize], and
//    nothing else: load() requires the size to be exactly that. Little-endian: Marian
//    writes its structs from memory, and its targets (x86, ARM, WebAssembly) are LE.
//  * Checksum (load(), and import() writing it): util::hashMem<uint64_t, uint64_t> over
//    the file read as u64 words from firstNum on, (size - 16) / 8 words, so with an odd
//    shortListsSize the last u32 is not covered. hashMem (src/common/hash.h) folds each
//    word with boost's hash_combine, seed ^= hash(w) + 0x9e3779b9 + (seed << 6) +
//    (seed >> 2) from seed 0, and std::hash<uint64_t> is the identity with a 64-bit
//    size_t (libstdc++, libc++): what the 64-bit marian-conv that writes these files
//    computes. With a 32-bit size_t the hash differs (libc++ murmur2 in the WebAssembly
//    build, libstdc++ truncation), so there Marian's own check refuses these files.
//  * import() (marian-conv --shortlist) writes wordToOffsetSize = source vocabulary size
//    + 1 and each source id's at most bestNum most probable targets, sorted by id; and
//    generate() reads wordToOffset[srcIndex + 1] unchecked, so a shorter table would be
//    read out of bounds: we require exactly source_vocab + 1.
//  * generate() selects, per batch: target ids [0, firstNum) (capped at the target
//    vocabulary), each source token's list, and with a shared vocabulary the source ids
//    themselves (`if(shared_) trgTruthTable[srcIndex] = 1`). bergamot-translator passes
//    shared when the source and target Vocab are one object (src/translator/
//    translation_model.cpp, TranslationModel::TranslationModel; vocabs.h loads one file
//    or buffer once). We store that as each source id being a candidate of itself.
// What Marian additionally does that this table does not hold:
//  * generate() pads the selection to a multiple of 8 with the lowest unselected ids
//    >= firstNum (for intgemm's shapes), so Marian may also emit those tokens (Petrel's
//    decoder does it too when the file says so: Shortlist.pad_to_multiple);
//  * the selection is the union over the whole batch, so Firefox's output can depend
//    on batching; Petrel restricts each sentence to its own tokens' lists;
//  * it never adds EOS itself (id 0 is inside [0, firstNum) for SentencePiece vocabs);
//    our `always` adds eos_id.
// Where we are stricter or looser than Marian's contentCheck() (shortlist.cpp), which
// runs only when asked (bergamot's byte-array path: option check-bytearray, default
// false, so Firefox checks nothing): Marian also rejects an offset equal to
// shortListsSize before the last entry (so trailing empty lists), which we accept; it
// does not require offsets to be non-decreasing, lists to hold at most bestNum ids, or
// firstNum/bestNum to fit the vocabulary, which we do.
namespace {

constexpr uint64_t kBinaryShortlistMagic = 0xF11A48D5013417F5ull;
constexpr size_t kShortlistHeaderBytes = 6 * sizeof(uint64_t);

uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Marian's util::hashMem<uint64_t, uint64_t> over `words` little-endian u64 words.
uint64_t marian_hash_words(const uint8_t* p, size_t words) {
  uint64_t seed = 0;
  for (size_t i = 0; i < words; ++i) seed ^= load_u64(p + 8 * i) + 0x9e3779b9ull + (seed << 6) + (seed >> 2);
  return seed;
}

}  // namespace

bool is_binary_shortlist(const std::string& path) {
  struct stat st {};  // not a regular file (or none): the text reader says what it is
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::ifstream in(path, std::ios::binary);
  uint8_t magic[8];
  return in.read(reinterpret_cast<char*>(magic), sizeof magic) && load_u64(magic) == kBinaryShortlistMagic;
}

ShortlistTable read_binary_shortlist(const std::string& path, uint32_t source_vocab, uint32_t target_vocab,
                                     int32_t eos_id, bool shared_vocab) {
  MappedFile file(path);
  return read_binary_shortlist(file.data(), file.size(), path, source_vocab, target_vocab, eos_id, shared_vocab);
}

ShortlistTable read_binary_shortlist(const uint8_t* data, size_t size, const std::string& name, uint32_t source_vocab,
                                     uint32_t target_vocab, int32_t eos_id, bool shared_vocab) {
  auto fail = [&](const std::string& what) { throw ConvertError(name + ": " + what); };
  // The caller's facts, checked so that nothing below depends on them being sane.
  if (eos_id < 0 || static_cast<uint32_t>(eos_id) >= target_vocab)
    fail("eos_id " + std::to_string(eos_id) + " is not a target token id (target vocabulary of " +
         std::to_string(target_vocab) + ")");
  if (shared_vocab && source_vocab != target_vocab)
    fail("a shared vocabulary needs equal source and target sizes, got " + std::to_string(source_vocab) + " and " +
         std::to_string(target_vocab));

  if (size < sizeof(uint64_t) || load_u64(data) != kBinaryShortlistMagic)
    fail("not a binary shortlist: it does not start with the magic " + hex(kBinaryShortlistMagic));
  if (size < kShortlistHeaderBytes)
    fail("truncated: " + std::to_string(size) + " bytes, shorter than the " + std::to_string(kShortlistHeaderBytes) +
         "-byte header");
  const uint64_t checksum = load_u64(data + 8), first_num = load_u64(data + 16), best_num = load_u64(data + 24),
                 offsets_size = load_u64(data + 32), lists_size = load_u64(data + 40);

  // The declared sizes against the bytes there are, by division: a declared 2^60 can
  // neither overflow the arithmetic nor make us allocate anything.
  const uint64_t after_header = size - kShortlistHeaderBytes;
  if (offsets_size > after_header / sizeof(uint64_t))
    fail("truncated: header.wordToOffsetSize = " + std::to_string(offsets_size) +
         " offsets of 8 bytes do not fit in the " + std::to_string(after_header) + " bytes after the header");
  const uint64_t after_offsets = after_header - offsets_size * sizeof(uint64_t);
  if (lists_size > after_offsets / sizeof(uint32_t))
    fail("truncated: header.shortListsSize = " + std::to_string(lists_size) + " ids of 4 bytes do not fit in the " +
         std::to_string(after_offsets) + " bytes after the offsets");
  if (after_offsets != lists_size * sizeof(uint32_t))
    fail(std::to_string(after_offsets - lists_size * sizeof(uint32_t)) +
         " trailing bytes after the shortLists array (header.shortListsSize = " + std::to_string(lists_size) + ")");

  const uint64_t computed = marian_hash_words(data + 16, (size - 16) / sizeof(uint64_t));
  if (computed != checksum)
    fail("header.checksum = " + hex(checksum) + " does not match the content's " + hex(computed) +
         " (the file is corrupted)");

  if (offsets_size != uint64_t{source_vocab} + 1)
    fail("header.wordToOffsetSize = " + std::to_string(offsets_size) + ", expected the source vocabulary size + 1 = " +
         std::to_string(uint64_t{source_vocab} + 1));
  if (first_num > target_vocab)
    fail("header.firstNum = " + std::to_string(first_num) + " exceeds the target vocabulary (" +
         std::to_string(target_vocab) + " tokens)");
  if (best_num > target_vocab)
    fail("header.bestNum = " + std::to_string(best_num) + " exceeds the target vocabulary (" +
         std::to_string(target_vocab) + " tokens)");
  // Candidates are indexed by uint32 offsets; a shared vocabulary adds one per source id.
  const uint64_t max_candidates = lists_size + (shared_vocab ? source_vocab : 0);
  if (max_candidates > UINT32_MAX)
    fail("header.shortListsSize = " + std::to_string(lists_size) + " is more candidates than 32-bit offsets index");

  const uint8_t* offsets = data + kShortlistHeaderBytes;
  const uint8_t* lists = offsets + offsets_size * sizeof(uint64_t);
  if (load_u64(offsets) != 0) fail("wordToOffset[0] = " + std::to_string(load_u64(offsets)) + ", must be 0");
  const uint64_t last = load_u64(offsets + source_vocab * sizeof(uint64_t));
  if (last != lists_size)
    fail("wordToOffset[" + std::to_string(source_vocab) + "] = " + std::to_string(last) +
         ", must equal header.shortListsSize = " + std::to_string(lists_size));

  ShortlistTable t;
  t.first = static_cast<uint32_t>(first_num);
  t.best = static_cast<uint32_t>(best_num);
  t.offsets.reserve(size_t{source_vocab} + 1);
  t.candidates.reserve(static_cast<size_t>(max_candidates));
  t.offsets.push_back(0);
  std::vector<uint32_t> kept_for(target_vocab, UINT32_MAX);  // target -> the source that kept it last
  uint64_t begin = 0;
  for (uint32_t source = 0; source < source_vocab; ++source) {
    const uint64_t end = load_u64(offsets + (uint64_t{source} + 1) * sizeof(uint64_t));
    // With end <= last == lists_size (checked), the list lies inside shortLists.
    if (end < begin)
      fail("wordToOffset[" + std::to_string(uint64_t{source} + 1) + "] = " + std::to_string(end) +
           " decreases (wordToOffset[" + std::to_string(source) + "] = " + std::to_string(begin) + ")");
    if (end > lists_size)
      fail("wordToOffset[" + std::to_string(uint64_t{source} + 1) + "] = " + std::to_string(end) +
           " exceeds header.shortListsSize = " + std::to_string(lists_size));
    if (end - begin > best_num)
      fail("source id " + std::to_string(source) + " lists " + std::to_string(end - begin) +
           " targets, more than header.bestNum = " + std::to_string(best_num));
    const size_t start = t.candidates.size();
    for (uint64_t j = begin; j < end; ++j) {
      const uint32_t id = load_u32(lists + j * sizeof(uint32_t));
      if (id >= target_vocab)
        fail("shortLists[" + std::to_string(j) + "] = " + std::to_string(id) +
             " is not a target token id (target vocabulary of " + std::to_string(target_vocab) + ")");
      if (kept_for[id] == source) continue;  // listed twice
      kept_for[id] = source;
      t.candidates.push_back(static_cast<int32_t>(id));
    }
    if (shared_vocab && kept_for[source] != source) {
      // Before the first larger id, so that an ascending list (as Marian writes) stays so.
      auto at = std::find_if(t.candidates.begin() + static_cast<std::ptrdiff_t>(start), t.candidates.end(),
                             [&](int32_t id) { return static_cast<uint32_t>(id) > source; });
      t.candidates.insert(at, static_cast<int32_t>(source));
    }
    t.offsets.push_back(static_cast<uint32_t>(t.candidates.size()));
    begin = end;
  }
  for (uint32_t id = 0; id < t.first; ++id) t.always.push_back(static_cast<int32_t>(id));
  if (static_cast<uint32_t>(eos_id) >= t.first) t.always.push_back(eos_id);  // past [0, first): still sorted
  return t;
}

}  // namespace petrel::convert
