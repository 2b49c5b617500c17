#include "decode/speculative_steps.h"

#include <algorithm>

namespace petrel::decode {

void TranslationLookup::propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) {
  draft.clear();
  if (!on_) return;
  // The inputs only grow within a sentence (one hypothesis): append what is new.
  sequence_.insert(sequence_.end(), inputs.begin() + static_cast<std::ptrdiff_t>(sequence_.size() - source_), inputs.end());
  lookup_.propose(sequence_, limit, draft);
}

TranslationModelDraft::TranslationModelDraft(const detail::ModelWeights& weights, const kernels::KernelTable& kernels,
                                             threads::ThreadPool& pool)
    : w_(weights), graph_(weights, kernels, pool) {
  output_.use_all(weights);
  logits_.resize(output_.size());
  banned_.assign(output_.size(), 0);
  for (const int32_t id : weights.info->bad_word_ids)
    if (id >= 0 && static_cast<size_t>(id) < banned_.size()) banned_[static_cast<size_t>(id)] = 1;
}

void TranslationModelDraft::start(const std::vector<int32_t>& source, size_t max_steps,
                                  const models::EncoderOutput* verifier_states) {
  // The draft's own positions bound what it reads and writes (a draft may have fewer than
  // the verifier): an input its encoder cannot read is not drafted for.
  const ModelInfo& info = *w_.info;
  run_.clear();
  const models::SourceReader reader(info);
  usable_ = verifier_states != nullptr ||
            (reader.tokens_read(source) > 0 && reader.positions(source) <= info.max_positions);
  if (!usable_) return;
  max_steps = std::min<size_t>(max_steps, info.max_positions);
  if (verifier_states == nullptr) graph_.encode({source}, encoded_, workspace_);
  graph_.start_decoding(verifier_states != nullptr ? *verifier_states : encoded_, {0}, max_steps, DType::kF32, state_,
                        workspace_);
}

void TranslationModelDraft::propose(const std::vector<int32_t>& inputs, size_t limit, std::vector<int32_t>& draft) {
  draft.clear();
  if (!usable_ || inputs.empty() || limit == 0) return;
  if (inputs.size() > state_.max_steps) return;
  // The caches keep the positions whose inputs are the same (one row: its slots are its
  // positions); at least the last input runs, its logits giving the first draft token.
  size_t common = 0;
  const size_t most = std::min(run_.size(), inputs.size() - 1);
  while (common < most && run_[common] == inputs[common]) ++common;
  run_.resize(common);
  state_.slots = common;
  auto run = [&](int32_t token) {
    graph_.decode_step(&token, 1, run_.size(), state_, workspace_, output_, logits_.data());
    run_.push_back(token);
    ++tokens_run_;
  };
  for (size_t p = common; p < inputs.size(); ++p) run(inputs[p]);
  for (;;) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < logits_.size(); ++i)
      if (!banned_[i] && (best == SIZE_MAX || logits_[i] > logits_[best])) best = i;
    if (best == SIZE_MAX) return;
    draft.push_back(output_.token(best));
    if (draft.size() == limit || run_.size() >= state_.max_steps) return;
    run(draft.back());
  }
}

SpeculativeSteps::SpeculativeSteps(const models::EncoderDecoder& graph, models::DecoderState& state,
                                   layers::Workspace& ws, const models::OutputVocabulary& output,
                                   TranslationDrafter& drafter, size_t max_draft, size_t max_steps)
    : graph_(graph), state_(state), ws_(ws), output_(output), drafter_(drafter), length_(max_draft),
      max_draft_(max_draft), max_steps_(max_steps) {
  logits_.resize((max_draft + 1) * output.size());
}

void SpeculativeSteps::step(const int32_t* tokens, size_t rows, size_t step, float* logits) {
  (void)rows;  // one hypothesis
  const size_t width = output_.size();
  inputs_.resize(step);
  inputs_.push_back(tokens[0]);
  // The search goes on as the draft guessed: the next row is already computed.
  if (!rows_.empty() && step == first_ + used_ && used_ < rows_.size() && rows_[used_] == tokens[0]) {
    std::copy_n(&logits_[used_ * width], width, logits);
    ++used_;
    return;
  }
  if (rows_.size() > 1) length_.update(rows_.size() - 1, used_ - 1);
  counts_.accepted += rows_.empty() ? 0 : used_ - 1;
  // The row holding the recurrent state after position step - 1 (0 before the first run).
  const size_t cell_row = rows_.empty() ? 0 : step - 1 - first_;
  size_t limit = std::min(length_.next(), max_draft_);
  limit = std::min(limit, max_steps_ - 1 - std::min(max_steps_ - 1, step));
  draft_.clear();
  if (limit > 0) drafter_.propose(inputs_, limit, draft_);
  rows_.assign(1, tokens[0]);
  rows_.insert(rows_.end(), draft_.begin(), draft_.end());
  first_ = step;
  graph_.decode_positions(rows_.data(), rows_.size(), step, cell_row, state_, ws_, output_, logits_.data());
  std::copy_n(logits_.data(), width, logits);
  used_ = 1;
  if (!draft_.empty()) {
    ++counts_.verifications;
    counts_.drafted += draft_.size();
  }
}

SpeculationCounts SpeculativeSteps::counts() const {
  SpeculationCounts c = counts_;
  if (!rows_.empty()) c.accepted += used_ - 1;
  return c;
}

}  // namespace petrel::decode
