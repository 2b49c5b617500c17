#include "convert/pytorch_checkpoint.h"

#include <cmath>
#include <cstring>
#include <set>

#include "convert/mapped_file.h"
#include "convert/pickle.h"
#include "convert/zip_reader.h"
#include "core/bytes.h"
#include "core/quoted.h"
#include "kernels/half.h"

namespace petrel::convert {
namespace {

using pickle::Id;
using pickle::Kind;

// torch.serialization's MAGIC_NUMBER (0x1950a86a20f9469cfc6c) as pickle's LONG1
// stores it, and the legacy PROTOCOL_VERSION.
constexpr uint8_t kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocol = 1001;
// Elements of all the state dict's entries together, per byte of the file. Names may
// share a tensor (tied tables: four names of one) and a tensor may repeat its elements
// (stride 0), so the sum can exceed the file's elements, but reading every entry must
// stay linear in the file: a real checkpoint has about 1 per byte or less (computed for an
// f16 NLLB-200-600M with its 256k x 1024 table under four names: 1.1).
constexpr uint64_t kMaxElementsPerFileByte = 4;

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
float load_f16(const uint8_t* p) { return kernels::half_to_float(detail::load_le16(p)); }
float load_bf16(const uint8_t* p) {
  const uint32_t bits = uint32_t{detail::load_le16(p)} << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// The tensor's elements in row-major order over any strides: the innermost
// dimension in a tight loop (a straight copy when it is contiguous), the others as
// an odometer. Positions were checked against the storage when the file was parsed.
template <float (*Load)(const uint8_t*), size_t kSize, typename Tensor>
void gather(const uint8_t* base, const Tensor& t, float* out, uint64_t elements) {
  const size_t dims = t.shape.size();
  if (dims == 0) {
    out[0] = Load(base + t.first * kSize);
    return;
  }
  const uint64_t inner = t.shape[dims - 1], inner_stride = t.strides[dims - 1];
  std::vector<uint64_t> index(dims, 0);
  uint64_t row_start = t.first;
  for (uint64_t i = 0; i < elements; i += inner) {
    const uint8_t* row = base + row_start * kSize;
    if (inner_stride == 1) {
      for (uint64_t k = 0; k < inner; ++k) out[i + k] = Load(row + k * kSize);
    } else {
      for (uint64_t k = 0; k < inner; ++k) out[i + k] = Load(row + k * inner_stride * kSize);
    }
    for (size_t d = dims - 1; d-- > 0;) {
      row_start += t.strides[d];
      if (++index[d] < t.shape[d]) break;
      row_start -= t.strides[d] * t.shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace

PytorchCheckpoint::PytorchCheckpoint(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)), data_(file_->data()), size_(file_->size()), path_(path) {
  parse();
}

PytorchCheckpoint::PytorchCheckpoint(const uint8_t* data, size_t size, std::string name)
    : data_(data), size_(size), path_(std::move(name)) {
  parse();
}

PytorchCheckpoint::~PytorchCheckpoint() = default;

std::string PytorchCheckpoint::format() const {
  return zip_ ? "zip format, torch 1.6+" : "legacy format, torch < 1.6";
}

void PytorchCheckpoint::parse() {
  if (ZipArchive::looks_like_zip(data_, size_)) {
    parse_zip();
  } else if (size_ >= 262 && std::memcmp(data_ + 257, "ustar", 5) == 0) {
    throw ConvertError(path_ + ": a tar archive (PyTorch < 0.4's format), which Petrel does not read; "
                       "load and re-save it with a newer torch");
  } else if (size_ >= 2 && data_[0] == 0x80 && data_[1] >= 2) {  // PROTO 2+: the legacy stream's first pickle
    parse_legacy();
  } else {
    throw ConvertError(path_ + ": not a PyTorch checkpoint (neither a zip archive nor a legacy pickle stream)");
  }
}

void PytorchCheckpoint::parse_zip() {
  zip_ = std::make_unique<ZipArchive>(data_, size_, path_);
  const auto& records = zip_->records();
  if (records.empty()) throw ConvertError(path_ + ": an empty zip archive");
  // Every record lies in one folder named after the saved file's stem ("archive"
  // when saved to a buffer).
  const std::string& first = records.front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0)
    throw ConvertError(path_ + ": zip record " + detail::quoted(first) + " is not inside a folder (torch.save puts all in one)");
  const std::string prefix = first.substr(0, slash + 1);
  for (const ZipRecord& r : records)
    if (r.name.compare(0, prefix.size(), prefix) != 0)
      throw ConvertError(path_ + ": zip record " + detail::quoted(r.name) + " lies outside the archive's folder " + detail::quoted(prefix));
  if (zip_->find(prefix + "constants.pkl"))
    throw ConvertError(path_ + ": a TorchScript archive (torch.jit.save), not a state dict saved by torch.save");
  if (const ZipRecord* order = zip_->find(prefix + "byteorder")) {
    const char* bytes = reinterpret_cast<const char*>(zip_->verified_data(*order));
    if (std::string(bytes, order->size) != "little")
      throw ConvertError(path_ + ": record " + detail::quoted(order->name) + " says the tensors are not little-endian; "
                         "Petrel reads little-endian checkpoints");
  }
  const ZipRecord* pkl = zip_->find(prefix + "data.pkl");
  if (!pkl) throw ConvertError(path_ + ": no record " + detail::quoted(prefix + "data.pkl") + " (not a checkpoint written by torch.save)");
  pickle::Machine machine(path_, pkl->name, pkl->data_offset, 5);
  size_t used = 0;
  const Id root = machine.run(zip_->verified_data(*pkl), pkl->size, &used);
  if (used != pkl->size)
    throw ConvertError(machine.where(pkl->data_offset + used) + ": " + std::to_string(pkl->size - used) +
                       " bytes after the pickle's STOP");

  std::vector<uint64_t> offsets;
  std::vector<const ZipRecord*> storage_records;
  for (const pickle::StorageRef& s : machine.storages()) {
    const std::string name = prefix + "data/" + s.key;
    const ZipRecord* r = zip_->find(name);
    if (!r)
      throw ConvertError(machine.where(s.position) + ": storage " + detail::quoted(s.key) + " has no record " + detail::quoted(name));
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(s.elements, float_dtype_size(s.dtype), &bytes) || bytes != r->size)
      throw ConvertError(path_ + ": record " + detail::quoted(name) + " holds " + std::to_string(r->size) + " bytes, but storage " +
                         detail::quoted(s.key) + " is declared with " + std::to_string(s.elements) + " " + s.dtype + " elements");
    offsets.push_back(r->data_offset + s.view_begin * float_dtype_size(s.dtype));
    storage_records.push_back(r);
  }
  add_state_dict(machine, root, offsets, storage_records);
}

void PytorchCheckpoint::parse_legacy() {
  size_t pos = 0;
  auto next = [&](pickle::Machine& m) {
    size_t used = 0;
    const Id id = m.run(data_ + pos, size_ - pos, &used);
    pos += used;
    return id;
  };
  pickle::Machine magic(path_, "legacy magic number", pos, 6);
  const pickle::Value& m = magic.value(next(magic));
  if (m.kind != Kind::kBigInt || m.text != std::string(reinterpret_cast<const char*>(kLegacyMagic), sizeof kLegacyMagic))
    throw ConvertError(path_ + ": not a PyTorch checkpoint (the legacy format's magic number is missing)");
  pickle::Machine protocol(path_, "legacy protocol version", pos, 6);
  const pickle::Value& p = protocol.value(next(protocol));
  if (p.kind != Kind::kInt || p.number != kLegacyProtocol)
    throw ConvertError(path_ + ": legacy protocol version is not " + std::to_string(kLegacyProtocol));
  pickle::Machine info(path_, "legacy system info", pos, 6);
  const uint64_t info_offset = pos;
  const pickle::Value& sys = info.value(next(info));
  if (sys.kind != Kind::kDict) throw ConvertError(info.where(info_offset) + ": system info is not a dict");
  for (size_t i = 0; i + 1 < sys.items.size(); i += 2) {
    const pickle::Value& key = info.value(sys.items[i]);
    const pickle::Value& value = info.value(sys.items[i + 1]);
    if (key.kind == Kind::kString && key.text == "little_endian" && !(value.kind == Kind::kBool && value.number))
      throw ConvertError(path_ + ": written on a big-endian machine; Petrel reads little-endian checkpoints");
  }
  pickle::Machine state(path_, "state dict", pos, 6);
  const Id root = next(state);
  pickle::Machine key_list(path_, "storage key list", pos, 6);
  const uint64_t keys_offset = pos;
  const pickle::Value& keys = key_list.value(next(key_list));
  if (keys.kind != Kind::kList) throw ConvertError(key_list.where(keys_offset) + ": storage key list is not a list");

  // Each root storage once: its type and size, as every reference declares it.
  struct Root {
    std::string dtype;
    uint64_t elements = 0;
    uint64_t offset = 0;  // of its bytes in the file
    bool stored = false;
  };
  std::map<std::string, Root> roots;
  for (const pickle::StorageRef& s : state.storages()) {
    auto [it, added] = roots.emplace(s.key, Root{s.dtype, s.elements});
    if (!added && (it->second.dtype != s.dtype || it->second.elements != s.elements))
      throw ConvertError(state.where(s.position) + ": storage " + detail::quoted(s.key) + " is declared again with a different "
                         "type or size");
  }
  for (Id key_id : keys.items) {
    const pickle::Value& key = key_list.value(key_id);
    if (key.kind != Kind::kString) throw ConvertError(key_list.where(keys_offset) + ": a storage key is not a string");
    auto it = roots.find(key.text);
    if (it == roots.end())
      throw ConvertError(key_list.where(keys_offset) + ": storage " + detail::quoted(key.text) + " is listed but no tensor uses it");
    Root& r = it->second;
    if (r.stored) throw ConvertError(key_list.where(keys_offset) + ": storage " + detail::quoted(key.text) + " is listed twice");
    const std::string where = path_ + ": byte " + std::to_string(pos) + " (storage " + detail::quoted(key.text) + ")";
    if (size_ - pos < 8) throw ConvertError(where + ": truncated: the file ends before the storage's size");
    const uint64_t count = detail::load_le64(data_ + pos);
    if (count != r.elements)
      throw ConvertError(where + ": holds " + std::to_string(count) + " elements, the state dict declares " +
                         std::to_string(r.elements));
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, float_dtype_size(r.dtype), &bytes) || bytes > size_ - pos - 8)
      throw ConvertError(where + ": truncated: " + std::to_string(count) + " " + r.dtype +
                         " elements run past the end of the file");
    r.offset = pos + 8;
    r.stored = true;
    pos += 8 + bytes;
  }
  for (const auto& [key, r] : roots)
    if (!r.stored)
      throw ConvertError(path_ + ": storage " + detail::quoted(key) + " is used by a tensor but missing from the storage key list");
  if (pos != size_)
    throw ConvertError(path_ + ": byte " + std::to_string(pos) + ": " + std::to_string(size_ - pos) +
                       " bytes after the last storage");

