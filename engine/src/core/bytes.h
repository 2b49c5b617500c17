// Fixed-width integers read from byte buffers of any alignment, in the byte order a
// file format defines (model files, zip archives, SentencePiece's charsmap are
// little-endian; the piece trie compares 8-byte big-endian chunks).
#pragma once

#include <cstdint>
#include <cstring>

namespace petrel::detail {

inline uint16_t load_le16(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(b[0] | b[1] << 8);
}

inline uint32_t load_le32(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

inline uint64_t load_le64(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return uint64_t{load_le32(b)} | uint64_t{load_le32(b + 4)} << 32;
}

inline uint64_t load_be64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

}  // namespace petrel::detail
