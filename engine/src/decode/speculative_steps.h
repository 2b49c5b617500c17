// Speculative decoding for translation (decode/speculation.h has the idea): a StepModel
// for greedy search over ONE sentence that runs the decoder over a drafted run of
// positions at once (EncoderDecoder::decode_positions) and then answers the search's
// steps from those rows for as long as the search feeds the tokens the draft guessed.
// The search itself is unchanged: it chooses every token from logits computed as a plain
// step computes them, so the translation, its scores and its stream are the plain ones.
#pragma once

#include <cstdint>
#include <vector>

#include "decode/search.h"
#include "decode/speculation.h"
#include "models/encoder_decoder.h"

namespace petrel::decode {

// Where a translation's drafts come from.
class TranslationDrafter {
 public:
  virtual ~TranslationDrafter() = default;
  // Up to `limit` tokens continuing `inputs` (the decoder's inputs by position: the
  // start token, then the output so far), into `draft` (emptied first).
  virtual void propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) = 0;
};

// Prompt lookup over the source's ids and the output so far (a shared vocabulary copies
// names, numbers and placeholders from the source; any vocabulary, repeated segments
// of the output). `ngram` 0: none (every propose drafts nothing).
class TranslationLookup final : public TranslationDrafter {
 public:
  TranslationLookup(const std::vector<int32_t>& source, size_t ngram) : lookup_(ngram), sequence_(source), source_(source.size()), on_(ngram > 0) {}
  void propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) override;

 private:
  PromptLookup lookup_;
  std::vector<int32_t> sequence_;  // the source, then the inputs
  size_t source_;
  bool on_;
};

// A draft translation model with the verifier's vocabulary: it encodes the source itself
// and proposes its greedy tokens (bad words masked, the lowest id among ties), keeping
// its caches for the positions it shares with the last proposal.
class TranslationModelDraft final : public TranslationDrafter {
 public:
  TranslationModelDraft(const detail::ModelWeights& weights, const kernels::KernelTable& kernels,
                        threads::ThreadPool& pool);
  // A new sentence: encodes `source` (ids the draft's SourceReader reads as the verifier's
  // does) for up to max_steps positions, or reads `verifier_states` (the verifier's
  // encoder output for it alone) when given: a draft trained on the verifier's encoder.
  void start(const std::vector<int32_t>& source, size_t max_steps,
             const models::EncoderOutput* verifier_states = nullptr);
  void propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) override;
  size_t tokens_run() const { return tokens_run_; }

 private:
  const detail::ModelWeights& w_;
  models::EncoderDecoder graph_;
  layers::Workspace workspace_;
  models::EncoderOutput encoded_;
  models::DecoderState state_;
  models::OutputVocabulary output_;
  std::vector<float> logits_;
  std::vector<uint8_t> banned_;  // per output index: a bad word
  std::vector<int32_t> run_;     // the inputs the caches hold, by position
  bool usable_ = false;          // the sentence fits the draft's positions
  size_t tokens_run_ = 0;
};

// Prompt lookup first, the draft model where lookup finds nothing (either may be absent).
class CombinedDrafter final : public TranslationDrafter {
 public:
  CombinedDrafter(TranslationDrafter* first, TranslationDrafter* second) : first_(first), second_(second) {}
  void propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) override {
    draft.clear();
    if (first_ != nullptr) first_->propose(inputs, limit, draft);
    if (draft.empty() && second_ != nullptr) second_->propose(inputs, limit, draft);
  }

 private:
  TranslationDrafter *first_, *second_;
};

struct SpeculationCounts {
  size_t verifications = 0, drafted = 0, accepted = 0;
};

class SpeculativeSteps final : public StepModel {
 public:
  // `state` started for the sentence with max_draft + 1 rows (decode_positions' rows);
  // `max_steps`: the positions the search may run.
  SpeculativeSteps(const models::EncoderDecoder& graph, models::DecoderState& state, layers::Workspace& ws,
                   const models::OutputVocabulary& output, TranslationDrafter& drafter, size_t max_draft,
                   size_t max_steps);
  void step(const int32_t* tokens, size_t rows, size_t step, float* logits) override;
  void select(const size_t*, size_t, size_t) override {}  // one hypothesis: rows only end
  // The counts so far, the last verification's accepted tokens included.
  SpeculationCounts counts() const;

 private:
  const models::EncoderDecoder& graph_;
  models::DecoderState& state_;
  layers::Workspace& ws_;
  const models::OutputVocabulary& output_;
  TranslationDrafter& drafter_;
  DraftLength length_;
  size_t max_draft_, max_steps_;
  std::vector<int32_t> inputs_;  // the search's tokens by position
  std::vector<int32_t> rows_;    // the last run's inputs, from position first_
  std::vector<int32_t> draft_;
  size_t first_ = 0, used_ = 0;  // rows of the last run the search has taken
  std::vector<float> logits_;    // the last run's [rows, output]
  SpeculationCounts counts_;
};

}  // namespace petrel::decode
