// Lexical shortlists for petrel-convert --shortlist: Marian's lexical table text
// format (as `extract_lex` writes lex.s2t), one "TARGET SOURCE PROBABILITY" per line.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace petrel::convert {

struct ShortlistTable {
  std::vector<int32_t> always;      // target ids [0, first) plus EOS, sorted
  std::vector<uint32_t> offsets;    // [vocab + 1]: CSR over source ids
  std::vector<int32_t> candidates;  // per source id: its `best` targets, most likely first
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

}  // namespace petrel::convert
