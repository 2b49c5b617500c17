// Beam search with the exact, reproducible rules of the runtime issue; greedy
// decoding is beam width 1 (the same code path, so the two always agree).
#pragma once

#include <cstdint>
#include <vector>

#include "models/encoder_decoder.h"

namespace petrel::decode {

struct SearchOptions {
  size_t beam = 1;
  size_t n_best = 1;
  size_t max_new_tokens = 1;  // >= 1, <= max_positions
  size_t min_new_tokens = 0;  // EOS is not allowed before this many tokens
  double length_penalty = 1.0;
  DType cache_type = DType::kF32;  // the decoder's K/V caches: f32 or f16
};

struct Hypothesis {
  std::vector<int32_t> ids;  // without the start token and the final EOS
  double score;              // cumulative log-probability / length^alpha
};

struct SearchResult {
  std::vector<std::vector<Hypothesis>> hypotheses;  // per sentence, best first
  size_t steps = 0;                                 // decoder steps run
};

// Everything a search needs between steps, sized before the first step so the
// loop does not allocate.
struct SearchState {
  models::DecoderState decoder;
  layers::AlignedVector<float> logits;
  std::vector<int32_t> tokens, history, new_history;
  std::vector<double> scores, new_scores;
  std::vector<size_t> parent, live;
  struct Candidate {
    double score;
    int32_t token;
    uint32_t hyp;
  };
  std::vector<Candidate> candidates;
  std::vector<size_t> bad_indices;  // output indices of the bad words
  std::vector<int32_t> top_ids;      // one hypothesis' best 2 x beam outputs
  std::vector<float> top_logits;
  // Finished hypotheses, at most kFinishedPerBeam x beam per sentence: tokens in
  // a preallocated arena, so finishing one allocates nothing.
  struct Finished {
    size_t length;
    double score;
  };
  std::vector<std::vector<Finished>> finished;  // per sentence
  std::vector<int32_t> finished_tokens;         // [sentence][slot][max_steps]
};

// Decodes over `output` (the whole vocabulary or a batch's shortlist): log-softmax
// over each sentence's allowed outputs, then bad words (and EOS before
// min_new_tokens) are masked.
SearchResult search(const models::EncoderDecoder& model, const models::EncoderOutput& encoded,
                    const models::OutputVocabulary& output, const SearchOptions& options, SearchState& state,
                    layers::Workspace& ws);

}  // namespace petrel::decode
