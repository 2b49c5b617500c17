#include "convert/zip_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "convert/convert_error.h"
#include "core/bytes.h"
#include "core/quoted.h"
#include "format/crc32.h"

namespace petrel::convert {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEndOfDirectory = 0x06054b50,
                   kZip64EndOfDirectory = 0x06064b50, kZip64Locator = 0x07064b50, kDataDescriptor = 0x08074b50;
constexpr size_t kLocalHeaderSize = 30, kCentralHeaderSize = 46, kEndSize = 22, kLocatorSize = 20,
                 kZip64EndSize = 56;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 1u << 0, kFlagDataDescriptor = 1u << 3, kFlagStrongEncryption = 1u << 6;
constexpr uint32_t kMissing32 = 0xffffffffu;
constexpr uint16_t kMissing16 = 0xffffu;

using detail::load_le16;
using detail::load_le32;
using detail::load_le64;

// [begin, begin + length) lies within [0, limit).
bool fits(uint64_t begin, uint64_t length, uint64_t limit) { return begin <= limit && length <= limit - begin; }

// The zip64 extended-information field of an extra area, if any: its bytes.
// Throws when the area is not a well-formed sequence of (id, length, data).
bool find_zip64_extra(const uint8_t* extra, size_t length, const uint8_t** field, size_t* field_length,
                      const std::string& where) {
  bool found = false;
  size_t pos = 0;
  while (pos < length) {
    if (length - pos < 4) throw ConvertError(where + ": malformed extra field");
    const uint16_t id = load_le16(extra + pos), size = load_le16(extra + pos + 2);
    if (size > length - pos - 4) throw ConvertError(where + ": extra field runs past its area");
    if (id == kZip64ExtraId) {
      if (found) throw ConvertError(where + ": two zip64 extra fields");
      found = true;
      *field = extra + pos + 4;
      *field_length = size;
    }
    pos += 4 + size;
  }
  return found;
}

// Replaces each 32-bit field that is 0xffffffff by its 64-bit value from the zip64
// extra field, in the order the format fixes (uncompressed, compressed, offset).
void apply_zip64(const uint8_t* extra, size_t extra_length, std::initializer_list<uint64_t*> fields,
                 const std::string& where) {
  bool any = false;
  for (uint64_t* f : fields) any = any || *f == kMissing32;
  if (!any) return;
  const uint8_t* field = nullptr;
  size_t field_length = 0;
  if (!find_zip64_extra(extra, extra_length, &field, &field_length, where))
    throw ConvertError(where + ": a size or offset is 0xffffffff but there is no zip64 extra field");
  size_t pos = 0;
  for (uint64_t* f : fields) {
    if (*f != kMissing32) continue;
    if (field_length - pos < 8) throw ConvertError(where + ": zip64 extra field is too short");
    *f = load_le64(field + pos);
    pos += 8;
  }
}

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
  uint64_t end = 0;  // where the directory must end: the first end-of-directory record
};

