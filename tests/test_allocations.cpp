// No allocation inside the decode loop: a translation of 40 steps allocates no
// more than one of 4 steps (EOS held back so the step counts are exact), once the
// session's buffers have grown to the largest shape. And a failed allocation
// anywhere in a translation is an error value, never an exception.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <optional>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "convert/quantize.h"
#include "decode/sampling.h"
#include "model_access.h"
#include "models/output_vocabulary.h"
#include "petrel/generator.h"
#include "petrel/translator.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<size_t> allocations{0};
// While counting: the allocation with this number (0-based) fails, as under memory pressure.
std::atomic<size_t> fail_at{SIZE_MAX};
// Of them, requests that may fail quietly (nothrow new: std::stable_sort's buffer,
// which falls back to sorting in place).
std::atomic<size_t> nothrow_allocations{0};
// While budgeting: the bytes that may still be requested (released ones are not given
// back: a bound on all a call asks for, which is portable, unlike the live bytes). A
// request past it fails, as on a device without overcommit whose memory ran out.
std::atomic<bool> budgeting{false};
std::atomic<int64_t> budget_left{0};
#ifdef __GLIBC__
// While measuring (glibc: malloc_usable_size): the bytes allocated and not yet
// released since measuring began, and their peak.
std::atomic<bool> measuring{false};
std::atomic<int64_t> live_bytes{0}, peak_bytes{0};
#endif
}  // namespace

// Counting replacements of every global allocation function (this test binary
// only). All of them, plain, nothrow and aligned, so that every allocation and
// release goes through malloc/free — as sanitizers require of a replacement.
namespace {
void* measured(void* p) {
#ifdef __GLIBC__
  if (p != nullptr && measuring.load(std::memory_order_relaxed)) {
    const int64_t live = live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                         static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = peak_bytes.load();
    while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
    }
  }
#endif
  return p;
}
void release(void* p) {
#ifdef __GLIBC__
  if (p != nullptr && measuring.load(std::memory_order_relaxed))
    live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
#endif
  std::free(p);
}
void* counted_alloc(size_t size, size_t alignment, bool nothrow = false) {
  if (budgeting.load(std::memory_order_relaxed) &&
      budget_left.fetch_sub(static_cast<int64_t>(std::min<uint64_t>(size, INT64_MAX / 2))) < static_cast<int64_t>(size))
    return nullptr;
  if (nothrow && counting.load(std::memory_order_relaxed)) nothrow_allocations.fetch_add(1);
  if (counting.load(std::memory_order_relaxed) &&
      allocations.fetch_add(1, std::memory_order_relaxed) == fail_at.load(std::memory_order_relaxed))
    return nullptr;
  if (size == 0) size = 1;
  if (alignment <= alignof(std::max_align_t)) return measured(std::malloc(size));
  return measured(std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment));
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
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }

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

// The sampler runs once per generated token: its scratch grows on the first call only.
TEST_CASE("Sampler::next allocates nothing after its first call", "[runtime][memory][sampling]") {
  constexpr size_t n = 262144;
  std::vector<float> logits(n);
  for (size_t i = 0; i < n; ++i) logits[i] = static_cast<float>((i * 2654435761u) % 1000) / 100.0f;
  const std::vector<int32_t> seen = {3, 1, 4, 1, 5, 9, 2, 6};
  for (int setting = 0; setting < 6; ++setting) {
    decode::SamplingOptions o;
    o.sample = setting > 0;
    o.repetition_penalty = 1.1f;
    o.temperature = setting == 5 ? 0.7f : 1.0f;
    o.top_k = setting == 1 ? 64 : setting == 2 ? 20000 : 0;  // a heap, and nth_element
    o.top_p = setting == 1 || setting == 3 ? 0.95f : 1.0f;
    o.min_p = setting == 4 ? 0.05f : 0.0f;
    decode::Sampler sampler(o);
    std::vector<float> work = logits;
    allocations = 0;
    counting = true;
    (void)sampler.next(work.data(), n, seen.data(), seen.size());
    counting = false;
    INFO("setting " << setting);
    CHECK(allocations.load() > 0);  // the counter sees the scratch growing
    allocations = 0;
    counting = true;
    for (int call = 0; call < 3; ++call) {
      work = logits;  // same size: no allocation
      (void)sampler.next(work.data(), n, seen.data(), seen.size());
      (void)sampler.next(work.data(), n / 2, seen.data(), seen.size());  // smaller: none either
    }
    counting = false;
    CHECK(allocations.load() == 0);
  }
}

