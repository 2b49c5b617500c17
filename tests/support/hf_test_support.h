// Helpers of the tokenizer.json tests (test_hf_tokenizer.cpp, test_hf_unigram.cpp, test_hf_wordpiece.cpp): a
// tokenizer converted by petrel-convert's reader and bound as a model file's is, and the
// fixtures' escaped lines.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "convert/hf_tokenizer.h"
#include "format/model_file.h"
#include "petrel_generated.h"
#include "support/test_support.h"
#include "text/hf_tokenizer.h"

namespace petrel::test::hf {

// The tokenizer.json and tokenizer_config.json of fixture directory `dir`, decompressed
// (nothing when xz may be skipped and is missing).
inline std::optional<convert::HfTokenizerFiles> fixture_files(const std::string& dir) {
  convert::HfTokenizerFiles files;
  files.dir = dir;
  auto json = xz_decompress(dir + "/tokenizer.json.xz");
  auto config = xz_decompress(dir + "/tokenizer_config.json.xz");
  if (!json || !config) return std::nullopt;
  files.tokenizer_json = std::move(*json);
  files.tokenizer_config = std::move(*config);
  return files;
}

// A converted tokenizer and the buffer it views.
struct LoadedHfTokenizer {
  std::vector<uint8_t> buffer;
  std::unique_ptr<petrel::text::HfTokenizer> tokenizer;
};

// Binds converted tokenizer tables (`buffer`) as a model file's are bound.
inline LoadedHfTokenizer bind_hf_tokenizer_buffer(std::vector<uint8_t> buffer, const std::string& dir) {
  LoadedHfTokenizer out;
  out.buffer = std::move(buffer);
  flatbuffers::Verifier verifier(out.buffer.data(), out.buffer.size());
  REQUIRE(verifier.VerifyBuffer<petrel::fb::Tokenizer>(nullptr));
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(out.buffer.data());
  const uint32_t size = root->vocab_spans()->size();
  auto tables = petrel::detail::bind_hf_tokenizer(*root, size, dir);
  if (!tables) FAIL(tables.error().message);
  auto tokenizer = petrel::text::HfTokenizer::create(std::move(tables.value()), dir);
  if (!tokenizer) FAIL(tokenizer.error().message);
  out.tokenizer = std::move(tokenizer.value());
  return out;
}

inline LoadedHfTokenizer load_hf_tokenizer(const petrel::convert::HfTokenizerFiles& files, uint32_t vocab_size = 0) {
  return bind_hf_tokenizer_buffer(petrel::convert::hf_tokenizer_buffer(files, vocab_size), files.dir);
}

// The tokenizer of fixture directory `dir`, converted once per run (shared_file): the
// sanitized and emulated stages bind the tables the native build converted, as a device
// binds a converted model's, instead of converting Gemma 3's 33 MB tokenizer.json again
// (13 s per tokenizer under qemu). Nothing when xz may be skipped and is missing.
inline std::optional<LoadedHfTokenizer> load_fixture_tokenizer(const std::string& dir) {
  const auto files = fixture_files(dir);
  if (!files) return std::nullopt;
  const std::filesystem::path path(dir);
  const std::string name = "tokenizer-" + path.parent_path().filename().string() + "-" + path.filename().string() + ".fb";
  const std::string file = shared_file(
      name, [&](const std::string& out) { write_bytes(out, petrel::convert::hf_tokenizer_buffer(*files)); });
  return bind_hf_tokenizer_buffer(read_bytes(file), dir);
}

// Reads a fixture's expected.bin (little-endian integers, u32-length-prefixed texts). A
// short file throws, which Catch reports as the test's failure: not a REQUIRE per read,
// whose millions of assertions took most of these tests' time under ASan and qemu.
struct FixtureReader {
  const std::string& bytes;
  size_t at = 0;
  bool done() const { return at >= bytes.size(); }
  void need(size_t n) const {
    if (n > bytes.size() - at) throw std::runtime_error("expected.bin ends early, at byte " + std::to_string(at));
  }
  uint32_t get(size_t n) {  // n <= 4 bytes
    need(n);
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, n);  // little-endian hosts only, as the engine
    at += n;
    return v;
  }
  uint32_t u32() { return get(4); }
  uint32_t u16() { return get(2); }
  uint32_t byte() { return get(1); }
  std::string string_of(size_t n) {
    need(n);
    std::string s = bytes.substr(at, n);
    at += n;
    return s;
  }
  std::string text() { return string_of(u32()); }
};

// A fixture line: \n, \t and \\ escaped.
inline std::string unescape_line(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\' || i + 1 == line.size()) {
      out.push_back(line[i]);
      continue;
    }
    const char c = line[++i];
    out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
  }
  return out;
}

}  // namespace petrel::test::hf
