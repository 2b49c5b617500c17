// A small command-line parser shared by the Petrel tools: --flag value,
// --flag=value, boolean switches, repeatable flags, positionals, --help.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace petrel::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  std::string name;      // without dashes
  std::string metavar;   // empty for a switch
  std::string help;
  bool repeatable = false;
};

class Parser {
 public:
  Parser(std::string program, std::string usage, std::string description)
      : program_(std::move(program)), usage_(std::move(usage)), description_(std::move(description)) {}

  void flag(const std::string& name, const std::string& metavar, const std::string& help, bool repeatable = false) {
    specs_.push_back({name, metavar, help, repeatable});
  }
  void toggle(const std::string& name, const std::string& help) { specs_.push_back({name, "", help, false}); }

  // Throws UsageError on an unknown flag, a missing value or a repeated flag.
  // Returns false when --help was given (help() has the text).
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> all(const std::string& name) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

  // Typed getters that name the flag in their errors.
  long long get_int(const std::string& name, long long fallback, long long min, long long max) const;
  double get_double(const std::string& name, double fallback) const;
  // The flag's value, which must be one of `choices` (fallback when absent).
  std::string get_choice(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& choices) const;

  std::string help() const;
  const std::string& program() const { return program_; }

 private:
  const FlagSpec* find(const std::string& name) const;
  std::string program_, usage_, description_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
};

// A tool's exit status once its run returned `status`: 1, with a message on standard
// error, when standard output could not be written (a full disk; a closed pipe with
// SIGPIPE ignored), which would otherwise pass for success. Call it as main returns.
int exit_status(const std::string& program, int status);

// A tool's main: `tool_main`'s status through exit_status, with memory that ran out in
// the tool's own code (the engine returns errors) reported as "PROGRAM: out of memory"
// and status 1, not an abort: a device without overcommit refuses allocations.
int run_tool(const std::string& program, int (*tool_main)(int, char**), int argc, char** argv);

// Parses whitespace-separated token ids, e.g. "12 7 99 0"; each must fit int32
// (whether it is in a model's vocabulary is the engine's check).
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace petrel::cli
