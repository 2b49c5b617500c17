#include "models/output_vocabulary.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace petrel::models {

void OutputVocabulary::use_all(const detail::ModelWeights& w) {
  size_ = w.output_proj.rows;
  ids_.clear();
  allowed_.clear();
  projection_ = w.output_proj;
  bias_ = w.final_logits_bias;
}

void OutputVocabulary::use_shortlist(const detail::ModelWeights& w, const std::vector<std::vector<int32_t>>& batch) {
  const detail::Shortlist& list = w.shortlist;
  const std::vector<int32_t>& bad = w.info->bad_word_ids;
  auto allowed_tokens = [&](const std::vector<int32_t>& source, std::vector<int32_t>& out) {
    out.assign(list.always, list.always + list.always_size);
    out.insert(out.end(), bad.begin(), bad.end());
    for (int32_t s : source)
      out.insert(out.end(), list.candidates + list.offsets[s], list.candidates + list.offsets[s + 1]);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  };

  std::vector<std::vector<int32_t>> per_sentence(batch.size());
  ids_.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    allowed_tokens(batch[s], per_sentence[s]);
    ids_.insert(ids_.end(), per_sentence[s].begin(), per_sentence[s].end());
  }
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  size_ = ids_.size();
  allowed_.clear();
  if (batch.size() > 1) {
    allowed_.assign(batch.size() * size_, 0);
    for (size_t s = 0; s < batch.size(); ++s)
      for (int32_t t : per_sentence[s]) allowed_[s * size_ + index_of(t)] = 1;
  }

  // Gather the rows into a matrix of the same dtype and layout; packed rows are
  // strided (groups of kInt8Group int8 columns, or single wider elements).
  const detail::Matrix& src = w.output_proj;
  detail::Matrix& dst = projection_;
  dst = src;
  dst.rows = size_;
  const bool packed = src.layout == detail::Layout::kPanel16;
  const size_t stored_rows = packed ? detail::round_up(size_, detail::kPanelRows) : size_;
  const size_t esize = src.element_size(), cols = src.stored_cols();
  const size_t group = !packed ? cols : src.dtype == DType::kInt8 ? detail::kInt8Group : 1;
  constexpr size_t kAlign = 64;
  data_.assign(stored_rows * cols * esize + kAlign, 0);
  auto* base = data_.data() + (kAlign - reinterpret_cast<uintptr_t>(data_.data()) % kAlign) % kAlign;
  dst.data = base;
  const auto* from = static_cast<const uint8_t*>(src.data);
  auto gather = [&](auto bytes) {  // a compile-time group size: no memcpy call per group
    for (size_t i = 0; i < size_; ++i)
      for (size_t c = 0; c < cols; c += group)
        std::memcpy(base + dst.index(i, c) * esize, from + src.index(ids_[i], c) * esize, bytes.value);
  };
  const size_t group_bytes = group * esize;
  if (group_bytes == 4) gather(std::integral_constant<size_t, 4>{});
  else if (group_bytes == 2) gather(std::integral_constant<size_t, 2>{});
  else
    for (size_t i = 0; i < size_; ++i)  // row-major: one row at a time
      std::memcpy(base + dst.index(i, 0) * esize, from + src.index(ids_[i], 0) * esize, group_bytes);
  if (src.scales) {
    scales_.resize(size_);
    for (size_t i = 0; i < size_; ++i) scales_[i] = src.scales[ids_[i]];
    dst.scales = scales_.data();
  }
  if (src.row_sums) {
    row_sums_.resize(size_);
    for (size_t i = 0; i < size_; ++i) row_sums_[i] = src.row_sums[ids_[i]];
    dst.row_sums = row_sums_.data();
  }
  bias_ = nullptr;
  if (w.final_logits_bias) {
    gathered_bias_.resize(size_);
    for (size_t i = 0; i < size_; ++i) gathered_bias_[i] = w.final_logits_bias[ids_[i]];
    bias_ = gathered_bias_.data();
  }
}

size_t OutputVocabulary::index_of(int32_t token) const {
  if (ids_.empty()) return token >= 0 && static_cast<size_t>(token) < size_ ? static_cast<size_t>(token) : kAbsent;
  auto it = std::lower_bound(ids_.begin(), ids_.end(), token);
  return it != ids_.end() && *it == token ? static_cast<size_t>(it - ids_.begin()) : kAbsent;
}

}  // namespace petrel::models
