// The rows of the output projection a batch decodes over: the whole vocabulary, or
// (with a lexical shortlist) the union of its sentences' shortlists gathered into a
// compact matrix. Each sentence still sees only its own shortlist, so results never
// depend on how inputs are batched.
#pragma once

#include <cstdint>
#include <vector>

#include "format/weights.h"

namespace petrel::models {

class OutputVocabulary {
 public:
  // The whole vocabulary: output index i is token i.
  void use_all(const detail::ModelWeights& w);
  // Sentence s may produce: the shortlist's `always` ids, the candidates of each of
  // its source tokens, and the bad-word ids (masked later, as in the full case: they
  // take part in the normalisation). `w.shortlist` must be present.
  void use_shortlist(const detail::ModelWeights& w, const std::vector<std::vector<int32_t>>& batch);
  // The same with each sentence's allowed ids given (shortlist_tokens' results; sentences
  // may share one: BatchOptions::shortlist_of_input).
  void use_shortlist_sets(const detail::ModelWeights& w, const std::vector<const std::vector<int32_t>*>& allowed);
  // What a sentence whose source tokens are `source` may produce, sorted (`w.shortlist` present).
  static std::vector<int32_t> shortlist_tokens(const detail::ModelWeights& w, const std::vector<int32_t>& source);

  size_t size() const { return size_; }
  int32_t token(size_t index) const { return ids_.empty() ? static_cast<int32_t>(index) : ids_[index]; }
  static constexpr size_t kAbsent = SIZE_MAX;
  size_t index_of(int32_t token) const;  // kAbsent if not an output
  // Which output indices sentence s may produce (1 = allowed); nullptr: all of them.
  const uint8_t* allowed(size_t sentence) const {
    return allowed_.empty() ? nullptr : &allowed_[sentence * size_];
  }
  const detail::Matrix& projection() const { return projection_; }
  const float* bias() const { return bias_; }

 private:
  size_t size_ = 0;
  std::vector<int32_t> ids_;       // sorted output index -> token id; empty: identity
  std::vector<uint8_t> allowed_;   // [sentences][size]; empty: everything allowed
  detail::Matrix projection_;
  const float* bias_ = nullptr;
  // Storage of the gathered rows (64-byte aligned inside `data_`).
  std::vector<uint8_t> data_;
  std::vector<float> scales_, gathered_bias_;
  std::vector<int32_t> row_sums_;
  std::vector<uint8_t> block_scales_;
};

}  // namespace petrel::models
