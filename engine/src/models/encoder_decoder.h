// The encoder-decoder graph: embed -> encoder layers; then, per decoding step,
// embed -> decoder layers (self-attention over a KV cache, cross-attention over
// K/V computed once per sentence) -> output projection.
#pragma once

#include <cstdint>
#include <vector>

#include "format/weights.h"
#include "layers/layers.h"
#include "models/output_vocabulary.h"

namespace petrel::models {

// A batch's encoder states, packed without padding: sentence s owns rows
// [offset[s], offset[s] + length[s]) of `states` (d floats per row).
struct EncoderOutput {
  std::vector<size_t> offset, length;
  layers::AlignedVector<float> states;
  size_t rows() const { return offset.empty() ? 0 : offset.back() + length.back(); }
};

// Per-hypothesis decoder state for `rows` hypotheses of up to `max_steps` steps.
// Self-attention K/V: each step appends one cache row (a slot) per decoding row after
// the previous step's slots, and slot_of[r * max_steps + t] names the slot holding row
// r's K/V of position t. A row taking another's place (beam reordering, dropping the
// rows of finished sentences) takes its list of slots: the keys never move, so a reorder
// copies rows x steps indices, not the history's K/V, and attention reads each position
// from the slot that wrote it (kernels::attend's row list).
// The K/V caches hold elements of cache_type: f32, or f16 (half the memory, and half
// the bytes attention reads, for outputs within f16 rounding of f32's). They have room
// for `capacity` positions of every row (rows x capacity slots), and grow (by half, up to
// max_steps) when a step needs more: memory follows the outputs' real length, not the
// length limit, and once most sentences are done a straggler's steps use few slots. A
// session keeps its buffers, so once they have grown, steps allocate nothing.
struct DecoderState {
  size_t rows = 0, max_steps = 0, capacity = 0;
  size_t slots = 0;  // self-attention cache slots written so far
  DType cache_type = DType::kF32;
  std::vector<layers::KeyRange> cross_keys;              // per row: its sentence's encoder rows
  std::vector<layers::KeyRange> reorder_keys;            // cross_keys' spare, for reorder
  std::vector<layers::AlignedVector<uint8_t>> cross_k, cross_v;  // per layer [encoder rows, d]
  std::vector<layers::AlignedVector<uint8_t>> self_k, self_v;    // per self-attention layer [rows * capacity slots, d]
  std::vector<size_t> slot_of, reorder_slots;                    // [rows, max_steps]; slot_of's spare, for reorder
  std::vector<layers::AlignedVector<float>> ssru_cells;          // per SSRU layer [rows, d]; empty otherwise
  layers::AlignedVector<float> ssru_reorder;                     // ssru_cells' spare, for reorder
  std::vector<layers::KeyRange> self_keys;               // per row: its positions in slot_of, rebuilt each step
  layers::AlignedVector<float> x;                        // [rows, d]
  std::vector<int32_t> positions;                        // [rows]
  // Word alignments, when alignment_layer is a decoder layer (start_decoding clears it):
  // each step writes row r's probabilities of head alignment_head of that layer's
  // cross-attention over its sentence's encoder rows to alignment_out + r x
  // alignment_width (the caller's buffer, set before each step; width >= the longest).
  size_t alignment_layer = SIZE_MAX, alignment_head = 0, alignment_width = 0;
  float* alignment_out = nullptr;
};

// What the encoder reads of an input. transformers' generate() masks every pad token of
// an input (attention_mask = ids != pad_token_id) unless pad is also EOS; a masked key is
// never attended, in the encoder or by the decoder's cross-attention, so leaving the
// token out is the same computation. The tokens kept keep the positions transformers
// gives them: their index in the input (Marian, mBART: arange over the whole input), or
// their count among the tokens kept (M2M100 / NLLB: create_position_ids_from_input_ids,
// fairseq's sinusoid read from row pad + 1 on).
class SourceReader {
 public:
  explicit SourceReader(const ModelInfo& info);
  bool masked(int32_t id) const { return masks_pads_ && id == pad_id_; }
  size_t tokens_read(const std::vector<int32_t>& ids) const;
  // The positions `ids` occupies, which must be at most max_positions: one per token,
  // or one per token read when positions skip pads.
  size_t positions(const std::vector<int32_t>& ids) const {
    return positions_skip_pads_ ? tokens_read(ids) : ids.size();
  }
  // Appends the tokens read and their positions.
  void read(const std::vector<int32_t>& ids, std::vector<int32_t>& tokens, std::vector<int32_t>& positions) const;

