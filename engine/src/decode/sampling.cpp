#include "decode/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>

#include "core/c_number.h"
#include "petrel/types.h"

namespace petrel::decode {

namespace {

// top-p without top-k: tokens are binned by how far their logit lies below the max;
// bins before the one holding the cut are kept whole, bins after it dropped, and only
// the tokens of the cut's bin are sorted (not the vocabulary).
constexpr size_t kBins = 256;
constexpr float kBinsPerLogit = 8.0f;  // bins 1/8 wide: the last starts 31.875 below the max

size_t bin_of(float logit, float max) {
  const float below = max - logit;
  // -inf and NaN (comparisons false) go to the last bin.
  if (!(below < static_cast<float>(kBins - 1) / kBinsPerLogit)) return kBins - 1;
  return static_cast<size_t>(below * kBinsPerLogit);
}

// The max of the non-NaN values; -inf when there is none.
float max_of(const float* values, size_t n) {
  float max = -INFINITY;
  for (size_t i = 0; i < n; ++i) max = values[i] > max ? values[i] : max;
  return max;
}

// A scan over a vocabulary for candidates (values above t, or at or above it with
// kOrEqual; NaN never is) calls this at each index i: at the start of a whole block of
// kScanBlock values holding none, it moves i to the block's last index (the scan's ++i
// goes on from the next block) and says so. The test is a branch-free pass the compiler
// vectorizes, so the scan's scalar loop sees only the blocks, few of them, that hold a
// candidate (top-k 64 and top-p over 262,144 logits: 235 -> 102 us per token).
constexpr size_t kScanBlock = 64;
template <bool kOrEqual>
bool skipped_block_without_candidates(const float* x, size_t n, float t, size_t& i) {
  if (i % kScanBlock != 0 || i + kScanBlock > n) return false;
  int32_t above = 0;
  for (size_t j = i; j < i + kScanBlock; ++j) above |= static_cast<int32_t>(kOrEqual ? x[j] >= t : x[j] > t);
  if (above != 0) return false;
  i += kScanBlock - 1;
  return true;
}

std::string show(float value) { return core::format_c_double("%.*g", 9, static_cast<double>(value)); }

Error invalid(const char* field, float value, const char* rule) {
  return Error{ErrorCode::kInvalidArgument,
               std::string("sampling option ") + field + " = " + show(value) + ": must be " + rule};
}

// transformers computes 1 - top_p from the Python float (the decimal in
// generation_config.json) in double and compares f32 cumulative sums with it rounded
// to f32. Our top_p is a float: take the shortest decimal that rounds to it (what the
// file said), so that e.g. 0.8 gives f32(0.19999999999999996) = 0.2, not
// 1 - 0.800000012 = 0.19999999, the very boundary §10's {0.5, 0.3, 0.2} example sits on.
float one_minus_as_transformers(float p) {
  double decimal = p;
  for (int digits = 1; digits <= 9; ++digits) {
    const double parsed = core::parse_c_double(core::format_c_double("%.*g", digits, static_cast<double>(p)));
    if (static_cast<float>(parsed) == p) {
      decimal = parsed;
      break;
    }
  }
  return static_cast<float>(1.0 - decimal);
}

// top-p's cut, transformers' rule seen from the top: with the candidates sorted by
// descending logit (`probability(j)` is the j-th one's), position j is removed when the
// mass of j and everything after it -- the ascending cumulative sum at j, summed in
// double as ATen's CPU cumsum does, rounded to f32 -- is <= threshold. The top token
// is always kept (min_tokens_to_keep 1). `total` is the mass of every candidate (id
// order); `before` the mass of those sorted before the first here (0 when it is the
// top). Returns how many are kept; `count` when the cut lies beyond them.
template <class Probability>
size_t top_p_cut(size_t count, double total, float threshold, double before, Probability probability) {
  const bool starts_at_top = before == 0.0;
  for (size_t j = 0; j < count; ++j) {
    if ((j > 0 || !starts_at_top) && static_cast<float>(total - before) <= threshold) return j;
    before += probability(j);
  }
  return count;
}

// A strict total order for (logit desc, id asc) over positions into `logits`: NaN last.
struct HigherLogitFirst {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    const float x = logits[a], y = logits[b];
    if (x > y) return true;
    if (x < y) return false;
    const bool x_nan = std::isnan(x), y_nan = std::isnan(y);
    if (x_nan != y_nan) return y_nan;
    return a < b;
  }
};

template <class T>
void reserve_at_least(std::vector<T>& v, size_t n) {
  if (v.capacity() < n) v.reserve(n);
}

}  // namespace

