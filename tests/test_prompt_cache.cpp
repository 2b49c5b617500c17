// Prompt caches (in process and in files): the ids a prompt generates are the same with
// and without a kept KV state, whichever beginning it shares, after the least recently
// used entries were dropped, and through a file loaded by a fresh Generator of a fresh
// Model load; the budget holds at every step; a file that is not exactly what was
// written (another model's, cut at any length, any byte changed, another version, a
// huge declared size) is an error naming the file and its field, never a crash.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/bytes.h"
#include "format/crc32.h"
#include "model_access.h"
#include "petrel/generator.h"
#include "petrel/petrel.h"
#include "prompt_cache.h"
#include "support/lm_fixture.h"
#include "support/test_support.h"

namespace prompt_cache_test {

using namespace petrel;
using namespace petrel::test;

// gemma3_f32: 3 layers (two with a sliding window of 6: rings of 134 slots), 128 ids, 512
// positions.
std::string lm_path() {
  return shared_conversion("lm-gemma3_f32", fixture_dir() + "/decoder_only/gemma3_f32", DType::kF32);
}

std::vector<int32_t> random_ids(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> id(3, 127);
  std::vector<int32_t> out(n);
  for (int32_t& x : out) x = id(rng);
  return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<int32_t> head(const std::vector<int32_t>& a, size_t n) { return {a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n)}; }

GenerateOptions greedy(DType cache) {
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.do_sample = false;
  o.ignore_eos = true;
  o.kv_cache_f16 = cache == DType::kF16;
  return o;
}

Generator make_generator(std::shared_ptr<const Model> model) {
  auto g = Generator::create(std::move(model));
  REQUIRE(g);
  return std::move(g.value());
}

Generation run(Generator& g, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  auto r = g.generate({prompt}, o);
  REQUIRE(r);
  REQUIRE(g.last_timings().reused_tokens == r.value()[0].reused_tokens);
  REQUIRE(g.last_timings().prompt_tokens == prompt.size() - r.value()[0].reused_tokens);
  return r.value()[0];
}

std::string cache_name(DType t) { return t == DType::kF16 ? "f16" : "f32"; }

void require_within_budget(const Generator& g) {
  const PromptCacheStats s = g.prompt_cache_stats();
  REQUIRE(s.bytes <= s.budget);
}

TEST_CASE("a prompt cache gives the ids a run without it gives, reusing the longest usable beginning",
          "[prompt_cache]") {
  auto model = load_model(lm_path());
  for (const DType cache : {DType::kF32, DType::kF16}) {
    INFO("KV cache " << cache_name(cache));
    const GenerateOptions o = greedy(cache);
    Generator cold = make_generator(model);
    Generator warm = make_generator(model);
    warm.set_prompt_cache_bytes(size_t{64} << 20);
    std::mt19937 rng(7);
    const std::vector<int32_t> base = random_ids(rng, 300);  // past the rings' 134 slots
    struct Case {
      std::vector<int32_t> prompt;
      size_t reused;  // SIZE_MAX: not checked
    };
    const std::vector<Case> cases = {
        {base, 0},                                        // nothing kept yet
        {concat(base, random_ids(rng, 20)), 300},         // the whole kept prompt, then more
        {base, 299},                                      // equal to a kept one: all but its last token
        {concat(head(base, 220), random_ids(rng, 40)), 220},  // 300 - 220 within the rings' 128 spare slots
        {concat(head(base, 100), random_ids(rng, 5)), 0},     // every kept state's rings have moved past 100
        // Shorter: the 260-token state came from the 300-token one rewound to 220, so its
        // rings hold positions from 300 - 134 = 166 on, not the window behind 149 (a fresh
        // 260-token prefill's would); case 4's 105-token state gives 100.
        {head(base, 150), 100},
        {random_ids(rng, 12), SIZE_MAX},                  // random: may share a first token
        {random_ids(rng, 1), 0},                          // one token: nothing to reuse
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO("case " << i);
      const Generation want = run(cold, cases[i].prompt, o);
      REQUIRE(want.reused_tokens == 0);
      const Generation got = run(warm, cases[i].prompt, o);
      REQUIRE(got.ids == want.ids);
      if (cases[i].reused != SIZE_MAX) REQUIRE(got.reused_tokens == cases[i].reused);
      REQUIRE(got.reused_tokens < cases[i].prompt.size());
      require_within_budget(warm);
    }
    // Several prompts in one call each use the cache (ids 1 and 2 are in no kept prompt).
    auto both = warm.generate({concat(base, {1, 2}), concat(head(base, 220), {1})}, o);
    REQUIRE(both);
    REQUIRE(both.value()[0].reused_tokens == 300);
    REQUIRE(both.value()[1].reused_tokens == 220);
    REQUIRE(both.value()[0].ids == run(cold, concat(base, {1, 2}), o).ids);
    REQUIRE(both.value()[1].ids == run(cold, concat(head(base, 220), {1}), o).ids);
  }
}

TEST_CASE("a prompt cache keeps the most recently used states within its budget", "[prompt_cache]") {
  auto model = load_model(lm_path());
  const GenerateOptions o = greedy(DType::kF32);
  std::mt19937 rng(11);
  const std::vector<int32_t> a = random_ids(rng, 40), b = random_ids(rng, 40), c = random_ids(rng, 40);
  Generator cold = make_generator(model);
  Generator warm = make_generator(model);
  // The charge of one 41-token state (a's with one more token), measured: room for two.
  warm.set_prompt_cache_bytes(size_t{1} << 30);
  run(warm, concat(a, {9}), o);
  const size_t one = warm.prompt_cache_stats().bytes;
  REQUIRE(one > 41 * 4);
  warm.set_prompt_cache_bytes(0);
  REQUIRE(warm.prompt_cache_stats().entries == 0);
  warm.set_prompt_cache_bytes(2 * one + one / 2);
  for (const auto* p : {&a, &b, &c}) {
    run(warm, concat(*p, {9}), o);
    require_within_budget(warm);
    REQUIRE(warm.prompt_cache_stats().entries <= 2);
  }
  // a's state went first; b's and c's stay.
  Generation got = run(warm, concat(a, {10}), o);
  REQUIRE(got.reused_tokens == 0);
  REQUIRE(got.ids == run(cold, concat(a, {10}), o).ids);
  require_within_budget(warm);
  // a's new state dropped b's (the least recently used); c's stays.
  got = run(warm, concat(c, {10}), o);
  REQUIRE(got.reused_tokens == 40);
  REQUIRE(got.ids == run(cold, concat(c, {10}), o).ids);
  got = run(warm, concat(b, {10}), o);
  REQUIRE(got.reused_tokens == 0);
  REQUIRE(got.ids == run(cold, concat(b, {10}), o).ids);
  require_within_budget(warm);
  // A budget smaller than any state keeps none.
  warm.set_prompt_cache_bytes(one / 2);
  REQUIRE(warm.prompt_cache_stats().entries == 0);
  run(warm, concat(a, {9}), o);
  REQUIRE(warm.prompt_cache_stats().entries == 0);
  REQUIRE(run(warm, concat(a, {9}), o).reused_tokens == 0);
  // States of one KV cache type are not used by another.
  warm.set_prompt_cache_bytes(size_t{1} << 30);
  run(warm, concat(a, {9}), o);
  got = run(warm, concat(a, {9, 8}), greedy(DType::kF16));
  REQUIRE(got.reused_tokens == 0);
  REQUIRE(got.ids == run(cold, concat(a, {9, 8}), greedy(DType::kF16)).ids);
}

TEST_CASE("generate_text and conversations report the tokens a prompt cache held", "[prompt_cache]") {
  auto model = load_model(tiny_lm("prompt-cache", tiny_lm_chat_template()));
  GenerateOptions o;
  o.max_new_tokens = 5;
  o.do_sample = false;
  o.ignore_eos = true;
  Generator cold = make_generator(model);
  Generator warm = make_generator(model);
  warm.set_prompt_cache_bytes(size_t{16} << 20);
  const std::string prefix = "the user said the thing in the end. ";
  auto first = warm.generate_text(prefix + "abc", o);
  REQUIRE(first);
  REQUIRE(first.value().reused_tokens == 0);
  auto second = warm.generate_text(prefix + "xyz", o);
  REQUIRE(second);
  auto want = cold.generate_text(prefix + "xyz", o);
  REQUIRE(want);
  REQUIRE(second.value().ids == want.value().ids);
  REQUIRE(second.value().text == want.value().text);
  REQUIRE(second.value().reused_tokens > 0);
  REQUIRE(second.value().reused_tokens < second.value().prompt_tokens);
  // A conversation's first turn may begin with a kept state; its replies are as without.
  auto chat = Conversation::create(warm, "be brief");
  auto plain = Conversation::create(cold, "be brief");
  REQUIRE(chat);
  REQUIRE(plain);
  for (const char* message : {"hi there", "and then?"}) {
    auto r = chat.value().reply(message, o);
    auto p = plain.value().reply(message, o);
    REQUIRE(r);
    REQUIRE(p);
    REQUIRE(r.value().ids == p.value().ids);
  }
  auto again = Conversation::create(warm, "be brief");
  REQUIRE(again);
  auto r = again.value().reply("hi there", o);
  REQUIRE(r);
  REQUIRE(r.value().reused_tokens + 1 == r.value().prompt_tokens);  // the first chat's first prompt
}

TEST_CASE("a prompt cache file restores the state in a fresh process's Generator", "[prompt_cache]") {
  TempDir dir;
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = random_ids(rng, 200), more = random_ids(rng, 30);
  for (const DType cache : {DType::kF32, DType::kF16}) {
    INFO("KV cache " << cache_name(cache));
    const GenerateOptions o = greedy(cache);
    const std::string file = dir.file("prompt-" + cache_name(cache) + ".cache");
    {
      Generator writer = make_generator(load_model(lm_path()));
      REQUIRE(!writer.save_prompt_cache(file));  // nothing kept
      writer.set_prompt_cache_bytes(size_t{64} << 20);
      run(writer, prompt, o);
      const Status saved = writer.save_prompt_cache(file);
      REQUIRE(saved);
    }
    auto model = load_model(lm_path());  // another load: another Model object
    Generator cold = make_generator(model);
    Generator reader = make_generator(model);  // no budget: the loaded entry is kept anyway
    const Status loaded = reader.load_prompt_cache(file);
    INFO((loaded ? std::string() : loaded.error().message));
    REQUIRE(loaded);
    REQUIRE(reader.prompt_cache_stats().entries == 1);
    Generation got = run(reader, concat(prompt, more), o);
    REQUIRE(got.reused_tokens == prompt.size());  // the file's tokens
    REQUIRE(got.ids == run(cold, concat(prompt, more), o).ids);
    got = run(reader, prompt, o);
    REQUIRE(got.reused_tokens == prompt.size() - 1);
    REQUIRE(got.ids == run(cold, prompt, o).ids);
    // The other KV cache type does not use it (and gives its own ids).
    const GenerateOptions other = greedy(cache == DType::kF32 ? DType::kF16 : DType::kF32);
    got = run(reader, concat(prompt, more), other);
    REQUIRE(got.reused_tokens == 0);
    REQUIRE(got.ids == run(cold, concat(prompt, more), other).ids);
    // A budget set after the load drops it when it does not fit.
    reader.set_prompt_cache_bytes(1);
    REQUIRE(reader.prompt_cache_stats().entries == 0);
  }
}

// A small file (3 prompt tokens) and its model.
struct SmallFile {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> model;
};
SmallFile small_file(const TempDir& dir) {
  SmallFile f;
  f.model = load_model(lm_path());
  Generator g = make_generator(f.model);
  g.set_prompt_cache_bytes(size_t{1} << 20);
  run(g, {5, 17, 99}, greedy(DType::kF32));
  REQUIRE(g.save_prompt_cache(dir.file("small.cache")));
  f.bytes = read_bytes(dir.file("small.cache"));
  return f;
}

Error load_error(const std::shared_ptr<const Model>& model, const std::string& path) {
  Generator g = make_generator(model);
  const Status s = g.load_prompt_cache(path);
  REQUIRE(!s);
  REQUIRE(g.prompt_cache_stats().entries == 0);
  return s.error();
}

// `bytes` with its trailing CRC-32 made right again.
std::vector<uint8_t> with_crc(std::vector<uint8_t> bytes) {
  const uint32_t crc = detail::crc32(bytes.data(), bytes.size() - 4);
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  return bytes;
}

TEST_CASE("a prompt cache file that is not what was written is refused by field", "[prompt_cache]") {
  TempDir dir;
  const SmallFile f = small_file(dir);
  const std::string path = dir.file("bad.cache");
  REQUIRE(f.bytes.size() == 80 + 3 * 24 + 3 * 4 + 2 * 3 * 3 * 2 * 16 * 4 + 4);  // layout of prompt_cache.h

  SECTION("another model: the binding names it") {
    write_bytes(path, f.bytes);
    const std::string other = shared_conversion("lm-gemma3_f32", fixture_dir() + "/decoder_only/gemma3_f32", DType::kF16);
    const Error e = load_error(load_model(other), path);
    REQUIRE(e.code == ErrorCode::kFormat);
    REQUIRE(e.message.rfind(path + ": header.model.", 0) == 0);
    REQUIRE(e.message.find("another model") != std::string::npos);
    // Same shapes, same weights, another tokenizer: the metadata hash tells them apart.
    const Error e2 = load_error(load_model(tiny_lm("prompt-cache", tiny_lm_chat_template())), path);
    REQUIRE(e2.message.rfind(path + ": header.model.", 0) == 0);
  }
  SECTION("cut at every length") {
    for (size_t n = 0; n < f.bytes.size(); ++n) {
      INFO("length " << n);
      write_bytes(path, {f.bytes.begin(), f.bytes.begin() + static_cast<std::ptrdiff_t>(n)});
      const Error e = load_error(f.model, path);
      REQUIRE(e.code == ErrorCode::kFormat);
      REQUIRE(e.message.rfind(path + ": ", 0) == 0);
    }
    std::vector<uint8_t> longer = f.bytes;
    longer.push_back(0);
    write_bytes(path, longer);
    REQUIRE(load_error(f.model, path).message.rfind(path + ": size: ", 0) == 0);
  }
  SECTION("every byte changed") {
    for (size_t i = 0; i < f.bytes.size(); ++i) {
      INFO("byte " << i);
      std::vector<uint8_t> bad = f.bytes;
      bad[i] ^= static_cast<uint8_t>(1u << (i % 8));
      write_bytes(path, bad);
      const Error e = load_error(f.model, path);
      REQUIRE((e.code == ErrorCode::kFormat || e.code == ErrorCode::kUnsupported));
      REQUIRE(e.message.rfind(path + ": ", 0) == 0);
    }
  }
  SECTION("fields wrong with a right CRC") {
    auto refused = [&](std::vector<uint8_t> bad, const std::string& field) {
      write_bytes(path, with_crc(std::move(bad)));
      const Error e = load_error(f.model, path);
      INFO(e.message);
      REQUIRE(e.message.rfind(path + ": " + field, 0) == 0);
      return e;
    };
    std::vector<uint8_t> bad = f.bytes;
    bad[8] = 2;  // version
    REQUIRE(refused(bad, "header.version: 2").code == ErrorCode::kUnsupported);
    bad = f.bytes;
    bad[44] = 4;  // kv_heads
    REQUIRE(refused(bad, "header.kv_heads: 4, the model has 2").code == ErrorCode::kFormat);
    bad = f.bytes;
    bad[12] = 3;
    refused(bad, "header.cache_type: 3");
    bad = f.bytes;
    bad[12] = 1;  // f16: its rows are half as long
    refused(bad, "header.row_bytes: 128, a f16 cache");
    // A huge declared size: refused against the file's size before anything is allocated.
    bad = f.bytes;
    bad[64] = 0xff;
    bad[65] = 0x01;  // 511 tokens
    refused(bad, "layers[0].rows: 3, 511 positions hold 134");
    bad = f.bytes;
    for (int i = 72; i < 80; ++i) bad[static_cast<size_t>(i)] = 0xff;  // payload_bytes 2^64 - 1
    refused(bad, "header.payload_bytes: ");
    bad = f.bytes;
    bad[66] = 0x01;  // 65,539 tokens
    refused(bad, "header.tokens: 65539");
    // An id outside the vocabulary, a value that is not finite.
    bad = f.bytes;
    bad[80 + 72 + 4] = 200;
    refused(bad, "tokens[1]: id 200");
    bad = f.bytes;
    const size_t payload = 80 + 72 + 12;
    bad[payload + 128 + 3] = 0x7f;
    bad[payload + 128 + 2] = 0x80;  // +inf in the second row
    refused(bad, "payload: row 1");
  }
  SECTION("what the file holds is what was written") {
    write_bytes(path, f.bytes);
    Generator g = make_generator(f.model);
    REQUIRE(g.load_prompt_cache(path));
    const Generation got = run(g, {5, 17, 99, 4}, greedy(DType::kF32));
    REQUIRE(got.reused_tokens == 3);
    Generator cold = make_generator(f.model);
    REQUIRE(got.ids == run(cold, {5, 17, 99, 4}, greedy(DType::kF32)).ids);
    REQUIRE(load_error(f.model, dir.file("missing.cache")).code == ErrorCode::kIo);
  }
}

TEST_CASE("C API: a session's prompt cache is set, saved and loaded", "[prompt_cache]") {
  TempDir dir;
  const std::string path = lm_path(), file = dir.file("c.cache");
  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(path.c_str(), &model) == PETREL_OK);
  petrel_session* writer = nullptr;
  petrel_session* reader = nullptr;
  REQUIRE(petrel_session_create(model, nullptr, 1, &writer) == PETREL_OK);
  REQUIRE(petrel_session_create(model, nullptr, 1, &reader) == PETREL_OK);
  petrel_generate_options o;
  petrel_generate_options_init(&o);
  REQUIRE(o.kv_cache_int8 == 0);
  o.max_new_tokens = 4;
  o.do_sample = 0;
  o.ignore_eos = 1;
  const std::vector<int32_t> prompt = {7, 8, 9, 10, 11, 12}, longer = {7, 8, 9, 10, 11, 12, 13};
  REQUIRE(petrel_generator_save_prompt_cache(writer, file.c_str()) == PETREL_INVALID_ARGUMENT);
  REQUIRE(std::string(petrel_last_error()).find("no prompt state") != std::string::npos);
  REQUIRE(petrel_generator_set_prompt_cache_bytes(writer, size_t{1} << 20) == PETREL_OK);
  petrel_result* result = nullptr;
  REQUIRE(petrel_generate(writer, prompt.data(), prompt.size(), &o, &result) == PETREL_OK);
  petrel_result_free(result);
  REQUIRE(petrel_generator_save_prompt_cache(writer, file.c_str()) == PETREL_OK);
  REQUIRE(petrel_generator_load_prompt_cache(reader, file.c_str()) == PETREL_OK);
  REQUIRE(petrel_generate(reader, longer.data(), longer.size(), &o, &result) == PETREL_OK);
  size_t n = 0;
  const int32_t* ids = petrel_result_ids(result, 0, 0, &n);
  const std::vector<int32_t> got(ids, ids + n);
  petrel_result_free(result);
  REQUIRE(petrel_generate(writer, longer.data(), longer.size(), &o, &result) == PETREL_OK);
  ids = petrel_result_ids(result, 0, 0, &n);
  REQUIRE(got == std::vector<int32_t>(ids, ids + n));
  petrel_result_free(result);
  // Errors: a bad file names itself; NULL arguments.
  write_bytes(dir.file("bad.cache"), {1, 2, 3});
  REQUIRE(petrel_generator_load_prompt_cache(reader, dir.file("bad.cache").c_str()) == PETREL_FORMAT);
  REQUIRE(std::string(petrel_last_error()).rfind(dir.file("bad.cache") + ": header", 0) == 0);
  REQUIRE(petrel_generator_load_prompt_cache(reader, nullptr) == PETREL_INVALID_ARGUMENT);
  REQUIRE(petrel_generator_save_prompt_cache(nullptr, file.c_str()) == PETREL_INVALID_ARGUMENT);
  REQUIRE(petrel_generator_set_prompt_cache_bytes(nullptr, 1) == PETREL_INVALID_ARGUMENT);
  // kv_cache_int8 with kv_cache_f16 is refused: the new field is read.
  o.kv_cache_int8 = 1;
  o.kv_cache_f16 = 1;
  REQUIRE(petrel_generate(reader, longer.data(), longer.size(), &o, &result) == PETREL_INVALID_ARGUMENT);
  // An options struct of the size before kv_cache_int8 is still accepted.
  petrel_generate_options older;
  petrel_generate_options_init_sized(&older, offsetof(petrel_generate_options, kv_cache_int8));
  older.max_new_tokens = 2;
  REQUIRE(petrel_generate(reader, longer.data(), longer.size(), &older, &result) == PETREL_OK);
  petrel_result_free(result);
  petrel_session_free(writer);
  petrel_session_free(reader);
  petrel_model_free(model);
}

