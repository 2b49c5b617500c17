// What every converter of a checkpoint shares: the checkpoint's tensors as a Source
// (each read once, shape- and NaN-checked, unread ones refused at the end) and the
// output's tensor table (TensorOutput: matrices encoded a block of rows at a time).
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convert/checkpoint_file.h"
#include "convert/convert.h"
#include "convert/convert_error.h"
#include "convert/model_writer.h"
#include "convert/quantize.h"

namespace petrel::convert {

using RowReader = std::function<void(uint64_t first, uint64_t count, float* out)>;

inline RowReader rows_of(const std::vector<float>& values, uint64_t cols) {
  return [&values, cols](uint64_t first, uint64_t count, float* out) {
    std::copy(values.begin() + first * cols, values.begin() + (first + count) * cols, out);
  };
}

// The checkpoint's tensors: each is read at most once, shape-checked, NaN-checked;
// whatever is left unread at the end is an unexpected tensor.
class Source {
 public:
  Source(const CheckpointFile& st, const ConvertOptions& o) : st_(st), options_(o), total_(st.names().size()) {}

  bool has(const std::string& name) const { return st_.has(name); }

  // Checks the tensor's shape and counts it as read (its values come from rows()).
  void open(const std::string& name, const std::vector<uint64_t>& shape) {
    const TensorInfo& e = st_.info(name);
    if (e.shape != shape)
      throw ConvertError(st_.path() + ": tensor '" + name + "' has shape " + shape_text(e.shape) +
                         ", the config needs " + shape_text(shape));
    consumed_.insert(name);
    if (options_.progress) options_.progress(name, consumed_.size(), total_);
  }

  std::vector<float> read(const std::string& name, const std::vector<uint64_t>& shape) {
    open(name, shape);
    return st_.read_f32(name);
  }

  // An opened tensor's rows, times `scale`.
  RowReader rows(const std::string& name, float scale = 1.0f) const {
    const uint64_t cols = row_elements(st_, name, 0, 0);
    return [this, name, scale, cols](uint64_t first, uint64_t count, float* out) {
      st_.read_f32_rows(name, first, count, out);
      if (scale != 1.0f)  // (x 1 would change nothing)
        for (uint64_t i = 0; i < count * cols; ++i) out[i] *= scale;
    };
  }

  // Whether two opened tensors hold the same values, compared by blocks of rows.
  bool same_values(const std::string& a, const std::string& b, uint64_t rows, uint64_t cols) const {
    const uint64_t block = std::max<uint64_t>(1, MatrixEncoder::kBlockValues / cols);
    std::vector<float> x(std::min(rows, block) * cols), y(x.size());
    for (uint64_t first = 0, n = 0; first < rows; first += n) {
      n = std::min(block, rows - first);
      st_.read_f32_rows(a, first, n, x.data());
      st_.read_f32_rows(b, first, n, y.data());
      if (!std::equal(x.begin(), x.begin() + n * cols, y.begin())) return false;
    }
    return true;
  }

  // The tensor's int8 values if the checkpoint stores it so (Marian's intgemm8), shape-
  // checked and consumed; nullopt (not consumed) otherwise.
  std::optional<CheckpointFile::Int8Values> read_int8(const std::string& name, const std::vector<uint64_t>& shape) {
    if (!st_.has(name)) return std::nullopt;
    auto q = st_.read_int8(name);
    if (!q) return std::nullopt;
    open(name, shape);  // the shape check and the progress report
    return q;
  }
  std::optional<float> activation_scale(const std::string& name) const { return st_.activation_scale(name); }
  bool stored_int8(const std::string& name) const { return st_.has(name) && st_.info(name).dtype == kInt8DType; }

  // Counts every tensor whose name starts with one of `prefixes` as read without reading
  // it (a multimodal checkpoint's vision tower, which a text model leaves out); returns how many.
  size_t skip(const std::vector<std::string>& prefixes) {
    size_t n = 0;
    for (const std::string& name : st_.names())
      for (const std::string& p : prefixes)
        if (name.compare(0, p.size(), p) == 0 && consumed_.insert(name).second) ++n;
    return n;
  }