 private:
  int32_t pad_id_;
  bool masks_pads_, positions_skip_pads_;
};

class EncoderDecoder {
 public:
  EncoderDecoder(const detail::ModelWeights& weights, const kernels::KernelTable& kernels, threads::ThreadPool& pool);

  // Ids are checked by the caller (in vocabulary, within max_positions, at least one
  // token read). Sentence s of `out` holds the rows of the tokens SourceReader reads.
  void encode(const std::vector<std::vector<int32_t>>& batch, EncoderOutput& out, layers::Workspace& ws) const;

  // Sizes `state` for rows hypotheses (row r decodes sentence sentence_of_row[r]) with
  // caches of cache_type (f32 or f16) and computes each decoder layer's
  // cross-attention K/V once.
  // initial_capacity: positions the caches start with (0: a little more than the longest input).
  void start_decoding(const EncoderOutput& enc, const std::vector<size_t>& sentence_of_row, size_t max_steps,
                      DType cache_type, DecoderState& state, layers::Workspace& ws, size_t initial_capacity = 0) const;

  // Runs one position for the first `rows` rows: tokens[r] at position `step`.
  // Writes logits [rows, output.size()]. Allocation-free.
  void decode_step(const int32_t* tokens, size_t rows, size_t step, DecoderState& state, layers::Workspace& ws,
                   const OutputVocabulary& output, float* logits) const;

  // Speculative decoding's verification: positions first..first+n-1 of ONE hypothesis
  // (tokens[i] at position first + i), each seeing the positions before it and itself, as
  // n steps of decode_step would compute them, in one pass over the weights. The state
  // must have been started with at least n rows, all of the hypothesis' sentence; its
  // caches are row 0's, whose slots are its positions, so what they held from `first` on
  // (a rejected draft) is overwritten. SSRU layers: row i's cell becomes the state after
  // position first + i, starting from the cell of row `cell_row` (the row that held the
  // state after position first - 1: 0 after a plain step). Writes logits [n, output.size()].
  void decode_positions(const int32_t* tokens, size_t n, size_t first, size_t cell_row, DecoderState& state,
                        layers::Workspace& ws, const OutputVocabulary& output, float* logits) const;

  // Row r (r < rows) takes the caches of row parent[r] (positions 0..step): beam
  // reordering, and dropping the rows of finished sentences. Moves slot lists, not K/V.
  void reorder(const size_t* parent, size_t rows, size_t step, DecoderState& state) const;

  const detail::ModelWeights& weights() const { return w_; }
  const kernels::KernelTable& kernels() const { return k_; }

 private:
  // The decoder over `rows` query rows whose positions, slots and keys the caller set
  // (st.positions, st.slot_of, st.self_keys; the new K/V go to slots st.slots..): the
  // first `start_rows` rows take Marian's zero start embedding; SSRU cells per row
  // (cell_row SIZE_MAX) or as one hypothesis' positions from cell_row's.
  void run_decoder(const int32_t* tokens, size_t rows, size_t start_rows, size_t cell_row, DecoderState& state,
                   layers::Workspace& ws, const OutputVocabulary& output, float* logits) const;
  // Gives the self-attention caches room for one more slot for each of `rows` rows.
  void grow_caches(size_t rows, DecoderState& state) const;
  void run_encoder_layer(layers::Context& c, const detail::Layer& layer, float* x, size_t rows,
                         const layers::KeyRange* keys) const;
  layers::Context context(layers::Workspace& ws) const { return {k_, pool_, ws}; }

  const detail::ModelWeights& w_;
  const kernels::KernelTable& k_;
  threads::ThreadPool& pool_;
  const ModelInfo& info_;
  size_t d_, heads_;
};

}  // namespace petrel::models
