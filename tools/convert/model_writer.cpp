#include "convert/model_writer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "convert/convert_error.h"
#include "format/crc32.h"
#include "format/model_file.h"
#include "petrel/model.h"

namespace petrel::convert {

fb::DataRef ModelWriter::append(const void* bytes, size_t size) {
  size_t offset = (data_.size() + detail::kDataAlignment - 1) / detail::kDataAlignment * detail::kDataAlignment;
  data_.resize(offset + size);
  if (size) std::memcpy(data_.data() + offset, bytes, size);
  return fb::DataRef(offset, size);
}

int32_t ModelWriter::add(const std::string& name, const std::vector<uint64_t>& shape,
                         const EncodedMatrix& m) {
  const auto layout = m.layout == detail::Layout::kPanel16 ? fb::Layout::Panel16 : fb::Layout::RowMajor;
  PendingTensor t{name, static_cast<fb::DType>(m.dtype), shape, layout, append(m.data.data(), m.data.size()),
                  {}, {}, {}, static_cast<float>(m.max_abs_error), static_cast<float>(m.snr_db), m.activation_scale};
  if (!m.scales.empty()) t.scales = append(m.scales.data(), m.scales.size() * sizeof(float));
  if (!m.row_sums.empty()) t.row_sums = append(m.row_sums.data(), m.row_sums.size() * sizeof(int32_t));
  if (!m.block_scales.empty()) t.block_scales = append(m.block_scales.data(), m.block_scales.size());
  tensors_.push_back(std::move(t));
  return static_cast<int32_t>(tensors_.size() - 1);
}

int32_t ModelWriter::add_f32(const std::string& name, const std::vector<uint64_t>& shape,
                             const std::vector<float>& values) {
  tensors_.push_back({name, fb::DType::F32, shape, fb::Layout::RowMajor, append(values.data(), values.size() * 4), {},
                      {}, {}, NAN, NAN, 0.0f});
  return static_cast<int32_t>(tensors_.size() - 1);
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> ModelWriter::tensor_table() {
  std::vector<flatbuffers::Offset<fb::Tensor>> offsets;
  for (const PendingTensor& t : tensors_) {
    auto name = builder_.CreateString(t.name);
    auto shape = builder_.CreateVector(t.shape);
    const fb::DataRef* scales = t.scales.size() ? &t.scales : nullptr;
    const fb::DataRef* row_sums = t.row_sums.size() ? &t.row_sums : nullptr;
    const fb::DataRef* block_scales = t.block_scales.size() ? &t.block_scales : nullptr;
    offsets.push_back(fb::CreateTensor(builder_, name, t.dtype, shape, t.layout, &t.data, scales, row_sums,
                                       block_scales, t.max_abs_error, t.snr_db, t.activation_scale));
  }
  return builder_.CreateVector(offsets);
}

uint32_t ModelWriter::data_crc32() const { return detail::crc32(data_.data(), data_.size()); }

uint64_t ModelWriter::write(flatbuffers::Offset<fb::Model> root, const std::string& path) {
  builder_.FinishSizePrefixed(root, fb::ModelIdentifier());
  const uint8_t* meta = builder_.GetBufferPointer();
  size_t meta_size = builder_.GetSize();  // includes the 4-byte prefix
  uint64_t data_start = detail::data_section_start(meta_size - 4);

  std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw ConvertError(path + ": cannot create output: " + std::strerror(errno));
  static const uint8_t zeros[detail::kDataAlignment] = {};
  const size_t padding = data_start - meta_size;  // < kDataAlignment
  bool ok = std::fwrite(meta, 1, meta_size, f) == meta_size && std::fwrite(zeros, 1, padding, f) == padding &&
            std::fwrite(data_.data(), 1, data_.size(), f) == data_.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    const int error = errno;
    std::remove(tmp.c_str());
    throw ConvertError(path + ": writing failed: " + std::strerror(error));
  }
  // The engine's own loader has the last word: a file it would refuse is never written
  // (the converter's checks and the loader's limits cannot drift apart unnoticed).
  auto loaded = Model::load(tmp);
  if (!loaded) {
    std::remove(tmp.c_str());
    throw ConvertError(path + ": not written: the engine would refuse the model (" + loaded.error().message + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    throw ConvertError(path + ": writing failed: " + std::strerror(error));
  }
  return data_start + data_.size();
}

}  // namespace petrel::convert
