// Hugging Face MarianMT (and M2M100 / mBART) checkpoints written by the fuzz targets that convert one
// (fuzz_convert, fuzz_text): a scratch directory, the tensors of a model of a given
// shape in the layout convert_checkpoint reads, and an f32 safetensors writer.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "exercise_model.h"

namespace petrel::fuzz {

// A directory (on tmpfs if there is one) made at construction and removed with
// everything in it at destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    for (const char* base : {"/dev/shm", "/tmp"}) {
      dir_ = std::string(base) + "/" + prefix + "-XXXXXX";
      if (mkdtemp(dir_.data()) != nullptr) return;
    }
    std::fprintf(stderr, "%s: cannot make a scratch directory\n", prefix.c_str());
    std::abort();
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& dir() const { return dir_; }
  // Removes what a previous input left.
  void clear() const {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ignored))
      std::filesystem::remove_all(entry.path(), ignored);
  }

 private:
  std::string dir_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  require(static_cast<bool>(out), "scratch files can be written");
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "scratch files can be read");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fuzz recipe's weights: int8 steps from the input's tail (cycled; zeros without one)
// times 2^exponent, so values can be tiny, huge or overflow in use.
class Weights {
 public:
  Weights(const uint8_t* data, size_t size, int exponent)
      : data_(data), size_(size), scale_(std::ldexp(1.0f, exponent)) {}
  float next() {
    if (size_ == 0) return 0.0f;
    const auto step = static_cast<int8_t>(data_[at_++ % size_]);
    return static_cast<float>(step) * scale_;
  }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
  float scale_;
};

// name -> (shape, f32 values)
using Tensors = std::map<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>;

// The Hugging Face model_type (tools/reference/FAMILIES.md).
enum class Family { kMarian, kM2M100, kMBart };

// A model's structure, as config.json and the tensor names state it. M2M100 and mBART
// are pre-LN with one shared table; M2M100's stored_positions is its optional
// sinusoid table (`embed_positions.weights`, positions + 2 rows), mBART always has
// learned positions at + 2 and an embedding LayerNorm.
struct MarianShape {
  Family family = Family::kMarian;
  uint32_t d = 8, ffn = 16, vocab = 12, target_vocab = 12, encoder_layers = 1, decoder_layers = 1, positions = 16;
  bool tied = true, shared = true, pre_ln = false, logits_bias = false, stored_positions = false;
};

// Every tensor of `shape`, values drawn from `next` in a fixed order.
inline Tensors marian_tensors(const MarianShape& m, const std::function<float()>& next) {
  Tensors tensors;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape) {
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    std::vector<float> values(n);
    for (float& v : values) v = next();
    tensors[name] = {std::move(shape), std::move(values)};
  };
  if (m.shared) {
    add("model.shared.weight", {m.vocab, m.d});
  } else {
    add("model.encoder.embed_tokens.weight", {m.vocab, m.d});
    add("model.decoder.embed_tokens.weight", {m.target_vocab, m.d});
  }
  if (!m.tied) add("lm_head.weight", {m.target_vocab, m.d});
  if (m.logits_bias) add("final_logits_bias", {1, m.target_vocab});
  for (const std::string stack : {"encoder", "decoder"}) {
    const std::string s = "model." + stack;
    if (m.family == Family::kMBart) {
      add(s + ".embed_positions.weight", {m.positions + 2, m.d});
      add(s + ".layernorm_embedding.weight", {m.d});
      add(s + ".layernorm_embedding.bias", {m.d});
    } else if (m.stored_positions) {
      if (m.family == Family::kM2M100) add(s + ".embed_positions.weights", {m.positions + 2, m.d});
      else add(s + ".embed_positions.weight", {m.positions, m.d});
    }
    if (m.pre_ln) {
      add(s + ".layer_norm.weight", {m.d});
      add(s + ".layer_norm.bias", {m.d});
    }
    for (uint32_t l = 0; l < (stack == "encoder" ? m.encoder_layers : m.decoder_layers); ++l) {
      const std::string p = s + ".layers." + std::to_string(l);
      for (const std::string attn : {"self_attn", "encoder_attn"}) {
        if (attn == "encoder_attn" && stack == "encoder") continue;
        for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
          add(p + "." + attn + "." + proj + ".weight", {m.d, m.d});
          add(p + "." + attn + "." + proj + ".bias", {m.d});
        }
        add(p + "." + attn + "_layer_norm.weight", {m.d});
        add(p + "." + attn + "_layer_norm.bias", {m.d});
      }
      add(p + ".fc1.weight", {m.ffn, m.d});
      add(p + ".fc1.bias", {m.ffn});
      add(p + ".fc2.weight", {m.d, m.ffn});
      add(p + ".fc2.bias", {m.d});
      add(p + ".final_layer_norm.weight", {m.d});
      add(p + ".final_layer_norm.bias", {m.d});
    }
  }
  return tensors;
}

// A safetensors file of f32 tensors.
inline std::string safetensors(const Tensors& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, tensor] : tensors) {
    const auto& [shape, values] = tensor;
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
  return out + text + data;
}

}  // namespace petrel::fuzz
