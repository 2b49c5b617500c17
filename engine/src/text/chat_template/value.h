// A chat template's values, with Python's semantics: undefined, none, bool, int, float,
// str, list (or tuple) and dict (or a namespace() or a loop's `loop`), shared and
// immutable but for the namespace's and the loop's dict; and the sizes of them that the
// renderer's value budget counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/string_hash.h"
#include "text/chat_template.h"

namespace petrel::text::chat_template_detail {

constexpr int kMaxValueDepth = ChatTemplate::kMaxNesting;  // lists in lists, dicts in dicts

struct ListData;
struct DictData;

// The sizes the value budget counts (kMaxAllocatedBytes): a 64-bit libstdc++ build's, on
// every build, so that a template is accepted or refused alike on every device (a 32-bit
// build's objects are smaller than counted). Checked against sizeof where they apply.
constexpr uint64_t kValueBytes = 32, kStringBytes = 32, kEntryBytes = kStringBytes + kValueBytes, kListBytes = 32,
                   kDictBytes = 56, kWeakPtrBytes = 16;

// 32 bytes: a kind, a number, and the string, list or dict it shares (immutable, but
// for a namespace's or loop's dict).
struct Value {
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict };
  Kind kind = Kind::kUndefined;
  bool boolean = false;
  union {
    int64_t integer = 0;
    double number;
  };
  std::shared_ptr<const void> object;  // kString: std::string, kList: ListData, kDict: DictData

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value of_bool(bool b) { Value v; v.kind = Kind::kBool; v.boolean = b; return v; }
  static Value of_int(int64_t i) { Value v; v.kind = Kind::kInt; v.integer = i; return v; }
  static Value of_float(double d) { Value v; v.kind = Kind::kFloat; v.number = d; return v; }
  static Value of_string(std::string s) {
    Value v;
    v.kind = Kind::kString;
    v.object = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  bool is(Kind k) const { return kind == k; }
  const std::string& str() const { return *static_cast<const std::string*>(object.get()); }
  const ListData* list() const { return static_cast<const ListData*>(object.get()); }
  // A namespace or a loop is changed in place: its DictData was made mutable.
  DictData* dict() const { return const_cast<DictData*>(static_cast<const DictData*>(object.get())); }
  std::shared_ptr<const ListData> list_ptr() const { return std::static_pointer_cast<const ListData>(object); }
  std::shared_ptr<DictData> dict_ptr() const {
    return std::const_pointer_cast<DictData>(std::static_pointer_cast<const DictData>(object));
  }
};
using Kind = Value::Kind;

struct ListData {
  std::vector<Value> items;
  int depth = 1;
  bool is_tuple = false;  // only str() tells a tuple from a list
};
// A dict's entries in insertion order (as Python's) and, past kLinearKeys entries, an
// index of them by key: open addressing over SipHash under this process's key
// (core/string_hash.h), so that which keys collide cannot be chosen by a template, and
// find, insert and replace cost O(1) per key.
struct DictData {
  using Entry = std::pair<std::string, Value>;
  static constexpr size_t kLinearKeys = 8;
  static constexpr size_t npos = SIZE_MAX;

  std::vector<Entry> entries;
  std::vector<uint32_t> slots;  // an entry's index + 1, 0 when empty; a power of two long (or none)
  bool is_namespace = false;    // namespace(): attributes assignable, not a mapping
  bool is_loop = false;         // a for loop's `loop`, updated in place each turn (as Jinja's)
  int depth = 1;

  // The index's length for `count` entries: at most half full.
  static size_t slots_for(size_t count) {
    if (count <= kLinearKeys) return 0;
    size_t length = 32;
    while (length < 2 * count) length *= 2;
    return length;
  }
  // The bytes of the arrays holding `capacity` entries (keys' heaps aside).
  static uint64_t table_bytes(size_t capacity) {
    return uint64_t{capacity} * kEntryBytes + uint64_t{slots_for(capacity)} * sizeof(uint32_t) + 32;
  }

