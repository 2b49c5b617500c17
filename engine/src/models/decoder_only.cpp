#include "models/decoder_only.h"

#include <algorithm>
#include <cmath>

#include "kernels/rope.h"

namespace petrel::models {

using layers::KeyRange;
using layers::Workspace;

DecoderOnly::DecoderOnly(const detail::ModelWeights& weights, const kernels::KernelTable& kernels,
                         threads::ThreadPool& pool)
    : w_(weights),
      k_(kernels),
      pool_(pool),
      info_(*weights.info),
      shape_{weights.info->num_heads, weights.info->num_kv_heads, weights.info->head_dim},
      d_(weights.info->d_model) {}

void DecoderOnly::start(size_t max_positions, DType cache_type, LmState& st) const {
  const auto& layers = w_.decoder.layers;
  st.length = 0;
  st.max_positions = max_positions;
  st.cache_type = cache_type;
  st.k.resize(layers.size());
  st.v.resize(layers.size());
  st.slots.assign(layers.size(), 0);
  st.ring.assign(layers.size(), 0);
  st.ring_from.assign(layers.size(), 0);
  for (size_t l = 0; l < layers.size(); ++l)
    if (layers[l].sliding_window != 0 && layers[l].sliding_window + kPrefillChunk < max_positions)
      st.ring[l] = layers[l].sliding_window + kPrefillChunk;
  // Each distinct RoPE frequency table (one per layer type) gets cos/sin rows per forward.
  st.rope_tables.clear();
  for (const detail::Layer& layer : layers)
    if (layer.rope_inv_freq != nullptr &&
        std::find(st.rope_tables.begin(), st.rope_tables.end(), layer.rope_inv_freq) == st.rope_tables.end())
      st.rope_tables.push_back(layer.rope_inv_freq);
  const size_t half = shape_.head_dim / 2;
  st.rope_cos.assign(st.rope_tables.size(), std::vector<float>(kPrefillChunk * half));
  st.rope_sin.assign(st.rope_tables.size(), std::vector<float>(kPrefillChunk * half));
  st.keys.resize(kPrefillChunk);
  st.x.resize(kPrefillChunk * d_);
}

bool DecoderOnly::rewind(size_t length, LmState& st) const {
  if (length > st.length) return false;
  // A ring of R slots holds positions [st.length - R, st.length); the next query at
  // `length` needs the window behind it.
  for (size_t l = 0; l < st.ring.size(); ++l)
    if (st.ring[l] != 0 && st.length - length > st.ring[l] - w_.decoder.layers[l].sliding_window) return false;
  std::vector<size_t> from = held_from(st);
  if (!holds_window(from, length)) return false;
  st.ring_from = std::move(from);
  st.length = length;
  return true;
}

std::vector<size_t> DecoderOnly::held_from(const LmState& st) const {
  std::vector<size_t> from(st.ring.size(), 0);
  for (size_t l = 0; l < st.ring.size(); ++l) {
    if (st.ring[l] == 0) continue;
    if (l < st.ring_from.size()) from[l] = st.ring_from[l];
    if (st.length > st.ring[l]) from[l] = std::max(from[l], st.length - st.ring[l]);
  }
  return from;
}

bool DecoderOnly::holds_window(const std::vector<size_t>& from, size_t length) const {
  const auto& layers = w_.decoder.layers;
  for (size_t l = 0; l < from.size() && l < layers.size(); ++l)
    if (from[l] != 0 && from[l] + layers[l].sliding_window > length) return false;
  return true;
}

void DecoderOnly::reserve(Workspace& ws) const {
  const size_t width = std::max<size_t>(d_, shape_.q_width());
  ws.reserve(kPrefillChunk, width, info_.ffn_dim, info_.max_positions, pool_.size());
}

void DecoderOnly::grow_caches(size_t positions, LmState& st) const {
  const size_t row_bytes = cache_row_bytes(st.cache_type, shape_.kv_heads, shape_.head_dim);
  for (size_t l = 0; l < st.k.size(); ++l) {
    // A ring grows as the rest do until it is whole: before its first wrap its slots are
    // positions (slot = position % ring = position), so the bytes stay where they are. A
    // conversation's session starts its rings for the model's positions, and a ring
    // allocated whole up front cost a window's caches for a first message of a few tokens.
    const size_t limit = st.ring[l] != 0 ? st.ring[l] : st.max_positions;
    const size_t needed = std::min(positions, limit);
    if (st.slots[l] >= needed) continue;
    // Half as much again (within the limit): a sequence's caches grow O(log n) times.
    const size_t slots = std::min(limit, std::max(needed, st.slots[l] + st.slots[l] / 2));
    // reserve first: resize alone may take up to twice the bytes (vector's own growth),
    // which generation_bytes does not count.
    st.k[l].reserve(slots * row_bytes);
    st.v[l].reserve(slots * row_bytes);
    st.k[l].resize(slots * row_bytes);
    st.v[l].resize(slots * row_bytes);
    st.slots[l] = slots;
  }
}

void DecoderOnly::normalize(const detail::Norm& norm, const float* x, size_t rows, size_t d, float* y) const {
  if (info_.norm_kind == NormKind::kRmsNorm) k_.rms_norm(x, rows, d, norm.gamma, info_.layer_norm_eps, y);
  else k_.layer_norm(x, nullptr, rows, d, norm.gamma, norm.beta, info_.layer_norm_eps, y);
}

void DecoderOnly::forward(const int32_t* tokens, size_t n, LmState& st, Workspace& ws, float* logits,
                          bool every_row) const {
  for (size_t done = 0; done < n;) {
    const size_t rows = std::min(kPrefillChunk, n - done);
    const bool last = done + rows == n;
    float* out = every_row ? logits + done * info_.vocab_size : (last ? logits : nullptr);
    const SequenceRows sequence{&st, tokens + done, rows};
    run_rows(&sequence, 1, ws, out, every_row);
    done += rows;
  }
}

void DecoderOnly::step(const int32_t* tokens, LmState* const* states, size_t count, Workspace& ws,
                       float* logits) const {
  SequenceRows batch[kPrefillChunk];
  for (size_t done = 0; done < count;) {
    const size_t rows = std::min(kPrefillChunk, count - done);
    for (size_t i = 0; i < rows; ++i) batch[i] = {states[done + i], tokens + done + i, 1};
    run_rows(batch, rows, ws, logits + done * info_.vocab_size, false);
    done += rows;
  }
}

void DecoderOnly::run_rows(const SequenceRows* sequences, size_t count, Workspace& ws, float* logits,
                           bool every_row) const {
  const detail::Stack& dec = w_.decoder;
  const size_t half = shape_.head_dim / 2;
  size_t n = 0;  // rows in all
  for (size_t s = 0; s < count; ++s) {
    LmState& st = *sequences[s].state;
    grow_caches(st.length + sequences[s].rows, st);
    for (size_t t = 0; t < st.rope_tables.size(); ++t)
      for (size_t r = 0; r < sequences[s].rows; ++r)
        kernels::rope_angles(st.rope_tables[t], half, st.length + r, &st.rope_cos[t][r * half],
                             &st.rope_sin[t][r * half]);
    n += sequences[s].rows;
  }

  // The hidden states of every row: the first sequence's buffer holds kPrefillChunk rows.
  float* x = sequences[0].state->x.data();
  layers::Context c = context(ws);
  for (size_t s = 0, row = 0; s < count; row += sequences[s].rows, ++s)  // the embedding scale is folded in
    k_.embed(dec.embed_tokens, sequences[s].tokens, nullptr, sequences[s].rows, nullptr, x + row * d_);
  for (size_t l = 0; l < dec.layers.size(); ++l) {
    const detail::Layer& layer = dec.layers[l];
    normalize(layer.self_attn_norm, x, n, d_, ws.normed.data());
    layers::dense(c, layer.self_attn.q, ws.normed.data(), n, ws.q.data());
    layers::dense(c, layer.self_attn.k, ws.normed.data(), n, ws.k.data());
    layers::dense(c, layer.self_attn.v, ws.normed.data(), n, ws.v.data());
    if (layer.q_norm.present()) {  // per head, before RoPE; q's gamma carries the attention scale
      normalize(layer.q_norm, ws.q.data(), n * shape_.heads, shape_.head_dim, ws.q.data());
      normalize(layer.k_norm, ws.k.data(), n * shape_.kv_heads, shape_.head_dim, ws.k.data());
    }
    for (size_t s = 0, row = 0; s < count; row += sequences[s].rows, ++s)
      attend_sequence(layer, l, *sequences[s].state, sequences[s].rows, row, ws, c);
    layers::dense(c, layer.self_attn.o, ws.context.data(), n, ws.out.data());
    if (layer.post_attn_norm.present()) normalize(layer.post_attn_norm, ws.out.data(), n, d_, ws.out.data());
    k_.add(ws.out.data(), x, n * d_);

    normalize(layer.ffn_norm, x, n, d_, ws.normed.data());
    layers::feed_forward(c, layer, info_.activation, ws.normed.data(), n, ws.out.data());
    if (layer.post_ffn_norm.present()) normalize(layer.post_ffn_norm, ws.out.data(), n, d_, ws.out.data());
    k_.add(ws.out.data(), x, n * d_);
  }
  for (size_t s = 0; s < count; ++s) sequences[s].state->length += sequences[s].rows;
  if (logits == nullptr) return;
  // Only the rows whose logits are wanted go through the final norm and the projection.
  size_t rows = 0;
  if (every_row) {
    normalize(dec.final_norm, x, n, d_, ws.normed.data());
    rows = n;
  } else {
    for (size_t s = 0, row = 0; s < count; ++s, ++rows) {
      row += sequences[s].rows;
      normalize(dec.final_norm, x + (row - 1) * d_, 1, d_, ws.normed.data() + rows * d_);
    }
  }
  layers::matmul(c, w_.output_proj, nullptr, ws.normed.data(), rows, logits);
  if (info_.final_logit_softcap > 0) {  // 1 / cap is folded into the projection's input
    const float cap = info_.final_logit_softcap;
    for (size_t i = 0; i < rows * info_.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i]);
  }
}