Directory find_directory(const uint8_t* data, size_t size, const std::string& path) {
  if (size < kEndSize) throw ConvertError(path + ": too small for a zip archive (" + std::to_string(size) + " bytes)");
  // The end record is the last thing in the file, followed only by its comment.
  size_t end_pos = SIZE_MAX;
  const size_t lowest = size - kEndSize > 0xffff ? size - kEndSize - 0xffff : 0;
  for (size_t pos = size - kEndSize + 1; pos-- > lowest;) {
    if (load_le32(data + pos) == kEndOfDirectory && pos + kEndSize + load_le16(data + pos + 20) == size) {
      end_pos = pos;
      break;
    }
  }
  if (end_pos == SIZE_MAX)
    throw ConvertError(path + ": no zip end-of-directory record at the end of the file (truncated download?)");
  const uint8_t* e = data + end_pos;
  const uint16_t disk = load_le16(e + 4), directory_disk = load_le16(e + 6);
  Directory d;
  uint64_t entries_here = load_le16(e + 8);
  d.entries = load_le16(e + 10);
  d.size = load_le32(e + 12);
  d.offset = load_le32(e + 16);
  d.end = end_pos;
  const bool needs_zip64 = disk == kMissing16 || directory_disk == kMissing16 || entries_here == kMissing16 ||
                           d.entries == kMissing16 || d.size == kMissing32 || d.offset == kMissing32;
  if (end_pos >= kLocatorSize && load_le32(data + end_pos - kLocatorSize) == kZip64Locator) {
    const uint8_t* loc = data + end_pos - kLocatorSize;
    const uint64_t record = load_le64(loc + 8);
    if (load_le32(loc + 4) != 0 || load_le32(loc + 16) > 1)
      throw ConvertError(path + ": a multi-disk zip archive (not written by PyTorch)");
    const uint64_t limit = end_pos - kLocatorSize;
    if (!fits(record, kZip64EndSize, limit) || load_le32(data + record) != kZip64EndOfDirectory)
      throw ConvertError(path + ": zip64 end-of-directory locator points to " + std::to_string(record) +
                         ", where there is no zip64 end-of-directory record");
    const uint8_t* z = data + record;
    const uint64_t record_size = load_le64(z + 4);
    if (record_size < kZip64EndSize - 12 || !fits(record, 12 + record_size, limit))
      throw ConvertError(path + ": zip64 end-of-directory record has a bad size");
    if (load_le32(z + 16) != 0 || load_le32(z + 20) != 0) throw ConvertError(path + ": a multi-disk zip archive");
    const uint64_t entries_here64 = load_le64(z + 24), entries64 = load_le64(z + 32), size64 = load_le64(z + 40),
                   offset64 = load_le64(z + 48);
    // The classic record either agrees or says "see zip64".
    if ((entries_here != kMissing16 && entries_here != entries_here64) ||
        (d.entries != kMissing16 && d.entries != entries64) || (d.size != kMissing32 && d.size != size64) ||
        (d.offset != kMissing32 && d.offset != offset64))
      throw ConvertError(path + ": the zip and zip64 end-of-directory records disagree");
    entries_here = entries_here64;
    d.entries = entries64;
    d.size = size64;
    d.offset = offset64;
    d.end = record;
  } else if (needs_zip64) {
    throw ConvertError(path + ": the end-of-directory record needs a zip64 record, which is missing");
  } else if (disk != 0 || directory_disk != 0) {
    throw ConvertError(path + ": a multi-disk zip archive (not written by PyTorch)");
  }
  if (entries_here != d.entries) throw ConvertError(path + ": a multi-disk zip archive (not written by PyTorch)");
  if (!fits(d.offset, d.size, d.end) || d.offset + d.size != d.end)
    throw ConvertError(path + ": the central directory (offset " + std::to_string(d.offset) + ", " +
                       std::to_string(d.size) + " bytes) does not end where the end-of-directory record begins (" +
                       std::to_string(d.end) + ")");
  if (d.entries > d.size / kCentralHeaderSize)
    throw ConvertError(path + ": " + std::to_string(d.entries) + " entries cannot fit in a central directory of " +
                       std::to_string(d.size) + " bytes");
  return d;
}

struct Footprint {
  uint64_t begin, end;  // local header .. end of data (and its descriptor)
  size_t record;
};

}  // namespace

bool ZipArchive::looks_like_zip(const uint8_t* data, size_t size) {
  return size >= 4 && load_le32(data) == kLocalHeader;
}

