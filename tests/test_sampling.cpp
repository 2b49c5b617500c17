// The sampler against transformers' rules (decoder_only_semantics.md §10): each filter
// on vectors where the answer can be worked out by hand, the whole chain against an
// independent double-precision model of it (kept sets exactly, draw frequencies within
// a stated bound), and the same ids on every platform of a run ([portable]).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "decode/sampling.h"
#include "kernels/isa.h"
#include "support/test_support.h"

namespace petrel::sampling_tests {

using decode::Random;
using decode::Sampler;
using decode::SamplingOptions;

// Logits in [-spread, spread] from PCG32 (not <random>'s distributions, whose
// algorithms differ between standard libraries).
std::vector<float> pcg_logits(size_t n, uint64_t seed, float spread) {
  Random random(seed, 7);
  std::vector<float> logits(n);
  for (float& s : logits) s = (random.uniform() * 2.0f - 1.0f) * spread;
  return logits;
}

// One call on a copy (next() modifies its logits).
int32_t next_of(Sampler& sampler, std::vector<float> logits, const std::vector<int32_t>& seen = {}) {
  return sampler.next(logits.data(), logits.size(), seen.data(), seen.size());
}

SamplingOptions sampling(float temperature = 1.0f, uint32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f) {
  SamplingOptions o;
  o.sample = true;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  return o;
}

// transformers' chain in double precision, written from §10 and independent of the
// sampler's algorithms: full sorts, an ascending cumulative sum. Returns the final
// probability of every token (0: removed). `margin` gets the smallest relative distance
// of a top-p or min-p comparison from its threshold: where it is tiny, f32 rounding
// could decide differently, and a test must not rely on such a vector.
std::vector<double> reference(const std::vector<float>& logits, const SamplingOptions& o,
                              const std::vector<int32_t>& seen, double* margin) {
  const size_t n = logits.size();
  std::vector<double> s(logits.begin(), logits.end());
  *margin = INFINITY;
  std::vector<bool> penalized(n, false);
  for (int32_t id : seen) {
    if (penalized[id]) continue;
    penalized[id] = true;
    s[id] = s[id] < 0 ? s[id] * o.repetition_penalty : s[id] / o.repetition_penalty;
  }
  for (double& x : s) x /= o.temperature;
  auto softmax = [&] {
    const double max = *std::max_element(s.begin(), s.end());
    std::vector<double> q(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += q[i] = std::exp(s[i] - max);
    for (double& x : q) x /= sum;
    return q;
  };
  if (o.top_k > 0 && o.top_k < n) {
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double kth = sorted[o.top_k - 1];
    for (double& x : s)
      if (x < kth) x = -INFINITY;
  }
  if (o.top_p < 1.0f) {
    const std::vector<double> q = softmax();
    std::vector<size_t> ascending(n);
    std::iota(ascending.begin(), ascending.end(), 0);
    std::stable_sort(ascending.begin(), ascending.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
    // 1 - p from the decimal p stands for (the tests' p have at most 6 digits), as
    // transformers computes it from the Python float.
    const double threshold = 1.0 - std::round(static_cast<double>(o.top_p) * 1e6) / 1e6;
    double cumulative = 0;
    for (size_t j = 0; j + 1 < n; ++j) {  // the last (largest) always stays
      cumulative += q[ascending[j]];
      if (q[ascending[j]] > 0) *margin = std::min(*margin, std::abs(cumulative - threshold) / threshold);
      if (cumulative <= threshold) s[ascending[j]] = -INFINITY;
    }
  }
  if (o.min_p > 0.0f) {
    const std::vector<double> q = softmax();
    const double limit = o.min_p * *std::max_element(q.begin(), q.end());
    for (size_t i = 0; i < n; ++i) {
      if (q[i] > 0) *margin = std::min(*margin, std::abs(q[i] - limit) / limit);
      if (q[i] < limit) s[i] = -INFINITY;
    }
  }
  return softmax();
}

// Where two id lists differ, briefly (Catch would print lists of 100,000 ids whole).
std::string difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  if (got == want) return "";
  const auto at = std::mismatch(got.begin(), got.end(), want.begin(), want.end());
  std::ostringstream text;
  text << got.size() << " ids, expected " << want.size() << "; first difference at " << at.first - got.begin();
  return text.str();
}

std::vector<int32_t> ids_above_zero(const std::vector<double>& probabilities) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < probabilities.size(); ++i)
    if (probabilities[i] > 0) ids.push_back(static_cast<int32_t>(i));
  return ids;
}

