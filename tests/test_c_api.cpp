// The C API gives what the C++ API gives, reports errors as codes and messages,
// and one model serves several threads with a session each.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#if !defined(__EMSCRIPTEN__)
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "convert/convert.h"
#include "petrel/petrel.h"
#include "petrel/batch_translator.h"
#include "petrel/translator.h"
#include "support/native_fixture.h"
#include "support/test_support.h"

using namespace petrel::test;

namespace {
const std::vector<std::vector<int32_t>> kInputs = {{19, 20, 37, 19, 34, 4, 0}, {27, 18, 24, 0}, {0}};

using Outputs = std::vector<std::pair<std::vector<int32_t>, double>>;  // ids and score per hypothesis

Outputs translate_c(petrel_session* session, const petrel_options& options) {
  std::vector<const int32_t*> inputs;
  std::vector<size_t> lengths;
  for (const auto& in : kInputs) {
    inputs.push_back(in.data());
    lengths.push_back(in.size());
  }
  petrel_result* result = nullptr;
  if (petrel_translate_ids(session, inputs.data(), lengths.data(), inputs.size(), &options, &result) != PETREL_OK)
    return {};
  Outputs out;
  for (size_t i = 0; i < petrel_result_inputs(result); ++i) {
    for (size_t k = 0; k < petrel_result_hypotheses(result, i); ++k) {
      size_t n = 0;
      const int32_t* ids = petrel_result_ids(result, i, k, &n);
      out.emplace_back(std::vector<int32_t>(ids, ids + n), petrel_result_score(result, i, k));
    }
  }
  petrel_result_free(result);
  return out;
}
// The portable fixture's model with a single-thread session, both freed at scope end.
struct PortableSession {
  const std::string path = fixture_dir() + "/portable/post_swish_concat_tied-int8.petrel";
  petrel_model* model = nullptr;
  petrel_session* session = nullptr;
  PortableSession() {
    REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
    REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  }
  ~PortableSession() {
    petrel_session_free(session);
    petrel_model_free(model);
  }
  PortableSession(const PortableSession&) = delete;
  PortableSession& operator=(const PortableSession&) = delete;
};
}  // namespace

TEST_CASE("C API: same outputs as the C++ API, errors as codes", "[capi]") {
  const std::string path = fixture_dir() + "/portable/post_swish_concat_tied-int8.petrel";
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  auto cpp_model = petrel::Model::load(path);
  REQUIRE(cpp_model.has_value());
  auto translator = petrel::Translator::create(cpp_model.value());
  Outputs per_cache[2];
  for (int half : {0, 1}) {  // the f32 and the f16 KV cache
    petrel_options options;
    petrel_options_init(&options);
    CHECK(options.kv_cache_f16 == 0);
    options.beam_size = options.n_best = 3;
    options.max_new_tokens = 12;
    options.kv_cache_f16 = half;
    per_cache[half] = translate_c(session, options);

    petrel::TranslateOptions o;
    o.beam_size = o.n_best = 3;
    o.max_new_tokens = 12;
    o.kv_cache_f16 = half != 0;
    auto from_cpp = translator.value().translate(kInputs, o);
    REQUIRE(from_cpp.has_value());
    Outputs expected;
    for (const auto& t : from_cpp.value())
      for (const auto& h : t.hypotheses) expected.emplace_back(h.ids, h.score);
    CHECK(per_cache[half] == expected);
  }
  CHECK(per_cache[0] != per_cache[1]);  // the option reached the engine: f16 rounding moves scores

  auto bytes = read_bytes(path);
  bytes[9] ^= 0xff;  // the file identifier
  petrel_model* broken = nullptr;
  CHECK(petrel_model_load_memory(bytes.data(), bytes.size(), &broken) == PETREL_FORMAT);
  CHECK(broken == nullptr);
  CHECK(std::string(petrel_last_error()).find("file identifier") != std::string::npos);
  petrel_session* no_threads = nullptr;
  CHECK(petrel_session_create(model, nullptr, 0, &no_threads) == PETREL_INVALID_ARGUMENT);
  CHECK(no_threads == nullptr);
  petrel_session_free(session);
  petrel_model_free(model);
}

