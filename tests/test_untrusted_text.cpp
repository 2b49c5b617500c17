// Strings from untrusted files are text: the loader refuses a model file whose
// strings are not UTF-8 (naming the field), the converter writes names that are, and
// the tools' JSON handles any byte string a user passes on the command line. Hash tables
// of such strings cannot be flooded (core/string_hash.h).
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/convert.h"
#include "core/string_hash.h"
#include "core/utf8.h"
#include "petrel_generated.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

const char* const kTextFixture = "post_swish_concat_tied";  // with vocab.json and lex.s2t

// A valid int8 model with a vocabulary and a shortlist, converted once.
const std::vector<uint8_t>& valid_model() {
  static std::vector<uint8_t> bytes = [] {
    TempDir tmp;
    convert::ConvertOptions o;
    o.checkpoint_dir = oracle_dir(kTextFixture);
    o.output_path = tmp.file("m.petrel");
    o.shortlist_path = oracle_dir(kTextFixture) + "/lex.s2t";
    convert::convert_checkpoint(o);
    return read_bytes(o.output_path);
  }();
  return bytes;
}

// The first byte of a FlatBuffer string, writable in place (the length stays).
char* first_byte(const flatbuffers::String* s) {
  REQUIRE(s->size() > 0);
  return const_cast<char*>(s->c_str());
}

// The first byte of vocabulary token `id` in the tokenizer's blob (format 1.6), writable.
char* vocab_first_byte(fb::Model* m, uint32_t id) {
  const fb::StringSpan* span = m->tokenizer()->vocab_spans()->Get(id);
  REQUIRE(span->size() > 0);
  return reinterpret_cast<char*>(const_cast<uint8_t*>(m->mutable_tokenizer()->mutable_strings()->data())) + span->offset();
}

struct Command {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
};

// Runs `command`, capturing stdout only (stderr goes to `err_file`).
Command run(const std::string& command, const std::string& err_file) {
  Command c;
  FILE* pipe = popen((command + " 2>'" + err_file + "'").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) c.out.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) c.exit_code = WEXITSTATUS(status);
  return c;
}

std::string read_text(const std::string& path) {
  auto bytes = read_bytes(path);
  return {bytes.begin(), bytes.end()};
}

}  // namespace

TEST_CASE("UTF-8 validation and replacement agree with nlohmann::json's decoder", "[utf8]") {
  // Random strings over the bytes where well-formedness is decided (table 3-7's edges).
  const uint8_t alphabet[] = {'a', 0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
                              0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
  std::mt19937 rng(16);
  int valid = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(rng() % 13, '\0');
    for (char& c : s) c = static_cast<char>(alphabet[rng() % sizeof alphabet]);
    if (trial % 3 == 0) s = std::string(rng() % 17, 'x') + s;  // past the 8-byte ASCII fast path
    bool nlohmann_valid = true;
    try {
      (void)json(s).dump();
    } catch (const json::type_error&) {
      nlohmann_valid = false;
    }
    INFO("trial " << trial);
    REQUIRE(detail::is_valid_utf8(s) == nlohmann_valid);
    valid += nlohmann_valid;
    // nlohmann replaces each maximal ill-formed subpart with U+FFFD, as Unicode recommends.
    const std::string replaced = detail::to_valid_utf8(s);
    REQUIRE(detail::is_valid_utf8(replaced));
    REQUIRE(json(replaced).dump() == json(s).dump(-1, ' ', false, json::error_handler_t::replace));
    if (nlohmann_valid) REQUIRE(replaced == s);
  }
  REQUIRE(valid > 1000);  // both kinds were tried
}

TEST_CASE("the loader refuses model-file strings that are not UTF-8, naming the field", "[utf8][format]") {
  std::vector<uint8_t> bytes = valid_model();
  fb::Model* m = fb::GetMutableModel(bytes.data() + 4);
  REQUIRE(Model::load_from_memory(bytes.data(), bytes.size(), "bad.petrel").has_value());
  std::string field;
  SECTION("tensor name") {
    *first_byte(m->tensors()->Get(3)->name()) = '\xff';
    field = "tensor #3: name";
  }
  SECTION("vocabulary entry (a truncated two-byte sequence)") {
    *vocab_first_byte(m, 12) = '\xc3';
    field = "tokenizer.strings";
  }
  SECTION("fold note (an overlong form)") {
    char* note = first_byte(m->folds()->Get(0)->note());
    note[0] = '\xc0', note[1] = '\xaf';
    field = "folds[0].note";
  }
  SECTION("shortlist source (a surrogate)") {
    char* source = first_byte(m->shortlist()->source());
    source[0] = '\xed', source[1] = '\xa0', source[2] = '\x80';
    field = "shortlist.source";
  }
  SECTION("producer") {
    first_byte(m->producer())[5] = '\x80';
    field = "producer";
  }
  auto r = Model::load_from_memory(bytes.data(), bytes.size(), "bad.petrel");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::kFormat);
  REQUIRE_THAT(r.error().message, Contains("bad.petrel: " + field + " is not valid UTF-8"));
  CHECK(detail::is_valid_utf8(r.error().message));
}

