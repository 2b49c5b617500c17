// Lexical shortlists for petrel-convert --shortlist: Marian's lexical table text
// format (as `extract_lex` writes lex.s2t), one "TARGET SOURCE PROBABILITY" per line,
// and Marian's binary shortlist (`marian-conv --shortlist`, the lex.*.s2t.bin files
// Firefox Translations ships).
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace petrel::convert {

struct ShortlistTable {
  std::vector<int32_t> always;      // target ids [0, first) plus EOS, sorted
  std::vector<uint32_t> offsets;    // [vocab + 1]: CSR over source ids
  std::vector<int32_t> candidates;  // per source id: its `best` targets, most likely first (text);
                                    // in the file's order, ascending as Marian writes it (binary)
  uint32_t first = 0, best = 0;
  size_t lines = 0, skipped = 0;    // skipped: NULL alignments and tokens not in the vocabulary
};

// `vocab` maps ids to tokens (source and target share it). Throws ConvertError naming
// the file and line for a malformed line or a probability outside [0, 1].
ShortlistTable read_lexical_shortlist(const std::string& path, const std::vector<std::string>& vocab, uint32_t first,
                                      uint32_t best, int32_t eos_id);
// The same from a stream; `name` names it in errors.
ShortlistTable read_lexical_shortlist(std::istream& in, const std::string& name, const std::vector<std::string>& vocab,
                                      uint32_t first, uint32_t best, int32_t eos_id);

// Marian's binary shortlist (marian-dev src/data/shortlist.h, BinaryShortlistGenerator).
// `source_vocab`/`target_vocab` are the model's vocabulary sizes; `shared_vocab`: source and
// target use one vocabulary (then each source id is also a candidate of itself, as Marian
// selects it). The file is untrusted: every inconsistency is a ConvertError naming the file
// and the field or index. Time and memory are linear in the file size and the vocabularies.
ShortlistTable read_binary_shortlist(const std::string& path, uint32_t source_vocab, uint32_t target_vocab,
                                     int32_t eos_id, bool shared_vocab);
// The same from bytes; `name` names them in errors.
ShortlistTable read_binary_shortlist(const uint8_t* data, size_t size, const std::string& name, uint32_t source_vocab,
                                     uint32_t target_vocab, int32_t eos_id, bool shared_vocab);
// Whether the file starts with the binary shortlist's magic (what Marian's
// isBinaryShortlist tests: no text file starts with it). False if it cannot be read.
bool is_binary_shortlist(const std::string& path);

}  // namespace petrel::convert