TEST_CASE("C API: one model, four threads with a session each, as sequential runs", "[capi][threads]") {
  const std::string path = fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel";
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = options.n_best = 2;
  options.max_new_tokens = 12;
  petrel_session* sequential = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &sequential) == PETREL_OK);
  const auto expected = translate_c(sequential, options);
  REQUIRE_FALSE(expected.empty());
  petrel_session_free(sequential);

  constexpr int kThreads = 4, kRepeats = 20;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      petrel_session* session = nullptr;
      // Odd threads also run an intra-op pool: same outputs, more concurrency.
      if (petrel_session_create(model, nullptr, 1 + t % 2, &session) != PETREL_OK) {
        mismatches[t] = -1;
        return;
      }
      for (int r = 0; r < kRepeats; ++r) mismatches[t] += translate_c(session, options) != expected;
      petrel_session_free(session);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
  petrel_model_free(model);
}

TEST_CASE("C API: sessions made at once by four threads on a model just loaded", "[capi][threads]") {
  // The generated position tables are made by the first session, not at load: here
  // four threads race to be first (run under the tsan preset to see the ordering).
  const std::string path = fixture_dir() + "/portable/post_swish_concat_tied-f32.petrel";
  petrel_options options;
  petrel_options_init(&options);
  options.max_new_tokens = 12;
  petrel_model* reference = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &reference) == PETREL_OK);
  petrel_session* sequential = nullptr;
  REQUIRE(petrel_session_create(reference, nullptr, 1, &sequential) == PETREL_OK);
  const auto expected = translate_c(sequential, options);
  REQUIRE_FALSE(expected.empty());
  petrel_session_free(sequential);
  petrel_model_free(reference);

  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      petrel_session* session = nullptr;
      if (petrel_session_create(model, nullptr, 1, &session) != PETREL_OK) {
        mismatches[t] = -1;
        return;
      }
      mismatches[t] += translate_c(session, options) != expected;
      petrel_session_free(session);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(mismatches[t] == 0);
  petrel_model_free(model);
}

TEST_CASE("C API: a text translation with no hypothesis is an error, not a read past the end", "[capi]") {
  // A shortlist whose only always-allowed token is EOS, a source word with no
  // candidates, and EOS held back by min_new_tokens: search finishes the sentence
  // with no hypothesis at all.
  TempDir tmp;
  std::ofstream(tmp.file("lex.s2t")) << "w5 w1 0.5\n";
  petrel::convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("m.petrel");
  o.shortlist_path = tmp.file("lex.s2t");
  o.shortlist_first = 0;
  o.shortlist_best = 1;
  petrel::convert::convert_checkpoint(o);

  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(o.output_path.c_str(), &model) == PETREL_OK);
  petrel_session* session = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &session) == PETREL_OK);
  petrel_options options;
  petrel_options_init(&options);
  options.use_shortlist = 1;
  char* text = nullptr;
  REQUIRE(petrel_translate_text(session, "w2", &options, &text) == PETREL_OK);  // EOS allowed: empty output
  CHECK(std::string(text).empty());
  petrel_string_free(text);

  options.min_new_tokens = 1;
  text = nullptr;
  CHECK(petrel_translate_text(session, "w2", &options, &text) == PETREL_INVALID_ARGUMENT);
  CHECK(text == nullptr);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("no token could be generated"));

  // The ids API reports the same state as an input with no hypotheses.
  const int32_t ids[] = {2, 0};
  const int32_t* inputs[] = {ids};
  const size_t lengths[] = {2};
  petrel_result* result = nullptr;
  REQUIRE(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_OK);
  CHECK(petrel_result_hypotheses(result, 0) == 0);
  size_t n = 7;
  CHECK(petrel_result_ids(result, 0, 0, &n) == nullptr);
  CHECK(n == 0);
  petrel_result_free(result);
  petrel_session_free(session);
  petrel_model_free(model);
}