Random::Random(uint64_t seed, uint64_t stream) {
  // pcg32_srandom_r.
  increment_ = (stream << 1u) | 1u;
  next_u32();
  state_ += seed;
  next_u32();
}

uint32_t Random::next_u32() {
  const uint64_t old = state_;
  state_ = old * 6364136223846793005ULL + increment_;
  const auto xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
  const auto rotation = static_cast<uint32_t>(old >> 59u);
  return (xorshifted >> rotation) | (xorshifted << ((32u - rotation) & 31u));
}

float Random::uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }

void mask_logits(float* logits, size_t n, const uint8_t* allowed) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) logits[i] = allowed[i] != 0 ? logits[i] : minus_infinity;  // a select: vectorized
}

Status check(const SamplingOptions& o) {
  // Written so that NaN fails every rule.
  if (!(o.temperature >= kMinSamplingScale && o.temperature <= kMaxSamplingScale))
    return invalid("temperature", o.temperature, "in [1e-6, 1e6]");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return invalid("top_p", o.top_p, "in (0, 1]");
  // transformers' MinPLogitsWarper takes [0, 1]: at 1 only the most likely tokens stay.
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) return invalid("min_p", o.min_p, "in [0, 1]");
  if (!(o.repetition_penalty >= kMinSamplingScale && o.repetition_penalty <= kMaxSamplingScale))
    return invalid("repetition_penalty", o.repetition_penalty, "in [1e-6, 1e6]");
  return Status::ok();
}

Sampler::Sampler(const SamplingOptions& options, TopK top_k)
    : options_(options), top_k_(top_k), random_(options.seed),
      top_p_threshold_(one_minus_as_transformers(options.top_p)) {}

void Sampler::apply_repetition_penalty(float* logits, size_t n, const int32_t* seen, size_t seen_count) {
  if (penalized_.size() < n) penalized_.resize(n, 0);
  const float penalty = options_.repetition_penalty;
  for (size_t i = 0; i < seen_count; ++i) {
    const int32_t id = seen[i];
    if (id < 0 || static_cast<size_t>(id) >= n || penalized_[id]) continue;
    penalized_[id] = 1;  // each distinct id once
    const float s = logits[id];
    logits[id] = s < 0.0f ? s * penalty : s / penalty;
  }
  for (size_t i = 0; i < seen_count; ++i)
    if (seen[i] >= 0 && static_cast<size_t>(seen[i]) < n) penalized_[seen[i]] = 0;
}

// The k-th largest logit, duplicates counted (torch.topk(...)[..., -1]); NaN ignored.
float Sampler::kth_largest(const float* logits, size_t n, size_t k) {
  if (k <= n / 16) {
    // One pass with a min-heap of the k largest so far: almost every logit is only
    // compared with the heap's smallest.
    heap_.clear();
    reserve_at_least(heap_, k);
    const std::greater<float> min_heap;
    size_t i = 0;
    for (; i < n && heap_.size() < k; ++i) {
      if (std::isnan(logits[i])) continue;
      heap_.push_back(logits[i]);
      std::push_heap(heap_.begin(), heap_.end(), min_heap);
    }
    if (heap_.empty()) return -INFINITY;
    float floor = heap_.front();
    for (; i < n; ++i) {
      // floor only rises: a block with nothing above it now holds nothing for the heap.
      if (skipped_block_without_candidates<false>(logits, n, floor, i)) continue;
      if (logits[i] > floor) {
        std::pop_heap(heap_.begin(), heap_.end(), min_heap);
        heap_.back() = logits[i];
        std::push_heap(heap_.begin(), heap_.end(), min_heap);
        floor = heap_.front();
      }
    }
    return floor;
  }
  // A large k: a selection over a copy. The k-th value is the same whatever the
  // library's nth_element does with equal elements.
  if (exps_.size() < n) exps_.resize(n);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i)
    if (!std::isnan(logits[i])) exps_[count++] = logits[i];
  if (count == 0) return -INFINITY;
  const size_t at = std::min(k, count) - 1;
  std::nth_element(exps_.begin(), exps_.begin() + static_cast<std::ptrdiff_t>(at),
                   exps_.begin() + static_cast<std::ptrdiff_t>(count), std::greater<float>());
  return exps_[at];
}

