// The decoder-only graph (Gemma 3, Llama, Qwen): embed -> pre-norm layers of
// grouped-query self-attention with rotary positions over a KV cache (full, or a
// sliding window) and a (gated) feed-forward -> final norm -> output projection.
// A prompt runs as matrix products over its tokens (prefill), each generated token as
// vector products (a step); both are forward() over the tokens after the cache's.
#pragma once

#include <cstdint>
#include <vector>

#include "format/weights.h"
#include "layers/layers.h"

namespace petrel::models {

// One sequence's KV caches. A full-attention layer's cache holds every position (slot
// p: position p), growing by half as the sequence does, up to the session's limit; a
// sliding-window layer's is a ring of window + kPrefillChunk slots (position p in slot
// p mod size), so it never grows past the window: a chunk's queries still find the
// window behind each of them.
struct LmState {
  size_t length = 0;         // positions in the caches
  size_t max_positions = 0;  // the session's limit
  DType cache_type = DType::kF32;
  std::vector<layers::AlignedVector<uint8_t>> k, v;  // per layer [slots][cache_row_bytes]
  std::vector<size_t> slots;                         // per layer: slots allocated
  std::vector<size_t> ring;                          // per layer: ring size (0: a full cache)
  // Per layer, the first position a rewind left its ring holding: after a rewind, the
  // slots of the positions given up hold those, not the earlier positions a fresh run
  // would have left there (0: nothing given up).
  std::vector<size_t> ring_from;
  // Per forward: keys per row, the ring slots they list, RoPE's cos/sin per row for each
  // distinct frequency table, the hidden states.
  std::vector<layers::KeyRange> keys;
  std::vector<size_t> key_rows;
  std::vector<const float*> rope_tables;
  std::vector<std::vector<float>> rope_cos, rope_sin;
  layers::AlignedVector<float> x;
};

// The bytes of one cache slot (one position's keys, or its values) in a cache of `type`:
// kv_heads x head_dim elements of f32 or f16; for int8, those values (padded to 4 bytes)
// followed by one f32 scale per KV head (max |value| / 127 of that head's row).
inline size_t cache_row_bytes(DType type, size_t kv_heads, size_t head_dim) {
  if (type == DType::kInt8) return kernels::int8_kv_row_bytes(kv_heads, head_dim);
  return kv_heads * head_dim * detail::dtype_size(type);
}

class DecoderOnly {
 public:
  // Rows a forward runs at most at once: longer prompts run in chunks of this many.
  static constexpr size_t kPrefillChunk = 128;

  DecoderOnly(const detail::ModelWeights& weights, const kernels::KernelTable& kernels, threads::ThreadPool& pool);

  // Empties `state` for a sequence of at most max_positions positions (<= the model's)
  // with caches of cache_type (f32, f16 or int8).
  void start(size_t max_positions, DType cache_type, LmState& state) const;

  // Drops the positions from `length` on, so a conversation re-reads only what changed.
  // False (state unchanged) when `length` is beyond the caches or a sliding-window ring
  // no longer holds keys the window behind `length` needs (overwritten by later
  // positions, or given up by an earlier rewind): then start() afresh.
  bool rewind(size_t length, LmState& state) const;

  // Per layer, the first position `state`'s rings hold (0 for a full cache): what
  // rewinds left, and what later positions overwrote (detail::KvSnapshot::from).
  std::vector<size_t> held_from(const LmState& state) const;
  // Whether caches holding each layer's positions from `from[l]` on hold the window a
  // query at `length` reads behind it.
  bool holds_window(const std::vector<size_t>& from, size_t length) const;

  // Sizes `ws` for forward() (once per session).
  void reserve(layers::Workspace& ws) const;

  // Runs tokens[0, n) at positions state.length.. (which must stay within
  // max_positions; ids in the vocabulary: the caller checks), appending them to the
  // caches. Writes the logits of the last token [vocab] to `logits`, or of every token
  // [n, vocab] when every_row. Allocation-free once the caches have grown.
  void forward(const int32_t* tokens, size_t n, LmState& state, layers::Workspace& ws, float* logits,
               bool every_row = false) const;

  // One token for each of `count` sequences (tokens[i] at states[i]'s next position, as
  // forward() checks it), run together: each layer's products read the weights once for
  // all of them, attention reads each sequence's own caches. Writes each sequence's
  // logits [count, vocab]. A sequence's logits are those forward() gives it alone
  // (the products compute each row as they do one row: test_decoder_only checks it).
  void step(const int32_t* tokens, LmState* const* states, size_t count, layers::Workspace& ws, float* logits) const;

  size_t vocab_size() const { return info_.vocab_size; }

 private:
  // A sequence's rows in a run: `rows` tokens at its state's next positions.
  struct SequenceRows {
    LmState* state;
    const int32_t* tokens;
    size_t rows;
  };
  // Runs the sequences' rows (kPrefillChunk at most in all) as one batch of rows. Logits:
  // of every row when every_row, else of each sequence's last row (in order); none for null.
  void run_rows(const SequenceRows* sequences, size_t count, layers::Workspace& ws, float* logits,
                bool every_row) const;
  // Layer l's self-attention for a sequence's n rows, which begin at `row` of the run's
  // q/k/v (RoPE, the KV cache stored, attention into ws.context's rows).
  void attend_sequence(const detail::Layer& layer, size_t l, LmState& st, size_t n, size_t row,
                       layers::Workspace& ws, layers::Context& c) const;
  void grow_caches(size_t positions, LmState& st) const;
  void normalize(const detail::Norm& norm, const float* x, size_t rows, size_t d, float* y) const;
  layers::Context context(layers::Workspace& ws) const { return {k_, pool_, ws}; }

  const detail::ModelWeights& w_;
  const kernels::KernelTable& k_;
  threads::ThreadPool& pool_;
  const ModelInfo& info_;
  layers::HeadShape shape_;
  size_t d_;
};

}  // namespace petrel::models