TEST_CASE("C API: petrel_options carries its size, and a wrong size is refused", "[capi]") {
  const PortableSession c;
  petrel_session* const session = c.session;
  const std::string& path = c.path;
  petrel_options options;
  petrel_options_init(&options);
  CHECK(options.struct_size == sizeof(petrel_options));
  REQUIRE_FALSE(translate_c(session, options).empty());

  options.struct_size = 0;  // never initialised
  petrel_result* result = nullptr;
  const int32_t ids[] = {5, 0};
  const int32_t* inputs[] = {ids};
  const size_t lengths[] = {2};
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("petrel_options_init"));
  options.struct_size = sizeof(petrel_options) + 8;  // a newer header than this library
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("newer petrel.h"));
  CHECK(result == nullptr);

  // A target prefix is forced, part of the output, and what the C++ API gives.
  petrel_options_init(&options);
  const int32_t prefix[] = {5, 6};
  options.target_prefix = prefix;
  options.target_prefix_length = 2;
  options.max_new_tokens = 8;
  const Outputs with_prefix = translate_c(session, options);
  REQUIRE(with_prefix.size() == kInputs.size());
  auto cpp_model = petrel::Model::load(path);
  REQUIRE(cpp_model.has_value());
  auto translator = petrel::Translator::create(cpp_model.value());
  petrel::TranslateOptions o;
  o.max_new_tokens = 8;
  o.target_prefix = {5, 6};
  auto from_cpp = translator.value().translate(kInputs, o);
  REQUIRE(from_cpp.has_value());
  for (size_t i = 0; i < kInputs.size(); ++i) {
    REQUIRE(with_prefix[i].first.size() >= 2);
    CHECK(std::vector<int32_t>(with_prefix[i].first.begin(), with_prefix[i].first.begin() + 2) == std::vector<int32_t>{5, 6});
    CHECK(with_prefix[i].first == from_cpp.value()[i].hypotheses[0].ids);
  }
  // A caller built before the prefix existed: its struct ends earlier, the prefix is not read.
  options.struct_size = offsetof(petrel_options, source_language);
  CHECK(translate_c(session, options) != with_prefix);
  options.struct_size = sizeof(petrel_options);
  options.target_prefix = nullptr;
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("target_prefix is NULL"));
  // A struct_size that ends inside the language block: none of that block is read
  // (petrel_translate_stream copies whole blocks only), not half a pointer.
  options.target_prefix = nullptr;
  options.target_prefix_length = 0;
  options.source_language = "xx";
  options.struct_size = offsetof(petrel_options, source_language) + 4;
  char* streamed = nullptr;
  CHECK(petrel_translate_stream(session, "w1 w2", &options, [](void*, const petrel_token_event*) { return 1; }, nullptr,
                                &streamed) == PETREL_OK);
  petrel_string_free(streamed);
  options.struct_size = sizeof(petrel_options);
  options.source_language = nullptr;
  options.target_language = "de";  // a single-pair model has no language codes
  CHECK(petrel_translate_ids(session, inputs, lengths, 1, &options, &result) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("unknown target language 'de'"));
}

TEST_CASE("C API: a request over the memory limit is PETREL_OUT_OF_MEMORY, on every platform", "[capi]") {
  const PortableSession c;
  petrel_session* const session = c.session;
  // 2^16 inputs x beam 64 x 64 steps: KV caches alone would need far more than the limit
  // (and their byte counts would wrap a 32-bit size_t).
  const int32_t ids[] = {5, 0};
  std::vector<const int32_t*> inputs(petrel::kMaxBatchSize, ids);
  std::vector<size_t> lengths(petrel::kMaxBatchSize, 2);
  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = 64;
  options.max_new_tokens = 64;
  petrel_result* result = nullptr;
  CHECK(petrel_translate_ids(session, inputs.data(), lengths.data(), inputs.size(), &options, &result) ==
        PETREL_OUT_OF_MEMORY);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("working memory") &&
                                      Catch::Matchers::Contains("translate fewer inputs per call"));
  inputs.push_back(ids);  // one input more than a call takes
  lengths.push_back(2);
  options.beam_size = 1;
  CHECK(petrel_translate_ids(session, inputs.data(), lengths.data(), inputs.size(), &options, &result) ==
        PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("at most 65536"));
  CHECK(result == nullptr);
}

