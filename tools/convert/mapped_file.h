// A whole file mapped read-only: big checkpoints are read in place, page by page,
// as tensors are asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace petrel::convert {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws ConvertError naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the pages of [begin, begin + size) from this process's memory once read:
  // the converter reads each tensor once, so a checkpoint's touched pages need not
  // add up (they stay in the page cache; a later read maps them again).
  void release(const uint8_t* begin, size_t size) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace petrel::convert
