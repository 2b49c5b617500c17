#include "run/line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace petrel::run {

bool LineReader::next_window(size_t max_lines, std::vector<Input>& out) {
  out.clear();
  size_t bytes = 0;
  for (;;) {
    for (size_t nl; out.size() < max_lines && bytes < kMaxWindowBytes &&
                    (nl = buffer_.find('\n', start_)) != std::string::npos;) {
      bytes += take_line(nl, out);
      start_ = nl + 1;
    }
    if (out.size() == max_lines || bytes >= kMaxWindowBytes) return true;
    if (buffer_.size() - start_ > kMaxLineBytes) {  // a line too long to hold: skip to its end
      ++line_;
      out.push_back({"", too_long()});
      buffer_.clear();
      start_ = 0;
      skipping_ = true;
      return true;  // the lines before it (and its error) now, however long the rest takes to come
    }
    if (done_) {
      if (start_ < buffer_.size()) {
        bytes += take_line(buffer_.size(), out);
        buffer_.clear();
        start_ = 0;
      }
      return !out.empty();
    }
    buffer_.erase(0, start_);
    start_ = 0;
    if (!read_more(/*wait=*/out.empty()) && !done_) return true;  // nothing more yet: answer what we have
  }
}

size_t LineReader::take_line(size_t end, std::vector<Input>& out) {
  ++line_;
  size_t length = end - start_;
  if (length > 0 && buffer_[start_ + length - 1] == '\r') --length;
  if (length > kMaxLineBytes) {
    out.push_back({"", too_long()});
    return 0;
  }
  out.push_back({buffer_.substr(start_, length), std::nullopt});
  return length;
}

std::string LineReader::too_long() const {
  return name_ + " line " + std::to_string(line_) + " is longer than " + std::to_string(kMaxLineBytes) +
         " bytes; skipped";
}

bool LineReader::read_more(bool wait) {
#ifdef __EMSCRIPTEN__
  // Node's file streams (NODERAWFS) have no poll(), and every read blocks: read only when
  // there is nothing to answer yet, so the lines already read are answered first.
  if (!wait) return false;
#else
  pollfd p{fd_, POLLIN, 0};
  if (!wait && poll(&p, 1, 0) == 0) return false;
#endif
  char chunk[1 << 16];
  ssize_t n;
  do n = read(fd_, chunk, sizeof chunk);
  while (n < 0 && errno == EINTR);
  if (n <= 0) {
    if (n < 0) read_error_ = name_ + ": cannot read: " + std::strerror(errno);
    done_ = true;
    return false;
  }
  std::string_view got(chunk, static_cast<size_t>(n));
  if (skipping_) {  // the rest of a line too long to hold
    const size_t nl = got.find('\n');
    if (nl == std::string_view::npos) return true;
    got.remove_prefix(nl + 1);
    skipping_ = false;
  }
  buffer_.append(got);
  return true;
}

}  // namespace petrel::run