// A token callback that calls back into its own session would reuse the caches the
// outer call is still filling (heap corruption, found by review): the nested call is
// refused, and the outer one ends as it would have.
TEST_CASE("C API: a token callback calling into its own session is refused, and the call goes on", "[capi]") {
  const PortableSession c;
  petrel_session* const session = c.session;
  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = 2;
  options.max_new_tokens = 8;
  const Outputs plain = translate_c(session, options);
  REQUIRE_FALSE(plain.empty());
  struct Nested {
    petrel_session* session;
    std::vector<petrel_status> statuses;
    std::string error;
  } nested{session, {}, {}};
  options.on_token = [](void* data, const petrel_token_event*) {
    auto* n = static_cast<Nested*>(data);
    const int32_t ids[] = {19, 20, 0};
    const int32_t* inputs[] = {ids};
    const size_t lengths[] = {3};
    petrel_result* inner = nullptr;
    n->statuses.push_back(petrel_translate_ids(n->session, inputs, lengths, 1, nullptr, &inner));
    n->error = petrel_last_error();
    petrel_result_free(inner);
    return 1;
  };
  options.on_token_data = &nested;
  CHECK(translate_c(session, options) == plain);
  REQUIRE_FALSE(nested.statuses.empty());
  CHECK(std::all_of(nested.statuses.begin(), nested.statuses.end(),
                    [](petrel_status s) { return s == PETREL_INVALID_ARGUMENT; }));
  CHECK_THAT(nested.error, Catch::Matchers::Contains("already running a call"));
  // The session serves the next call as before.
  options.on_token = nullptr;
  CHECK(translate_c(session, options) == plain);
}

// A length far over any model's positions is refused before anything is read: 2^62 + 2
// wrapped the end pointer around, and the call translated 2 ids (found by review).
TEST_CASE("C API: lengths beyond any model's positions are refused", "[capi]") {
  const PortableSession c;
  petrel_session* const session = c.session;
  const int32_t ids[] = {19, 20, 0};
  const int32_t* inputs[] = {ids};
  for (size_t length : {(size_t{1} << 20) + 1, SIZE_MAX, SIZE_MAX / 4 + 3}) {
    const size_t lengths[] = {length};
    petrel_result* result = nullptr;
    CHECK(petrel_translate_ids(session, inputs, lengths, 1, nullptr, &result) == PETREL_INVALID_ARGUMENT);
    CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("far over any model's positions"));
    CHECK(result == nullptr);
  }
}

#if !defined(__EMSCRIPTEN__)
// A session whose threads the system will not start (a process or memory limit: here
// the address space, 256 threads' stacks over it) is an error. It hung: the half-built
// thread pool destroyed what its started threads waited on (found by review). In a
// child process, under its own limit; where the limit does not hold (qemu-user ignores
// RLIMIT_AS; sanitizers reserve terabytes) there is nothing to show.
TEST_CASE("C API: a session whose threads cannot start is PETREL_OUT_OF_MEMORY, not a hang", "[capi][threads]") {
  if (built_with_sanitizer()) {
    WARN("not under a sanitizer: an address-space limit stops its runtime");
    return;
  }
  const std::string path = fixture_dir() + "/portable/post_swish_concat_tied-int8.petrel";
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
    const rlimit address_space{limit, limit};
    if (pages == 0 || setrlimit(RLIMIT_AS, &address_space) != 0) _exit(77);
    void* probe = mmap(nullptr, size_t{1} << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe != MAP_FAILED) _exit(77);  // the limit does not hold here
    petrel_session* session = nullptr;
    const petrel_status status = petrel_session_create(model, nullptr, 256, &session);
    if (status != PETREL_OUT_OF_MEMORY) _exit(10 + static_cast<int>(status));
    if (std::strstr(petrel_last_error(), "cannot start a thread") == nullptr) _exit(2);
    _exit(session == nullptr ? 0 : 3);
  }
  int wait_status = 0;
  pid_t done = 0;
  for (int tenth = 0; tenth < 600 && done == 0; ++tenth) {  // a hang is the bug: 60 s at most
    done = waitpid(child, &wait_status, WNOHANG);
    if (done == 0) usleep(100000);
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &wait_status, 0);
    FAIL("petrel_session_create hung after a thread failed to start");
  }
  REQUIRE(WIFEXITED(wait_status));
  if (WEXITSTATUS(wait_status) == 77) {
    WARN("RLIMIT_AS does not hold here (emulated): not tested");
  } else {
    CHECK(WEXITSTATUS(wait_status) == 0);  // 10 + status: another status; 2: another message
  }
  petrel_model_free(model);
}
#endif