TEST_CASE("the decode loop does not allocate", "[runtime][memory]") {
  // Converted once: the GENERATEs below run this body 32 times.
  static const std::shared_ptr<const Model> model = [] {
    static TempDir tmp;  // the model maps its file
    convert::ConvertOptions o;
    o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
    o.output_path = tmp.file("m.petrel");
    o.shortlist_path = oracle_dir("post_swish_concat_tied") + "/lex.s2t";
    convert::convert_checkpoint(o);
    return load_model(o.output_path);
  }();
  const size_t beam = GENERATE(1, 3);
  const size_t threads = GENERATE(from_range(thread_counts({1, 2})));
  const bool shortlist = GENERATE(false, true);
  const bool half_cache = GENERATE(false, true);
  const bool streaming = GENERATE(false, true);  // a token callback per step adds nothing either
  auto created = Translator::create(model, {"", threads});
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

// A language model's generation: allocations per call, not per token (the caches and
// buffers grow on the first calls, then a longer generation costs no more than a short one).
TEST_CASE("a language model's generation loop does not allocate per token", "[runtime][memory][decoder_only]") {
  static const std::shared_ptr<const Model> model = [] {
    static TempDir tmp;
    convert::ConvertOptions o;
    o.checkpoint_dir = fixture_dir() + "/decoder_only/gemma3_f32";  // sliding-window rings and full caches
    o.output_path = tmp.file("lm.petrel");
    convert::convert_checkpoint(o);
    return load_model(o.output_path);
  }();
  const bool sample = GENERATE(false, true);
  const bool half_cache = GENERATE(false, true);
  auto created = Generator::create(model, {"", 1});
  REQUIRE(created.has_value());
  auto run = [&](size_t steps) {
    GenerateOptions o;
    o.max_new_tokens = steps;
    o.ignore_eos = true;
    o.do_sample = sample;
    o.top_k = 10u;
    o.kv_cache_f16 = half_cache;
    allocations = 0;
    counting = true;
    auto r = created.value().generate({{5, 9, 13, 17, 21}}, o);
    counting = false;
    REQUIRE(r.has_value());
    REQUIRE(r.value()[0].ids.size() == steps);
    return allocations.load();
  };
  run(60);  // grow every buffer
  const size_t short_run = run(4), long_run = run(60);
  INFO("sample " << sample << ", f16 cache " << half_cache << ": " << short_run << " allocations for 4 tokens, "
                 << long_run << " for 60");
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

#ifdef __GLIBC__
TEST_CASE("the converter streams: its heap stays far below its largest tensor's f32 size", "[convert][memory]") {
  // The oracle checkpoint with a 131072-token vocabulary: its tied table (4 M values,
  // 16 MB as f32) dwarfs everything else. Converted a block of rows at a time, the
  // heap holds a few blocks of MatrixEncoder::kBlockValues, the table's row scales
  // and the writer's buffer; a converter holding the table (as f32 or encoded) fails.
  TempDir tmp;
  const std::string dir = tmp.file("big_vocabulary");
  std::filesystem::create_directory(dir);
  constexpr uint64_t kOracleVocab = 48, kVocab = 131072;
  auto tensors = read_checkpoint(oracle_dir("post_swish_concat_tied") + "/model.safetensors");
  uint64_t largest = 0;
  for (auto& [name, t] : tensors) {
    if (t.shape.size() != 2 || (t.shape[0] != kOracleVocab && t.shape[1] != kOracleVocab)) continue;
    const size_t vocab_dim = t.shape[0] == kOracleVocab ? 0 : 1;
    t.shape[vocab_dim] = kVocab;
    const size_t old_size = t.values.size();
    t.values.resize(t.shape[0] * t.shape[1]);
    for (size_t i = old_size; i < t.values.size(); ++i) t.values[i] = t.values[i % old_size];
    largest = std::max<uint64_t>(largest, t.values.size());
  }
  REQUIRE(largest == kVocab * 32);
  write_checkpoint(dir + "/model.safetensors", tensors);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(oracle_dir("post_swish_concat_tied") + "/config.json"));
  config["vocab_size"] = config["decoder_vocab_size"] = kVocab;
  std::ofstream(dir + "/config.json") << config.dump();
  tensors.clear();

  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("m.petrel");
  // Under a subset (sanitizers, emulated CPUs: an int4 conversion took 25 s there) int8 alone.
  const std::vector<DType> dtypes =
      subset_stride() > 1 ? std::vector<DType>{DType::kInt8} : std::vector<DType>{DType::kInt8, DType::kInt4, DType::kF32};
  for (DType dtype : dtypes) {
    INFO(to_string(dtype));
    o.linear_dtype = o.embedding_dtype = dtype;
    live_bytes = peak_bytes = 0;
    measuring = true;
    convert::convert_checkpoint(o);
    measuring = false;
    const int64_t table_f32 = static_cast<int64_t>(largest * 4);
    INFO("peak heap " << peak_bytes.load() << " bytes; the table is " << table_f32 << " as f32");
    CHECK(peak_bytes.load() < table_f32 / 2);
    CHECK(peak_bytes.load() > static_cast<int64_t>(convert::MatrixEncoder::kBlockValues * 4));  // measured at all
    load_model(o.output_path);
  }
}

TEST_CASE("a shortlist gathers each source id's candidates once, however often the sentence repeats it",
          "[runtime][memory][shortlist]") {
  // A hostile file may give one source id every target (here 65536); a sentence of 512
  // such tokens gathered 512 x 65536 ids (128 MiB) before removing duplicates.
  constexpr uint32_t kVocab = 65536, kCols = 8;
  std::vector<uint32_t> offsets(kVocab + 1, kVocab);
  offsets[0] = 0;  // source id 0 owns every candidate
  std::vector<int32_t> candidates(kVocab);
  for (uint32_t i = 0; i < kVocab; ++i) candidates[i] = static_cast<int32_t>(i);
  std::vector<int8_t> table(size_t{kVocab} * kCols, 1);
  std::vector<float> scales(kVocab, 1.0f);
  ModelInfo info;
  detail::ModelWeights w;
  w.info = &info;
  w.output_proj.dtype = DType::kInt8;
  w.output_proj.rows = kVocab;
  w.output_proj.cols = kCols;
  w.output_proj.data = table.data();
  w.output_proj.scales = scales.data();
  w.shortlist.offsets = offsets.data();
  w.shortlist.candidates = candidates.data();
  const std::vector<std::vector<int32_t>> batch = {std::vector<int32_t>(512, 0)};
  models::OutputVocabulary vocabulary;
  live_bytes = peak_bytes = 0;
  measuring = true;
  vocabulary.use_shortlist(w, batch);
  measuring = false;
  CHECK(vocabulary.size() == kVocab);
  CHECK(vocabulary.token(kVocab - 1) == static_cast<int32_t>(kVocab - 1));
  // The ids (sentence and batch: 2 x 256 KiB), the gathered table (512 KiB) and scales (256 KiB).
  INFO("peak heap " << peak_bytes.load() << " bytes");
  CHECK(peak_bytes.load() < int64_t{4} << 20);
}
#endif

namespace {
// What a chat app does with a language model file: load it, make a generator, continue a
// text, start a conversation and reply once. The first error, or nothing.
std::optional<Error> load_generate_and_chat(const std::vector<uint8_t>& file) {
  auto model = load_bytes(file, "lm.petrel");
  if (!model) return model.error();
  auto generator = Generator::create(model.value());
  if (!generator) return generator.error();
  GenerateOptions o;
  o.do_sample = false;
  o.max_new_tokens = 2;
  o.ignore_eos = true;
  auto text = generator.value().generate_text("the user is in", o);
  if (!text) return text.error();
  auto chat = Conversation::create(generator.value(), "Answer briefly.");
  if (!chat) return chat.error();
  auto reply = chat.value().reply("hi there", o);
  if (!reply) return reply.error();
  return std::nullopt;
}
}  // namespace

TEST_CASE("a failed allocation anywhere in loading a language model, generating text or chatting is kOutOfMemory",
          "[runtime][memory][decoder_only]") {
  const std::vector<uint8_t> file = read_bytes(tiny_lm("chat", tiny_lm_chat_template()));
  REQUIRE_FALSE(load_generate_and_chat(file).has_value());
  allocations = 0;
  nothrow_allocations = 0;
  counting = true;
  REQUIRE_FALSE(load_generate_and_chat(file).has_value());
  counting = false;
  const size_t total = allocations.load(), may_fail_quietly = nothrow_allocations.load();
  REQUIRE(total > 100);
  size_t failed = 0, tried = 0;
  for (size_t n = 0; n < total; n += subset_stride()) {
    allocations = 0;
    fail_at = n;
    counting = true;
    std::optional<Error> error;
    bool threw = false;
    try {
      error = load_generate_and_chat(file);
    } catch (...) {
      threw = true;
    }
    counting = false;
    fail_at = SIZE_MAX;
    INFO("allocation " << n << " of " << total << " failed");
    REQUIRE_FALSE(threw);
    ++tried;
    if (error) {
      ++failed;
      INFO(error->message);
      REQUIRE(error->code == ErrorCode::kOutOfMemory);
    }
  }
  // Every throwing allocation is inside a guard that makes it an error (a nothrow one
  // may be either: the loader's own is an error, std::stable_sort's buffer is not).
  if (subset_stride() == 1) CHECK(failed + may_fail_quietly >= total);
  CHECK(failed > tried / 2);
}

TEST_CASE("hostile chat templates end in an error or a result within a memory budget, never an exception",
          "[runtime][memory][decoder_only]") {
  // Each allocated gigabytes before its limit was checked, or ran for minutes; the budget
  // (all bytes requested, released or not) is a device's whole memory.
  struct Case {
    std::string name, chat_template;
    bool renders;  // a result (the template is within every limit), else an error
  };
  std::string keys;  // a 16,000-key dict literal (a 90,000-key one has more tokens than a template may)
  for (int i = 0; i < 16000; ++i) keys += (i ? ",'" : "'") + std::to_string(i) + "':0";
  const std::vector<Case> cases = {
      {"list-repeat", "{{ [0] * 16777216 }}", false},
      {"split-16m", "{{ ('a' * 16777216).split('a') | length }}", false},
      {"output-16m", "{{ 'a ' * 8388608 }}", false},
      {"substring-2m", "{% set s = 'a' * 2097152 %}{{ ('a' * 1000 + 'b') in s }}" + tiny_lm_chat_template(), true},
      {"dict-16k-x20", "{% for t in range(20) %}{% set d = {" + keys + "} %}{% endfor %}" + tiny_lm_chat_template(), true},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto model = load_model(tiny_lm("hostile-" + c.name, c.chat_template));
    auto generator = Generator::create(model);
    REQUIRE(generator);
    budget_left = int64_t{256} << 20;
    budgeting = true;
    Result<Conversation> chat = Error{ErrorCode::kInternal, "not run"};
    bool threw = false;
    try {
      chat = Conversation::create(generator.value());
    } catch (...) {
      threw = true;
    }
    budgeting = false;
    REQUIRE_FALSE(threw);
    CHECK(budget_left.load() > 0);  // ended by its own limits, not by the budget
    if (c.renders) {
      CHECK(chat);
      continue;
    }
    REQUIRE_FALSE(chat);
    INFO(chat.error().message);
    CHECK(chat.error().message.rfind("chat template", 0) == 0);
  }
}

TEST_CASE("a request over this device's memory is refused before it is allocated", "[generation]") {
  // kMaxRequestBytes (32 GiB on 64-bit) would let a phone with 4 GiB start a 20 GiB request
  // and be killed; the limit is the device's memory, or the process's cgroup limit, where
  // that is less.
  const uint64_t device = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
#if defined(__linux__)
  CHECK(petrel::detail::process_memory_limit() == petrel::detail::cgroup_memory_limit(""));
#endif
  const uint64_t limit = std::min({petrel::kMaxRequestBytes, device, petrel::detail::process_memory_limit()});
  CHECK(petrel::detail::working_memory_limit() == limit);
  CHECK_FALSE(petrel::detail::working_memory_problem(petrel::detail::CheckedSize(limit), "it needs", "less"));
  const auto over = petrel::detail::working_memory_problem(petrel::detail::CheckedSize(limit + 1), "it needs", "ask less");
  REQUIRE(over);
  CHECK(over->code == petrel::ErrorCode::kOutOfMemory);
  CHECK_THAT(over->message, Catch::Matchers::Contains("the limit is " + std::to_string((limit + (1u << 20) - 1) >> 20) + " MiB") &&
                                Catch::Matchers::EndsWith(": ask less"));
  if (limit < petrel::kMaxRequestBytes) CHECK_THAT(over->message, Catch::Matchers::Contains("the memory this process may use"));
}

TEST_CASE("the cgroup memory limit is the least of the process's groups and their ancestors, v1 and v2", "[generation]") {
  petrel::test::TempDir tmp;
  const std::string root = tmp.path();
  auto put = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + path).parent_path());
    std::ofstream(root + path) << text;
  };
  using petrel::detail::cgroup_memory_limit;
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);  // no /proc: no limit
  // v2: the group's own memory.max is "max"; its parent's is 3 GiB, the top's 5 GiB.
  put("/proc/self/cgroup", "0::/app.slice/petrel.service\n");
  put("/sys/fs/cgroup/app.slice/petrel.service/memory.max", "max\n");
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);
  put("/sys/fs/cgroup/app.slice/memory.max", "3221225472\n");
  put("/sys/fs/cgroup/memory.max", "5368709120\n");
  CHECK(cgroup_memory_limit(root) == 3221225472u);
  put("/sys/fs/cgroup/app.slice/petrel.service/memory.max", "1073741824\n");
  CHECK(cgroup_memory_limit(root) == 1073741824u);
  // Values that are not a number of bytes are no limit: garbage, a number past 2^64.
  put("/sys/fs/cgroup/app.slice/petrel.service/memory.max", "12ab\n");
  put("/sys/fs/cgroup/app.slice/memory.max", "99999999999999999999999\n");
  CHECK(cgroup_memory_limit(root) == 5368709120u);
  // v1: the memory controller's line, among others; a container sees its group at the top.
  put("/proc/self/cgroup", "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n");
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);  // v2's files are not read for v1 lines
  put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
  CHECK(cgroup_memory_limit(root) == 536870912u);
  // A line without the memory controller, a malformed line and a path longer than a path
  // can be read nothing; the last line reads v2's top.
  put("/proc/self/cgroup", "3:cpu:/a\nnonsense\n0::" + std::string(5000, '/') + "\n0::/\n");
  CHECK(cgroup_memory_limit(root) == 5368709120u);
  // A group outside the process's cgroup namespace: not under this tree's top, whose
  // limit is another group's.
  put("/proc/self/cgroup", "0::/../../system.slice/petrel.service\n");
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);
  put("/proc/self/cgroup", "0::/app.slice/..\n");
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);
  // A line cut at the 64 KiB read limit is not read: "/app.slice" of "/app.slicex".
  put("/proc/self/cgroup", std::string(65536 - 13, '\n') + "0::/app.slicex\n");
  CHECK(cgroup_memory_limit(root) == UINT64_MAX);
}
