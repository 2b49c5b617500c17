// No allocation inside the decode loop: a translation of 40 steps allocates no
// more than one of 4 steps (EOS held back so the step counts are exact), once the
// session's buffers have grown to the largest shape. And a failed allocation
// anywhere in a translation is an error value, never an exception.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "convert/convert.h"
#include "petrel/translator.h"
#include "support/test_support.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<size_t> allocations{0};
// While counting: the allocation with this number (0-based) fails, as under memory pressure.
std::atomic<size_t> fail_at{SIZE_MAX};
// Of them, requests that may fail quietly (nothrow new: std::stable_sort's buffer,
// which falls back to sorting in place).
std::atomic<size_t> nothrow_allocations{0};
}  // namespace

// Counting replacements of every global allocation function (this test binary
// only). All of them, plain, nothrow and aligned, so that every allocation and
// release goes through malloc/free — as sanitizers require of a replacement.
namespace {
void* counted_alloc(size_t size, size_t alignment, bool nothrow = false) {
  if (nothrow && counting.load(std::memory_order_relaxed)) nothrow_allocations.fetch_add(1);
  if (counting.load(std::memory_order_relaxed) &&
      allocations.fetch_add(1, std::memory_order_relaxed) == fail_at.load(std::memory_order_relaxed))
    return nullptr;
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(size);
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void* checked(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t n) { return checked(counted_alloc(n, 0)); }
void* operator new[](size_t n) { return checked(counted_alloc(n, 0)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0, true); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n, 0, true); }
void* operator new(size_t n, std::align_val_t a) { return checked(counted_alloc(n, static_cast<size_t>(a))); }
void* operator new[](size_t n, std::align_val_t a) { return checked(counted_alloc(n, static_cast<size_t>(a))); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<size_t>(a), true);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<size_t>(a), true);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace petrel;
using namespace petrel::test;

namespace {
size_t allocations_of(Translator& translator, const std::vector<std::vector<int32_t>>& batch, size_t steps,
                      size_t beam, bool shortlist, bool half_cache, bool streaming = false) {
  TranslateOptions o;
  o.beam_size = o.n_best = beam;
  o.use_shortlist = shortlist;
  o.kv_cache_f16 = half_cache;
  size_t events = 0;
  if (streaming) o.on_token = [&events](const TokenEvent& e) { return ++events > 0 && !e.piece.empty(); };
  o.max_new_tokens = o.min_new_tokens = steps;
  allocations = 0;
  counting = true;
  auto r = translator.translate(batch, o);
  counting = false;
  REQUIRE(r.has_value());
  REQUIRE(translator.last_timings().decode_steps == steps);
  return allocations.load();
}
}  // namespace

TEST_CASE("the decode loop does not allocate", "[runtime][memory]") {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("m.petrel");
  o.shortlist_path = oracle_dir("post_swish_concat_tied") + "/lex.s2t";
  convert::convert_checkpoint(o);
  auto model = Model::load(o.output_path);
  REQUIRE(model.has_value());
  const size_t beam = GENERATE(1, 3);
  const size_t threads = GENERATE(from_range(thread_counts({1, 2})));
  const bool shortlist = GENERATE(false, true);
  const bool half_cache = GENERATE(false, true);
  const bool streaming = GENERATE(false, true);  // a token callback per step adds nothing either
  auto created = Translator::create(model.value(), {"", threads});
  REQUIRE(created.has_value());
  Translator& translator = created.value();
  const std::vector<std::vector<int32_t>> batch = {{5, 9, 13, 0}, {7, 0}, {21, 22, 23, 24, 25, 0}};
  allocations_of(translator, batch, 40, beam, shortlist, half_cache, streaming);  // grow every buffer
  const size_t short_run = allocations_of(translator, batch, 4, beam, shortlist, half_cache, streaming);
  const size_t long_run = allocations_of(translator, batch, 40, beam, shortlist, half_cache, streaming);
  INFO("beam " << beam << ", threads " << threads << ", shortlist " << shortlist << ", f16 cache " << half_cache
               << ", streaming " << streaming << ": " << short_run << " allocations for 4 steps, " << long_run
               << " for 40");
  CHECK(long_run == short_run);
}

TEST_CASE("a failed allocation anywhere in a translation is kOutOfMemory, and the session still works",
          "[runtime][memory]") {
  auto model = load_model(fixture_dir() + "/portable/post_swish_concat_tied-int8.petrel");
  const std::vector<std::vector<int32_t>> batch = {{5, 9, 13, 0}, {7, 0}};
  TranslateOptions o;
  o.beam_size = o.n_best = 2;
  o.max_new_tokens = 8;
  auto reference = Translator::create(model);
  REQUIRE(reference.has_value());
  const auto expected = reference.value().translate(batch, o);
  REQUIRE(expected.has_value());

  size_t fresh_allocations = 0;  // what a new session's first translation allocates
  {
    auto translator = Translator::create(model);
    REQUIRE(translator.has_value());
    allocations = 0;
    nothrow_allocations = 0;
    counting = true;
    auto r = translator.value().translate(batch, o);
    counting = false;
    REQUIRE(r.has_value());
    fresh_allocations = allocations.load();
  }
  const size_t may_fail_quietly = nothrow_allocations.load();
  REQUIRE(fresh_allocations > 10);
  size_t failed = 0;
  for (size_t n = 0; n < fresh_allocations; ++n) {
    auto translator = Translator::create(model);
    REQUIRE(translator.has_value());
    allocations = 0;
    fail_at = n;
    counting = true;
    auto r = translator.value().translate(batch, o);  // must not throw
    counting = false;
    fail_at = SIZE_MAX;
    INFO("allocation " << n << " of " << fresh_allocations << " failed");
    if (!r.has_value()) {
      ++failed;
      REQUIRE(r.error().code == ErrorCode::kOutOfMemory);
    }
    auto again = translator.value().translate(batch, o);  // buffers left half-grown still serve
    REQUIRE(again.has_value());
    for (size_t s = 0; s < batch.size(); ++s)
      for (size_t k = 0; k < expected.value()[s].hypotheses.size(); ++k)
        REQUIRE(again.value()[s].hypotheses[k].ids == expected.value()[s].hypotheses[k].ids);
  }
  // Every throwing allocation of a translation is inside the guard.
  CHECK(failed + may_fail_quietly == fresh_allocations);
}
