// A checkpoint's named tensors, whatever the container: the converter reads
// weights through this and does not care whether they came from safetensors or
// from a PyTorch pickle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert_error.h"

namespace petrel::convert {

// Dimensions of a tensor, beyond any real model's (they have at most 4); the readers
// refuse more before they copy a shape.
constexpr size_t kMaxTensorDims = 16;

// TensorInfo::dtype of int8 values with one scale per tensor (Marian's intgemm8 items:
// CheckpointFile::read_int8 gives them as stored).
constexpr const char* kInt8DType = "INTGEMM8";

struct TensorInfo {
  std::string dtype;  // "F32", "F16", "BF16", "F64" (safetensors' names), kInt8DType
  std::vector<uint64_t> shape;
};

// Bytes per element of a floating-point TensorInfo::dtype; 0 for any other name.
inline size_t float_dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

class CheckpointFile {
 public:
  virtual ~CheckpointFile() = default;

  virtual const std::string& path() const = 0;
  // What was read, for the report: "safetensors", "zip format, torch 1.6+", ...
  virtual std::string format() const = 0;
  virtual std::vector<std::string> names() const = 0;  // sorted
  virtual const TensorInfo* find(const std::string& name) const = 0;  // nullptr if absent
  // The tensor's values in row-major order, widened to f32. Throws on NaN/Inf.
  virtual std::vector<float> read_f32(const std::string& name) const = 0;
  // Rows [first_row, first_row + rows) of the tensor (along its first dimension) widened
  // to f32 into out[rows][elements per row], so that a table need not be read whole.
  // Throws on NaN/Inf (naming the element's index in the whole tensor) and on a range
  // past the tensor. The readers of mapped files override it to read just those rows
  // and release their pages; this default (Marian's files, whose items may be stored
  // transposed: models of a few hundred MB at most) reads the whole tensor once and
  // serves its blocks from that copy.
  virtual void read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const;

  // Int8 values as the checkpoint stores them (Marian's intgemm8 items), in read_f32's
  // layout and order: the weight is values x scale. nullopt: the tensor is not int8.
  struct Int8Values {
    std::vector<int8_t> values;
    float scale = 0;
  };
  virtual std::optional<Int8Values> read_int8(const std::string& /*name*/) const { return std::nullopt; }
  // A precomputed scale for the activations this weight multiplies (Marian's alphas:
  // an int8 input is round(x / scale)), if the checkpoint has one.
  virtual std::optional<float> activation_scale(const std::string& /*name*/) const { return std::nullopt; }

  bool has(const std::string& name) const { return find(name) != nullptr; }
  const TensorInfo& info(const std::string& name) const {
    if (const TensorInfo* t = find(name)) return *t;
    throw ConvertError(path() + ": missing tensor '" + name + "'");
  }

 private:
  mutable std::string rows_name_;        // the tensor the default read_f32_rows holds
  mutable std::vector<float> rows_values_;
};

// The elements per row of tensor `name` of `file` along its first dimension; throws
// unless rows [first_row, first_row + rows) are in the tensor.
uint64_t row_elements(const CheckpointFile& file, const std::string& name, uint64_t first_row, uint64_t rows);

// A sharded checkpoint's index (model.safetensors.index.json, pytorch_model.bin.index.json,
// as transformers writes them): its weight_map, tensor name -> shard file name. Untrusted:
// a shard must be a plain file name in the same directory, and the map is bounded
// (kMaxShards files). `path` names the index in errors. Throws ConvertError.
constexpr size_t kMaxShards = 4096;
std::map<std::string, std::string> parse_shard_index(const std::string& path, const std::string& text);

// The tensors of a sharded checkpoint: each read from the shard the index names. Every
// shard must exist, hold exactly the tensors the index gives it, and no tensor may be in
// two shards.
class ShardedCheckpoint : public CheckpointFile {
 public:
  // `index`: the index file's path; `shards` are opened from its directory by `open`.
  ShardedCheckpoint(const std::string& index_path, const std::string& index_text,
                    const std::function<std::unique_ptr<CheckpointFile>(const std::string&)>& open);

  const std::string& path() const override { return path_; }
  std::string format() const override;
  std::vector<std::string> names() const override;
  const TensorInfo* find(const std::string& name) const override;
  std::vector<float> read_f32(const std::string& name) const override { return shard(name).read_f32(name); }
  void read_f32_rows(const std::string& name, uint64_t first_row, uint64_t rows, float* out) const override {
    shard(name).read_f32_rows(name, first_row, rows, out);
  }

 private:
  const CheckpointFile& shard(const std::string& name) const;

  std::string path_;
  std::vector<std::unique_ptr<CheckpointFile>> shards_;
  std::map<std::string, const CheckpointFile*> shard_of_;
};

// The weights of a checkpoint directory: model.safetensors if present, else
// pytorch_model.bin (zip or legacy format), else a sharded checkpoint
// (model.safetensors.index.json, then pytorch_model.bin.index.json). Throws if none exists.
std::unique_ptr<CheckpointFile> open_checkpoint_weights(const std::string& dir);

}  // namespace petrel::convert
