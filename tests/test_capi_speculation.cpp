// Speculative decoding through the C API (petrel.h): the lookup_ngram / max_draft_tokens
// fields of petrel_options and petrel_generate_options, the draft model setters and
// petrel_session_speculation_stats. The outputs are compared with the same calls without
// drafts (the engine's own tests compare those with plain decoding in depth); older
// callers' structs, which end before the new fields, keep working. Tagged [c_api], not
// [capi]: these are no concurrency tests (petrel_concurrency_tests holds every [capi] one).
#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "petrel/petrel.h"
#include "support/test_support.h"

namespace capi_speculation_test {

using namespace petrel;
using namespace petrel::test;

struct CModel {
  petrel_model* model = nullptr;
  explicit CModel(const std::string& path) { REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK); }
  ~CModel() { petrel_model_free(model); }
  CModel(const CModel&) = delete;
  CModel& operator=(const CModel&) = delete;
};

struct CSession {
  petrel_session* session = nullptr;
  explicit CSession(const CModel& m) { REQUIRE(petrel_session_create(m.model, nullptr, 1, &session) == PETREL_OK); }
  ~CSession() { petrel_session_free(session); }
  CSession(const CSession&) = delete;
  CSession& operator=(const CSession&) = delete;
};

std::string chat_model_path(DType dtype) {
  return shared_conversion("lm-gemma3_chat", fixture_dir() + "/decoder_only/gemma3_chat", dtype);
}

// Generated ids, or the status with petrel_last_error's message in `error`.
std::vector<int32_t> generate(petrel_session* session, const std::vector<int32_t>& prompt,
                              const petrel_generate_options& options, petrel_status& status) {
  petrel_result* result = nullptr;
  status = petrel_generate(session, prompt.data(), prompt.size(), &options, &result);
  std::vector<int32_t> ids;
  if (status == PETREL_OK) {
    size_t n = 0;
    const int32_t* out = petrel_result_ids(result, 0, 0, &n);
    ids.assign(out, out + n);
  }
  petrel_result_free(result);
  return ids;
}

petrel_speculation_stats stats_of(const petrel_session* session) {
  petrel_speculation_stats s;
  REQUIRE(petrel_session_speculation_stats(session, &s) == PETREL_OK);
  REQUIRE(s.struct_size == sizeof s);
  return s;
}

TEST_CASE("C API: generation with prompt lookup or a draft model gives the ids it gives without", "[c_api][speculation]") {
  const CModel model(chat_model_path(DType::kF32));
  const CModel other(chat_model_path(DType::kInt8));  // the same tokens, other numbers
  const CSession session(model);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 7) % 11);
  petrel_generate_options options;
  petrel_generate_options_init(&options);
  CHECK(options.struct_size == sizeof options);
  CHECK(options.lookup_ngram == 0);
  CHECK(options.max_draft_tokens == 0);
  options.do_sample = 0;
  options.ignore_eos = 1;
  options.max_new_tokens = 80;
  petrel_status status;
  const std::vector<int32_t> plain = generate(session.session, prompt, options, status);
  REQUIRE(status == PETREL_OK);
  REQUIRE(plain.size() == 80);
  petrel_speculation_stats s = stats_of(session.session);
  CHECK(s.verifications == 0);
  CHECK(s.drafted_tokens == 0);
  CHECK(s.generated_tokens == 80);

  options.lookup_ngram = 4;
  options.max_draft_tokens = 8;
  REQUIRE(generate(session.session, prompt, options, status) == plain);
  REQUIRE(status == PETREL_OK);
  s = stats_of(session.session);
  CHECK(s.verifications > 0);
  CHECK(s.drafted_tokens > 0);
  CHECK(s.accepted_tokens > 0);
  CHECK(s.accepted_tokens <= s.drafted_tokens);
  CHECK(s.draft_model_tokens == 0);
  CHECK(s.generated_tokens == 80);

  // A draft model: its own tokens are counted; cleared with NULL, the counts are lookup's again.
  options.lookup_ngram = 0;
  REQUIRE(petrel_generator_set_draft_model(session.session, other.model) == PETREL_OK);
  REQUIRE(generate(session.session, prompt, options, status) == plain);
  REQUIRE(status == PETREL_OK);
  s = stats_of(session.session);
  CHECK(s.verifications > 0);
  CHECK(s.draft_model_tokens > 0);
  REQUIRE(petrel_generator_set_draft_model(session.session, nullptr) == PETREL_OK);
  REQUIRE(generate(session.session, prompt, options, status) == plain);
  CHECK(stats_of(session.session).draft_model_tokens == 0);
  CHECK(stats_of(session.session).verifications == 0);

  // Text in, text out, with seeded sampling: the same text.
  petrel_generate_options sampled;
  petrel_generate_options_init(&sampled);
  sampled.do_sample = 1;
  sampled.temperature = 0.7f;
  sampled.seed = 5;
  sampled.ignore_eos = 1;
  sampled.max_new_tokens = 50;
  petrel_result* want = nullptr;
  REQUIRE(petrel_generate_text(session.session, "a b a b a b a b", &sampled, &want) == PETREL_OK);
  sampled.lookup_ngram = 2;
  petrel_result* got = nullptr;
  REQUIRE(petrel_generate_text(session.session, "a b a b a b a b", &sampled, &got) == PETREL_OK);
  CHECK(std::string(petrel_result_text(got, 0, 0)) == petrel_result_text(want, 0, 0));
  CHECK(stats_of(session.session).drafted_tokens > 0);
  petrel_result_free(want);
  petrel_result_free(got);
}

