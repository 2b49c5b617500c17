// petrel-bench --cold-cache's pieces: the eviction (tools/bench/cache_eviction.h) and the
// model file's byte range it evicts (ModelAccess::file_bytes).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "bench/cache_eviction.h"
#include "model_access.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

TEST_CASE("evicting a range from the caches keeps its bytes, at any alignment and length", "[bench]") {
  std::vector<uint8_t> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::vector<uint8_t> before = bytes;
#if defined(__x86_64__) || defined(__i386__)
  REQUIRE(bench::cache_eviction_unavailable().empty());  // every x86-64 CPU has CLFLUSH (SSE2)
#else
  CHECK_THAT(bench::cache_eviction_unavailable(), Contains("x86"));
#endif
  if (!bench::cache_eviction_unavailable().empty()) return;
  for (size_t offset : {0, 1, 63, 64, 65})
    for (size_t size : {0, 1, 63, 4097, 9000}) bench::evict_from_caches(bytes.data() + offset, size);
  CHECK(bytes == before);
}

TEST_CASE("a model's file bytes are the whole file as loaded", "[bench]") {
  const std::string path = en_de_model_path(DType::kInt8);
  auto model = load_model(path);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  const detail::ModelAccess::Bytes file = detail::ModelAccess::file_bytes(*model);
  REQUIRE(file.data != nullptr);
  CHECK(file.size == static_cast<size_t>(st.st_size));
  // The weights are views into these bytes.
  const detail::ModelWeights& w = detail::ModelAccess::weights(*model);
  const auto* table = static_cast<const uint8_t*>(w.decoder.embed_tokens.data);
  CHECK(table >= file.data);
  CHECK(table < file.data + file.size);
}