TEST_CASE("sampling options: check() refuses each bad field by name and value", "[sampling]") {
  CHECK(decode::check(SamplingOptions{}).has_value());
  CHECK(decode::check(sampling(0.6f, 20, 0.95f, 0.05f)).has_value());
  SamplingOptions top_p_one = sampling(1.0f, 0, 1.0f);
  CHECK(decode::check(top_p_one).has_value());

  struct Bad {
    const char* field;
    float value;
    const char* shown;
  };
  for (const Bad& bad : {Bad{"temperature", 0.0f, "= 0"}, Bad{"temperature", -1.0f, "= -1"},
                         Bad{"temperature", NAN, "nan"}, Bad{"temperature", INFINITY, "inf"},
                         Bad{"top_p", 0.0f, "= 0"}, Bad{"top_p", 1.5f, "= 1.5"}, Bad{"top_p", NAN, "nan"},
                         Bad{"min_p", -0.25f, "= -0.25"}, Bad{"min_p", 1.5f, "= 1.5"}, Bad{"min_p", NAN, "nan"},
                         Bad{"repetition_penalty", 0.0f, "= 0"}, Bad{"repetition_penalty", -2.0f, "= -2"},
                         Bad{"repetition_penalty", INFINITY, "inf"},
                         // divisors that make finite logits infinite
                         Bad{"temperature", 1e-45f, "e-45"}, Bad{"repetition_penalty", 1e-30f, "e-30"},
                         Bad{"temperature", 2e6f, "2000000"}}) {
    SamplingOptions o;  // greedy: the fields are checked all the same
    const std::string field = bad.field;
    if (field == "temperature") o.temperature = bad.value;
    if (field == "top_p") o.top_p = bad.value;
    if (field == "min_p") o.min_p = bad.value;
    if (field == "repetition_penalty") o.repetition_penalty = bad.value;
    const Status status = decode::check(o);
    INFO(field << " " << bad.value);
    REQUIRE_FALSE(status.has_value());
    CHECK(status.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(status.error().message, Catch::Matchers::Contains(field + " "));
    CHECK_THAT(status.error().message, Catch::Matchers::Contains(bad.shown));
  }
}

// The published pcg32-demo output (pcg-c-basic, pcg-random.org): seed 42, stream 54.
TEST_CASE("Random is PCG32: the reference outputs, and uniform() from its top 24 bits", "[sampling]") {
  Random random(42, 54);
  for (uint32_t want : {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu})
    CHECK(random.next_u32() == want);
  Random a(9), b(9);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t bits = a.next_u32();
    const float u = b.uniform();
    CHECK(u == static_cast<float>(bits >> 8) / 16777216.0f);
    CHECK(u >= 0.0f);
    CHECK(u < 1.0f);
  }
}

TEST_CASE("greedy is the argmax (the first index among ties) and ignores the sampling filters", "[sampling]") {
  SamplingOptions greedy;
  greedy.temperature = 0.3f;
  greedy.top_k = 2;
  greedy.top_p = 0.5f;
  Sampler sampler(greedy);
  CHECK(next_of(sampler, {1.0f, 3.0f, 3.0f, 2.0f}) == 1);
  CHECK(next_of(sampler, {-INFINITY, -1.0f, -INFINITY}) == 1);
  CHECK(sampler.kept_ids().empty());
  // With every kernel path's top-k doing the argmax (as the Generator runs it): the same choice.
  std::vector<Sampler> samplers = {Sampler(greedy)};
  for (petrel::kernels::Isa isa : petrel::kernels::runnable_isas())
    samplers.emplace_back(greedy, petrel::kernels::table_for(isa)->top_k);
  for (Sampler& s : samplers) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      std::vector<float> logits = pcg_logits(1000 + seed, seed, 4.0f);
      logits[seed * 37 % 1000] = logits[seed * 11 % 1000] = 9.0f;  // a tie for the max
      const auto want = std::max_element(logits.begin(), logits.end()) - logits.begin();  // the first max
      CHECK(next_of(s, logits) == want);
    }
    CHECK(next_of(s, {-INFINITY, -1.0f, -INFINITY}) == 1);
  }
}