TEST_CASE("C API: speculative decoding's errors carry the engine's messages", "[c_api][speculation]") {
  const CModel model(chat_model_path(DType::kF32));
  const CModel llama(shared_conversion("lm-llama3", fixture_dir() + "/decoder_only/llama3", DType::kF32));
  const CModel translation(en_de_model_path(DType::kInt8));
  const CSession session(model);
  const CSession translator(translation);
  // Another vocabulary cannot draft; nor a translation model for a language model.
  CHECK(petrel_generator_set_draft_model(session.session, llama.model) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("cannot draft for"));
  CHECK(petrel_generator_set_draft_model(session.session, translation.model) != PETREL_OK);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("not a decoder-only model"));
  CHECK(petrel_translator_set_draft_model(translator.session, model.model) != PETREL_OK);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("not a translation"));
  // Each setter belongs to its kind of session.
  CHECK(petrel_translator_set_draft_model(session.session, nullptr) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("petrel_generator_set_draft_model"));
  CHECK(petrel_generator_set_draft_model(translator.session, nullptr) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("petrel_translator_set_draft_model"));
  CHECK(petrel_generator_set_draft_model(nullptr, nullptr) == PETREL_INVALID_ARGUMENT);
  CHECK(petrel_session_speculation_stats(nullptr, static_cast<petrel_speculation_stats*>(nullptr)) ==
        PETREL_INVALID_ARGUMENT);

  // Options out of range are named.
  petrel_generate_options options;
  petrel_generate_options_init(&options);
  options.max_new_tokens = 4;
  options.lookup_ngram = 1000;
  petrel_status status;
  generate(session.session, {3, 4, 5}, options, status);
  CHECK(status == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("lookup_ngram"));
  petrel_options t;
  petrel_options_init(&t);
  t.beam_size = 4;
  t.lookup_ngram = 2;
  char* out = nullptr;
  CHECK(petrel_translate_text(translator.session, "Hello world.", &t, &out) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("lookup_ngram"));
  CHECK(out == nullptr);
}