  size_t index_of(std::string_view key) const {
    if (slots.empty()) {
      for (size_t i = 0; i < entries.size(); ++i)
        if (entries[i].first == key) return i;
      return npos;
    }
    const size_t mask = slots.size() - 1;
    for (size_t at = detail::StringHash()(key) & mask;; at = (at + 1) & mask) {
      if (slots[at] == 0) return npos;
      if (entries[slots[at] - 1].first == key) return slots[at] - 1;
    }
  }
  const Value* find(std::string_view key) const {
    const size_t i = index_of(key);
    return i == npos ? nullptr : &entries[i].second;
  }
  Value* find(std::string_view key) {
    const size_t i = index_of(key);
    return i == npos ? nullptr : &entries[i].second;
  }
  // Room for `count` entries (the caller accounted table_bytes(count)).
  void reserve(size_t count) {
    entries.reserve(count);
    const size_t length = slots_for(count);
    if (length > slots.size()) {
      slots.assign(length, 0);
      for (size_t i = 0; i < entries.size(); ++i) index(i);
    }
  }
  // Appends a key the dict does not hold, within the room reserve() made.
  void append(std::string key, Value value) {
    entries.emplace_back(std::move(key), std::move(value));
    if (slots_for(entries.size()) > slots.size()) reserve(entries.size());  // (only past reserve()'s room)
    else if (!slots.empty()) index(entries.size() - 1);
  }
  void clear() {
    entries.clear();
    slots.clear();
  }

 private:
  void index(size_t i) {
    const size_t mask = slots.size() - 1;
    size_t at = detail::StringHash()(entries[i].first) & mask;
    while (slots[at] != 0) at = (at + 1) & mask;
    slots[at] = static_cast<uint32_t>(i + 1);
  }
};
static_assert(sizeof(void*) != 8 || (sizeof(Value) == kValueBytes && sizeof(std::string) == kStringBytes &&
                                     sizeof(DictData::Entry) == kEntryBytes && sizeof(ListData) == kListBytes &&
                                     sizeof(DictData) == kDictBytes && sizeof(std::weak_ptr<DictData>) == kWeakPtrBytes),
              "the value budget counts a 64-bit build's sizes");

inline int depth_of(const Value& v) {
  if (v.is(Kind::kList)) return v.list()->depth;
  if (v.is(Kind::kDict)) return v.dict()->depth;
  return 0;
}
inline bool is_namespace(const Value& v) { return v.is(Kind::kDict) && v.dict()->is_namespace; }
// The two mutable values never go into a list, dict or namespace: no value can then
// reach itself, and a container's depth, fixed when it is built, stays true.
inline bool is_mutable(const Value& v) { return v.is(Kind::kDict) && (v.dict()->is_namespace || v.dict()->is_loop); }
inline bool is_number(const Value& v) { return v.is(Kind::kInt) || v.is(Kind::kFloat) || v.is(Kind::kBool); }
inline double as_double(const Value& v) {
  return v.is(Kind::kFloat) ? v.number : v.is(Kind::kBool) ? (v.boolean ? 1 : 0) : static_cast<double>(v.integer);
}
inline int64_t as_int(const Value& v) { return v.is(Kind::kBool) ? (v.boolean ? 1 : 0) : v.integer; }
inline bool is_integral(const Value& v) { return v.is(Kind::kInt) || v.is(Kind::kBool); }

inline const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return v.dict()->is_namespace ? "namespace" : "dict";
  }
  return "?";
}

inline bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.boolean;
    case Kind::kInt: return v.integer != 0;
    case Kind::kFloat: return v.number != 0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return !v.list()->items.empty();
    case Kind::kDict: return v.dict()->is_namespace || !v.dict()->entries.empty();
  }
  return false;
}

}  // namespace petrel::text::chat_template_detail
