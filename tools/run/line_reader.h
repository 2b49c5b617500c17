// petrel-run's inputs from a file or pipe: lines a window at a time, in bounded memory.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace petrel::run {

// One input: a --text / --ids value or a line, or why it cannot be one.
struct Input {
  std::string text;
  std::optional<std::string> error;
};

// The lines of a file or pipe, a window at a time. A window is what has arrived (at
// least one line; it waits only when none has), so a program driving petrel-run as a
// coprocess gets each line's answer before it writes the next, and memory holds one
// window whatever the input's size: a line longer than kMaxLineBytes is reported as an
// error and its bytes are skipped, not kept.
class LineReader {
 public:
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;
  static constexpr size_t kMaxWindowBytes = size_t{8} << 20;

  // `name` is how errors name the input ("standard input", a path).
  LineReader(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

  // Up to max_lines lines (a last line without a newline included); false when the
  // input is done. A read error ends the input (read_error()).
  bool next_window(size_t max_lines, std::vector<Input>& out);
  // Why reading stopped early ("NAME: cannot read: ..."), or empty.
  const std::string& read_error() const { return read_error_; }

 private:
  size_t take_line(size_t end, std::vector<Input>& out);
  std::string too_long() const;
  // Reads what is there (waiting for it when `wait`); false when nothing was read.
  bool read_more(bool wait);

  int fd_;
  std::string name_;
  std::string buffer_;
  size_t start_ = 0;  // the first byte of buffer_ not yet taken
  size_t line_ = 0;
  bool skipping_ = false, done_ = false;
  std::string read_error_;
};

}  // namespace petrel::run
