// A strict reader for the zip archives PyTorch writes (torch.save since 1.6):
// every record stored uncompressed, found through the central directory (zip64
// where needed) and cross-checked against its local header. Anything else — a
// compressed or encrypted record, a name that differs between the two headers,
// records that overlap each other or the directory, offsets past the end — throws
// ConvertError naming the file and the record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace petrel::convert {

struct ZipRecord {
  std::string name;
  uint64_t header_offset = 0;  // the local header
  uint64_t data_offset = 0;    // the record's first byte, within the archive
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

class ZipArchive {
 public:
  // Does not copy or own `data`; `path` names the archive in errors.
  ZipArchive(const uint8_t* data, size_t size, std::string path);

  static bool looks_like_zip(const uint8_t* data, size_t size);

  const std::vector<ZipRecord>& records() const { return records_; }
  const ZipRecord* find(const std::string& name) const;
  // The record's bytes, after its CRC-32 has been checked (once per record; the
  // cache of checked records makes this not thread-safe).
  const uint8_t* verified_data(const ZipRecord& record) const;

 private:
  const uint8_t* data_;
  std::string path_;
  std::vector<ZipRecord> records_;
  std::map<std::string, size_t> by_name_;
  mutable std::vector<bool> verified_;
};

}  // namespace petrel::convert