ZipArchive::ZipArchive(const uint8_t* data, size_t size, std::string path)
    : data_(data), path_(std::move(path)) {
  const Directory dir = find_directory(data, size, path_);
  std::vector<Footprint> footprints;
  uint64_t pos = dir.offset;
  const uint64_t directory_end = dir.offset + dir.size;
  for (uint64_t n = 0; n < dir.entries; ++n) {
    const std::string entry = path_ + ": central directory entry " + std::to_string(n);
    if (!fits(pos, kCentralHeaderSize, directory_end) || load_le32(data + pos) != kCentralHeader)
      throw ConvertError(entry + " (offset " + std::to_string(pos) + "): not a central directory header");
    const uint8_t* c = data + pos;
    const uint16_t flags = load_le16(c + 8), method = load_le16(c + 10), name_length = load_le16(c + 28),
                   extra_length = load_le16(c + 30), comment_length = load_le16(c + 32);
    const uint16_t disk = load_le16(c + 34);
    uint64_t compressed = load_le32(c + 20), uncompressed = load_le32(c + 24), local = load_le32(c + 42);
    const uint64_t variable = uint64_t{name_length} + extra_length + comment_length;
    if (!fits(pos + kCentralHeaderSize, variable, directory_end))
      throw ConvertError(entry + ": name or extra field runs past the central directory");
    ZipRecord r;
    r.name.assign(reinterpret_cast<const char*>(c + kCentralHeaderSize), name_length);
    r.crc32 = load_le32(c + 16);
    const std::string where = path_ + ": record " + detail::quoted(r.name);
    if (r.name.empty() || r.name.find('\0') != std::string::npos) throw ConvertError(entry + ": empty or bad name");
    const uint8_t* extra = c + kCentralHeaderSize + name_length;
    apply_zip64(extra, extra_length, {&uncompressed, &compressed, &local}, where);
    if (disk != 0) throw ConvertError(where + " lies on another disk of a multi-disk archive");
    if (flags & (kFlagEncrypted | kFlagStrongEncryption)) throw ConvertError(where + " is encrypted");
    if (method != 0)
      throw ConvertError(where + " is compressed (method " + std::to_string(method) +
                         "); PyTorch stores checkpoint records uncompressed");
    if (compressed != uncompressed)
      throw ConvertError(where + " is stored with different compressed (" + std::to_string(compressed) +
                         ") and uncompressed (" + std::to_string(uncompressed) + ") sizes");
    r.size = uncompressed;
    r.header_offset = local;

    // The local header must describe the same record.
    if (!fits(local, kLocalHeaderSize, dir.offset) || load_le32(data + local) != kLocalHeader)
      throw ConvertError(where + ": no local header at offset " + std::to_string(local));
    const uint8_t* h = data + local;
    const uint16_t local_name_length = load_le16(h + 26), local_extra_length = load_le16(h + 28);
    if (!fits(local + kLocalHeaderSize, uint64_t{local_name_length} + local_extra_length, dir.offset))
      throw ConvertError(where + ": local header runs into the central directory");
    const std::string local_name(reinterpret_cast<const char*>(h + kLocalHeaderSize), local_name_length);
    if (local_name != r.name)
      throw ConvertError(where + ": local header names it " + detail::quoted(local_name));
    if (load_le16(h + 6) != flags || load_le16(h + 8) != method)
      throw ConvertError(where + ": local header's flags or method differ from the central directory's");
    const uint8_t* local_extra = h + kLocalHeaderSize + local_name_length;
    uint64_t local_compressed = load_le32(h + 18), local_uncompressed = load_le32(h + 22);
    const uint32_t local_crc = load_le32(h + 14);
    const uint8_t* z64 = nullptr;
    size_t z64_length = 0;
    const bool local_zip64 = find_zip64_extra(local_extra, local_extra_length, &z64, &z64_length, where);
    r.data_offset = local + kLocalHeaderSize + local_name_length + local_extra_length;
    if (!fits(r.data_offset, r.size, dir.offset))
      throw ConvertError(where + ": its " + std::to_string(r.size) + " bytes at offset " +
                         std::to_string(r.data_offset) + " run past the records' area (" +
                         std::to_string(dir.offset) + " bytes)");
    uint64_t end = r.data_offset + r.size;
    if (flags & kFlagDataDescriptor) {
      // Sizes and CRC follow the data; the local header holds zeros (or the same values).
      const bool zeros = local_crc == 0 && local_compressed == 0 && local_uncompressed == 0;
      if (!zeros && local_crc != r.crc32) throw ConvertError(where + ": local header's CRC differs");
      uint64_t d = end;
      if (fits(d, 4, dir.offset) && load_le32(data + d) == kDataDescriptor) d += 4;
      const size_t size_bytes = local_zip64 ? 8 : 4;
      if (!fits(d, 4 + 2 * size_bytes, dir.offset))
        throw ConvertError(where + ": data descriptor runs into the central directory");
      const uint64_t dc = size_bytes == 8 ? load_le64(data + d + 4) : load_le32(data + d + 4);
      const uint64_t du = size_bytes == 8 ? load_le64(data + d + 4 + size_bytes) : load_le32(data + d + 4 + size_bytes);
      if (load_le32(data + d) != r.crc32 || dc != r.size || du != r.size)
        throw ConvertError(where + ": data descriptor differs from the central directory");
      end = d + 4 + 2 * size_bytes;
    } else {
      if (local_zip64) apply_zip64(local_extra, local_extra_length, {&local_uncompressed, &local_compressed}, where);
      if (local_crc != r.crc32 || local_compressed != r.size || local_uncompressed != r.size)
        throw ConvertError(where + ": local header's size or CRC differs from the central directory's");
    }
    if (!by_name_.emplace(r.name, records_.size()).second) throw ConvertError(where + " appears twice");
    footprints.push_back({local, end, records_.size()});
    records_.push_back(std::move(r));
    pos += kCentralHeaderSize + variable;
  }
  if (pos != directory_end)
    throw ConvertError(path_ + ": central directory holds " + std::to_string(directory_end - pos) +
                       " bytes after its last entry");
  std::sort(footprints.begin(), footprints.end(),
            [](const Footprint& a, const Footprint& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < footprints.size(); ++i)
    if (footprints[i].begin < footprints[i - 1].end)
      throw ConvertError(path_ + ": records " + detail::quoted(records_[footprints[i - 1].record].name) + " and " +
                         detail::quoted(records_[footprints[i].record].name) + " overlap");
  verified_.assign(records_.size(), false);
}

const ZipRecord* ZipArchive::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &records_[it->second];
}

const uint8_t* ZipArchive::verified_data(const ZipRecord& record) const {
  auto it = by_name_.find(record.name);
  if (it == by_name_.end()) throw ConvertError(path_ + ": no record " + detail::quoted(record.name));
  const size_t index = it->second;
  if (!verified_[index]) {
    const uint32_t crc = detail::crc32(data_ + record.data_offset, record.size);
    if (crc != record.crc32) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "CRC-32 is %08x, the directory says %08x", crc, record.crc32);
      throw ConvertError(path_ + ": record " + detail::quoted(record.name) + ": " + buf + " (corrupt download?)");
    }
    verified_[index] = true;
  }
  return data_ + record.data_offset;
}

}  // namespace petrel::convert
