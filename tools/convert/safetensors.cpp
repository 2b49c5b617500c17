#include "convert/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "convert/config_reader.h"
#include "convert/mapped_file.h"
#include "core/bytes.h"
#include "kernels/half.h"

namespace petrel::convert {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // safetensors' own limit

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)), path_(path), bytes_(file_->data()), size_(file_->size()) {
  parse();
}

SafetensorsFile::SafetensorsFile(const uint8_t* data, size_t size, std::string name)
    : path_(std::move(name)), bytes_(data), size_(size) {
  parse();
}

SafetensorsFile::~SafetensorsFile() = default;

void SafetensorsFile::parse() {
  const std::string& path = path_;
  if (size_ < 8)
    throw ConvertError(path + ": too small for a safetensors file (" + std::to_string(size_) + " bytes)");
  const uint64_t header_len = detail::load_le64(bytes_);
  if (header_len > kMaxHeader || header_len > size_ - 8)
    throw ConvertError(path + ": bad header length " + std::to_string(header_len) + " (file has " +
                       std::to_string(size_) + " bytes)");
  data_ = bytes_ + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  check_json_depth(path + ": header", std::string_view(reinterpret_cast<const char*>(bytes_ + 8), header_len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_ + 8, bytes_ + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw ConvertError(path + ": header is not valid JSON: " + json_error(e));
  }
  if (!header.is_object()) throw ConvertError(path + ": header is not a JSON object");
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const auto& v = it.value();
    auto bad = [&](const std::string& what) {
      return ConvertError(path + ": tensor '" + name + "': " + what);
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      throw bad("entry needs dtype, shape and data_offsets");
    SafetensorsEntry e;
    if (!v["dtype"].is_string()) throw bad("dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    size_t esize = float_dtype_size(e.dtype);
    if (esize == 0) throw bad("unsupported dtype " + e.dtype + " (F32, F16, BF16, F64 are)");
    if (!v["shape"].is_array()) throw bad("shape is not an array");
    if (v["shape"].size() > kMaxTensorDims)
      throw bad("shape has " + std::to_string(v["shape"].size()) + " dimensions, more than the limit of " +
                std::to_string(kMaxTensorDims));
    uint64_t elements = 1;
    for (const auto& dim : v["shape"]) {
      if (!dim.is_number_unsigned()) throw bad("shape has a non-integer or negative dimension");
      uint64_t d = dim.get<uint64_t>();
      if (__builtin_mul_overflow(elements, d, &elements)) throw bad("shape product overflows");
      e.shape.push_back(d);
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw bad("data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end) throw bad("data_offsets are reversed");
    if (e.end > data_size)
      throw bad("data_offsets end " + std::to_string(e.end) + " lies past the end of the data (" +
                std::to_string(data_size) + " bytes; truncated file?)");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, esize, &bytes) || bytes != e.end - e.begin)
      throw bad("holds " + std::to_string(e.end - e.begin) + " bytes but shape and dtype need " +
                std::to_string(bytes));
    ranges.push_back({{e.begin, e.end}, name});
    entries_.emplace(name, std::move(e));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first.first < ranges[i - 1].first.second)
      throw ConvertError(path + ": tensors '" + ranges[i - 1].second + "' and '" + ranges[i].second +
                         "' have overlapping data ranges");
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConvertError(path_ + ": missing tensor '" + name + "'");
  return it->second;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  std::vector<float> out((e.end - e.begin) / float_dtype_size(e.dtype));
  read_elements(name, 0, out.size(), out.data());
  return out;
}

void SafetensorsFile::read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const {
  const uint64_t n = row_elements(*this, name, first_row, rows);
  read_elements(name, first_row * n, rows * n, out);
}

void SafetensorsFile::read_elements(const std::string& name, uint64_t first, uint64_t count, float* out) const {
  const SafetensorsEntry& e = entry(name);
  if (count == 0) return;  // an empty tensor: `out` may be null (memcpy must not see it)
  const size_t esize = float_dtype_size(e.dtype);
  const uint8_t* p = data_ + e.begin + first * esize;
  // One loop per dtype: the test stays out of the loop over a table's elements.
  if (e.dtype == "F32") {
    std::memcpy(out, p, count * 4);
  } else if (e.dtype == "F16") {
    for (size_t i = 0; i < count; ++i) out[i] = kernels::half_to_float(detail::load_le16(p + 2 * i));
  } else if (e.dtype == "BF16") {
    for (size_t i = 0; i < count; ++i) {
      const uint32_t bits = uint32_t{detail::load_le16(p + 2 * i)} << 16;
      std::memcpy(&out[i], &bits, 4);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  }
  if (file_) file_->release();
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(out[i]))
      throw ConvertError(path_ + ": tensor '" + name + "' holds a non-finite value (NaN or Inf) at element " +
                         std::to_string(first + i));
}

}  // namespace petrel::convert
