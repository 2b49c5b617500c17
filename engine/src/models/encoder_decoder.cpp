#include "models/encoder_decoder.h"

#include <algorithm>

namespace petrel::models {

using layers::KeyRange;
using layers::Workspace;

EncoderDecoder::EncoderDecoder(const detail::ModelWeights& weights, const kernels::KernelTable& kernels,
                               threads::ThreadPool& pool)
    : w_(weights), k_(kernels), pool_(pool), info_(*weights.info), d_(weights.info->d_model), heads_(weights.info->num_heads) {}

void EncoderDecoder::run_encoder_layer(layers::Context& c, const detail::Layer& layer, float* x, size_t rows,
                                       const KeyRange* keys) const {
  const float eps = info_.layer_norm_eps;
  Workspace& ws = c.ws;
  layers::residual_block(c, info_.norm, layer.self_attn_norm, eps, x, rows, d_, [&](const float* in, float* out) {
    layers::dense(c, layer.self_attn.q, in, rows, ws.q.data());
    layers::dense(c, layer.self_attn.k, in, rows, ws.k.data());
    layers::dense(c, layer.self_attn.v, in, rows, ws.v.data());
    layers::attend_rows(c, ws.q.data(), ws.k.data(), ws.v.data(), DType::kF32, keys, rows, layers::HeadShape::multi_head(d_, heads_),
                        ws.context.data());
    layers::dense(c, layer.self_attn.o, ws.context.data(), rows, out);
  });
  layers::residual_block(c, info_.norm, layer.ffn_norm, eps, x, rows, d_, [&](const float* in, float* out) {
    layers::feed_forward(c, layer, info_.activation, in, rows, out);
  });
}

SourceReader::SourceReader(const ModelInfo& info)
    : pad_id_(info.pad_id),
      masks_pads_(info.pad_id >= 0 && info.pad_id != info.eos_id),
      positions_skip_pads_(info.encoder_positions.kind == PositionKind::kSinusoidalConcatenated &&
                           info.encoder_positions.frequency == FrequencyConvention::kMarianCpp &&
                           int64_t{info.encoder_positions.first_index} == int64_t{info.pad_id} + 1) {}

size_t SourceReader::tokens_read(const std::vector<int32_t>& ids) const {
  return static_cast<size_t>(std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return !masked(id); }));
}

void SourceReader::read(const std::vector<int32_t>& ids, std::vector<int32_t>& tokens,
                        std::vector<int32_t>& positions) const {
  int32_t kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (masked(ids[i])) continue;
    tokens.push_back(ids[i]);
    positions.push_back(positions_skip_pads_ ? kept : static_cast<int32_t>(i));
    ++kept;
  }
}

void EncoderDecoder::encode(const std::vector<std::vector<int32_t>>& batch, EncoderOutput& out, Workspace& ws) const {
  out.offset.clear();
  out.length.clear();
  std::vector<int32_t> ids, positions;
  const SourceReader reader(info_);
  size_t longest = 0;
  for (const auto& sentence : batch) {
    out.offset.push_back(ids.size());
    reader.read(sentence, ids, positions);
    out.length.push_back(ids.size() - out.offset.back());
    longest = std::max(longest, out.length.back());
  }
  const size_t rows = ids.size();
  ws.reserve(rows, d_, info_.ffn_dim, longest, pool_.size());
  out.states.resize(rows * d_);
  layers::Context c = context(ws);

  // Packed rows: each sentence attends only its own tokens, so no padding mask.
  std::vector<KeyRange> keys;
  for (size_t s = 0; s < batch.size(); ++s)
    keys.insert(keys.end(), out.length[s], KeyRange{out.offset[s], out.length[s]});
  const auto& enc = w_.encoder;
  k_.embed(enc.embed_tokens, ids.data(), positions.data(), rows, enc.position_table, out.states.data());
  if (enc.embed_norm.present())
    k_.layer_norm(out.states.data(), nullptr, rows, d_, enc.embed_norm.gamma, enc.embed_norm.beta,
                  info_.layer_norm_eps, out.states.data());
  for (const auto& layer : enc.layers) run_encoder_layer(c, layer, out.states.data(), rows, keys.data());
  if (enc.final_norm.present())
    k_.layer_norm(out.states.data(), nullptr, rows, d_, enc.final_norm.gamma, enc.final_norm.beta,
                        info_.layer_norm_eps, out.states.data());
}