  std::vector<uint64_t> offsets;
  for (const pickle::StorageRef& s : state.storages())
    offsets.push_back(roots.at(s.key).offset + s.view_begin * float_dtype_size(s.dtype));
  add_state_dict(state, root, offsets, std::vector<const ZipRecord*>(state.storages().size(), nullptr));
}

void PytorchCheckpoint::add_state_dict(const pickle::Machine& machine, uint32_t root,
                                       const std::vector<uint64_t>& storage_offsets,
                                       const std::vector<const ZipRecord*>& records) {
  const pickle::Value& dict = machine.value(root);
  if (dict.kind != Kind::kDict)
    throw ConvertError(path_ + ": the pickled object is " + pickle::kind_name(dict.kind) +
                       ", not a state dict (a dict of tensors)");
  uint64_t all_elements = 0;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const pickle::Value& key = machine.value(dict.items[i]);
    const pickle::Value& value = machine.value(dict.items[i + 1]);
    if (key.kind != Kind::kString)
      throw ConvertError(path_ + ": a state dict key is " + pickle::kind_name(key.kind) + ", not a string");
    const std::string& name = key.text;
    if (value.kind != Kind::kTensor)
      throw ConvertError(path_ + ": state dict entry " + detail::quoted(name) + " is " + pickle::kind_name(value.kind) +
                         ", not a tensor (Petrel reads a model's state dict, not a training checkpoint)");
    const pickle::TensorRef& t = machine.tensors()[static_cast<size_t>(value.number)];
    const pickle::StorageRef& s = machine.storages()[t.storage];
    const std::string where = machine.where(t.position) + ": tensor " + detail::quoted(name);

    Tensor out;
    out.dtype = s.dtype;
    out.storage_offset = storage_offsets[t.storage];
    out.record = records[t.storage];
    // At most pickle::Machine::kMaxDims dimensions: the machine checked them before copying.
    if (t.offset < 0) throw ConvertError(where + ": negative storage offset " + std::to_string(t.offset));
    out.first = static_cast<uint64_t>(t.offset);
    uint64_t elements = 1, last = out.first;
    bool overflow = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] < 0 || t.strides[d] < 0)
        throw ConvertError(where + ": negative size or stride in dimension " + std::to_string(d) + " (size " +
                           std::to_string(t.sizes[d]) + ", stride " + std::to_string(t.strides[d]) + ")");
      const auto size = static_cast<uint64_t>(t.sizes[d]), stride = static_cast<uint64_t>(t.strides[d]);
      out.shape.push_back(size);
      out.strides.push_back(stride);
      overflow = overflow || __builtin_mul_overflow(elements, size, &elements);
    }
    if (overflow) throw ConvertError(where + ": the product of its sizes overflows");
    // A tensor may alias its elements (stride 0), but not so far that reading it
    // would need more memory than the file could plausibly describe.
    if (elements > size_)
      throw ConvertError(where + ": has " + std::to_string(elements) + " elements, more than the file has bytes");
    all_elements += elements;  // at most (4 + 1) * size_: checked below before the next term
    if (all_elements / kMaxElementsPerFileByte > size_)
      throw ConvertError(where + ": the state dict's tensors up to this one hold " + std::to_string(all_elements) +
                         " elements, more than " + std::to_string(kMaxElementsPerFileByte) +
                         " per byte of the file (names sharing tensors that repeat their elements)");
    if (elements > 0) {
      for (size_t d = 0; d < out.shape.size(); ++d) {
        uint64_t step = 0;
        if (__builtin_mul_overflow(out.shape[d] - 1, out.strides[d], &step) || __builtin_add_overflow(last, step, &last))
          throw ConvertError(where + ": its last element's position overflows (size/stride/offset too large)");
      }
      if (last >= s.view_elements)
        throw ConvertError(where + ": reads element " + std::to_string(last) + " of storage " + detail::quoted(s.key) +
                           ", which holds " + std::to_string(s.view_elements) + " elements");
    }
    if (!tensors_.emplace(name, std::move(out)).second)
      throw ConvertError(path_ + ": state dict entry " + detail::quoted(name) + " appears twice");
  }
}

