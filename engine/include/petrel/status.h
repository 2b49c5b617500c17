// Errors as values: nothing in the engine throws across its API or prints.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace petrel {

enum class ErrorCode {
  kInvalidArgument = 1,  // a caller's input is wrong (ids, options)
  kIo = 2,               // a file could not be opened or mapped
  kFormat = 3,           // a model file is corrupt, hostile or inconsistent
  kUnsupported = 4,      // a valid file this build cannot run (newer major version, ...)
  kInternal = 5,
  kOutOfMemory = 6,      // an allocation failed, or a request needs more memory than allowed
  kCancelled = 7,        // the caller cancelled the work (BatchOptions::cancel)
};

struct Error {
  ErrorCode code;
  std::string message;
};

// Either a T or an Error. Deliberately small: has_value / value / error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// A Result with no value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}
  static Status ok() { return Status(); }
  bool has_value() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const Error& error() const { return error_; }

 private:
  Error error_{ErrorCode::kInternal, ""};
  bool failed_ = false;
};

}  // namespace petrel
