// Speculative decoding's drafts (Leviathan et al. 2023; transformers' assisted and prompt
// lookup decoding): something cheaper than the model proposes the next tokens, one
// forward of the model over all of them checks them, and the model's own choices decide
// what is kept, so the output is the one the model gives alone.
//
// Drafts here are deterministic (a continuation found in the text, or a draft model's
// greedy tokens). The verifier then needs no probabilities of the draft: it chooses each
// position's token exactly as the plain loop does (greedy, or a draw from the model's
// distribution with the same random numbers) and keeps the draft while they agree. That
// is the standard rejection scheme with the draft's distribution one-hot (accept token d
// with probability p(d); on rejection draw from p without d), and it gives the same ids
// as generation without a draft, for greedy decoding and for seeded sampling alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "layers/layers.h"
#include "models/decoder_only.h"

namespace petrel::decode {

// Prompt lookup: the tokens that followed the latest earlier occurrence of the sequence's
// last n tokens (n from `ngram` down to 1). Each position is indexed once, as the
// sequence grows (O(ngram^2) per token): finding a match costs the same at any length.
class PromptLookup {
 public:
  explicit PromptLookup(size_t ngram) : ngram_(ngram), last_(ngram) {}

  // Up to `limit` tokens continuing `sequence` (which only grows between calls), into
  // `draft` (emptied first; left empty when nothing matches).
  void propose(const std::vector<int32_t>& sequence, size_t limit, std::vector<int32_t>& draft);

 private:
  // Indexes the n-grams that end just before each position p < `end` (p: where their
  // continuation starts).
  void index(const std::vector<int32_t>& sequence, size_t end);

  size_t ngram_;
  size_t indexed_ = 1;  // positions 1..indexed_-1 are indexed
  std::vector<std::unordered_map<uint64_t, uint32_t>> last_;  // [n - 1]: hash of an n-gram -> the position after its latest occurrence
};

// A draft language model with the verifier's vocabulary: greedy tokens (the lowest id
// among ties) from its own KV caches, which follow the verified sequence (what it shares
// with the last proposal stays; the rest is rewound and run).
class ModelDraft {
 public:
  ModelDraft(const detail::ModelWeights& weights, const kernels::KernelTable& kernels, threads::ThreadPool& pool)
      : graph_(weights, kernels, pool) {}

  // A new sequence of at most `max_positions` positions.
  void start(size_t max_positions);
  // Up to `limit` tokens continuing `sequence`, into `draft` (emptied first).
  void propose(const std::vector<int32_t>& sequence, size_t limit, std::vector<int32_t>& draft);
  // The draft's tokens run so far (its forwards' rows).
  size_t tokens_run() const { return tokens_run_; }

 private:
  models::DecoderOnly graph_;
  models::LmState state_;
  layers::Workspace workspace_;
  std::vector<float> logits_;
  std::vector<int32_t> cached_;  // the tokens in the draft's caches
  size_t max_positions_ = 0;
  size_t tokens_run_ = 0;
};

// How many tokens to draft next, from how the last drafts fared (transformers' heuristic
// for assisted generation, with a pause): all accepted, two more; some, one fewer (at
// least one); none, one fewer down to none, after which drafting waits a number of tokens
// that doubles each time it comes back to none (up to kMaxPause) before it tries one
// token again. A model whose drafts are never right then runs almost as without them.
class DraftLength {
 public:
  static constexpr size_t kMaxPause = 64;

  explicit DraftLength(size_t max) : max_(max), length_(max < 4 ? max : 4) {}
  // The length to draft now (0: a plain step).
  size_t next();
  // The draft just verified: `drafted` tokens proposed, `accepted` kept.
  void update(size_t drafted, size_t accepted);

 private:
  size_t max_, length_;
  size_t pause_ = 0, wait_ = 0;  // the current pause's length, and the plain steps left in it
};

}  // namespace petrel::decode
