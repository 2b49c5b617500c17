// Word alignments of a translation made through a pivot language, as bergamot-translator
// composes them (src/translator/response.cpp: remapAlignments, transferThroughCharacters).
//
// The first model translates source -> pivot, the second pivot -> target; each gives a
// soft alignment per sentence, P[t][s] = p(source token s | target token t). The two
// models tokenise the pivot text differently: the first hop's target tokens q (as its
// vocabulary decoded them) and the second hop's source tokens q' (the same sentences of
// the same text, encoded by the second model's vocabulary). For each target token t:
//
//   R[t][q] = sum over q' of  P2[t][q']                      when q and q' are the same bytes,
//                             |q ∩ q'| * P2[t][q'] / |q'|      otherwise (overlap in bytes),
//   walking q and q' together from the sentence's start (a two-pointer merge of the two
//   partitions: the token that ends first moves on, both when they end together);
//   q' tokens left over when q runs out (an EOS that did not meet the other's) give
//   P2[t][q'] / |Q| to every q;
//   out[t][s] = sum over q (ascending) of P1[q][s] * R[t][q]
//
// in float, in bergamot's order of additions, so the values are bergamot's bit for bit.
// Where bergamot's arithmetic is undefined this differs: two tokens that do not even touch
// (bergamot subtracts size_t and wraps) share 0 bytes here. An empty q' met by a
// different q gives 0 * P / 0 = NaN, as it does in bergamot.
//
// A matrix product: work is (target tokens) x (pivot tokens) x (source tokens) per
// sentence, refused beyond kMaxPivotMultiplyAdds; each matrix built holds at most
// kMaxPivotCells values (kOutOfMemory past it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "petrel/status.h"
#include "petrel/types.h"

namespace petrel::text {

// [target token][source token] = p(source token | target token); rows include EOS.
using SoftAlignment = std::vector<std::vector<float>>;

constexpr uint64_t kMaxPivotCells = uint64_t{1} << 24;
constexpr uint64_t kMaxPivotMultiplyAdds = uint64_t{1} << 32;

// R above (transferThroughCharacters): pivot_given_target re-expressed over the first
// hop's pivot tokens. pivot_as_target: the first hop's target tokens of the sentence;
// pivot_as_source: the second hop's source tokens; pivot_given_target: [t][q'].
Result<SoftAlignment> transfer_through_characters(const std::vector<TextRange>& pivot_as_target,
                                                  const std::vector<TextRange>& pivot_as_source,
                                                  const SoftAlignment& pivot_given_target);

// One sentence's composed alignment, [target token][source token]. source_given_pivot is
// the first hop's ([q][s], source_tokens columns), pivot_given_target the second's ([t][q']).
Result<SoftAlignment> compose_pivot_alignment(const std::vector<TextRange>& pivot_as_target,
                                              const std::vector<TextRange>& pivot_as_source,
                                              const SoftAlignment& source_given_pivot,
                                              const SoftAlignment& pivot_given_target, size_t source_tokens);

// Every sentence (remapAlignments): source is the first hop's source text, pivot_as_target
// its target, pivot_as_source the second hop's source (same text, same sentences).
Result<std::vector<SoftAlignment>> compose_pivot_alignments(const AnnotatedText& source,
                                                            const AnnotatedText& pivot_as_target,
                                                            const AnnotatedText& pivot_as_source,
                                                            const std::vector<SoftAlignment>& source_given_pivot,
                                                            const std::vector<SoftAlignment>& pivot_given_target);

// A sentence's token ranges as bergamot records them when the second model reads the
// pivot text (TextProcessor::processFromAnnotation; also how it records any source):
// its Annotation keeps only where each token begins, so token i runs to where token i+1
// begins, the last piece to its own end, then the EOS, an empty range at that end (at the
// sentence's end when there are no pieces). `pieces`: SentencePiece's byte ranges of the
// sentence's pieces, in order, as offsets into the whole text.
Result<std::vector<TextRange>> bergamot_token_ranges(const std::vector<TextRange>& pieces, TextRange sentence);

}  // namespace petrel::text
