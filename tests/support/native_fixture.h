// The Marian-native fixture models (tests/fixtures/marian-native: Firefox's file formats,
// with bergamot's and the PyTorch reference's outputs) converted for the tests.
#pragma once

#include <filesystem>
#include <string>

#include "convert/convert.h"
#include "support/test_support.h"

namespace petrel::test {

inline std::string native_dir() { return fixture_dir() + "/marian-native"; }

// Model `model` ("transformer", "ssru") converted with f32 weights, once per run.
inline std::string native_model(const std::string& model) {
  return shared_file("native-" + model + "-f32.petrel", [&](const std::string& out) {
    TempDir tmp;
    const std::string dir = tmp.file(model);
    std::filesystem::create_directories(dir);
    write_bytes(dir + "/model.bin", read_bytes(native_dir() + "/" + model + "/model.bin"));
    write_bytes(dir + "/vocab.spm", read_bytes(native_dir() + "/vocab.spm"));
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = DType::kF32;
    convert::convert_checkpoint(o);
  });
}

}  // namespace petrel::test