void EncoderDecoder::start_decoding(const EncoderOutput& enc, const std::vector<size_t>& sentence_of_row,
                                    size_t max_steps, DType cache_type, DecoderState& st, Workspace& ws,
                                    size_t initial_capacity) const {
  const size_t rows = sentence_of_row.size(), layers = w_.decoder.layers.size();
  const size_t enc_rows = enc.rows(), esize = detail::dtype_size(cache_type);
  size_t longest = 0;
  for (size_t len : enc.length) longest = std::max(longest, len);
  ws.reserve(std::max(rows, enc_rows), d_, info_.ffn_dim, std::max(longest, max_steps), pool_.size());
  layers::Context c = context(ws);

  st.rows = rows;
  st.max_steps = max_steps;
  st.alignment_layer = SIZE_MAX;
  st.alignment_out = nullptr;
  // A first guess at the output's length (about the input's); grown when exceeded.
  st.capacity = std::min(max_steps, initial_capacity ? initial_capacity : detail::round_up(longest + 8, 16));
  st.cache_type = cache_type;
  st.cross_keys.resize(rows);
  for (size_t r = 0; r < rows; ++r) st.cross_keys[r] = {enc.offset[sentence_of_row[r]], enc.length[sentence_of_row[r]]};
  st.reorder_keys.resize(rows);
  st.slots = 0;
  st.slot_of.resize(rows * max_steps);
  st.reorder_slots.resize(rows * max_steps);
  st.self_keys.resize(rows);
  st.x.resize(rows * d_);
  st.positions.resize(rows);
  st.cross_k.resize(layers);
  st.cross_v.resize(layers);
  st.self_k.resize(layers);
  st.self_v.resize(layers);
  st.ssru_cells.resize(layers);
  for (size_t l = 0; l < layers; ++l) {
    const auto& attn = w_.decoder.layers[l].cross_attn;
    st.cross_k[l].resize(enc_rows * d_ * esize);
    st.cross_v[l].resize(enc_rows * d_ * esize);
    layers::dense(c, attn.k, enc.states.data(), enc_rows, ws.k.data());
    layers::dense(c, attn.v, enc.states.data(), enc_rows, ws.v.data());
    k_.store_as(ws.k.data(), enc_rows * d_, cache_type, st.cross_k[l].data());
    k_.store_as(ws.v.data(), enc_rows * d_, cache_type, st.cross_v[l].data());
    if (w_.decoder.layers[l].ssru()) {  // a recurrent state instead of a cache: c_0 = 0
      st.ssru_cells[l].assign(rows * d_, 0.0f);
      st.ssru_reorder.resize(rows * d_);
      st.self_k[l].clear();
      st.self_v[l].clear();
    } else {
      st.ssru_cells[l].clear();
      st.self_k[l].resize(rows * st.capacity * d_ * esize);
      st.self_v[l].resize(rows * st.capacity * d_ * esize);
    }
  }
}

void EncoderDecoder::decode_step(const int32_t* tokens, size_t rows, size_t step, DecoderState& st, Workspace& ws,
                                 const OutputVocabulary& output, float* logits) const {
  if (st.slots + rows > st.rows * st.capacity) grow_caches(rows, st);
  std::fill_n(st.positions.begin(), rows, static_cast<int32_t>(step));
  for (size_t r = 0; r < rows; ++r) {  // this step's slots follow the last step's
    st.slot_of[r * st.max_steps + step] = st.slots + r;
    st.self_keys[r] = {r * st.max_steps, step + 1};
  }
  run_decoder(tokens, rows, step == 0 ? rows : 0, SIZE_MAX, st, ws, output, logits);
}

