#include "models/output_vocabulary.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace petrel::models {
namespace {

// to[i] = from[ids[i]], for a per-row array (scales, row sums, bias); null stays null.
template <class T>
const T* gather_rows(const T* from, const std::vector<int32_t>& ids, std::vector<T>& to) {
  if (from == nullptr) return nullptr;
  to.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) to[i] = from[ids[i]];
  return to.data();
}

}  // namespace

void OutputVocabulary::use_all(const detail::ModelWeights& w) {
  size_ = w.output_proj.rows;
  ids_.clear();
  allowed_.clear();
  projection_ = w.output_proj;
  bias_ = w.final_logits_bias;
}

std::vector<int32_t> OutputVocabulary::shortlist_tokens(const detail::ModelWeights& w,
                                                       const std::vector<int32_t>& source) {
  const detail::Shortlist& list = w.shortlist;
  const std::vector<int32_t>& bad = w.info->bad_word_ids;
  std::vector<int32_t> distinct, out;
  out.assign(list.always, list.always + list.always_size);
  out.insert(out.end(), bad.begin(), bad.end());
  // Each source id's candidates once: a file may give one id every candidate, and a
  // sentence repeating it would otherwise gather them once per token before dedup.
  distinct.assign(source.begin(), source.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (int32_t s : distinct) {
    if (list.candidates16 != nullptr)
      out.insert(out.end(), list.candidates16 + list.offsets[s], list.candidates16 + list.offsets[s + 1]);
    else
      out.insert(out.end(), list.candidates + list.offsets[s], list.candidates + list.offsets[s + 1]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (list.pad_to_multiple > 1) {  // Marian's: the smallest unselected ids >= first
    const size_t target = w.output_proj.rows, before = out.size();
    for (size_t id = list.first; out.size() % list.pad_to_multiple != 0 && id < target; ++id)
      if (!std::binary_search(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(before), static_cast<int32_t>(id)))
        out.push_back(static_cast<int32_t>(id));
    std::sort(out.begin(), out.end());
  }
  return out;
}

void OutputVocabulary::use_shortlist(const detail::ModelWeights& w, const std::vector<std::vector<int32_t>>& batch) {
  std::vector<std::vector<int32_t>> per_sentence;
  per_sentence.reserve(batch.size());
  for (const auto& source : batch) per_sentence.push_back(shortlist_tokens(w, source));
  std::vector<const std::vector<int32_t>*> sets;
  for (const auto& set : per_sentence) sets.push_back(&set);
  use_shortlist_sets(w, sets);
}

void OutputVocabulary::use_shortlist_sets(const detail::ModelWeights& w,
                                          const std::vector<const std::vector<int32_t>*>& per_sentence) {
  const size_t sentences = per_sentence.size();
  ids_.clear();
  for (size_t s = 0; s < sentences; ++s) {
    if (s > 0 && per_sentence[s] == per_sentence[s - 1]) continue;  // a set shared by neighbours: once
    ids_.insert(ids_.end(), per_sentence[s]->begin(), per_sentence[s]->end());
  }
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  size_ = ids_.size();
  allowed_.clear();
  if (sentences > 1) {
    allowed_.assign(sentences * size_, 0);
    for (size_t s = 0; s < sentences; ++s)
      for (int32_t t : *per_sentence[s]) allowed_[s * size_ + index_of(t)] = 1;
  }

  // Gather the rows into a matrix of the same dtype and layout, run by run (a packed
  // row is strided: see Matrix::row_run), with their side arrays.
  const detail::Matrix& src = w.output_proj;
  detail::Matrix& dst = projection_;
  dst = src;
  dst.rows = size_;
  const size_t cols = src.stored_cols(), run = src.row_run(), run_bytes = src.bytes(run);
  constexpr size_t kAlign = 64;
  data_.assign(dst.row_offset_bytes(dst.stored_rows()) + kAlign, 0);
  auto* base = data_.data() + (kAlign - reinterpret_cast<uintptr_t>(data_.data()) % kAlign) % kAlign;
  dst.data = base;
  const auto* from = static_cast<const uint8_t*>(src.data);
  // Runs start on whole bytes (int4 runs are 8 columns): element index -> byte offset.
  auto at = [](const detail::Matrix& m, size_t r, size_t c) { return m.bytes(m.index(r, c)); };
  auto gather = [&](auto bytes) {  // a compile-time run size: no memcpy call per run
    for (size_t i = 0; i < size_; ++i)
      for (size_t c = 0; c < cols; c += run) std::memcpy(base + at(dst, i, c), from + at(src, ids_[i], c), bytes.value);
  };
  if (run_bytes == 4) gather(std::integral_constant<size_t, 4>{});
  else if (run_bytes == 2) gather(std::integral_constant<size_t, 2>{});
  else
    for (size_t i = 0; i < size_; ++i)  // row-major: one row at a time
      std::memcpy(base + at(dst, i, 0), from + at(src, ids_[i], 0), run_bytes);
  dst.scales = gather_rows(src.scales, ids_, scales_);
  dst.row_sums = gather_rows(src.row_sums, ids_, row_sums_);
  dst.block_scales = nullptr;
  if (dst.int4_panels()) {  // the scales live in the panels; padding rows of the last panel stay 0
    for (size_t i = 0; i < size_; ++i)
      for (size_t b = 0; b < dst.blocks(); ++b)
        base[i / detail::kPanelRows * dst.int4_panel_bytes() + dst.int4_scales_offset(b) + i % detail::kPanelRows] =
            src.block_scale(ids_[i], b);
  } else if (src.block_scales) {
    block_scales_.assign(dst.stored_rows() * dst.blocks(), 0);
    for (size_t i = 0; i < size_; ++i)
      for (size_t b = 0; b < dst.blocks(); ++b) block_scales_[dst.block_scale_index(i, b)] = src.block_scale(ids_[i], b);
    dst.block_scales = block_scales_.data();
  }
  bias_ = gather_rows(w.final_logits_bias, ids_, gathered_bias_);
}

size_t OutputVocabulary::index_of(int32_t token) const {
  if (ids_.empty()) return token >= 0 && static_cast<size_t>(token) < size_ ? static_cast<size_t>(token) : kAbsent;
  auto it = std::lower_bound(ids_.begin(), ids_.end(), token);
  return it != ids_.end() && *it == token ? static_cast<size_t>(it - ids_.begin()) : kAbsent;
}

}  // namespace petrel::models
