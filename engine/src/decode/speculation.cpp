#include "decode/speculation.h"

#include <algorithm>

namespace petrel::decode {

namespace {
// The n tokens before `end`, hashed (each id mixed in as splitmix64 does).
uint64_t ngram_hash(const int32_t* tokens, size_t end, size_t n) {
  uint64_t h = n;
  for (size_t i = end - n; i < end; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0x9e3779b97f4a7c15ULL;
    h ^= h >> 31;
  }
  return h;
}
}  // namespace

void PromptLookup::index(const std::vector<int32_t>& sequence, size_t end) {
  for (; indexed_ < end; ++indexed_)
    for (size_t n = 1; n <= ngram_ && n <= indexed_; ++n)
      last_[n - 1][ngram_hash(sequence.data(), indexed_, n)] = static_cast<uint32_t>(indexed_);
}

void PromptLookup::propose(const std::vector<int32_t>& sequence, size_t limit, std::vector<int32_t>& draft) {
  draft.clear();
  const size_t length = sequence.size();
  if (limit == 0 || length < 2) return;
  index(sequence, length);  // every position but the end (whose continuation is not there yet)
  for (size_t n = std::min(ngram_, length - 1); n >= 1; --n) {
    const auto found = last_[n - 1].find(ngram_hash(sequence.data(), length, n));
    if (found == last_[n - 1].end()) continue;
    const size_t p = found->second;  // < length
    if (!std::equal(sequence.begin() + static_cast<std::ptrdiff_t>(p - n), sequence.begin() + static_cast<std::ptrdiff_t>(p),
                    sequence.end() - static_cast<std::ptrdiff_t>(n)))
      continue;  // a hash collision
    // A continuation that reaches the end goes on as the draft itself: text repeating with
    // period length - p is drafted as repeating on.
    for (size_t i = 0; i < limit; ++i) draft.push_back(p + i < length ? sequence[p + i] : draft[p + i - length]);
    return;
  }
}

void ModelDraft::start(size_t max_positions) {
  max_positions_ = max_positions;
  graph_.start(max_positions, DType::kF32, state_);
  graph_.reserve(workspace_);
  logits_.resize(graph_.vocab_size());
  cached_.clear();
}

void ModelDraft::propose(const std::vector<int32_t>& sequence, size_t limit, std::vector<int32_t>& draft) {
  draft.clear();
  if (sequence.empty() || limit == 0) return;
  // What the caches share with the sequence stays (at least one token runs: its logits
  // give the first draft token).
  size_t common = 0;
  const size_t most = std::min(cached_.size(), sequence.size() - 1);
  while (common < most && cached_[common] == sequence[common]) ++common;
  if (common < cached_.size() && !graph_.rewind(common, state_)) {
    common = 0;
    graph_.start(max_positions_, DType::kF32, state_);
  }
  cached_.resize(common);
  // The draft's positions bound it: the last draft token is not run.
  if (sequence.size() > max_positions_) return;
  limit = std::min(limit, max_positions_ - sequence.size() + 1);
  graph_.forward(sequence.data() + common, sequence.size() - common, state_, workspace_, logits_.data());
  tokens_run_ += sequence.size() - common;
  cached_.insert(cached_.end(), sequence.begin() + static_cast<std::ptrdiff_t>(common), sequence.end());
  for (;;) {
    const auto best = std::max_element(logits_.begin(), logits_.end());  // the first of equals
    const int32_t token = static_cast<int32_t>(best - logits_.begin());
    draft.push_back(token);
    if (draft.size() == limit) return;
    graph_.forward(&token, 1, state_, workspace_, logits_.data());
    ++tokens_run_;
    cached_.push_back(token);
  }
}

size_t DraftLength::next() {
  if (length_ > 0) return length_;
  if (wait_ > 0) {
    --wait_;
    return 0;
  }
  return max_ > 0 ? 1 : 0;  // a trial after the pause
}

void DraftLength::update(size_t drafted, size_t accepted) {
  if (drafted == 0) return;
  if (accepted == drafted) {
    length_ = std::min(max_, std::max(length_, drafted) + 2);
    pause_ = 0;
  } else if (accepted > 0) {
    length_ = std::max<size_t>(1, length_ - 1);
  } else if (length_ > 0) {
    --length_;
  }
  if (length_ == 0 && accepted < drafted) {
    pause_ = std::min(kMaxPause, std::max<size_t>(1, pause_ * 2));
    wait_ = pause_;
  }
}

}  // namespace petrel::decode
