// Builds a Petrel model file: tensors go to a 64-byte aligned data section, the
// metadata to a size-prefixed FlatBuffer in front of it (schema/petrel.fbs). Every
// scalar field is written, defaults included: a file states each value it relies
// on, and tools and tests can patch any field in place.
//
// The tensors' bytes are written out as they are added, never held together in
// memory: to a temporary file (unlinked at once, so nothing is left behind), copied
// after the metadata once that is known, since the metadata comes first in the file
// and its size depends on everything converted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "convert/quantize.h"
#include "petrel_generated.h"

namespace petrel::convert {

// The file's `producer` field.
constexpr const char* kProducer = "petrel-convert 0.1.0";

// Appends the first `size` bytes of file `from` to file `to`, whose end is at offset `at`,
// in writes that end on 2 MiB offsets of `to` (so the page cache can hold it in 2 MiB
// folios, which a mapping then maps with 2 MiB pages). False on a read or write error.
bool append_in_huge_page_chunks(int from, int to, uint64_t at, uint64_t size);

// Makes SIGINT, SIGTERM and SIGHUP remove the partial outputs of ModelWriter::write()s in
// progress before they end the process as they would have (petrel-convert calls it; a
// library caller with handlers of its own does not). Ignored signals stay ignored.
void remove_partial_outputs_on_signals();

// Names a partial output for those handlers to remove while this object lives (write()
// holds one from creating its file to renaming it). Up to 8 at once in a process; beyond
// that, or for a path of 4 KiB or more, only the clean-up on a signal is lost.
class PartialRegistration {
 public:
  explicit PartialRegistration(const std::string& path);
  ~PartialRegistration();
  PartialRegistration(const PartialRegistration&) = delete;
  PartialRegistration& operator=(const PartialRegistration&) = delete;

 private:
  void* slot_ = nullptr;  // model_writer.cpp's slot, or none
};

class ModelWriter {
 public:
  // The file will be written to `path` (write()); its tensor bytes go to a temporary
  // file beside it until then. Throws ConvertError if that cannot be created.
  explicit ModelWriter(const std::string& path);
  ~ModelWriter();
  ModelWriter(const ModelWriter&) = delete;
  ModelWriter& operator=(const ModelWriter&) = delete;

  flatbuffers::FlatBufferBuilder& builder() { return builder_; }

  // Adds a tensor and returns its index in the tensor table.
  int32_t add(const std::string& name, const std::vector<uint64_t>& shape, const EncodedMatrix& m);
  int32_t add_f32(const std::string& name, const std::vector<uint64_t>& shape,
                  const std::vector<float>& values);

  // A matrix whose bytes come in blocks (MatrixEncoder): begin_data(), then each block's
  // bytes in order with write_data(), then add_streamed() with the encoder's result (its
  // side arrays; its `data` is what was written since begin_data()).
  void begin_data();
  void write_data(const std::vector<uint8_t>& bytes);
  int32_t add_streamed(const std::string& name, const std::vector<uint64_t>& shape, const EncodedMatrix& m);

  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> tensor_table();
  uint64_t data_size() const { return data_size_; }
  uint32_t data_crc32() const { return crc_; }  // of the data section so far (schema: Model.data_crc32)

  // Finishes `root` and writes the file atomically (temporary file + rename), so a
  // failure never leaves a partial output behind; a file the engine's loader refuses
  // is a failure too. Returns the file size.
  uint64_t write(flatbuffers::Offset<fb::Model> root);

 private:
  fb::DataRef append(const void* bytes, size_t size);  // aligned, as a blob of its own
  void pad_to_alignment();
  void put(const void* bytes, size_t size);  // buffered, into the data file
  void flush();

  struct PendingTensor {
    std::string name;
    fb::DType dtype;
    std::vector<uint64_t> shape;
    fb::Layout layout;
    fb::DataRef data, scales, row_sums, block_scales;
    float max_abs_error, snr_db;  // NaN: not recorded (f32 vectors)
    float activation_scale;       // int8: static activation scale; 0: none
  };
  std::string path_;
  int data_fd_ = -1;              // the data section so far (an unlinked temporary file)
  std::vector<uint8_t> buffer_;   // bytes not yet in data_fd_
  uint64_t data_size_ = 0, data_begin_ = 0;
  uint32_t crc_ = 0;
  flatbuffers::FlatBufferBuilder builder_{1 << 16};
  std::vector<PendingTensor> tensors_;
};

}  // namespace petrel::convert
