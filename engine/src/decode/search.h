// Beam search with exact, reproducible rules; greedy decoding is beam width 1 (the
// same code path, so the two always agree). The search knows nothing of the model
// beyond StepModel: a step over rows of hypotheses, and a way to carry rows over.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "layers/aligned_vector.h"
#include "models/output_vocabulary.h"
#include "petrel/status.h"

namespace petrel::decode {

// The model side of a search. Row r of a step holds one hypothesis; the rows of
// sentence s's hypotheses form a block of `beam` rows, blocks in the order of the
// sentences still searching (finished sentences' rows are dropped).
class StepModel {
 public:
  virtual ~StepModel() = default;
  // Row r reads tokens[r] at position `step`; writes logits [rows, outputs].
  virtual void step(const int32_t* tokens, size_t rows, size_t step, float* logits) = 0;
  // Row r of the next step continues row parent[r] of this one (positions 0..step);
  // `rows` rows go on. Called only when some row moves or rows are dropped.
  virtual void select(const size_t* parent, size_t rows, size_t step) = 0;
  // With SearchOptions::alignment_width: before each step, where that step writes each
  // row's word alignment (row r at rows_by_width + r x width). A model without them
  // leaves it alone.
  virtual void align_into(float* rows_by_width) { (void)rows_by_width; }
};

// Sees the search step by step: for streaming output and for stopping early.
class SearchObserver {
 public:
  virtual ~SearchObserver() = default;
  // After each step, for each sentence still searching: its best live hypothesis so
  // far (`length` tokens; provisional under beam search, where a later step may
  // prefer another). Return false to stop the sentence now: its live hypotheses
  // finish as they would at the length limit.
  virtual bool on_step(size_t sentence, const int32_t* tokens, size_t length) = 0;
};

// When beam search stops for a sentence.
enum class BeamStop {
  // Hugging Face's default (transformers >= 4.50, early_stopping=False): go on while
  // the best live hypothesis, normalized by its current length, could beat the worst
  // of the beam's K finished ones; the finished set keeps the best K.
  kHeuristic,
  // As soon as K hypotheses have finished (early_stopping=True; CTranslate2).
  kFirstK,
};

struct SearchOptions {
  size_t beam = 1;
  size_t n_best = 1;
  size_t max_new_tokens = 1;  // >= 1
  // When given: sentence s generates at most (*sentence_max_new_tokens)[s] tokens (each
  // in 1..max_new_tokens), Marian's max-length-factor.
  const std::vector<size_t>* sentence_max_new_tokens = nullptr;
  size_t min_new_tokens = 0;  // EOS is not allowed before this many tokens
  double length_penalty = 1.0;
  BeamStop stop = BeamStop::kHeuristic;
  int32_t decoder_start_id = 0, eos_id = 0;
  // >= 0: this token is forced at the last allowed step (Hugging Face's
  // forced_eos_token_id), scored 0 like any forced token.
  int32_t forced_eos_id = -1;
  std::vector<int32_t> bad_word_ids;  // never generated
  // forced[s] (when given; may be empty): the tokens sentence s must start with. A
  // forced token scores 0, as under Hugging Face's forced-token logits processors
  // (which set its log-probability to 0), and is part of the output.
  const std::vector<std::vector<int32_t>>* forced = nullptr;
  SearchObserver* observer = nullptr;
  // > 0: each hypothesis carries the alignment row the model wrote at each of its steps
  // (StepModel::align_into), this many floats a row.
  size_t alignment_width = 0;
  // Each hypothesis carries the score of each of its tokens (Hypothesis::token_scores).
  bool token_scores = false;
  // Sentence s of this search is sentence first_sentence + s of the output vocabulary's
  // (its shortlist) and of error messages: a batch's inputs searched one at a time over
  // the batch's vocabulary, as speculative decoding does.
  size_t first_sentence = 0;
};

// What the search knew of one output token when it chose it.
struct TokenScore {
  float log_probability;  // over the allowed outputs (0 for a forced token)
  float logit;            // the model's output for it before the softmax (0 for a forced token)
};

struct Hypothesis {
  std::vector<int32_t> ids;  // without the start token and the final EOS
  double score;              // cumulative log-probability / length^alpha
  bool ended_on_eos;         // not at the length limit or stopped by the observer
  // With alignment_width: one row per step, ids.size() + ended_on_eos rows (EOS has one)
  // of alignment_width floats each.
  std::vector<float> alignment;
  // With token_scores: one per step, as the alignment rows.
  std::vector<TokenScore> token_scores;
};

struct SearchResult {
  // Per sentence, best first; empty when no token could be generated (every
  // candidate masked, e.g. min_new_tokens with a shortlist allowing only EOS).
  std::vector<std::vector<Hypothesis>> hypotheses;
  size_t steps = 0;  // decoder steps run
};

// Everything a search needs between steps, sized before the first step so the
// loop does not allocate.
struct SearchState {
  layers::AlignedVector<float> logits;
  std::vector<int32_t> tokens, history, new_history;
  std::vector<double> scores, new_scores;
  std::vector<size_t> parent, live, active, next_active;
  struct Candidate {
    double score;
    int32_t token;
    uint32_t hyp;
    float logit;  // the model's output for the token (0 when forced)
  };
  std::vector<Candidate> candidates;
  std::vector<size_t> bad_indices;  // output indices of the bad words
  std::vector<int32_t> top_ids;     // one hypothesis' best 2 x beam outputs
  std::vector<float> top_logits;
  // The best `beam` finished hypotheses of each sentence: tokens in a preallocated
  // arena, so finishing one allocates nothing.
  struct Finished {
    size_t length;
    double score;
    bool eos;  // stopped on EOS (not at the length limit or by the observer)
  };
  std::vector<std::vector<Finished>> finished;  // per sentence, in slot order
  std::vector<int32_t> finished_tokens;         // [sentence][slot][max_steps]
  // Alignments (SearchOptions::alignment_width = W): what each step's rows wrote
  // [max_steps][rows][W], the row each step's row continued [max_steps][rows], and the
  // finished hypotheses' rows, traced back at finishing [sentence][slot][max_steps][W].
  std::vector<float> step_alignments, finished_alignments;
  std::vector<size_t> step_parents;
  // Token scores (SearchOptions::token_scores): each row's, as its history
  // [rows][max_steps], and the finished hypotheses' [sentence][slot][max_steps].
  std::vector<TokenScore> score_history, new_score_history, finished_scores;
};

// The order candidates are visited in: higher score first, then lower token id,
// then lower hypothesis. A strict weak ordering for any scores: NaN ranks below
// every number (search stops with an error before NaN scores arise; see search()).
bool ranks_before(const SearchState::Candidate& a, const SearchState::Candidate& b);

// Decodes `sentences` sentences over `output` (the whole vocabulary or a batch's
// shortlist): log-softmax over each sentence's allowed outputs, then bad words (and
// EOS before min_new_tokens) are masked. Fails (kFormat) when a step's scores are
// not finite — NaN or infinite logits come from a corrupt model file — naming the
// sentence and the step.
Result<SearchResult> search(StepModel& model, size_t sentences, const models::OutputVocabulary& output,
                            const kernels::KernelTable& kernels, const SearchOptions& options, SearchState& state);

}  // namespace petrel::decode