  void check_all_consumed(const std::string& model_type) const {
    for (const std::string& name : st_.names())
      if (!consumed_.count(name))
        throw ConvertError(st_.path() + ": unexpected tensor '" + name + "' (not part of a " + model_type +
                           " model with this config)");
  }

  // A tensor of any shape (a table whose row count varies between exports).
  std::vector<float> read_any(const std::string& name, std::vector<uint64_t>* shape) {
    *shape = st_.info(name).shape;
    return read(name, *shape);
  }

  const std::string& path() const { return st_.path(); }

  static std::string shape_text(const std::vector<uint64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  }

 private:
  const CheckpointFile& st_;
  const ConvertOptions& options_;
  size_t total_;
  std::set<std::string> consumed_;
};

class TensorOutput {
 protected:
  TensorOutput(const ConvertOptions& o, Source& src)
      : options_(o), src_(src), writer_(o.output_path), fbb_(writer_.builder()) {}

  // `values` encoded as `dtype`, unless the checkpoint's tensor `source` is int8 already
  // and dtype is int8: then its values are stored as they are (no requantization).
  // An int8 matrix takes the checkpoint's activation scale for `source`, if it has one,
  // times `input_scale` (a fold that scales the layer's input).
  // The values are read, encoded and written a block of rows at a time (MatrixEncoder):
  // a table is never held whole, as f32 or encoded.
  int32_t matrix(const std::string& name, const RowReader& values, uint64_t rows, uint64_t cols,
                 DType dtype, float row_scale = 1.0f, detail::Layout layout = detail::Layout::kRowMajor,
                 const std::string& source = "", const std::string& activation_of = "", float input_scale = 1.0f) {
    std::optional<CheckpointFile::Int8Values> q;
    if (dtype == DType::kInt8 && !source.empty()) q = src_.read_int8(source, {rows, cols});
    EncodedMatrix m;
    if (q) {
      m = encode_quantized_int8(q->values, rows, cols, q->scale, row_scale, layout);
    } else {
      MatrixEncoder encoder(rows, cols, dtype, row_scale, layout);
      std::vector<float> block(std::min<uint64_t>(rows, encoder.block_rows()) * cols);
      writer_.begin_data();
      for (uint64_t first = 0, n = 0; first < rows; first += n) {
        n = std::min<uint64_t>(encoder.block_rows(), rows - first);
        values(first, n, block.data());
        writer_.write_data(encoder.encode_rows(block.data(), n));
      }
      m = encoder.finish();
    }
    if (dtype == DType::kInt8 && !source.empty())
      if (auto s = src_.activation_scale(activation_of.empty() ? source : activation_of)) {
        m.activation_scale = *s * input_scale;
        activation_scales_++;
      }
    int4_used_ |= dtype == DType::kInt4;
    report_.parameters += rows * cols;
    report_.tensors.push_back({name, dtype, {rows, cols}, m.bytes(), m.max_abs_error, m.snr_db});
    return q ? writer_.add(name, {rows, cols}, m) : writer_.add_streamed(name, {rows, cols}, m);
  }

  int32_t vector_tensor(const std::string& name, const std::vector<float>& values) {
    report_.parameters += values.size();
    report_.tensors.push_back({name, DType::kF32, {values.size()}, values.size() * 4, 0, INFINITY});
    return writer_.add_f32(name, {values.size()}, values);
  }


  // The folds as the file's table. Separate statements: argument evaluation order is
  // unspecified, and the bytes must not depend on the compiler (files are reproducible).
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Fold>>> fold_table() {
    std::vector<flatbuffers::Offset<fb::Fold>> folds;
    for (const FoldInfo& f : folds_) {
      auto what = fbb_.CreateString(f.what);
      auto targets = fbb_.CreateVectorOfStrings(f.targets);
      auto note = fbb_.CreateString(f.note);
      folds.push_back(fb::CreateFold(fbb_, what, f.value, targets, note));
    }
    return fbb_.CreateVector(folds);
  }

  const ConvertOptions& options_;
  Source& src_;
  ModelWriter writer_;
  flatbuffers::FlatBufferBuilder& fbb_;
  ConvertReport report_;
  std::vector<FoldInfo> folds_;
  bool int4_used_ = false;
  size_t activation_scales_ = 0;  // int8 matrices given the checkpoint's activation scales
};

}  // namespace petrel::convert
