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
  // Drops the mapping's pages from this process's memory (they stay in the page cache;
  // a later read maps them again). The readers call it after each read: the converter
  // reads each tensor once, so a checkpoint's touched pages need not add up. All of
  // them, not the range just read: a page fault maps the cached pages around it too
  // (the kernel's fault-around), pages of tensors read before or after.
  void release() const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace petrel::convert
