// The engine's way to make a StringTable (petrel/types.h) of a model file's strings.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "petrel/types.h"

namespace petrel::detail {

struct StringTableAccess {
  // Views `count` strings of a verified FlatBuffers vector of strings whose first
  // offset slot is at `slots` (Vector::Data()); the bytes must outlive the table.
  static StringTable view(const void* slots, size_t count) {
    StringTable t;
    t.offsets_ = static_cast<const unsigned char*>(slots);
    t.size_ = count;
    return t;
  }
  // The same table, keeping `owner` (the bytes it views) alive with every copy.
  static StringTable owning(StringTable t, std::shared_ptr<const void> owner) {
    if (t.offsets_ != nullptr) t.owner_ = std::move(owner);
    return t;
  }
};

}  // namespace petrel::detail
