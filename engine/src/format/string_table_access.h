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
  // Views `count` strings given as (offset, size) pairs of little-endian 32-bit values
  // at `spans` (a FlatBuffers vector of StringSpan), each bytes [offset, offset + size)
  // of `blob`; checked by the caller, and the bytes must outlive the table.
  static StringTable view_spans(const char* blob, const void* spans, size_t count) {
    StringTable t;
    t.blob_ = blob;
    t.spans_ = static_cast<const unsigned char*>(spans);
    t.size_ = count;
    return t;
  }
  // The same table, keeping `owner` (the bytes it views) alive with every copy.
  static StringTable owning(StringTable t, std::shared_ptr<const void> owner) {
    if (t.offsets_ != nullptr || t.spans_ != nullptr) t.owner_ = std::move(owner);
    return t;
  }
};

}  // namespace petrel::detail