// Softmax in f32: exp(s - max), the sum in double in the given (id) order, each
// divided by the sum rounded to f32.
static void softmax_of(const std::vector<float>& logits, std::vector<float>& probabilities) {
  const size_t count = logits.size();
  probabilities.resize(count);
  const float max = max_of(logits.data(), count);
  double sum = 0.0;
  for (size_t j = 0; j < count; ++j) {
    probabilities[j] = std::exp(logits[j] - max);
    sum += probabilities[j];
  }
  const auto denominator = static_cast<float>(sum);
  for (size_t j = 0; j < count; ++j) probabilities[j] /= denominator;
}

void Sampler::keep_top_p_of_kept() {
  softmax_of(kept_logits_, kept_probabilities_);
  const size_t count = kept_ids_.size();
  double total = 0.0;
  for (size_t j = 0; j < count; ++j) total += kept_probabilities_[j];
  order_.resize(count);
  for (size_t j = 0; j < count; ++j) order_[j] = static_cast<int32_t>(j);
  // Positions ascend with ids, so this is (logit desc, id asc).
  std::sort(order_.begin(), order_.end(), HigherLogitFirst{kept_logits_.data()});
  const size_t keep = top_p_cut(count, total, top_p_threshold_, 0.0,
                                [&](size_t j) { return static_cast<double>(kept_probabilities_[order_[j]]); });
  order_.resize(keep);
  std::sort(order_.begin(), order_.end());
  for (size_t j = 0; j < keep; ++j) {  // in place: order_[j] >= j
    kept_ids_[j] = kept_ids_[order_[j]];
    kept_logits_[j] = kept_logits_[order_[j]];
  }
  kept_ids_.resize(keep);
  kept_logits_.resize(keep);
}

void Sampler::keep_top_p_of_all(const float* logits, size_t n) {
  kept_ids_.clear();
  kept_logits_.clear();
  const float max = max_of(logits, n);
  if (!std::isfinite(max)) {  // exp(s - max) would be NaN: draw()'s fallback decides
    for (size_t i = 0; i < n; ++i) {
      kept_ids_.push_back(static_cast<int32_t>(i));
      kept_logits_.push_back(logits[i]);
    }
    return;
  }
  if (exps_.size() < n) exps_.resize(n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    exps_[i] = std::exp(logits[i] - max);
    sum += exps_[i];
  }
  const auto denominator = static_cast<float>(sum);
  double total = 0.0;
  double bin_mass[kBins] = {};
  for (size_t i = 0; i < n; ++i) {
    exps_[i] /= denominator;  // now the probability
    total += exps_[i];
    bin_mass[bin_of(logits[i], max)] += exps_[i];
  }
  // first_bin: the last bin whose first token surely stays (the mass from it on is
  // surely > the threshold), so every bin before it stays whole; last_bin: the first
  // after which the remaining mass is surely <= the threshold, so every later bin goes.
  // The margin (1e-9) dwarfs the difference between sums in id and in sorted order.
  constexpr double kMargin = 1e-9;
  const double threshold = top_p_threshold_;
  size_t first_bin = 0, last_bin = kBins - 1;
  double before = 0.0, before_first_bin = 0.0;
  for (size_t b = 0; b < kBins; ++b) {
    if (total - before > threshold + kMargin) {
      first_bin = b;
      before_first_bin = before;
    }
    before += bin_mass[b];
    if (total - before <= threshold - kMargin) {
      last_bin = b;
      break;
    }
  }
  int32_t first_removed = -1;  // none
  for (;;) {
    order_.clear();
    for (size_t i = 0; i < n; ++i) {
      const size_t bin = bin_of(logits[i], max);
      if (bin >= first_bin && bin <= last_bin) order_.push_back(static_cast<int32_t>(i));
    }
    std::sort(order_.begin(), order_.end(), HigherLogitFirst{logits});
    const size_t keep = top_p_cut(order_.size(), total, top_p_threshold_, before_first_bin,
                                  [&](size_t j) { return static_cast<double>(exps_[order_[j]]); });
    if (keep == order_.size() && last_bin != kBins - 1) {
      last_bin = kBins - 1;  // not reached: the bins were chosen so the cut lies within
      continue;
    }
    if (keep < order_.size()) first_removed = order_[keep];
    break;
  }
  const HigherLogitFirst higher{logits};
  for (size_t i = 0; i < n; ++i) {
    if (first_removed < 0 || higher(static_cast<int32_t>(i), first_removed)) {
      kept_ids_.push_back(static_cast<int32_t>(i));
      kept_logits_.push_back(logits[i]);
    }
  }
}

