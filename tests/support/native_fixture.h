// The Marian-native fixture models (tests/fixtures/marian-native: Firefox's file formats,
// with bergamot's and the PyTorch reference's outputs) converted for the tests.
#pragma once

#include <filesystem>
#include <string>

#include "convert/convert.h"
#include "support/test_support.h"

namespace petrel::test {

inline std::string native_dir() { return fixture_dir() + "/marian-native"; }

// Model `model`'s `file` with the shared vocabulary, converted to `dtype` once per run.
inline std::string converted_native(const std::string& model, const std::string& file, DType dtype,
                                    const std::string& name) {
  return shared_file("native-" + model + "-" + name + ".petrel", [&](const std::string& out) {
    TempDir tmp;
    const std::string dir = tmp.file(model);
    std::filesystem::create_directories(dir);
    write_bytes(dir + "/" + file, read_bytes(native_dir() + "/" + model + "/" + file));
    write_bytes(dir + "/vocab.spm", read_bytes(native_dir() + "/vocab.spm"));
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = dtype;
    convert::convert_checkpoint(o);
  });
}

// Model `model` ("transformer", "ssru") with f32 weights.
inline std::string native_model(const std::string& model) {
  return converted_native(model, "model.bin", DType::kF32, "f32");
}

// Its intgemm8 file (model.intgemm.alphas.bin: int8 weights with Marian's activation
// alphas) converted as stored.
inline std::string native_int8_model(const std::string& model) {
  return converted_native(model, "model.intgemm.alphas.bin", DType::kInt8, "intgemm8");
}

}  // namespace petrel::test
