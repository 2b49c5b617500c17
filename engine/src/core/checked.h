// Overflow-checked size arithmetic, for every size that comes from a file or a caller.
#pragma once

#include <cstdint>

namespace petrel::detail {

inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// A running product or sum that remembers whether it ever overflowed 64 bits.
class CheckedSize {
 public:
  explicit CheckedSize(uint64_t value = 0) : value_(value) {}
  CheckedSize& operator*=(uint64_t factor) {
    ok_ = ok_ && checked_mul(value_, factor, &value_);
    return *this;
  }
  CheckedSize& operator+=(const CheckedSize& other) {
    ok_ = ok_ && other.ok_ && checked_add(value_, other.value_, &value_);
    return *this;
  }
  friend CheckedSize operator*(CheckedSize a, uint64_t b) { return a *= b; }
  bool ok() const { return ok_; }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_;
  bool ok_ = true;
};

}  // namespace petrel::detail