void EncoderDecoder::decode_positions(const int32_t* tokens, size_t n, size_t first, size_t cell_row, DecoderState& st,
                                      Workspace& ws, const OutputVocabulary& output, float* logits) const {
  st.slots = first;  // row 0's slots are its positions: what the caches held from `first` on is dropped
  if (st.slots + n > st.rows * st.capacity) grow_caches(n, st);
  for (size_t i = 0; i < n; ++i) {  // query row i is position first + i, seeing positions 0..first + i
    st.positions[i] = static_cast<int32_t>(first + i);
    st.slot_of[first + i] = first + i;
    st.self_keys[i] = {0, first + i + 1};
  }
  run_decoder(tokens, n, first == 0 ? 1 : 0, cell_row, st, ws, output, logits);
}

void EncoderDecoder::run_decoder(const int32_t* tokens, size_t rows, size_t start_rows, size_t cell_row,
                                 DecoderState& st, Workspace& ws, const OutputVocabulary& output, float* logits) const {
  const size_t esize = detail::dtype_size(st.cache_type);
  const float eps = info_.layer_norm_eps;
  const auto& dec = w_.decoder;
  float* x = st.x.data();
  layers::Context c = context(ws);
  k_.embed(dec.embed_tokens, tokens, st.positions.data(), rows, dec.position_table, x);
  if (info_.decoder_start_zeros) {  // Marian C++: a zero embedding plus position 0 at the first step
    for (size_t r = 0; r < start_rows; ++r) {
      float* row = x + r * d_;
      if (dec.position_table != nullptr) std::copy_n(dec.position_table, d_, row);
      else std::fill_n(row, d_, 0.0f);
    }
  }
  if (dec.embed_norm.present()) k_.layer_norm(x, nullptr, rows, d_, dec.embed_norm.gamma, dec.embed_norm.beta, eps, x);

  for (size_t l = 0; l < dec.layers.size(); ++l) {
    const detail::Layer& layer = dec.layers[l];
    if (layer.ssru()) {
      layers::residual_block(c, info_.norm, layer.ssru_norm, eps, x, rows, d_, [&](const float* in, float* out) {
        layers::dense(c, layer.ssru_w, in, rows, ws.q.data());
        layers::dense(c, layer.ssru_forget, in, rows, ws.k.data());
        float* cells = st.ssru_cells[l].data();
        if (cell_row == SIZE_MAX) {  // each row its own hypothesis
          k_.ssru(ws.q.data(), ws.k.data(), rows * d_, cells, out);
          return;
        }
        // One hypothesis' positions in order: row i's cell is the state after position
        // first + i, from the one before it (cell_row's for the first).
        for (size_t i = 0; i < rows; ++i) {
          const size_t from = i == 0 ? cell_row : i - 1;
          if (from != i) std::copy_n(cells + from * d_, d_, cells + i * d_);
          k_.ssru(ws.q.data() + i * d_, ws.k.data() + i * d_, d_, cells + i * d_, out + i * d_);
        }
      });
    } else {
      layers::residual_block(c, info_.norm, layer.self_attn_norm, eps, x, rows, d_, [&](const float* in, float* out) {
      layers::dense(c, layer.self_attn.q, in, rows, ws.q.data());
      layers::dense(c, layer.self_attn.k, in, rows, ws.k.data());
      layers::dense(c, layer.self_attn.v, in, rows, ws.v.data());
      // Store the rows' K/V in their new slots, then attend to the positions each sees.
      const size_t at = st.slots * d_ * esize;
      k_.store_as(ws.k.data(), rows * d_, st.cache_type, &st.self_k[l][at]);
      k_.store_as(ws.v.data(), rows * d_, st.cache_type, &st.self_v[l][at]);
      layers::attend_rows(c, ws.q.data(), st.self_k[l].data(), st.self_v[l].data(), st.cache_type,
                          st.self_keys.data(), rows, layers::HeadShape::multi_head(d_, heads_), ws.context.data(), st.slot_of.data());
      layers::dense(c, layer.self_attn.o, ws.context.data(), rows, out);
      });
    }
    layers::residual_block(c, info_.norm, layer.cross_attn_norm, eps, x, rows, d_, [&](const float* in, float* out) {
      layers::dense(c, layer.cross_attn.q, in, rows, ws.q.data());
      if (l == st.alignment_layer && st.alignment_out != nullptr) {
        const size_t head_dim = d_ / heads_, offset = st.alignment_head * head_dim;
        for (size_t r = 0; r < rows; ++r) {
          const layers::KeyRange keys = st.cross_keys[r];
          kernels::attention_probabilities(ws.q.data() + r * d_ + offset,
                                           &st.cross_k[l][(keys.first * d_ + offset) * esize], st.cache_type, nullptr,
                                           keys.count, d_, head_dim, st.alignment_out + r * st.alignment_width);
        }
      }
      layers::attend_rows(c, ws.q.data(), st.cross_k[l].data(), st.cross_v[l].data(), st.cache_type,
                          st.cross_keys.data(), rows, layers::HeadShape::multi_head(d_, heads_), ws.context.data());
      layers::dense(c, layer.cross_attn.o, ws.context.data(), rows, out);
    });
    layers::residual_block(c, info_.norm, layer.ffn_norm, eps, x, rows, d_, [&](const float* in, float* out) {
      layers::feed_forward(c, layer, info_.activation, in, rows, out);
    });
  }
  st.slots += rows;
  if (dec.final_norm.present())
    k_.layer_norm(x, nullptr, rows, d_, dec.final_norm.gamma, dec.final_norm.beta, eps, x);
  layers::matmul(c, output.projection(), output.bias(), x, rows, logits);
}