// Seeds for tests/fuzz/fuzz_prompt_cache (its input: a control byte, then a file):
//   PETREL_PROMPT_CACHE_SEEDS_DIR=tests/fuzz/corpus/fuzz_prompt_cache petrel_tests "[prompt_cache_seeds]"
TEST_CASE("fuzz_prompt_cache's seeds", "[.][prompt_cache_seeds]") {
  const char* out = std::getenv("PETREL_PROMPT_CACHE_SEEDS_DIR");
  REQUIRE(out != nullptr);
  TempDir dir;
  auto model = load_model(lm_path());
  struct Seed {
    const char* name;
    std::vector<int32_t> prompt;
    DType cache;
  };
  std::mt19937 rng(3);
  const std::vector<Seed> seeds = {{"seed-f32-3", {5, 17, 99}, DType::kF32},
                                   {"seed-f16-9", random_ids(rng, 9), DType::kF16},
                                   {"seed-f32-140-ring", random_ids(rng, 140), DType::kF32}};
  for (const Seed& s : seeds) {
    Generator g = make_generator(model);
    g.set_prompt_cache_bytes(size_t{64} << 20);
    run(g, s.prompt, greedy(s.cache));
    REQUIRE(g.save_prompt_cache(dir.file("seed.cache")));
    const std::vector<uint8_t> file = read_bytes(dir.file("seed.cache"));
    for (const uint8_t control : {0, 3}) {  // as written; the model's binding and the CRC made right
      std::vector<uint8_t> input = {control};
      input.insert(input.end(), file.begin(), file.end());
      write_bytes(std::string(out) + "/" + s.name + (control ? "-fixed" : "") + ".bin", input);
    }
  }
}

}  // namespace prompt_cache_test