TEST_CASE("petrel-inspect and petrel-run refuse such a file with a message, not an abort", "[utf8][cli]") {
  TempDir tmp;
  std::vector<uint8_t> bytes = valid_model();
  fb::Model* m = fb::GetMutableModel(bytes.data() + 4);
  SECTION("tensor name") { *first_byte(m->tensors()->Get(0)->name()) = '\xfe'; }
  SECTION("vocabulary entry") { *vocab_first_byte(m, 5) = '\xff'; }
  const std::string model = tmp.file("bad.petrel"), err = tmp.file("stderr");
  write_bytes(model, bytes);
  for (const std::string& command : {petrel_inspect_command() + " '" + model + "' --json",
                                     petrel_run_command() + " '" + model + "' --ids \"1 2 0\" --json",
                                     petrel_run_command() + " '" + model + "' --text \"w1 w2\" --json"}) {
    INFO(command);
    Command c = run(command, err);
    CHECK(c.exit_code == 1);  // an error exit, not a signal (SIGABRT was the bug)
    CHECK(c.out.empty());
    REQUIRE_THAT(read_text(err), Contains("bad.petrel") && Contains("is not valid UTF-8"));
  }
}

// Valid UTF-8 may still hold terminal controls: petrel-inspect's text printed a tensor
// name's ESC [2J (clear the screen) and OSC title sequence raw (found by review).
TEST_CASE("petrel-inspect shows control characters in a file's strings escaped", "[utf8][cli]") {
  TempDir tmp;
  std::vector<uint8_t> bytes = valid_model();
  fb::Model* m = fb::GetMutableModel(bytes.data() + 4);
  char* name = first_byte(m->tensors()->Get(0)->name());
  const std::string evil = "\x1b[2J\x1b]0;X\x07\xc2\x9b";  // ESC, BEL and C1's CSI
  REQUIRE(m->tensors()->Get(0)->name()->size() >= evil.size());
  std::copy(evil.begin(), evil.end(), name);
  const std::string model = tmp.file("controls.petrel"), err = tmp.file("stderr");
  write_bytes(model, bytes);
  Command inspect = run(petrel_inspect_command() + " '" + model + "'", err);
  INFO(read_text(err));
  REQUIRE(inspect.exit_code == 0);
  CHECK(inspect.out.find_first_of("\x1b\x07") == std::string::npos);
  CHECK(inspect.out.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(inspect.out, Contains("\\x1b[2J\\x1b]0;X\\x07\\u009b"));
}

TEST_CASE("the tools write valid JSON whatever bytes a path or text holds", "[utf8][cli]") {
  TempDir tmp;
  // A checkpoint directory and model path whose names are not UTF-8 (Linux allows any bytes).
  const std::string dir = tmp.file("ckpt-\xff\xc3");
  copy_dir(oracle_dir(kTextFixture), dir);
  const std::string model = tmp.file("m-\xe2\x82.petrel"), err = tmp.file("stderr");

  Command convert = run(petrel_convert_command() + " '" + dir + "' -o '" + model + "' --json", err);
  INFO(read_text(err));
  REQUIRE(convert.exit_code == 0);
  const json report = json::parse(convert.out);  // throws on invalid UTF-8
  CHECK_THAT(report["output"].get<std::string>(), Contains("m-\xef\xbf\xbd.petrel"));
  auto loaded = Model::load(model);  // the directory name became the file's `source`, as text
  REQUIRE(loaded.has_value());
  CHECK(loaded.value()->info().source == "ckpt-\xef\xbf\xbd\xef\xbf\xbd");

  Command inspect = run(petrel_inspect_command() + " '" + model + "' --json", err);
  REQUIRE(inspect.exit_code == 0);
  const json info = json::parse(inspect.out);
  CHECK_THAT(info["file"].get<std::string>(), Contains("m-\xef\xbf\xbd.petrel"));
  CHECK(info["source"] == "ckpt-\xef\xbf\xbd\xef\xbf\xbd");

  // Text that is not UTF-8 cannot be encoded by the model's vocabulary: a message.
  // The input's error is on standard error and, as valid JSON, in its result.
  Command text = run(petrel_run_command() + " '" + model + "' --text \"w1 \xff\" --json", err);
  CHECK(text.exit_code == 1);
  CHECK_THAT(read_text(err), Contains("cannot encode"));
  CHECK_THAT(json::parse(text.out)["results"][0]["error"].get<std::string>(), Contains("cannot encode"));
  Command ok = run(petrel_run_command() + " '" + model + "' --text \"w1 w2\" --json", err);
  REQUIRE(ok.exit_code == 0);
  CHECK(json::parse(ok.out)["results"][0]["input_text"] == "w1 w2");
}

TEST_CASE("SipHash matches the reference vectors", "[string_hash]") {
  // SipHash-2-4 under the key 00 01 .. 0f of the messages 00 01 .. (len - 1): the paper's
  // appendix (len 15) and the reference implementation's vectors.h (len 0 and 1).
  std::string message;
  for (char c = 0; c < 15; ++c) message.push_back(c);
  const uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;
  CHECK(detail::siphash<2, 4>(std::string_view(message.data(), 0), k0, k1) == 0x726fdb47dd0e0e31ull);
  CHECK(detail::siphash<2, 4>(std::string_view(message.data(), 1), k0, k1) == 0x74f839c593dc67fdull);
  CHECK(detail::siphash<2, 4>(message, k0, k1) == 0xa129ca6149be45e5ull);
}

TEST_CASE("strings chosen to collide under std::hash spread over a StringSet's buckets", "[string_hash]") {
  // libstdc++'s std::hash of a string mixes each 8-byte block m as d = f(m * M) * M,
  // hash = (hash ^ d) * M. For blocks a and b with d(b) = d(a) ^ 2^63, "aa" and "bb"
  // leave the hash equal (bit 63 survives the odd multiplication and is flipped back):
  // 10 such pairs give 1024 strings of one hash, whatever the seed. A file holding them
  // made building a vocabulary map quadratic (0.8 s at 2^14 tokens, 20 s at 2^16).
  constexpr uint64_t M = (uint64_t{0xc6a4a793} << 32) + 0x5bd1e995;
  uint64_t inverse = M;  // of M modulo 2^64 (Newton: each step doubles the correct bits)
  for (int i = 0; i < 6; ++i) inverse *= 2 - M * inverse;
  REQUIRE(M * inverse == 1);
  auto shift_mix = [](uint64_t v) { return v ^ (v >> 47); };  // its own inverse
  auto mix = [&](uint64_t k) { return shift_mix(k * M) * M; };
  auto unmix = [&](uint64_t d) { return shift_mix(d * inverse) * inverse; };
  std::mt19937_64 random(7);
  std::vector<std::pair<std::string, std::string>> pairs;
  auto block = [](uint64_t k) { return std::string(reinterpret_cast<const char*>(&k), 8); };  // little-endian hosts
  for (int bit = 0; bit < 10; ++bit) {
    const uint64_t a = random(), b = unmix(mix(a) ^ (uint64_t{1} << 63));
    REQUIRE(mix(b) == (mix(a) ^ (uint64_t{1} << 63)));
    pairs.emplace_back(block(a) + block(a), block(b) + block(b));
  }
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < 1024; ++i) {
    std::string key;
    for (int bit = 0; bit < 10; ++bit) key += (i >> bit) & 1 ? pairs[bit].second : pairs[bit].first;
    keys.push_back(key);
  }
#if defined(__GLIBCXX__) && UINTPTR_MAX == UINT64_MAX && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const size_t first = std::hash<std::string_view>{}(keys[0]);  // the attack is real here
  CHECK(std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return std::hash<std::string_view>{}(k) == first; }));
#endif
  detail::StringSet<std::string_view> set(keys.begin(), keys.end());
  REQUIRE(set.size() == keys.size());
  size_t largest = 0;
  for (size_t b = 0; b < set.bucket_count(); ++b) largest = std::max(largest, set.bucket_size(b));
  CHECK(largest <= 12);  // ~1 key per bucket: 13 or more in one happens with probability < 1e-6
}
