#include "common/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <stdexcept>
#include <cstdlib>
#include <sstream>

namespace petrel::cli {

const FlagSpec* Parser::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

bool Parser::parse(int argc, char** argv) {
  bool only_positionals = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positionals || arg.size() < 2 || arg[0] != '-') {
      positionals_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positionals = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") return false;
    if (arg.rfind("--", 0) != 0) throw UsageError("unknown option '" + arg + "' (see --help)");
    std::string name = arg.substr(2), value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    const FlagSpec* spec = find(name);
    if (!spec) throw UsageError("unknown option '--" + name + "' (see --help)");
    if (spec->metavar.empty()) {
      if (has_inline) throw UsageError("option '--" + name + "' takes no value");
      value = "1";
    } else if (!has_inline) {
      if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value (" + spec->metavar + ")");
      value = argv[++i];
    }
    if (values_.count(name) && !spec->repeatable) throw UsageError("option '--" + name + "' given twice");
    values_[name].push_back(value);
  }
  return true;
}

std::string Parser::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Parser::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

long long Parser::get_int(const std::string& name, long long fallback, long long min, long long max) const {
  if (!has(name)) return fallback;
  std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0)
    throw UsageError("--" + name + ": '" + text + "' is not an integer");
  if (v < min || v > max)
    throw UsageError("--" + name + ": " + text + " is out of range " + std::to_string(min) + ".." + std::to_string(max));
  return v;
}

double Parser::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  std::string text = get(name);
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw UsageError("--" + name + ": '" + text + "' is not a number");
  return v;
}

std::string Parser::get_choice(const std::string& name, const std::string& fallback,
                               const std::vector<std::string>& choices) const {
  if (!has(name)) return fallback;
  std::string text = get(name), listed;
  for (const auto& c : choices) {
    if (text == c) return text;
    listed += (listed.empty() ? "" : ", ") + c;
  }
  throw UsageError("--" + name + ": '" + text + "' is not one of " + listed);
}

std::string Parser::help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " " << usage_ << "\n\n" << description_ << "\n\noptions:\n";
  for (const auto& s : specs_) {
    std::string left = "  --" + s.name + (s.metavar.empty() ? "" : " " + s.metavar);
    out << left;
    out << std::string(left.size() < 30 ? 30 - left.size() : 1, ' ') << s.help << "\n";
  }
  out << "  -h, --help                  show this help\n";
  return out.str();
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::istringstream in(text);
  std::vector<int32_t> out;
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(word.c_str(), &end, 10);
    if (*end != '\0' || errno != 0) throw UsageError(flag + ": '" + word + "' is not an integer token id");
    if (v < 0 || v > INT32_MAX) throw UsageError(flag + ": token id " + word + " is out of range");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) throw UsageError(flag + ": no token ids given");
  return out;
}

int exit_status(const std::string& program, int status) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return status;
  const int error = errno;
  std::fprintf(stderr, "%s: cannot write standard output%s%s\n", program.c_str(), error != 0 ? ": " : "",
               error != 0 ? std::strerror(error) : "");
  return status == 0 ? 1 : status;
}

int run_tool(const std::string& program, int (*tool_main)(int, char**), int argc, char** argv) {
  int status = 1;
  try {
    status = tool_main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory\n", program.c_str());
  } catch (const std::length_error&) {  // a container asked for more than its max_size()
    std::fprintf(stderr, "%s: out of memory\n", program.c_str());
  }
  return exit_status(program, status);
}

}  // namespace petrel::cli