TEST_CASE("top_k 1 samples the argmax whatever the seed and temperature", "[sampling]") {
  const std::vector<float> logits = pcg_logits(5000, 3, 2.0f);  // distinct values
  const auto argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingOptions o = sampling(seed % 2 ? 3.0f : 0.5f, 1);
    o.seed = seed;
    Sampler sampler(o);
    CHECK(next_of(sampler, logits) == argmax);
  }
}

TEST_CASE("repetition penalty: positive scores divided, negative multiplied, each distinct id once", "[sampling]") {
  SamplingOptions o;
  o.repetition_penalty = 2.0f;
  Sampler sampler(o);
  std::vector<float> logits = {4.0f, -2.0f, 0.0f, 3.0f, -1.0f, 1.0f};
  // 0 and 1 twice, an id outside the vocabulary (ignored), 5 never.
  const std::vector<int32_t> seen = {0, 1, 0, 2, 1, 3, 4, 99, -1};
  const int32_t id = sampler.next(logits.data(), logits.size(), seen.data(), seen.size());
  CHECK(logits == std::vector<float>{2.0f, -4.0f, 0.0f, 1.5f, -2.0f, 1.0f});
  CHECK(id == 0);  // greedy after the penalty
  // A second call penalizes once again (the marks were cleared), not twice.
  std::vector<float> again = {4.0f, -2.0f};
  const int32_t twice[] = {0, 0, 1, 1};
  CHECK(sampler.next(again.data(), again.size(), twice, 4) == 0);
  CHECK(again == std::vector<float>{2.0f, -4.0f});
  // Greedy's choice changes where the penalty moves the max.
  std::vector<float> close = {2.0f, 1.5f};
  const int32_t first[] = {0};
  CHECK(sampler.next(close.data(), close.size(), first, 1) == 1);
}

TEST_CASE("top-k keeps every token tied with the k-th largest score", "[sampling]") {
  Sampler k1(sampling(1.0f, 1));
  next_of(k1, {1.0f, 2.0f, 2.0f, 0.5f});  // §10's check
  CHECK(k1.kept_ids() == std::vector<int32_t>{1, 2});
  Sampler k2(sampling(1.0f, 2));
  next_of(k2, {3.0f, 2.0f, 1.0f, 2.0f, 2.0f});
  CHECK(k2.kept_ids() == std::vector<int32_t>{0, 1, 3, 4});
  // Both selections (a heap for k <= n/16, nth_element above), with ties, against a
  // full sort.
  for (const size_t n : {40, 1000, 70000}) {
    for (const uint32_t k : {1u, 3u, 64u, 500u}) {
      if (k >= n) continue;
      std::vector<float> logits = pcg_logits(n, n + k, 3.0f);
      for (size_t i = 0; i < n; i += 7) logits[i] = std::round(logits[i]);  // many ties
      std::vector<float> sorted = logits;
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      std::vector<int32_t> want;
      for (size_t i = 0; i < n; ++i)
        if (logits[i] >= sorted[k - 1]) want.push_back(static_cast<int32_t>(i));
      Sampler sampler(sampling(1.0f, k));
      const int32_t id = next_of(sampler, logits);
      INFO("n " << n << ", k " << k);
      CHECK(difference(sampler.kept_ids(), want) == "");
      CHECK(std::binary_search(want.begin(), want.end(), id));
    }
  }
}

