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

#include "convert/checkpoint_file.h"

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

  // Memory is bounded by the input: every value the machine creates and every id,
  // dimension, string byte, memo entry and storage it stores or copies is charged,
  // in bytes of what it occupies, and after n bytes of pickle have been read the
  // charge may not exceed kBudgetPerByte * n + kBudgetBase (checked at each charge;
  // exceeding it throws, naming the budget). A state dict written by torch.save
  // costs 20-45 bytes per byte (tests/test_pytorch_checkpoint.cpp), and a one-byte
  // opcode makes at most one Value, so only copying (one memoized tuple or list used
  // as the contents of many values) reaches kBudgetPerByte. What the machine holds
  // is at most about twice its charge (containers grow by doubling), plus the stack
  // (kMaxStack ids, 1 MiB) and the pickle's own bytes.
  static constexpr uint64_t kBudgetPerByte = 128;
  static constexpr uint64_t kBudgetBase = uint64_t{1} << 20;
  // Limits checked before anything is copied. A real state dict needs about 20
  // values per tensor, a stack of a few thousand (pickle batches items by 1000),
  // MARKs nested 5 deep, tensors of at most 4 dimensions and storage keys of a few
  // digits (zip: "0", "1", ...; legacy: an object id).
  static constexpr size_t kMaxMarkDepth = 64;
  static constexpr size_t kMaxStack = size_t{1} << 18;
  static constexpr size_t kMaxMemo = size_t{1} << 22;
  static constexpr size_t kMaxValues = size_t{1} << 22;
  static constexpr size_t kMaxDims = kMaxTensorDims;
  static constexpr size_t kMaxStorageKeyBytes = 256;

  // Bytes charged so far and the pickle bytes read so far (over every run()): the
  // charge never exceeds kBudgetPerByte * bytes_read() + kBudgetBase.
  uint64_t charged() const { return charged_; }
  uint64_t bytes_read() const { return read_before_ + run_position_; }

 private:
  void charge(uint64_t bytes);              // adds to the charge, or fails when over budget
  void check_budget(uint64_t bytes) const;  // fails when `bytes` more would be over budget
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
  size_t run_position_ = 0;    // bytes of the current run() read so far
  uint64_t read_before_ = 0;   // bytes read by earlier runs
  uint64_t charged_ = 0;
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
