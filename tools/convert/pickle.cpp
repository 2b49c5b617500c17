#include "convert/pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "convert/convert_error.h"
#include "core/bytes.h"
#include "core/quoted.h"
#include "core/utf8.h"

namespace petrel::convert::pickle {
namespace {

// The opcodes a state dict written by torch.save (pickle protocols 2 to 5, and
// Python 2's strings in old files) is made of.
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kEmptyList = ']',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyTuple = ')',
  kEmptyDict = '}',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// Names of the opcodes refused, so that the message says what the file tried.
const char* refused_opcode_name(uint8_t op) {
  switch (op) {
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'F': return "FLOAT";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'g': return "GET";
    case '2': return "DUP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case 'P': return "PERSID";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8b: return "LONG4";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

using detail::load_le32;
using detail::load_le64;

// What a memo entry occupies (an unordered_map node and its share of the buckets),
// for the memory budget.
constexpr uint64_t kMemoEntryBytes = 64;
// A one-byte opcode (None, an empty list) makes a Value: it must fit the per-byte allowance.
static_assert(sizeof(Value) <= Machine::kBudgetPerByte, "a Value costs more than the budget allows per byte");

// The storage classes torch.save names, with what they hold.
struct StorageClass {
  const char* name;
  const char* dtype;  // our name for an accepted type; nullptr: refused
  const char* holds;
};
constexpr StorageClass kStorageClasses[] = {
    {"FloatStorage", "F32", "float32"},
    {"HalfStorage", "F16", "float16"},
    {"BFloat16Storage", "BF16", "bfloat16"},
    {"DoubleStorage", nullptr, "float64"},
    {"LongStorage", nullptr, "int64"},
    {"IntStorage", nullptr, "int32"},
    {"ShortStorage", nullptr, "int16"},
    {"CharStorage", nullptr, "int8"},
    {"ByteStorage", nullptr, "uint8"},
    {"BoolStorage", nullptr, "bool"},
    {"ComplexHalfStorage", nullptr, "complex32"},
    {"ComplexFloatStorage", nullptr, "complex64"},
    {"ComplexDoubleStorage", nullptr, "complex128"},
    {"QInt8Storage", nullptr, "quantized int8"},
    {"QUInt8Storage", nullptr, "quantized uint8"},
    {"QInt32Storage", nullptr, "quantized int32"},
    {"QUInt4x2Storage", nullptr, "quantized 4-bit"},
    {"QUInt2x4Storage", nullptr, "quantized 2-bit"},
    {"UntypedStorage", nullptr, "untyped bytes"},
};

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kBigInt: return "a wide int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a string";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kCallable: return "a class or function";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "?";
}

Machine::Machine(std::string file, std::string part, uint64_t base, size_t storage_id_fields)
    : file_(std::move(file)), part_(std::move(part)), base_(base), storage_id_fields_(storage_id_fields) {}

std::string Machine::where(uint64_t file_offset) const {
  return file_ + ": byte " + std::to_string(file_offset) + " (" + part_ + ")";
}

void Machine::fail(const std::string& reason) const { throw ConvertError(where(base_ + op_position_) + ": " + reason); }

void Machine::charge(uint64_t bytes) {
  check_budget(bytes);
  charged_ += bytes;
}

void Machine::check_budget(uint64_t bytes) const {
  const uint64_t budget = kBudgetPerByte * bytes_read() + kBudgetBase;
  if (bytes > budget || charged_ > budget - bytes)
    fail("the pickle needs more than its memory budget of " + std::to_string(budget) + " bytes after " +
         std::to_string(bytes_read()) + " bytes read (" + std::to_string(kBudgetPerByte) +
         " per byte read + 1 MiB; it copies its values over and over, which a state dict does not)");
}

Id Machine::make(Value v) {
  if (arena_.size() >= kMaxValues) fail("more than " + std::to_string(kMaxValues) + " values");
  charge(sizeof(Value) + v.text.size() + v.dtype.size() + v.items.size() * sizeof(Id));
  arena_.push_back(std::move(v));
  return static_cast<Id>(arena_.size() - 1);
}

Id Machine::pop() {
  const size_t floor = marks_.empty() ? 0 : marks_.back();
  if (stack_.size() <= floor) fail("stack underflow (the opcode needs a value the pickle did not push)");
  Id id = stack_.back();
  stack_.pop_back();
  return id;
}

Id& Machine::top() {
  const size_t floor = marks_.empty() ? 0 : marks_.back();
  if (stack_.size() <= floor) fail("stack underflow (the opcode needs a value the pickle did not push)");
  return stack_.back();
}

std::vector<Id> Machine::pop_mark() {
  if (marks_.empty()) fail("no MARK to collect items from");
  const size_t height = marks_.back();
  marks_.pop_back();
  std::vector<Id> items(stack_.begin() + static_cast<std::ptrdiff_t>(height), stack_.end());
  stack_.resize(height);
  return items;
}

int64_t Machine::integer(Id id, const char* what) const {
  const Value& v = arena_[id];
  if (v.kind != Kind::kInt) fail(std::string(what) + " is " + kind_name(v.kind) + ", not an int");
  return v.number;
}

const std::string& Machine::string(Id id, const char* what) const {
  const Value& v = arena_[id];
  if (v.kind != Kind::kString) fail(std::string(what) + " is " + kind_name(v.kind) + ", not a string");
  return v.text;
}

std::vector<int64_t> Machine::integer_tuple(Id id, const char* what) const {
  const Value& v = arena_[id];
  if (v.kind != Kind::kTuple) fail(std::string(what) + " is " + kind_name(v.kind) + ", not a tuple of ints");
  if (v.items.size() > kMaxDims)  // before copying: one long tuple may be every tensor's size
    fail(std::string(what) + " has " + std::to_string(v.items.size()) + " dimensions, more than the limit of " +
         std::to_string(kMaxDims));
  std::vector<int64_t> out;
  for (Id item : v.items) out.push_back(integer(item, what));
  return out;
}

Id Machine::global(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  Value v;
  v.kind = Kind::kCallable;
  v.text = full;
  if (full == "collections.OrderedDict") {
    v.number = static_cast<int64_t>(Callable::kOrderedDict);
  } else if (full == "torch._utils._rebuild_tensor_v2") {
    v.number = static_cast<int64_t>(Callable::kRebuildTensorV2);
  } else if (full == "torch._utils._rebuild_tensor") {
    v.number = static_cast<int64_t>(Callable::kRebuildTensor);
  } else if (full == "torch._utils._rebuild_parameter") {
    v.number = static_cast<int64_t>(Callable::kRebuildParameter);
  } else {
    for (const StorageClass& c : kStorageClasses) {
      if (module != "torch" || name != c.name) continue;
      if (!c.dtype)
        fail("storage type torch." + name + " holds " + c.holds +
             " values; Petrel reads float32, float16 and bfloat16 tensors (FloatStorage, HalfStorage, "
             "BFloat16Storage)");
      v.number = static_cast<int64_t>(Callable::kStorageType);
      v.dtype = c.dtype;
      return make(std::move(v));
    }
    fail("global " + detail::quoted(full) +
         " is not allowed: a state dict needs only collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
         "torch._utils._rebuild_parameter and torch.*Storage (anything else, such as a pickled model or a "
         "function, would run code when unpickled)");
  }
  return make(std::move(v));
}

Id Machine::reduce(Id callable, Id args_id) {
  const Value& f = arena_[callable];
  if (f.kind != Kind::kCallable) fail(std::string("REDUCE calls ") + kind_name(f.kind) + ", not an allowed function");
  const Value& a = arena_[args_id];
  if (a.kind != Kind::kTuple) fail(std::string("REDUCE arguments are ") + kind_name(a.kind) + ", not a tuple");
  const std::string fname = f.text;
  const auto function = static_cast<Callable>(f.number);
  // The argument ids, once their number is known to be small (make() below may move
  // the arena, so they are copied, not referenced).
  auto arity = [&](std::initializer_list<size_t> allowed) {
    const std::vector<Id>& items = arena_[args_id].items;
    for (size_t n : allowed)
      if (items.size() == n) return items;
    fail(fname + " called with " + std::to_string(items.size()) + " arguments");
  };
  auto expect = [&](Id id, Kind kind, const char* what) {
    if (arena_[id].kind != kind)
      fail(fname + ": " + what + " is " + kind_name(arena_[id].kind) + ", not " + kind_name(kind));
  };
  switch (function) {
    case Callable::kOrderedDict: {
      Value d;
      d.kind = Kind::kDict;
      const std::vector<Id> args = arity({0, 1});
      if (args.size() == 1) {  // Python 2 pickled OrderedDict([[key, value], ...])
        expect(args[0], Kind::kList, "the items");
        // Checked before the copy is made: one memoized list may be rebuilt into many dicts.
        check_budget(sizeof(Value) + 2 * sizeof(Id) * arena_[args[0]].items.size());
        for (Id pair : arena_[args[0]].items) {
          const Value& p = arena_[pair];
          if ((p.kind != Kind::kList && p.kind != Kind::kTuple) || p.items.size() != 2)
            fail("collections.OrderedDict: an item is not a (key, value) pair");
          d.items.push_back(p.items[0]);
          d.items.push_back(p.items[1]);
        }
      }
      return make(std::move(d));
    }
    case Callable::kRebuildTensorV2:
    case Callable::kRebuildTensor: {
      const bool v2 = function == Callable::kRebuildTensorV2;
      // v2: (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
      const std::vector<Id> args = v2 ? arity({6, 7}) : arity({4});
      expect(args[0], Kind::kStorage, "the storage");
      TensorRef t;
      t.storage = static_cast<size_t>(arena_[args[0]].number);
      t.offset = integer(args[1], "the storage offset");
      t.sizes = integer_tuple(args[2], "the size");
      t.strides = integer_tuple(args[3], "the stride");
      t.position = base_ + op_position_;
      if (t.sizes.size() != t.strides.size())
        fail(fname + ": size has " + std::to_string(t.sizes.size()) + " dimensions, stride " +
             std::to_string(t.strides.size()));
      if (v2) {
        expect(args[4], Kind::kBool, "requires_grad");
        expect(args[5], Kind::kDict, "backward_hooks");
        if (!arena_[args[5]].items.empty()) fail(fname + ": backward_hooks is not empty");
        if (args.size() == 7 && arena_[args[6]].kind != Kind::kNone && arena_[args[6]].kind != Kind::kDict)
          fail(fname + ": metadata is " + kind_name(arena_[args[6]].kind));
      }
      charge(sizeof(TensorRef) + (t.sizes.size() + t.strides.size()) * sizeof(int64_t));
      Value v;
      v.kind = Kind::kTensor;
      v.number = static_cast<int64_t>(tensors_.size());
      tensors_.push_back(std::move(t));
      return make(std::move(v));
    }
    case Callable::kRebuildParameter: {  // (data, requires_grad, backward_hooks): the tensor itself
      const std::vector<Id> args = arity({3});
      expect(args[0], Kind::kTensor, "the data");
      expect(args[1], Kind::kBool, "requires_grad");
      expect(args[2], Kind::kDict, "backward_hooks");
      if (!arena_[args[2]].items.empty()) fail(fname + ": backward_hooks is not empty");
      return args[0];
    }
    case Callable::kStorageType:
      break;
  }
  fail(fname + " is a storage type, which a state dict never calls");
}

Id Machine::persistent_load(Id pid_id) {
  const Value& pid = arena_[pid_id];
  if (pid.kind != Kind::kTuple || pid.items.empty())
    fail(std::string("persistent id is ") + kind_name(pid.kind) + ", not a ('storage', ...) tuple");
  const std::string& tag = string(pid.items[0], "persistent id's tag");
  if (tag != "storage") fail("persistent id " + detail::quoted(tag) + " is not allowed (only 'storage' is)");
  // zip: ('storage', type, key, location, elements); legacy adds a view (or None).
  if (pid.items.size() != storage_id_fields_)
    fail("storage persistent id has " + std::to_string(pid.items.size()) + " fields (" +
         std::to_string(storage_id_fields_) + " expected in this format)");
  const std::vector<Id> items = pid.items;  // make() below may move the arena
  // Keys are copied into every storage that names them (a view names its root's):
  // bounded first, so one long string cannot be copied many times.
  auto key = [&](Id id, const char* what) -> const std::string& {
    const std::string& k = string(id, what);
    if (k.size() > kMaxStorageKeyBytes)
      fail(std::string(what) + " of " + std::to_string(k.size()) + " bytes is longer than the limit of " +
           std::to_string(kMaxStorageKeyBytes));
    return k;
  };
  const Value& type = arena_[items[1]];
  if (type.kind != Kind::kCallable || static_cast<Callable>(type.number) != Callable::kStorageType)
    fail(std::string("storage type is ") + kind_name(type.kind) + ", not a torch.*Storage class");
  StorageRef s;
  s.dtype = type.dtype;
  s.key = key(items[2], "storage key");
  string(items[3], "storage location");
  const int64_t elements = integer(items[4], "storage size");
  if (elements < 0) fail("storage " + detail::quoted(s.key) + " has a negative size " + std::to_string(elements));
  s.elements = static_cast<uint64_t>(elements);
  s.view_elements = s.elements;
  s.position = base_ + op_position_;
  std::string ref_key = s.key;
  if (items.size() == 6 && arena_[items[5]].kind != Kind::kNone) {
    // An old storage view: (view key, first element, length) within the root storage.
    const Value& view = arena_[items[5]];
    if (view.kind != Kind::kTuple || view.items.size() != 3) fail("storage view is not a (key, offset, size) tuple");
    ref_key = key(view.items[0], "storage view key");
    const int64_t begin = integer(view.items[1], "storage view offset");
    const int64_t length = integer(view.items[2], "storage view size");
    if (begin < 0 || length < 0 || static_cast<uint64_t>(begin) > s.elements ||
        static_cast<uint64_t>(length) > s.elements - static_cast<uint64_t>(begin))
      fail("storage view " + detail::quoted(ref_key) + " (offset " + std::to_string(begin) + ", size " +
           std::to_string(length) + ") lies outside storage " + detail::quoted(s.key) + " of " + std::to_string(s.elements) +
           " elements");
    s.view_begin = static_cast<uint64_t>(begin);
    s.view_elements = static_cast<uint64_t>(length);
  }
  size_t index;
  auto found = storage_by_key_.find(ref_key);
  if (found != storage_by_key_.end()) {
    const StorageRef& old = storages_[found->second];
    if (old.key != s.key || old.dtype != s.dtype || old.elements != s.elements || old.view_begin != s.view_begin ||
        old.view_elements != s.view_elements)
      fail("storage " + detail::quoted(ref_key) + " is declared again with a different type or size");
    index = found->second;
  } else {
    charge(sizeof(StorageRef) + s.key.size() + kMemoEntryBytes + 2 * ref_key.size());  // + its node in storage_by_key_
    index = storages_.size();
    storage_by_key_.emplace(ref_key, index);
    storages_.push_back(std::move(s));
  }
  Value v;
  v.kind = Kind::kStorage;
  v.number = static_cast<int64_t>(index);
  return make(std::move(v));
}

Id Machine::run(const uint8_t* data, size_t size, size_t* consumed) {
  size_t& pos = run_position_;  // the memory budget grows with it
  pos = 0;
  auto need = [&](size_t n) {
    if (size - pos < n)
      fail("truncated: the opcode needs " + std::to_string(n) + " more bytes, " + std::to_string(size - pos) +
           " are left");
  };
  auto push = [&](Id id) {
    if (stack_.size() >= kMaxStack) fail("stack deeper than " + std::to_string(kMaxStack) + " values");
    stack_.push_back(id);
  };
  auto push_value = [&](Value v) { push(make(std::move(v))); };
  auto push_int = [&](int64_t n) {
    Value v;
    v.kind = Kind::kInt;
    v.number = n;
    push_value(std::move(v));
  };
  auto push_string = [&](size_t length) {
    need(length);
    const std::string_view text(reinterpret_cast<const char*>(data + pos), length);
    if (!detail::is_valid_utf8(text)) fail("string is not valid UTF-8");
    pos += length;
    Value v;
    v.kind = Kind::kString;
    v.text = text;
    push_value(std::move(v));
  };
  auto memo_put = [&](uint64_t index) {
    if (index >= kMaxMemo) fail("memo index " + std::to_string(index) + " is beyond the limit of " + std::to_string(kMaxMemo));
    const auto key = static_cast<uint32_t>(index);
    if (!memo_.count(key)) {
      if (memo_.size() >= kMaxMemo) fail("memo is full");
      charge(kMemoEntryBytes);
    }
    memo_[key] = top();
  };
  auto memo_get = [&](uint64_t index) {
    auto it = memo_.find(static_cast<uint32_t>(index));
    if (index > UINT32_MAX || it == memo_.end()) fail("memo index " + std::to_string(index) + " was never stored");
    push(it->second);
  };
  auto read_line = [&]() {
    const size_t limit = std::min<size_t>(size - pos, 1024);
    const void* nl = std::memchr(data + pos, '\n', limit);
    if (!nl) fail("GLOBAL name is not terminated by a newline within 1024 bytes");
    const size_t length = static_cast<size_t>(static_cast<const uint8_t*>(nl) - (data + pos));
    std::string line(reinterpret_cast<const char*>(data + pos), length);
    pos += length + 1;
    if (!detail::is_valid_utf8(line)) fail("GLOBAL name is not valid UTF-8");
    return line;
  };

  while (true) {
    op_position_ = pos;
    if (pos >= size) fail("truncated: the pickle ends without STOP");
    const uint8_t op = data[pos++];
    switch (op) {
      case kProto: {
        need(1);
        if (data[pos] > 5) fail("pickle protocol " + std::to_string(data[pos]) + " is newer than 5");
        ++pos;
        break;
      }
      case kFrame: {  // protocol 4 framing: a length hint, the opcodes follow as usual
        need(8);
        const uint64_t length = load_le64(data + pos);
        pos += 8;
        if (length > size - pos) fail("frame of " + std::to_string(length) + " bytes runs past the end");
        break;
      }
      case kStop: {
        if (!marks_.empty()) fail("STOP with a MARK still open");
        if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack (1 expected)");
        *consumed = pos;
        read_before_ += pos;
        pos = 0;
        const Id result = stack_.back();
        stack_.clear();
        return result;
      }
      case kMark:
        if (marks_.size() >= kMaxMarkDepth)
          fail("nesting deeper than " + std::to_string(kMaxMarkDepth) + " MARKs");
        marks_.push_back(stack_.size());
        break;
      case kNone:
        push_value(Value{});
        break;
      case kNewTrue:
      case kNewFalse: {
        Value v;
        v.kind = Kind::kBool;
        v.number = op == kNewTrue;
        push_value(std::move(v));
        break;
      }
      case kBinInt:
        need(4);
        push_int(static_cast<int32_t>(load_le32(data + pos)));
        pos += 4;
        break;
      case kBinInt1:
        need(1);
        push_int(data[pos++]);
        break;
      case kBinInt2:
        need(2);
        push_int(detail::load_le16(data + pos));
        pos += 2;
        break;
      case kLong1: {  // n bytes, little-endian two's complement
        need(1);
        const size_t n = data[pos++];
        need(n);
        const uint8_t* p = data + pos;
        pos += n;
        const uint8_t sign = n > 0 && (p[n - 1] & 0x80) ? 0xff : 0x00;
        bool fits = true;
        for (size_t i = 8; i < n; ++i) fits = fits && p[i] == sign;
        if (n > 8 && fits && ((p[7] & 0x80) ? 0xff : 0x00) != sign) fits = false;
        if (!fits) {
          Value v;
          v.kind = Kind::kBigInt;
          v.text.assign(reinterpret_cast<const char*>(p), n);
          push_value(std::move(v));
          break;
        }
        uint64_t bits = sign ? ~uint64_t{0} : 0;
        for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) {
          bits &= ~(uint64_t{0xff} << (8 * i));
          bits |= uint64_t{p[i]} << (8 * i);
        }
        int64_t value;
        std::memcpy(&value, &bits, 8);
        push_int(value);
        break;
      }
      case kBinFloat: {  // big-endian IEEE double
        need(8);
        const uint64_t bits = detail::load_be64(data + pos);
        pos += 8;
        Value v;
        v.kind = Kind::kFloat;
        std::memcpy(&v.real, &bits, 8);
        push_value(std::move(v));
        break;
      }
      case kShortBinString:  // Python 2 str: torch.load reads it as UTF-8
      case kShortBinUnicode:
        need(1);
        ++pos;
        push_string(data[pos - 1]);
        break;
      case kBinString: {
        need(4);
        const int32_t length = static_cast<int32_t>(load_le32(data + pos));
        pos += 4;
        if (length < 0) fail("negative string length");
        push_string(static_cast<size_t>(length));
        break;
      }
      case kBinUnicode:
        need(4);
        pos += 4;
        push_string(load_le32(data + pos - 4));
        break;
      case kBinUnicode8: {
        need(8);
        const uint64_t length = load_le64(data + pos);
        pos += 8;
        if (length > size - pos) fail("string of " + std::to_string(length) + " bytes runs past the end");
        push_string(static_cast<size_t>(length));
        break;
      }
      case kEmptyTuple:
      case kEmptyList:
      case kEmptyDict: {
        Value v;
        v.kind = op == kEmptyTuple ? Kind::kTuple : op == kEmptyList ? Kind::kList : Kind::kDict;
        push_value(std::move(v));
        break;
      }
      case kTuple: {
        Value v;
        v.kind = Kind::kTuple;
        v.items = pop_mark();
        push_value(std::move(v));
        break;
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        Value v;
        v.kind = Kind::kTuple;
        v.items.resize(op - kTuple1 + 1);
        for (size_t i = v.items.size(); i-- > 0;) v.items[i] = pop();
        push_value(std::move(v));
        break;
      }
      case kAppend: {
        const Id item = pop();
        if (arena_[top()].kind != Kind::kList) fail(std::string("APPEND to ") + kind_name(arena_[top()].kind) + ", not a list");
        charge(sizeof(Id));
        arena_[top()].items.push_back(item);
        break;
      }
      case kAppends: {
        std::vector<Id> items = pop_mark();
        Value& list = arena_[top()];
        if (list.kind != Kind::kList) fail(std::string("APPENDS to ") + kind_name(list.kind) + ", not a list");
        charge(items.size() * sizeof(Id));
        list.items.insert(list.items.end(), items.begin(), items.end());
        break;
      }
      case kSetItem: {
        const Id value = pop(), key = pop();
        Value& dict = arena_[top()];
        if (dict.kind != Kind::kDict) fail(std::string("SETITEM on ") + kind_name(dict.kind) + ", not a dict");
        charge(2 * sizeof(Id));
        dict.items.push_back(key);
        dict.items.push_back(value);
        break;
      }
      case kSetItems: {
        std::vector<Id> items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        Value& dict = arena_[top()];
        if (dict.kind != Kind::kDict) fail(std::string("SETITEMS on ") + kind_name(dict.kind) + ", not a dict");
        charge(items.size() * sizeof(Id));
        dict.items.insert(dict.items.end(), items.begin(), items.end());
        break;
      }
      case kBinPut:
        need(1);
        memo_put(data[pos++]);
        break;
      case kLongBinPut:
        need(4);
        memo_put(load_le32(data + pos));
        pos += 4;
        break;
      case kMemoize:
        memo_put(memo_.size());
        break;
      case kBinGet:
        need(1);
        memo_get(data[pos++]);
        break;
      case kLongBinGet:
        need(4);
        memo_get(load_le32(data + pos));
        pos += 4;
        break;
      case kGlobal: {
        const std::string module = read_line();
        const std::string name = read_line();
        push(global(module, name));
        break;
      }
      case kStackGlobal: {
        const Id name = pop(), module = pop();
        push(global(string(module, "STACK_GLOBAL module"), string(name, "STACK_GLOBAL name")));
        break;
      }
      case kReduce: {
        const Id args = pop();
        Id& callable = top();
        callable = reduce(callable, args);
        break;
      }
      case kBinPersId: {
        const Id pid = pop();
        push(persistent_load(pid));
        break;
      }
      case kBuild: {  // only the state of an OrderedDict (a module's _metadata), which is not needed
        const Id state = pop();
        const Value& target = arena_[top()];
        if (target.kind != Kind::kDict) fail(std::string("BUILD on ") + kind_name(target.kind) + ", not a dict");
        if (arena_[state].kind != Kind::kDict)
          fail(std::string("BUILD with ") + kind_name(arena_[state].kind) + " as state, not a dict");
        break;
      }
      default: {
        char buf[96];
        const char* name = refused_opcode_name(op);
        if (name)
          std::snprintf(buf, sizeof buf, "opcode 0x%02x (%s) is not allowed in a state dict", op, name);
        else
          std::snprintf(buf, sizeof buf, "unknown opcode 0x%02x", op);
        fail(buf);
      }
    }
  }
}

}  // namespace petrel::convert::pickle
