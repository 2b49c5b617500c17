// Builds a Petrel model file: tensors go to a 64-byte aligned data section, the
// metadata to a size-prefixed FlatBuffer in front of it (schema/petrel.fbs). Every
// scalar field is written, defaults included: a file states each value it relies
// on, and tools and tests can patch any field in place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/quantize.h"
#include "petrel_generated.h"

namespace petrel::convert {

class ModelWriter {
 public:
  ModelWriter() { builder_.ForceDefaults(true); }
  flatbuffers::FlatBufferBuilder& builder() { return builder_; }

  // Adds a tensor and returns its index in the tensor table.
  int32_t add(const std::string& name, const std::vector<uint64_t>& shape, const EncodedMatrix& m);
  int32_t add_f32(const std::string& name, const std::vector<uint64_t>& shape,
                  const std::vector<float>& values);

  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> tensor_table();
  uint64_t data_size() const { return data_.size(); }
  uint32_t data_crc32() const;  // of the data section so far (schema: Model.data_crc32)

  // Finishes `root` and writes the file atomically (temporary file + rename), so a
  // failure never leaves a partial output behind; a file the engine's loader refuses
  // is a failure too. Returns the file size.
  uint64_t write(flatbuffers::Offset<fb::Model> root, const std::string& path);

 private:
  fb::DataRef append(const void* bytes, size_t size);

  struct PendingTensor {
    std::string name;
    fb::DType dtype;
    std::vector<uint64_t> shape;
    fb::Layout layout;
    fb::DataRef data, scales, row_sums, block_scales;
    float max_abs_error, snr_db;  // NaN: not recorded (f32 vectors)
    float activation_scale;       // int8: static activation scale; 0: none
  };
  flatbuffers::FlatBufferBuilder builder_{1 << 16};
  std::vector<PendingTensor> tensors_;
  std::vector<uint8_t> data_;
};

}  // namespace petrel::convert
