// Hash tables keyed by strings that come from untrusted input (a model file's
// vocabulary, a checkpoint's tokenizer, a text being tokenized). std::hash's function is
// fixed and public: a file can hold thousands of tokens that all hash alike (libstdc++'s
// murmur mix has collisions whatever its seed), and building a map of them then takes
// quadratic time. StringHash is SipHash-1-3 (Aumasson and Bernstein, the hash Rust's
// HashMap and Python's str use) under a key drawn once per process, so which strings
// collide cannot be known when the file is written.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace petrel::detail {

// SipHash-c-d of `bytes` under the 128-bit key (k0, k1): little-endian words, as the
// reference implementation.
template <int kCompressionRounds, int kFinalizationRounds>
uint64_t siphash(std::string_view bytes, uint64_t k0, uint64_t k1) {
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  auto absorb = [&](uint64_t m) {
    v3 ^= m;
    for (int r = 0; r < kCompressionRounds; ++r) round();
    v0 ^= m;
  };
  auto word = [](const char* p, size_t n) {  // n <= 8 bytes, little-endian
    uint64_t m = 0;
    for (size_t i = 0; i < n; ++i) m |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
    return m;
  };
  const size_t whole = bytes.size() / 8 * 8;
  for (size_t at = 0; at < whole; at += 8) absorb(word(bytes.data() + at, 8));
  absorb(word(bytes.data() + whole, bytes.size() - whole) | (uint64_t{bytes.size()} << 56));
  v2 ^= 0xff;
  for (int r = 0; r < kFinalizationRounds; ++r) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

struct StringHashKey {
  uint64_t k0, k1;
};
// This process's key: from the system's entropy source, or where it has none (it may
// throw), from the clock and an address, which still differ from run to run.
inline const StringHashKey& string_hash_key() {
  static const StringHashKey key = [] {
    try {
      std::random_device entropy;
      const uint64_t a = (uint64_t{entropy()} << 32) | entropy(), b = (uint64_t{entropy()} << 32) | entropy();
      return StringHashKey{a, b};
    } catch (...) {
      const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      static const char anchor = 0;
      return StringHashKey{now, reinterpret_cast<uintptr_t>(&anchor) * 0x9e3779b97f4a7c15ull};
    }
  }();
  return key;
}

// The hash of untrusted strings (std::string and std::string_view keys alike).
struct StringHash {
  size_t operator()(std::string_view s) const noexcept {
    const StringHashKey& key = string_hash_key();
    return static_cast<size_t>(siphash<1, 3>(s, key.k0, key.k1));
  }
};

template <class Key, class Value>
using StringMap = std::unordered_map<Key, Value, StringHash>;
template <class Key>
using StringSet = std::unordered_set<Key, StringHash>;

}  // namespace petrel::detail