TEST_CASE("top-p: §10's boundary case, {0.5, 0.3, 0.2} with p 0.8 keeps {0.5, 0.3}", "[sampling]") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  for (const uint32_t top_k : {0u, 3u, 2u}) {  // the whole-vocabulary path, and after top-k
    Sampler sampler(sampling(1.0f, top_k, 0.8f));
    next_of(sampler, logits);
    INFO("top_k " << top_k);
    CHECK(sampler.kept_ids() == std::vector<int32_t>{0, 1});
    REQUIRE(sampler.kept_probabilities().size() == 2);
    CHECK(sampler.kept_probabilities()[0] == Approx(0.625).epsilon(1e-6));
    CHECK(sampler.kept_probabilities()[1] == Approx(0.375).epsilon(1e-6));
  }
  // The top token always stays, even when it alone is more than p.
  Sampler sampler(sampling(1.0f, 0, 0.1f));
  next_of(sampler, {0.0f, 5.0f, 1.0f});
  CHECK(sampler.kept_ids() == std::vector<int32_t>{1});
}

TEST_CASE("top-p over large vocabularies keeps exactly the set of a full sort", "[sampling]") {
  for (const size_t n : {3000, 100000}) {
    for (const float top_p : {0.3f, 0.9f, 0.95f, 0.99f}) {
      for (const float spread : {2.0f, 12.0f}) {  // nearly flat, and peaked
        const SamplingOptions o = sampling(0.7f, 0, top_p);
        // The sampler's f32 probabilities are each within ~2e-7 (relative) of the
        // exact ones, so its sums of them within 2e-7 of the exact masses, and 1 - p
        // in f32 within 6e-8 of its own: a vector whose every cumulative sum is 1e-6
        // or more (relative) from 1 - p leaves f32 no room to decide otherwise. Nearly
        // flat ones have thousands of sums near 1 - p: the first such vector of a few.
        std::vector<float> logits;
        std::vector<int32_t> want;
        double margin = 0;
        for (uint64_t seed = 0; seed < 20 && !(margin > 1e-6); ++seed) {
          logits = pcg_logits(n, n + static_cast<uint64_t>(spread) + 1000 * seed, spread);
          want = ids_above_zero(reference(logits, o, {}, &margin));
        }
        INFO("n " << n << ", top_p " << top_p << ", spread " << spread << ": " << want.size() << " kept");
        REQUIRE(margin > 1e-6);
        Sampler sampler(o);
        const int32_t id = next_of(sampler, logits);
        CHECK(difference(sampler.kept_ids(), want) == "");
        CHECK(std::binary_search(want.begin(), want.end(), id));
      }
    }
  }
}

TEST_CASE("min-p removes only probabilities strictly less than min_p times the max", "[sampling]") {
  // exp(-f32(ln 2)) rounds to exactly 0.5, so the probabilities are q and q/2 exactly
  // (the sum 1.5 is exact, and halving is exact).
  const float minus_ln2 = -std::log(2.0f);
  REQUIRE(std::exp(minus_ln2) == 0.5f);
  const std::vector<float> logits = {0.0f, minus_ln2, -INFINITY};
  Sampler at_limit(sampling(1.0f, 0, 1.0f, 0.5f));
  next_of(at_limit, logits);
  CHECK(at_limit.kept_ids() == std::vector<int32_t>{0, 1});  // q/2 == 0.5 * q: kept
  Sampler above_limit(sampling(1.0f, 0, 1.0f, std::nextafter(0.5f, 1.0f)));
  next_of(above_limit, logits);
  CHECK(above_limit.kept_ids() == std::vector<int32_t>{0});
  // After temperature, on tempered probabilities: T = 0.5 squares the ratio (1/4).
  Sampler tempered(sampling(0.5f, 0, 1.0f, 0.3f));
  next_of(tempered, logits);
  CHECK(tempered.kept_ids() == std::vector<int32_t>{0});
  // min_p = 1 (transformers takes [0, 1]; a model file's default was refused before):
  // the most likely tokens only, ties included.
  REQUIRE(decode::check(sampling(1.0f, 0, 1.0f, 1.0f)));
  Sampler one(sampling(1.0f, 0, 1.0f, 1.0f));
  next_of(one, logits);
  CHECK(one.kept_ids() == std::vector<int32_t>{0});
  next_of(one, {0.5f, -1.0f, 0.5f});
  CHECK(one.kept_ids() == std::vector<int32_t>{0, 2});
}