TEST_CASE("C API: word alignments, as the C++ API gives them", "[capi]") {
  PortableSession s;
  petrel_options options;
  petrel_options_init(&options);
  options.beam_size = options.n_best = 2;
  options.alignment = 1;
  const int32_t* inputs[] = {kInputs[0].data()};
  const size_t lengths[] = {kInputs[0].size()};
  petrel_result* result = nullptr;
  REQUIRE(petrel_translate_ids(s.session, inputs, lengths, 1, &options, &result) == PETREL_OK);

  auto model = load_model(s.path);
  auto translator = petrel::Translator::create(model);
  REQUIRE(translator);
  petrel::TranslateOptions o;
  o.beam_size = o.n_best = 2;
  o.alignment = true;
  auto want = translator.value().translate({kInputs[0]}, o);
  REQUIRE(want);
  REQUIRE(petrel_result_hypotheses(result, 0) == want.value()[0].hypotheses.size());
  for (size_t k = 0; k < petrel_result_hypotheses(result, 0); ++k) {
    const auto& rows = want.value()[0].hypotheses[k].alignment;
    size_t n = 0, m = 0;
    const float* flat = petrel_result_alignment(result, 0, k, &n, &m);
    REQUIRE(flat != nullptr);
    REQUIRE(n == rows.size());
    REQUIRE(m == kInputs[0].size());
    for (size_t t = 0; t < n; ++t)
      for (size_t j = 0; j < m; ++j) CHECK(flat[t * m + j] == rows[t][j]);
  }
  size_t n = 1, m = 1;
  CHECK(petrel_result_alignment(result, 0, 5, &n, &m) == nullptr);
  CHECK((n == 0 && m == 0));
  petrel_result_free(result);

  options.alignment_layer = 7;  // the fixture has 2 decoder layers
  result = nullptr;
  CHECK(petrel_translate_ids(s.session, inputs, lengths, 1, &options, &result) == PETREL_INVALID_ARGUMENT);
  CHECK(std::string(petrel_last_error()).find("alignment layer 7") != std::string::npos);
  options.alignment = 0;  // without alignments: none in the result
  REQUIRE(petrel_translate_ids(s.session, inputs, lengths, 1, &options, &result) == PETREL_OK);
  CHECK(petrel_result_alignment(result, 0, 0, &n, &m) == nullptr);
  petrel_result_free(result);
}

