// A pickle interpreter that never runs pickle. A pickle is a program for Python's
// unpickler, and a hostile one can call any Python function; this machine knows
// only the opcodes and the few globals a PyTorch state dict needs (the rules of
// torch.load(weights_only=True), narrowed to float tensors) and builds plain
// values from them. Anything else throws ConvertError naming the file, the byte
// offset and the reason. Tensor data is never touched here: a tensor is a
// reference to a storage (by key) with offset, sizes and strides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace petrel::convert::pickle {

using Id = uint32_t;  // a value in the machine's arena

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kBigInt,  // an integer wider than 64 bits (the legacy format's magic number)
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kCallable,  // one of the allowed globals
  kStorage,   // a persistent reference to tensor bytes held outside the pickle
  kTensor,
};

// The globals a state dict names. Everything else is refused when it is named.
enum class Callable : uint8_t { kOrderedDict, kRebuildTensorV2, kRebuildTensor, kRebuildParameter, kStorageType };

struct Value {
  Kind kind = Kind::kNone;
  int64_t number = 0;     // kBool, kInt; kCallable: a Callable; kStorage, kTensor: an index
  double real = 0;        // kFloat
  std::string text;       // kString (UTF-8); kBigInt: little-endian two's complement; kCallable: the global's name
  std::string dtype;      // kCallable kStorageType: "F32", "F16", "BF16"
  std::vector<Id> items;  // kTuple, kList; kDict: key, value, key, value, ... in insertion order
};

struct StorageRef {
  std::string key;          // the root storage's key: data/<key> in a zip, the storage list in legacy files
  std::string dtype;        // "F32", "F16", "BF16"
  uint64_t elements = 0;    // of the root storage
  uint64_t view_begin = 0;  // a legacy storage view: its first element within the root ...
  uint64_t view_elements = 0;  // ... and its length; the whole root otherwise
  uint64_t position = 0;    // file offset of the reference, for messages
};

struct TensorRef {
  size_t storage = 0;  // index into Machine::storages()
  int64_t offset = 0;  // in elements, as pickled (not yet checked)
  std::vector<int64_t> sizes, strides;
  uint64_t position = 0;  // file offset of the call that built it, for messages
};

class Machine {
 public:
  // `file` and `part` name the pickle in errors ("x.bin", "data.pkl"); `base` is
  // the pickle's offset within the file so that errors give file offsets.
  // Storage persistent ids have 5 fields in the zip format; the legacy format
  // adds a sixth (a storage view, or None).
  Machine(std::string file, std::string part, uint64_t base, size_t storage_id_fields = 5);

  // Runs one pickle from data[0] to its STOP; returns the result and sets
  // *consumed to the bytes used (the legacy format puts several pickles in a row).
  Id run(const uint8_t* data, size_t size, size_t* consumed);

  const Value& value(Id id) const { return arena_[id]; }
  const std::vector<StorageRef>& storages() const { return storages_; }
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  // A message prefix naming the file and the value's origin.
  std::string where(uint64_t file_offset) const;

  // Limits that keep a hostile pickle's memory bounded.
  // A real state dict needs about 20 values per tensor, a stack of a few
  // thousand (pickle batches items by 1000) and MARKs nested 5 deep.
  static constexpr size_t kMaxMarkDepth = 64;
  static constexpr size_t kMaxStack = size_t{1} << 18;
  static constexpr size_t kMaxMemo = size_t{1} << 22;
  static constexpr size_t kMaxValues = size_t{1} << 22;

 private:
  Id make(Value v);
  Id pop();
  Id& top();
  std::vector<Id> pop_mark();
  [[noreturn]] void fail(const std::string& reason) const;
  Id global(const std::string& module, const std::string& name);
  Id reduce(Id callable, Id args);
  Id persistent_load(Id pid);
  int64_t integer(Id id, const char* what) const;
  const std::string& string(Id id, const char* what) const;
  std::vector<int64_t> integer_tuple(Id id, const char* what) const;

  std::string file_, part_;
  uint64_t base_;
  size_t storage_id_fields_;
  uint64_t op_position_ = 0;  // offset of the opcode being run, within the pickle
  std::vector<Value> arena_;
  std::vector<Id> stack_;
  std::vector<size_t> marks_;  // stack heights at each open MARK
  std::unordered_map<uint32_t, Id> memo_;
  std::vector<StorageRef> storages_;
  std::map<std::string, size_t> storage_by_key_;
  std::vector<TensorRef> tensors_;
};

// A short description of a value's type for messages ("a tuple", "an int", ...).
const char* kind_name(Kind kind);

}  // namespace petrel::convert::pickle