TEST_CASE("C API: structs from before speculative decoding still work, their ends unread and unwritten", "[c_api][speculation]") {
  const CModel model(chat_model_path(DType::kF32));
  const CSession session(model);
  // A caller built before the fields: its struct ends where they begin (the padded size of
  // the struct that ended at kv_cache_int8), so values there are not read.
  petrel_generate_options options;
  petrel_generate_options_init_sized(&options, offsetof(petrel_generate_options, lookup_ngram));
  CHECK(options.struct_size == offsetof(petrel_generate_options, lookup_ngram));
  options.lookup_ngram = 1000;  // beyond the caller's struct: never read
  options.do_sample = 0;
  options.ignore_eos = 1;
  options.max_new_tokens = 20;
  petrel_status status;
  const std::vector<int32_t> old_size = generate(session.session, {3, 4, 5, 3, 4, 5}, options, status);
  REQUIRE(status == PETREL_OK);
  CHECK(old_size.size() == 20);
  CHECK(stats_of(session.session).drafted_tokens == 0);
  // A statistics struct of an older, shorter layout: only its bytes are written.
  struct {
    petrel_speculation_stats stats;
    size_t guard;
  } shorter;
  shorter.guard = 12345;
  shorter.stats.accepted_tokens = 777;
  const size_t size = offsetof(petrel_speculation_stats, accepted_tokens);
  REQUIRE(petrel_session_speculation_stats_sized(session.session, &shorter.stats, size) == PETREL_OK);
  CHECK(shorter.stats.struct_size == size);
  CHECK(shorter.stats.accepted_tokens == 777);
  CHECK(shorter.guard == 12345);
  CHECK(petrel_session_speculation_stats_sized(session.session, &shorter.stats, 2) == PETREL_INVALID_ARGUMENT);

  // petrel_options of an older caller: the speculative fields are not read either.
  const CModel translation(en_de_model_path(DType::kInt8));
  const CSession translator(translation);
  petrel_options t;
  petrel_options_init_sized(&t, offsetof(petrel_options, lookup_ngram));
  t.beam_size = 4;
  t.lookup_ngram = 1000;
  char* out = nullptr;
  REQUIRE(petrel_translate_text(translator.session, "Hello world.", &t, &out) == PETREL_OK);
  petrel_string_free(out);
  CHECK(stats_of(translator.session).verifications == 0);
}

TEST_CASE("C API: translation with prompt lookup or a draft model gives the ids it gives without", "[c_api][speculation]") {
  const CModel model(en_de_model_path(DType::kInt8));
  const CModel other(en_de_model_path(DType::kF32));
  const CModel student(shared_conversion("firefox-student", source_dir() + "/tools/firefox-student", DType::kF32));
  const CSession session(model);
  std::vector<std::string> lines;
  std::ifstream file(source_dir() + "/tests/fixtures/en-de/test.en");
  std::string line;
  while (lines.size() < 6 && std::getline(file, line)) lines.push_back(line);
  REQUIRE(lines.size() == 6);
  std::vector<const char*> texts;
  for (const std::string& l : lines) texts.push_back(l.c_str());

  using Output = std::vector<std::pair<std::vector<int32_t>, double>>;
  auto translate = [&](const petrel_options& options) {
    petrel_result* result = nullptr;
    REQUIRE(petrel_translate_texts(session.session, texts.data(), texts.size(), &options, &result) == PETREL_OK);
    Output out;
    for (size_t i = 0; i < texts.size(); ++i) {
      size_t n = 0;
      const int32_t* ids = petrel_result_ids(result, i, 0, &n);
      REQUIRE(ids != nullptr);
      out.emplace_back(std::vector<int32_t>(ids, ids + n), petrel_result_score(result, i, 0));
    }
    petrel_result_free(result);
    return out;
  };
  petrel_options options;
  petrel_options_init(&options);
  CHECK(options.lookup_ngram == 0);
  CHECK(options.max_draft_tokens == 0);
  options.beam_size = 1;
  const Output plain = translate(options);
  CHECK(stats_of(session.session).verifications == 0);

  options.lookup_ngram = 2;
  REQUIRE(translate(options) == plain);
  petrel_speculation_stats s = stats_of(session.session);
  CHECK(s.verifications > 0);
  CHECK(s.drafted_tokens > 0);
  CHECK(s.accepted_tokens <= s.drafted_tokens);
  CHECK(s.generated_tokens > 0);

  options.lookup_ngram = 0;
  options.max_draft_tokens = 4;
  REQUIRE(petrel_translator_set_draft_model(session.session, other.model) == PETREL_OK);
  REQUIRE(translate(options) == plain);
  s = stats_of(session.session);
  CHECK(s.draft_model_tokens > 0);
  CHECK(s.accepted_tokens > 0);
  // Another vocabulary is refused by name, and the draft model set before stays.
  CHECK(petrel_translator_set_draft_model(session.session, student.model) == PETREL_INVALID_ARGUMENT);
  CHECK_THAT(petrel_last_error(), Catch::Matchers::Contains("cannot draft for"));
  REQUIRE(translate(options) == plain);
  CHECK(stats_of(session.session).draft_model_tokens > 0);
  REQUIRE(petrel_translator_set_draft_model(session.session, nullptr) == PETREL_OK);
  REQUIRE(translate(options) == plain);
  CHECK(stats_of(session.session).draft_model_tokens == 0);
}

}  // namespace capi_speculation_test
