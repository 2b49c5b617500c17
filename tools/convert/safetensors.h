// A strict reader for the safetensors format (8-byte little-endian header length,
// JSON header, raw little-endian tensor bytes). Every field is checked: a
// malformed or hostile file throws ConvertError naming the file and tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convert/checkpoint_file.h"

namespace petrel::convert {

struct SafetensorsEntry : TensorInfo {
  uint64_t begin = 0, end = 0;  // within the data area
};

class MappedFile;

class SafetensorsFile : public CheckpointFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps the file
  // A file's bytes in memory (not copied, must outlive this); `name` names it in errors.
  SafetensorsFile(const uint8_t* data, size_t size, std::string name);
  ~SafetensorsFile() override;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const override { return path_; }
  std::string format() const override { return "safetensors"; }
  std::vector<std::string> names() const override;
  const TensorInfo* find(const std::string& name) const override;
  const SafetensorsEntry& entry(const std::string& name) const;
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }

  // The tensor's values widened to f32 (F64 narrowed). Throws on NaN/Inf.
  std::vector<float> read_f32(const std::string& name) const override;
  void read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const override;

 private:
  void parse();
  // Elements [first, first + count) of the tensor, widened; throws on NaN/Inf.
  void read_elements(const std::string& name, uint64_t first, uint64_t count, float* out) const;

  std::unique_ptr<MappedFile> file_;
  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  const uint8_t* data_ = nullptr;  // after the header
  std::map<std::string, SafetensorsEntry> entries_;
};

}  // namespace petrel::convert
