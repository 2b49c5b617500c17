// A Marian C++ model (as Firefox Translations ships them: model*.bin / model*.npz) seen
// through Hugging Face's tensor names and layouts, so the converter maps it as it maps
// a transformers checkpoint (tools/reference/MARIAN_NATIVE.md has the facts).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "convert/checkpoint_file.h"
#include "convert/marian_model_file.h"

namespace petrel::convert {

// Names: `Wemb` -> model.shared.weight, `encoder_Wemb` / `decoder_Wemb` ->
// model.{encoder,decoder}.embed_tokens.weight, `decoder_ff_logit_out_Wt` -> lm_head.weight,
// `decoder_ff_logit_out_b` -> final_logits_bias, `{encoder,decoder}_l{i}_...` ->
// model.{encoder,decoder}.layers.{i-1}.... (self_attn, encoder_attn, fc1, fc2, their
// norms; the SSRU's rnn_W / rnn_Wf / rnn_bf / rnn_ffn_ln_* -> ssru.weight,
// ssru_forget.weight / .bias, ssru_layer_norm.*). Marian's x.W matrices ([in, out]) read
// transposed ([out, in]); its [1, n] vectors as [n]. Items no name maps keep their own
// name (the converter then reports them as unexpected). `<W>_QuantMultA` items are the
// activation scales of <W> (1 / the multiplier), `special:model.yml` the options.
class MarianNativeCheckpoint final : public CheckpointFile {
 public:
  explicit MarianNativeCheckpoint(std::unique_ptr<MarianModelFile> file);

  const std::string& path() const override { return file_->path(); }
  std::string format() const override { return "Marian " + file_->format(); }
  std::vector<std::string> names() const override;
  const TensorInfo* find(const std::string& name) const override;
  std::vector<float> read_f32(const std::string& name) const override;
  std::optional<Int8Values> read_int8(const std::string& name) const override;
  std::optional<float> activation_scale(const std::string& name) const override;

  const MarianOptions& options() const { return file_->options(); }
  bool has_intgemm8() const { return intgemm8_; }
  bool has_activation_scales() const { return !alphas_.empty(); }

 private:
  struct Entry {
    std::string marian;  // the item's name in the file
    TensorInfo info;     // in Hugging Face's layout
    bool transposed = false;
  };
  std::unique_ptr<MarianModelFile> file_;
  std::map<std::string, Entry> entries_;      // by Hugging Face name
  std::map<std::string, std::string> alphas_;  // weight's Hugging Face name -> its _QuantMultA item
  bool intgemm8_ = false;
};

// A Marian word vocabulary (DefaultVocab) as id -> token: `.yml`/`.yaml` (`token: id`),
// `.json` (an object of token -> id) or text (one token per line, ids in line order; no
// empty lines or duplicates). Ids a map leaves out are empty tokens. Throws ConvertError.
std::vector<std::string> read_marian_word_vocabulary(const std::string& path);

// The Hugging Face name of a Marian item ("" for items that are not tensors of the
// model: special:model.yml, *_QuantMultA), and whether it reads transposed.
std::string hugging_face_name(const std::string& marian, bool* transposed);

}  // namespace petrel::convert
