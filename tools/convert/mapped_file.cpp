#include "convert/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "convert/convert_error.h"

namespace petrel::convert {

MappedFile::MappedFile(const std::string& path) {
  // O_NONBLOCK: a FIFO's open would wait for a writer before fstat could refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConvertError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ConvertError(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > SIZE_MAX) {  // a 32-bit build (armv7, wasm32) cannot map it
    ::close(fd);
    throw ConvertError(path + ": " + std::to_string(st.st_size) + " bytes, more than a 32-bit build can map");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {  // mmap refuses empty files; an empty span is what the readers expect
    ::close(fd);
    return;
  }
  void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (addr == MAP_FAILED) throw ConvertError(path + ": cannot map: " + std::strerror(map_errno));
  data_ = static_cast<const uint8_t*>(addr);
}

void MappedFile::release() const {
  // Advice only: on failure the pages simply stay mapped.
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace petrel::convert