void Sampler::keep_min_p() {
  softmax_of(kept_logits_, kept_probabilities_);
  const size_t count = kept_ids_.size();
  const float limit = options_.min_p * max_of(kept_probabilities_.data(), count);
  size_t kept = 0;
  for (size_t j = 0; j < count; ++j) {
    if (kept_probabilities_[j] < limit) continue;  // strictly less is removed
    kept_ids_[kept] = kept_ids_[j];
    kept_logits_[kept] = kept_logits_[j];
    ++kept;
  }
  if (kept == 0) return;  // NaN probabilities: draw()'s fallback decides
  kept_ids_.resize(kept);
  kept_logits_.resize(kept);
}

int32_t Sampler::draw() {
  softmax_of(kept_logits_, kept_probabilities_);
  const size_t count = kept_ids_.size();
  double total = 0.0;
  for (size_t j = 0; j < count; ++j) total += kept_probabilities_[j];
  const double target = static_cast<double>(random_.uniform()) * total;
  double cumulative = 0.0;
  for (size_t j = 0; j < count; ++j) {
    cumulative += kept_probabilities_[j];
    if (cumulative > target) return kept_ids_[j];
  }
  // Only with NaN (or +inf) logits: the highest-scoring kept token.
  size_t best = 0;
  for (size_t j = 1; j < count; ++j)
    if (HigherLogitFirst{kept_logits_.data()}(static_cast<int32_t>(j), static_cast<int32_t>(best))) best = j;
  return kept_ids_[best];
}

int32_t Sampler::next(float* logits, size_t n, const int32_t* seen, size_t seen_count) {
  kept_ids_.clear();
  kept_logits_.clear();
  kept_probabilities_.clear();
  if (n == 0) return -1;
  if (options_.repetition_penalty != 1.0f) apply_repetition_penalty(logits, n, seen, seen_count);
  if (!options_.sample) {
    if (top_k_ != nullptr) {  // the same choice among finite logits (ties: the lower id)
      int32_t id = 0;
      float value = 0;
      if (top_k_(logits, n, 1, &id, &value) == 1) return id;
    }
    // The first index of the max, NaN skipped (0 when all are NaN).
    size_t best = 0;
    while (best + 1 < n && std::isnan(logits[best])) ++best;
    float best_logit = logits[best];
    for (size_t i = best + 1; i < n; ++i) {
      if (logits[i] > best_logit) {
        best = i;
        best_logit = logits[i];
      }
    }
    return std::isnan(best_logit) ? 0 : static_cast<int32_t>(best);
  }
  reserve_at_least(kept_ids_, n);
  reserve_at_least(kept_logits_, n);
  reserve_at_least(kept_probabilities_, n);
  reserve_at_least(order_, n);

  if (options_.temperature != 1.0f) {
    const float temperature = options_.temperature;
    for (size_t i = 0; i < n; ++i) logits[i] /= temperature;  // a division, as torch's scores / T
  }
  bool all_kept = true;  // kept_* not filled yet: every token is a candidate
  if (options_.top_k > 0 && options_.top_k < n) {
    const float kth = kth_largest(logits, n, options_.top_k);
    for (size_t i = 0; i < n; ++i) {
      if (skipped_block_without_candidates<true>(logits, n, kth, i)) continue;
      if (logits[i] >= kth) {  // ties at the k-th value all stay
        kept_ids_.push_back(static_cast<int32_t>(i));
        kept_logits_.push_back(logits[i]);
      }
    }
    all_kept = kept_ids_.empty();  // only when every logit is NaN
  }
  if (options_.top_p < 1.0f) {
    if (all_kept) keep_top_p_of_all(logits, n);
    else keep_top_p_of_kept();
    all_kept = false;
  }
  if (all_kept) {
    kept_ids_.clear();
    kept_logits_.clear();
    for (size_t i = 0; i < n; ++i) {
      kept_ids_.push_back(static_cast<int32_t>(i));
      kept_logits_.push_back(logits[i]);
    }
  }
  if (options_.min_p > 0.0f) keep_min_p();
  return draw();
}

}  // namespace petrel::decode
