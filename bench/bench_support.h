// What the benchmarks share: xz-compressed fixtures and the converted tokenizer.json
// fixtures (tests/fixtures/hf_tokenizer).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "convert/hf_tokenizer.h"
#include "format/model_file.h"
#include "petrel_generated.h"
#include "text/hf_tokenizer.h"

namespace petrel::bench {

// A file's content through `xz -dc` (empty when that fails).
inline std::string xz_decompress(const std::string& path) {
  FILE* pipe = popen(("xz -dc '" + path + "'").c_str(), "r");
  std::string text;
  if (pipe) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
    if (pclose(pipe) != 0) text.clear();
  }
  return text;
}

// A fixture tokenizer converted and built, with the buffer it views.
struct HfFixture {
  std::vector<uint8_t> buffer;
  std::unique_ptr<text::HfTokenizer> tokenizer;
};

// `dir`: a tests/fixtures/hf_tokenizer/<name> folder. Throws std::runtime_error.
inline HfFixture load_hf_fixture(const std::string& dir) {
  convert::HfTokenizerFiles files;
  files.dir = dir;
  files.tokenizer_json = xz_decompress(dir + "/tokenizer.json.xz");
  files.tokenizer_config = xz_decompress(dir + "/tokenizer_config.json.xz");
  HfFixture f;
  f.buffer = convert::hf_tokenizer_buffer(files);
  const auto* root = flatbuffers::GetRoot<fb::Tokenizer>(f.buffer.data());
  auto tables = detail::bind_hf_tokenizer(*root, root->vocab_spans()->size(), dir);
  if (!tables) throw std::runtime_error(tables.error().message);
  auto t = text::HfTokenizer::create(std::move(tables.value()), dir);
  if (!t) throw std::runtime_error(t.error().message);
  f.tokenizer = std::move(t.value());
  return f;
}

}  // namespace petrel::bench
