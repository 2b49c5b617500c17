// A test's child process driven as a coprocess: a shell command with a pipe to its
// standard input and one from its standard output, read with a timeout so that a child
// waiting for more input fails the test instead of hanging it.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <utility>

namespace petrel::test {

// A shell command with a pipe to its standard input and one from its standard output.
class Coprocess {
 public:
  explicit Coprocess(const std::string& command) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      close(in[0]), close(in[1]), close(out[0]), close(out[1]);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~Coprocess() {
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void write_line(const std::string& line) {
    const std::string bytes = line + "\n";
    REQUIRE(write(to_child_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }

  // Writes bytes as they are, from any thread (no assertion): false once the child stops reading.
  bool write_raw(const std::string& bytes) {
    return write(to_child_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  }

  // The next line of output, or nothing when none came within `timeout_ms` or the output ended.
  std::optional<std::string> read_line(int timeout_ms = 60000) {
    for (;;) {
      const size_t nl = buffered_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return line;
      }
      pollfd p{from_child_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
      char chunk[4096];
      const ssize_t n = read(from_child_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffered_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Closes its input; the rest of its output and its exit status.
  std::pair<std::string, int> finish() {
    close(to_child_);
    to_child_ = -1;
    std::string rest = buffered_;
    char chunk[4096];
    for (ssize_t n; (n = read(from_child_, chunk, sizeof chunk)) > 0;) rest.append(chunk, static_cast<size_t>(n));
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return {rest, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffered_;
};

}  // namespace petrel::test