// Slots keep their places (slot_of names them), so growing only extends each cache:
// one copy of what it holds when the session's buffer has to be reallocated, none once
// it has grown before.
void EncoderDecoder::grow_caches(size_t rows, DecoderState& st) const {
  const size_t esize = detail::dtype_size(st.cache_type);
  const size_t needed = (st.slots + rows + st.rows - 1) / st.rows;  // positions per row, in slots
  // Half as much again: outputs overshoot their inputs by a little, rarely by double.
  st.capacity = std::min(st.max_steps, detail::round_up(std::max(st.capacity + st.capacity / 2, needed), 16));
  for (auto* caches : {&st.self_k, &st.self_v})
    for (size_t l = 0; l < caches->size(); ++l)
      if (!w_.decoder.layers[l].ssru()) (*caches)[l].resize(st.rows * st.capacity * d_ * esize);
}

// Each row takes its parent's slot list (positions 0..step), gathered into the spare:
// rows x (step + 1) indices. The K/V slots themselves stay where they are: a slot is
// written once, at its step, and read by every row whose list names it.
void EncoderDecoder::reorder(const size_t* parent, size_t rows, size_t step, DecoderState& st) const {
  for (size_t r = 0; r < rows; ++r)
    std::copy_n(&st.slot_of[parent[r] * st.max_steps], step + 1, &st.reorder_slots[r * st.max_steps]);
  st.slot_of.swap(st.reorder_slots);  // both hold start_decoding's rows
  for (size_t l = 0; l < st.ssru_cells.size(); ++l) {  // a recurrent state travels with its hypothesis
    auto& cells = st.ssru_cells[l];
    if (cells.empty()) continue;
    for (size_t r = 0; r < rows; ++r) std::copy_n(&cells[parent[r] * d_], d_, &st.ssru_reorder[r * d_]);
    cells.swap(st.ssru_reorder);  // both hold start_decoding's rows
  }
  for (size_t r = 0; r < rows; ++r) st.reorder_keys[r] = st.cross_keys[parent[r]];
  st.cross_keys.swap(st.reorder_keys);
}

}  // namespace petrel::models
