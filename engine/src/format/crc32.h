// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320: the one zip, zlib and PNG
// use), for the model file's data-section checksum. Structural checks at load cannot
// see a flipped weight; comparing this with the converter's value can.
#pragma once

#include <cstddef>
#include <cstdint>

namespace petrel::detail {

// Continues `crc` (0 to start) over `size` bytes, as zlib's crc32() does.
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace petrel::detail
