// pytorch_model.bin as torch.save writes it, read without running pickle:
//  * zip format (PyTorch >= 1.6): <prefix>/data.pkl with the state dict, and
//    <prefix>/data/<key> records holding each storage's raw bytes;
//  * legacy format (PyTorch < 1.6): pickles in a row (magic number, protocol,
//    system info, the state dict, the storage key list), then for each key an
//    int64 element count and the storage's raw bytes.
// The state dict is interpreted by pickle::Machine (only what weights_only
// allows); tensors are mapped in place and converted when read, honouring
// storage offsets and strides. f32, f16 and bf16 storages are read; anything
// else throws ConvertError naming the file, the byte offset or tensor, and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convert/checkpoint_file.h"

namespace petrel::convert {

class MappedFile;
class ZipArchive;
struct ZipRecord;
namespace pickle {
class Machine;
}

class PytorchCheckpoint : public CheckpointFile {
 public:
  explicit PytorchCheckpoint(const std::string& path);  // maps the file
  // A checkpoint in memory (not copied, must outlive this); `name` names it in errors.
  PytorchCheckpoint(const uint8_t* data, size_t size, std::string name);
  ~PytorchCheckpoint() override;

  const std::string& path() const override { return path_; }
  std::string format() const override;
  std::vector<std::string> names() const override;
  const TensorInfo* find(const std::string& name) const override;
  std::vector<float> read_f32(const std::string& name) const override;
  void read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const override;

  bool is_zip() const { return zip_ != nullptr; }

 private:
  struct Tensor : TensorInfo {
    uint64_t storage_offset = 0;  // file offset of the storage's (or view's) first element
    uint64_t first = 0;           // the tensor's first element within it
    std::vector<uint64_t> strides;
    const ZipRecord* record = nullptr;  // zip: checked against its CRC before first use
  };

  // Tensor t's elements (all of them) into out; index_offset: the first one's index in
  // the tensor `name`, for messages.
  void read(const std::string& name, const Tensor& t, uint64_t index_offset, float* out) const;
  void parse();
  void parse_zip();
  void parse_legacy();
  // The state dict `root` of `machine`; storage i of the machine starts at file
  // offset storage_offsets[i] (and lies in zip record records[i], if any).
  void add_state_dict(const pickle::Machine& machine, uint32_t root, const std::vector<uint64_t>& storage_offsets,
                      const std::vector<const ZipRecord*>& records);

  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  std::unique_ptr<ZipArchive> zip_;
  std::map<std::string, Tensor> tensors_;
};

// Parses an in-memory pytorch_model.bin and reads every tensor; throws
// ConvertError on anything wrong. The entry point for a fuzz target.
void parse_pytorch_checkpoint(const uint8_t* data, size_t size, const std::string& name);

}  // namespace petrel::convert