// Bernstein's inequality: for a count S of N draws, each the token with probability q,
// P(|S - Nq| >= t) <= 2 exp(-t^2 / (2 Nq(1-q) + 2t/3)). The bound t below makes that
// 1e-12 per check; this test makes fewer than 100 checks, so a correct sampler fails it
// with probability < 1e-10 (u's 24-bit granularity and the f32 probabilities move Nq
// by < 0.1). The bound is 0.5% of N at q = 0.1, 0.8% at q = 0.5: a rule applied wrongly
// on these vectors (a filter skipped, the temperature missing) moves some probability
// by several percent.
double bernstein_bound(size_t draws, double q) {
  const double log_term = std::log(2.0 / 1e-12);
  const double variance = static_cast<double>(draws) * q * (1 - q);
  return log_term / 3 + std::sqrt(log_term * log_term / 9 + 2 * log_term * variance);
}

TEST_CASE("draw frequencies match the exact distribution after every filter", "[bulk][sampling]") {
  const std::vector<float> logits = {2.0f, 1.5f, 1.5f, 0.7f, 0.0f, -0.5f, -1.2f, -3.0f};
  struct Case {
    const char* name;
    SamplingOptions options;
    std::vector<int32_t> seen;
  };
  SamplingOptions penalized = sampling();
  penalized.repetition_penalty = 1.5f;
  SamplingOptions chain = sampling(0.8f, 6, 0.95f, 0.1f);
  chain.repetition_penalty = 1.2f;
  const std::vector<Case> cases = {
      {"softmax alone", sampling(), {}},
      {"temperature 0.5, top-k 2 (a tie at the 2nd)", sampling(0.5f, 2), {}},
      {"temperature 1.5, top-p 0.8", sampling(1.5f, 0, 0.8f), {}},
      {"temperature 2, min-p 0.2", sampling(2.0f, 0, 1.0f, 0.2f), {}},
      {"repetition penalty 1.5", penalized, {0, 3, 3, 7}},
      {"penalty, temperature, top-k, top-p, min-p", chain, {1, 6}},
  };
  constexpr size_t kDraws = 200000;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& test = cases[c];
    double margin;
    const std::vector<double> want = reference(logits, test.options, test.seen, &margin);
    REQUIRE(margin > 1e-3);
    SamplingOptions o = test.options;
    o.seed = 1000 + c;
    Sampler sampler(o);
    std::vector<size_t> counts(logits.size(), 0);
    std::vector<float> copy;
    for (size_t draw = 0; draw < kDraws; ++draw) {
      copy = logits;  // next() may change its logits
      const int32_t id = sampler.next(copy.data(), copy.size(), test.seen.data(), test.seen.size());
      // No assertion per draw: 1.2 million of them took most of this test's time under ASan.
      if (id < 0 || static_cast<size_t>(id) >= logits.size()) FAIL(test.name << ": draw " << draw << " gave id " << id);
      ++counts[static_cast<size_t>(id)];
    }
    CHECK(sampler.kept_ids() == ids_above_zero(want));
    for (size_t i = 0; i < logits.size(); ++i) {
      const double expected = want[i] * kDraws;
      INFO(test.name << ": token " << i << " drawn " << counts[i] << " times, expected " << expected);
      if (want[i] == 0) CHECK(counts[i] == 0);
      else CHECK(std::abs(static_cast<double>(counts[i]) - expected) <= bernstein_bound(kDraws, want[i]));
    }
  }
}

TEST_CASE("a seed gives one sequence, other seeds give others", "[sampling]") {
  const std::vector<float> logits(1000, 0.0f);  // uniform: 1000^-40 for two equal sequences
  auto sequence = [&](uint64_t seed) {
    SamplingOptions o = sampling();
    o.seed = seed;
    Sampler sampler(o);
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(next_of(sampler, logits));
    return ids;
  };
  CHECK(sequence(5) == sequence(5));
  CHECK(sequence(5) != sequence(6));
  CHECK(sequence(0) != sequence(1ull << 40));
}

