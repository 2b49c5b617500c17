// The encoder-decoder graph as a search sees it (decode::StepModel): decoder steps
// over the live rows, and their reordering. One batch's decoding: the decoder state
// must have been started (EncoderDecoder::start_decoding) for its rows.
#pragma once

#include "decode/search.h"
#include "models/encoder_decoder.h"

namespace petrel::decode {

class DecoderSteps final : public StepModel {
 public:
  DecoderSteps(const models::EncoderDecoder& graph, models::DecoderState& state, layers::Workspace& ws,
               const models::OutputVocabulary& output)
      : graph_(graph), state_(state), ws_(ws), output_(output) {}
  void step(const int32_t* tokens, size_t rows, size_t step, float* logits) override {
    graph_.decode_step(tokens, rows, step, state_, ws_, output_, logits);
  }
  void select(const size_t* parent, size_t rows, size_t step) override { graph_.reorder(parent, rows, step, state_); }
  void align_into(float* rows_by_width) override { state_.alignment_out = rows_by_width; }

 private:
  const models::EncoderDecoder& graph_;
  models::DecoderState& state_;
  layers::Workspace& ws_;
  const models::OutputVocabulary& output_;
};

}  // namespace petrel::decode