TEST_CASE("C API: bergamot's Response per text (markup, sentences, quality, alignments) as the C++ API gives it",
          "[capi][html]") {
  const std::string path = native_model("transformer");
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_options o;
  petrel_options_init_sized(&o, sizeof o);
  o.beam_size = 1;
  o.max_length_factor = 2.0;
  o.use_shortlist = -1;
  o.html = 1;
  o.quality_scores = 1;
  o.alignment = 1;
  petrel_batch_options b;
  petrel_batch_options_init(&b);
  b.split_sentences = 1;
  b.split_mode = PETREL_SPLIT_PARAGRAPH_PER_LINE;
  b.limit_by_longest_sentence = 1;
  const std::vector<std::string> texts = {"<p>Open <b>the file</b> now. Save it.</p>", "<b>broken &amp; <i>nested</b>",
                                          "plain words"};
  std::vector<const char*> c_texts;
  for (const std::string& t : texts) c_texts.push_back(t.c_str());
  struct Seen {
    std::string text, source;
    std::vector<std::array<size_t, 4>> sentences;
    std::vector<float> quality;
    std::vector<size_t> words, rows, columns;
    std::vector<float> first_cells;
  };
  std::vector<Seen> seen(texts.size());
  auto sink = [](void* data, size_t i, petrel_status status, const petrel_response* r, const char* error) {
    auto& out = (*static_cast<std::vector<Seen>*>(data))[i];
    if (status != PETREL_OK) {
      out.text = std::string("error: ") + error;
      return;
    }
    out.text = petrel_response_text(r);
    out.source = petrel_response_source(r);
    for (size_t k = 0; k < petrel_response_sentences(r); ++k) {
      std::array<size_t, 4> ranges{};
      petrel_response_sentence(r, k, ranges.data());
      out.sentences.push_back(ranges);
      out.quality.push_back(petrel_response_sentence_quality(r, k));
      out.words.push_back(petrel_response_words(r, k));
      size_t rows = 0, columns = 0;
      const float* cells = petrel_response_alignment(r, k, &rows, &columns);
      out.rows.push_back(rows);
      out.columns.push_back(columns);
      out.first_cells.push_back(cells != nullptr ? cells[0] : -1.0f);
    }
  };
  REQUIRE(petrel_translate_responses(model, nullptr, c_texts.data(), c_texts.size(), &o, &b, sink, &seen) == PETREL_OK);

  // The same through the C++ API.
  auto batch = petrel::BatchTranslator::create(load_model(path));
  REQUIRE(batch);
  petrel::TranslateOptions co;
  co.beam_size = 1;
  co.max_length_factor = 2.0;
  co.use_shortlist = false;
  co.html = co.quality_scores = co.alignment = true;
  petrel::BatchOptions cb;
  cb.split_sentences = true;
  cb.split_mode = petrel::SentenceSplit::kParagraphPerLine;
  cb.limit_by_longest_sentence = true;
  size_t checked = 0;
  REQUIRE(batch.value().translate_text(texts, co, cb, [&](size_t i, petrel::Result<petrel::TextTranslation>&& r) {
    REQUIRE(r);
    const petrel::TextTranslation& t = r.value();
    CHECK(seen[i].text == t.hypotheses.at(0).text);
    CHECK(seen[i].source == t.source_html);
    REQUIRE(seen[i].sentences.size() == t.sentences.size());
    for (size_t k = 0; k < t.sentences.size(); ++k) {
      const petrel::SentenceTranslation& s = t.sentences[k];
      CHECK(seen[i].sentences[k] == std::array<size_t, 4>{s.source.begin, s.source.end, s.target.begin, s.target.end});
      REQUIRE(s.quality);
      CHECK((seen[i].quality[k] == s.quality->score || (std::isnan(seen[i].quality[k]) && std::isnan(s.quality->score))));
      CHECK(seen[i].words[k] == s.quality->word_scores.size());
      CHECK(seen[i].rows[k] == s.alignment.size());
      CHECK(seen[i].columns[k] == s.source_tokens.size());
      CHECK(seen[i].first_cells[k] == s.alignment.at(0).at(0));
    }
    ++checked;
  }));
  CHECK(checked == texts.size());
  CHECK(seen[0].sentences.size() == 2);
  CHECK(seen[0].text.find("<b>") != std::string::npos);

  // An older caller's options (ending before html) translate the markup as text; a bad
  // split mode is refused by name.
  petrel_options old = o;
  old.struct_size = offsetof(petrel_options, html);
  std::vector<Seen> plain(texts.size());
  REQUIRE(petrel_translate_responses(model, nullptr, c_texts.data(), 1, &old, &b, sink, &plain) == PETREL_OK);
  CHECK(plain[0].source == texts[0]);
  b.split_mode = 7;
  CHECK(petrel_translate_responses(model, nullptr, c_texts.data(), 1, &o, &b, sink, &plain) == PETREL_INVALID_ARGUMENT);
  CHECK(std::string(petrel_last_error()).find("split_mode = 7") != std::string::npos);
  petrel_model_free(model);
}