std::vector<std::string> PytorchCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

const TensorInfo* PytorchCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<float> PytorchCheckpoint::read_f32(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ConvertError(path_ + ": missing tensor " + detail::quoted(name));
  uint64_t elements = 1;
  for (uint64_t s : it->second.shape) elements *= s;  // checked when parsed
  std::vector<float> out(elements);
  read(name, it->second, 0, out.data());
  return out;
}

void PytorchCheckpoint::read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const {
  const uint64_t n = row_elements(*this, name, first_row, rows);
  // Rows of the first dimension are a tensor of their own: the same strides, from a later first element.
  Tensor part = tensors_.at(name);
  part.shape[0] = rows;
  part.first += first_row * part.strides[0];  // within the storage: the whole tensor's range was checked
  read(name, part, first_row * n, out);
}

void PytorchCheckpoint::read(const std::string& name, const Tensor& t, uint64_t index_offset, float* out) const {
  if (t.record) {
    zip_->verified_data(*t.record);  // the CRC check reads the whole record once: released below
  }
  uint64_t elements = 1;
  for (uint64_t s : t.shape) elements *= s;
  if (elements == 0) return;
  const uint8_t* base = data_ + t.storage_offset;
  if (t.dtype == "F32") gather<load_f32, 4>(base, t, out, elements);
  else if (t.dtype == "F16") gather<load_f16, 2>(base, t, out, elements);
  else gather<load_bf16, 2>(base, t, out, elements);
  if (file_) file_->release();
  for (size_t i = 0; i < elements; ++i)
    if (!std::isfinite(out[i]))
      throw ConvertError(path_ + ": tensor " + detail::quoted(name) + " holds a non-finite value (NaN or Inf) at element " +
                         std::to_string(index_offset + i));
}

void parse_pytorch_checkpoint(const uint8_t* data, size_t size, const std::string& name) {
  PytorchCheckpoint checkpoint(data, size, name);
  for (const std::string& tensor : checkpoint.names()) checkpoint.read_f32(tensor);
}

}  // namespace petrel::convert
