// A checkpoint's named tensors, whatever the container: the converter reads
// weights through this and does not care whether they came from safetensors or
// from a PyTorch pickle.
#pragma once

#include <cstddef>
#include <cstdint>
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
};

// The weights of a checkpoint directory: model.safetensors if present, else
// pytorch_model.bin (zip or legacy format). Throws if neither exists.
std::unique_ptr<CheckpointFile> open_checkpoint_weights(const std::string& dir);

}  // namespace petrel::convert