void DecoderOnly::attend_sequence(const detail::Layer& layer, size_t l, LmState& st, size_t n, size_t row,
                                  Workspace& ws, layers::Context& c) const {
  const size_t first = st.length, q_width = shape_.q_width(), kv_width = shape_.kv_width();
  const size_t row_bytes = cache_row_bytes(st.cache_type, shape_.kv_heads, shape_.head_dim);
  float* q = ws.q.data() + row * q_width;
  float* k = ws.k.data() + row * kv_width;
  float* v = ws.v.data() + row * kv_width;
  if (layer.rope_inv_freq != nullptr) {
    const size_t t = std::find(st.rope_tables.begin(), st.rope_tables.end(), layer.rope_inv_freq) -
                     st.rope_tables.begin();
    k_.rope(q, n, shape_.heads, shape_.head_dim, q_width, st.rope_cos[t].data(), st.rope_sin[t].data());
    k_.rope(k, n, shape_.kv_heads, shape_.head_dim, kv_width, st.rope_cos[t].data(), st.rope_sin[t].data());
  }
  // rows of K or V (kv_width floats each) into the cache from slot `slot` on.
  auto store = [&](const float* from, size_t rows, layers::AlignedVector<uint8_t>& cache, size_t slot) {
    uint8_t* to = &cache[slot * row_bytes];
    if (st.cache_type == DType::kInt8) k_.store_int8_kv(from, rows, shape_.kv_heads, shape_.head_dim, to);
    else k_.store_as(from, rows * kv_width, st.cache_type, to);
  };
  // Store the rows' K/V, then attend: position p sees keys max(0, p - window + 1)..p.
  const size_t ring = st.ring[l], window = layer.sliding_window;
  const size_t* key_rows = nullptr;
  if (ring == 0) {
    store(k, n, st.k[l], first);
    store(v, n, st.v[l], first);
    for (size_t r = 0; r < n; ++r) {
      const size_t p = first + r, from = window != 0 && p + 1 > window ? p + 1 - window : 0;
      st.keys[r] = {from, p + 1 - from};
    }
  } else {
    for (size_t r = 0; r < n; ++r) {
      const size_t slot = (first + r) % ring;
      store(k + r * kv_width, 1, st.k[l], slot);
      store(v + r * kv_width, 1, st.v[l], slot);
    }
    st.key_rows.clear();
    for (size_t r = 0; r < n; ++r) {
      const size_t p = first + r, from = p + 1 > window ? p + 1 - window : 0;
      st.keys[r] = {st.key_rows.size(), p + 1 - from};
      for (size_t j = from; j <= p; ++j) st.key_rows.push_back(j % ring);
    }
    key_rows = st.key_rows.data();
  }
  layers::attend_rows(c, q, st.k[l].data(), st.v[l].data(), st.cache_type, st.keys.data(), n, shape_,
                      ws.context.data() + row * q_width, key_rows);
}

}  // namespace petrel::models