TEST_CASE("one-token and empty vocabularies", "[sampling]") {
  for (const SamplingOptions& o : {SamplingOptions{}, sampling(), sampling(0.5f, 1, 0.5f, 0.5f), sampling(2.0f, 5, 0.9f)}) {
    Sampler sampler(o);
    CHECK(next_of(sampler, {-3.0f}) == 0);
    CHECK(next_of(sampler, {}) == -1);
  }
}

TEST_CASE("a Gemma-sized vocabulary (262144) under every filter draws a kept token", "[sampling]") {
  constexpr size_t n = 262144;
  const std::vector<float> logits = pcg_logits(n, 11, 16.0f);
  SamplingOptions penalized = sampling(1.0f, 64, 0.95f);
  penalized.repetition_penalty = 1.1f;
  for (const SamplingOptions& o : {SamplingOptions{}, sampling(1.0f, 64, 0.95f), sampling(1.0f, 0, 0.95f),
                                   sampling(0.6f, 20, 0.95f), sampling(1.0f, 0, 1.0f, 0.05f), sampling(), penalized}) {
    const std::vector<int32_t> seen = {5, 17, 99999, 262143};
    double margin;
    const std::vector<double> want = reference(logits, o, seen, &margin);
    INFO("top_k " << o.top_k << ", top_p " << o.top_p << ", min_p " << o.min_p << ", sample " << o.sample);
    REQUIRE(margin > 1e-6);  // as in the test above
    Sampler sampler(o);
    for (int i = 0; i < 3; ++i) {
      const int32_t id = next_of(sampler, logits, seen);
      REQUIRE(id >= 0);
      REQUIRE(static_cast<size_t>(id) < n);
      if (!o.sample) {
        CHECK(want[id] == *std::max_element(want.begin(), want.end()));
        continue;
      }
      CHECK(want[id] > 0);
      CHECK(difference(sampler.kept_ids(), ids_above_zero(want)) == "");
    }
  }
}

// What x86-64 drew (the run's first platform writes the file) this platform draws too:
// tools/test.sh's aarch64, armv7 and WebAssembly stages run [portable].
TEST_CASE("a seed draws the same ids as on the run's first platform", "[sampling][portable]") {
  const std::vector<float> logits = pcg_logits(50000, 2026, 10.0f);
  SamplingOptions gemma = sampling(1.0f, 64, 0.95f);
  gemma.repetition_penalty = 1.1f;
  const std::vector<SamplingOptions> settings = {gemma, sampling(0.6f, 20, 0.95f), sampling(0.8f, 0, 0.95f),
                                                 sampling(1.3f, 0, 1.0f, 0.02f), sampling(0.7f)};
  auto draw_all = [&] {
    std::ostringstream text;
    for (size_t s = 0; s < settings.size(); ++s) {
      SamplingOptions o = settings[s];
      o.seed = 77 + s;
      Sampler sampler(o);
      std::vector<int32_t> seen = {1, 2, 3};
      for (int i = 0; i < 64; ++i) {
        seen.push_back(next_of(sampler, logits, seen));
        text << seen.back() << (i + 1 < 64 ? " " : "\n");
      }
    }
    return text.str();
  };
  const std::string here = draw_all();
  const std::string shared = test::shared_file("sampling_draws_v1.txt", [&](const std::string& path) {
    std::ofstream(path) << here;
  });
  std::ifstream in(shared);
  const std::string first_platform((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(here == first_platform);
}

}  // namespace petrel::sampling_tests

TEST_CASE("sampling options: a refused value is written with '.' whatever LC_NUMERIC the application set", "[sampling]") {
  petrel::decode::SamplingOptions o;
  o.top_p = 1.5f;
  const auto in_c = petrel::decode::check(o);
  REQUIRE_FALSE(in_c);
  petrel::test::CommaRadixLocale comma;
  if (!comma.ok()) {
    WARN("no locale with a ',' radix here: not checked");
    return;
  }
  const auto in_comma = petrel::decode::check(o);
  REQUIRE_FALSE(in_comma);
  CHECK(in_comma.error().message == in_c.error().message);
}
