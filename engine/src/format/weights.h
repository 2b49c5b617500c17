// The engine's bound view of a model's tensors: pointers into the mapped file,
// checked by the loader so that every later read is in bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "petrel/model.h"

namespace petrel::detail {

// A row-major matrix [rows][cols]. Int8 rows carry one f32 scale each.
struct Matrix {
  DType dtype = DType::kF32;
  size_t rows = 0, cols = 0;
  const void* data = nullptr;
  const float* scales = nullptr;  // int8 only

  bool present() const { return data != nullptr; }
};

struct Linear {
  Matrix weight;              // [out, in]
  const float* bias = nullptr;  // [out] or null
};

struct Norm {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  bool present() const { return gamma != nullptr; }
};

struct Attention {
  Linear q, k, v, o;  // q already carries 1/sqrt(head_dim)
};

struct Layer {
  Attention self_attn;
  Norm self_attn_norm;
  Attention cross_attn;  // decoder only
  Norm cross_attn_norm;  // decoder only
  Linear fc1, fc2;
  Norm ffn_norm;
};

struct Stack {
  Matrix embed_tokens;  // [vocab, d_model], embedding scale folded in
  PositionInfo positions{};
  // [max_positions, d_model] f32: the learned table in the file, or the sinusoidal
  // table generated at load time (owned by the model).
  const float* position_table = nullptr;
  std::vector<Layer> layers;
  Norm final_norm;  // pre-LN only
};

struct ModelWeights {
  const ModelInfo* info = nullptr;
  Stack encoder, decoder;
  Matrix output_proj;  // [vocab, d_model]; the decoder table when tied
  const float* final_logits_bias = nullptr;
};

}  // namespace petrel::detail
