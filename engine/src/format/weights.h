// The engine's bound view of a model's tensors: pointers into the mapped file,
// checked by the loader so that every later read is in bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "petrel/types.h"

namespace petrel::detail {

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
  Attention self_attn;   // absent in an SSRU decoder layer
  Norm self_attn_norm;
  // Marian's SSRU instead of self-attention (decoder only): x = h ssru_w, f =
  // sigmoid(h ssru_forget + bias); ssru_norm is its residual block's norm.
  Linear ssru_w, ssru_forget;
  Norm ssru_norm;
  bool ssru() const { return ssru_w.weight.present(); }
  Attention cross_attn;  // decoder only
  Norm cross_attn_norm;  // decoder only
  Linear fc1, fc2;
  Norm ffn_norm;
  // Decoder-only models: RMSNorms of each q and k head (before RoPE; q's carries the
  // attention scale), norms of the blocks' outputs (Gemma), the gated feed-forward's gate,
  // the sliding window (0: every earlier key) and RoPE's frequencies [head_dim / 2].
  Norm q_norm, k_norm, post_attn_norm, post_ffn_norm;
  Linear fc_gate;
  bool gated() const { return fc_gate.weight.present(); }
  size_t sliding_window = 0;
  const float* rope_inv_freq = nullptr;
};

struct Stack {
  Matrix embed_tokens;  // [vocab, d_model], embedding scale folded in
  PositionInfo positions{};
  // [max_positions, d_model] f32: the learned table in the file, or the sinusoidal
  // table generated at load time (owned by the model).
  const float* position_table = nullptr;
  std::vector<Layer> layers;
  Norm final_norm;  // pre-LN only
  Norm embed_norm;  // on embedding + position before the first layer (mBART); optional
};

// The file's lexical shortlist, in place (schema: Shortlist); ids checked at load.
struct Shortlist {
  const int32_t* always = nullptr;
  size_t always_size = 0;
  const uint32_t* offsets = nullptr;  // [vocab + 1], non-decreasing
  const int32_t* candidates = nullptr;    // one of these two is set
  const uint16_t* candidates16 = nullptr;
  uint32_t first = 0, pad_to_multiple = 0;  // Marian's padding: smallest unselected ids >= first
  bool present() const { return offsets != nullptr; }
};

struct ModelWeights {
  const ModelInfo* info = nullptr;
  Stack encoder, decoder;
  Matrix output_proj;  // [vocab, d_model]; the decoder table when tied
  const float* final_logits_bias = nullptr;
  Shortlist shortlist;
};

}  // namespace petrel::detail
