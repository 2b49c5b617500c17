// The Converter (convert_encoder_decoder.h): an encoder-decoder checkpoint's tensors as
// the model file's embeddings, encoder and decoder stacks and output projection, with
// the folds, the generation defaults and the shortlist.
#include "convert/convert_encoder_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "convert/shortlist.h"
#include "core/utf8.h"
#include "format/format_version.h"

namespace petrel::convert {
namespace {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Opens one embedding table, the first present of `names`, and returns its name; the
// others, if present, must be identical (they are tied copies).
std::string open_tied(Source& src, const std::vector<std::string>& names, uint64_t rows, const CheckpointConfig& c) {
  std::vector<std::string> present;
  for (const std::string& name : names) {
    if (!src.has(name)) continue;
    src.open(name, {rows, c.d_model});
    present.push_back(name);
  }
  if (present.empty()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
    throw ConvertError(src.path() + ": missing embedding table (one of " + list + ")");
  }
  for (size_t i = 1; i < present.size(); ++i)
    if (!src.same_values(present[0], present[i], rows, c.d_model))
      throw ConvertError(src.path() + ": tensors '" + present[0] + "' and '" + present[i] +
                         "' should be tied (identical) but differ");
  return present[0];
}

}  // namespace

ConvertReport Converter::run() {
  // A table that is also the tied output projection is stored in panels: the
  // projection over the vocabulary is the hot path, one gathered row per token is not.
  const auto tied_layout = c_.tie_word_embeddings ? detail::Layout::kPanel16 : detail::Layout::kRowMajor;
  const float embed_scale = static_cast<float>(
      options_.embed_scale ? *options_.embed_scale : (c_.scale_embedding ? std::sqrt(double(c_.d_model)) : 1.0));
  const uint32_t head_dim = c_.d_model / c_.heads;
  attention_scale_ = static_cast<float>(1.0 / std::sqrt(double(head_dim)));

  // Embeddings, with sqrt(d_model) folded in (ARCHITECTURE.md, "Where each fold happens").
  // A table that is also the tied output projection takes --output's dtype (the
  // projection is 60% of a base model's bytes and its most sensitive matrix); the
  // embedding gathers read that same table.
  const bool tied = c_.tie_word_embeddings;
  const DType tied_dtype = options_.output_dtype.value_or(options_.embedding_dtype);
  const DType output_dtype = tied ? tied_dtype : options_.output_dtype.value_or(options_.linear_dtype);
  std::string enc_name, dec_name;
  int32_t enc_embed = -1, dec_embed = -1;
  // The tied table is also the output projection: its input (the output norm's) is
  // scaled by 1/embed_scale (below), and so is an activation scale of the checkpoint's.
  const std::string tied_output = tied ? "lm_head.weight" : "";
  const float tied_input_scale = tied ? 1.0f / embed_scale : 1.0f;
  std::vector<std::string> embed_targets;
  if (c_.share_embeddings) {
    std::vector<std::string> names = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                      "model.decoder.embed_tokens.weight"};
    if (tied) names.push_back("lm_head.weight");
    enc_name = open_tied(src_, names, c_.vocab, c_);
    enc_embed = dec_embed = matrix("embed_tokens", src_.rows(enc_name), c_.vocab, c_.d_model,
                                   tied ? tied_dtype : options_.embedding_dtype, embed_scale, tied_layout, enc_name,
                                   tied_output, tied_input_scale);
    embed_targets = {"embed_tokens"};
  } else {
    enc_name = open_tied(src_, {"model.encoder.embed_tokens.weight"}, c_.vocab, c_);
    enc_embed = matrix("encoder.embed_tokens", src_.rows(enc_name), c_.vocab, c_.d_model, options_.embedding_dtype, embed_scale,
                       detail::Layout::kRowMajor, enc_name);
    // An older export's leftover model.shared only has the decoder's shape with one vocabulary.
    std::vector<std::string> names = {"model.decoder.embed_tokens.weight"};
    if (c_.target_vocab == c_.vocab) names.push_back("model.shared.weight");
    if (tied) names.push_back("lm_head.weight");
    dec_name = open_tied(src_, names, c_.target_vocab, c_);
    dec_embed = matrix("decoder.embed_tokens", src_.rows(dec_name), c_.target_vocab, c_.d_model,
                       tied ? tied_dtype : options_.embedding_dtype, embed_scale, tied_layout, dec_name,
                       tied_output, tied_input_scale);
    embed_targets = {"encoder.embed_tokens", "decoder.embed_tokens"};
  }
  if (embed_scale != 1.0f)
    folds_.push_back({"embed_scale", embed_scale, embed_targets,
                      options_.embed_scale ? "explicit --embed-scale" : "sqrt(d_model): config scale_embedding"});

  // The norm that produces the tied projection's input carries 1/embed_scale.
  if (tied && embed_scale != 1.0f) {
    output_norm_ = c_.normalize_before ? "model.decoder.layer_norm"
                                       : "model.decoder.layers." + std::to_string(c_.decoder_layers - 1) +
                                             ".final_layer_norm";
    output_unscale_ = 1.0f / embed_scale;
  }

  const bool marian = c_.family == Family::kMarian && !c_.marian_native;
  auto positions_of = [&](const std::string& role) {
    if (c_.marian_native) {  // Marian C++ computes them (layers/embedding.cpp): never stored
      PositionDecision d;
      d.info = {PositionKind::kSinusoidalConcatenated, FrequencyConvention::kMarianCpp, 0};
      report_.notes.push_back(role + " positions: " + to_string(d.info.kind) + " (" + to_string(d.info.frequency) +
                              " frequencies, first index 0), as Marian C++ computes them");
      return d;
    }
    if (marian)
      return decide_positions(src_, "model." + role + ".embed_positions.weight", c_, options_.positions, role,
                              &report_.notes);
    return family_positions(src_, role, c_, &report_.notes);
  };
  auto enc_pos = positions_of("encoder");
  auto dec_pos = positions_of("decoder");
  auto encoder = stack("encoder", enc_embed, enc_pos, false);
  auto decoder = stack("decoder", dec_embed, dec_pos, true);

  int32_t output_proj = -1;
  if (!tied) {
    src_.open("lm_head.weight", {c_.target_vocab, c_.d_model});
    output_proj = matrix("output_proj", src_.rows("lm_head.weight"), c_.target_vocab, c_.d_model, output_dtype, 1.0f, detail::Layout::kPanel16,
                         "lm_head.weight");
  }
  report_.notes.push_back(std::string("weights: linear layers ") + to_string(options_.linear_dtype) +
                          ", output projection " + to_string(output_dtype) +
                          (tied ? " (tied: the embedding table" + std::string(c_.share_embeddings ? "s" : "") +
                                      " read the same " + to_string(output_dtype) + " table)"
                                : "") +
                          (!tied || !c_.share_embeddings
                               ? std::string(", embeddings ") + to_string(options_.embedding_dtype)
                               : std::string()));
  if (activation_scales_ > 0)
    report_.notes.push_back(std::to_string(activation_scales_) +
                            " int8 matrices carry the checkpoint's activation scales (used with petrel-run "
                            "--activation-scales file; by default activations are quantized per row at run time)");
  if (int4_used_)
    report_.notes.push_back(
        "int4: symmetric 4-bit values in [-7, 7] with an f32 scale per row times a u8 scale per block of 32 "
        "columns (4.25 bits per weight + 32 per row; bench/README.md, \"4-bit weights\")");
  int32_t logits_bias = -1;
  if (c_.family != Family::kM2M100 && src_.has("final_logits_bias")) {  // M2M100 has none
    auto b = src_.read("final_logits_bias", {1, c_.target_vocab});
    logits_bias = vector_tensor("final_logits_bias", b);
  }
  if (!output_norm_.empty())
    folds_.push_back({"output_unscale", output_unscale_, {output_norm_target_ + ".gamma", output_norm_target_ + ".beta"},
                      "1/embed_scale for the tied output projection, folded into the LayerNorm that feeds it"});
  folds_.push_back({"attention_scale", attention_scale_, q_targets_, "1/sqrt(head_dim) folded into W_q and b_q"});
  src_.check_all_consumed(c_.model_type);

  if (!c_.legacy_keys.empty()) {
    std::string keys;
    for (const auto& k : c_.legacy_keys) keys += (keys.empty() ? "" : ", ") + k;
    report_.notes.push_back("config.json keys transformers ignores, consistent with Marian: " + keys);
  }
  if (options_.norm)
    report_.notes.push_back(std::string("layer norms: ") + to_string(*options_.norm) + "-LN (--norm)");
  auto tokenizer = read_vocab();
  auto shortlist = read_shortlist();
  auto folds_vec = fold_table();
  auto producer = fbb_.CreateString(kProducer);
  // The checkpoint directory's name only: a machine's paths do not belong in a
  // portable file, and the same checkpoint converts to the same bytes anywhere.
  std::string dir = options_.checkpoint_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  // A name is any bytes; the file's strings are UTF-8 (the loader refuses others).
  auto source = fbb_.CreateString(detail::to_valid_utf8(dir.substr(dir.find_last_of('/') + 1)));
  auto bad_words = fbb_.CreateVector(c_.bad_words);
  auto tensors = writer_.tensor_table();
  auto generation = fb::CreateGenerationDefaults(
      fbb_, c_.num_beams, c_.max_length, static_cast<float>(c_.length_penalty),
      c_.early_stopping ? fb::BeamStop::FirstK : fb::BeamStop::Heuristic, c_.forced_eos, c_.forced_bos,
      static_cast<float>(c_.max_length_factor));
  report_.notes.push_back("decoding defaults from " + c_.generation_source.substr(c_.generation_source.rfind('/') + 1) +
                          ": beam " + std::to_string(c_.num_beams) + ", " +
                          (c_.early_stopping ? "first-k" : "heuristic") + " beam stop, length penalty " +
                          format_number(c_.length_penalty) + ", max length " +
                          (c_.max_length ? std::to_string(c_.max_length) : std::string("none")) + ", forced EOS " +
                          (c_.forced_eos >= 0 ? std::to_string(c_.forced_eos) : std::string("none")) +
                          ", forced BOS (target language) " +
                          (c_.forced_bos >= 0 ? std::to_string(c_.forced_bos) : std::string("none")));
  for (const std::string& n : c_.generation_notes)
    report_.notes.push_back("not applied by Petrel: " + n + " (" + c_.generation_source + ")");

  fb::ModelBuilder mb(fbb_);
  mb.add_format_major(detail::kFormatMajor);
  mb.add_format_minor(detail::kFormatMinor);
  mb.add_producer(producer);
  mb.add_source(source);
  mb.add_architecture(fb::Architecture::EncoderDecoder);
  mb.add_d_model(c_.d_model);
  mb.add_num_heads(c_.heads);
  mb.add_ffn_dim(c_.ffn);
  mb.add_vocab_size(c_.vocab);
  if (c_.target_vocab != c_.vocab) mb.add_target_vocab_size(c_.target_vocab);
  mb.add_max_positions(c_.max_positions);
  mb.add_norm(c_.normalize_before ? fb::NormPlacement::Pre : fb::NormPlacement::Post);
  mb.add_activation(static_cast<fb::Activation>(c_.activation));
  mb.add_layer_norm_eps(c_.layer_norm_eps);
  mb.add_pad_id(c_.pad);
  mb.add_eos_id(c_.eos);
  mb.add_decoder_start_id(c_.decoder_start);
  mb.add_bad_word_ids(bad_words);
  mb.add_encoder(encoder);
  mb.add_decoder(decoder);
  mb.add_output_proj(output_proj);
  mb.add_final_logits_bias(logits_bias);
  mb.add_folds(folds_vec);
  if (!tokenizer.IsNull()) mb.add_tokenizer(tokenizer);
  if (!shortlist.IsNull()) mb.add_shortlist(shortlist);
  mb.add_generation(generation);
  if (c_.marian_native) mb.add_decoder_start(fb::DecoderStart::Zeros);
  if (c_.alignment_layer >= 0) mb.add_alignment_layer(c_.alignment_layer);
  mb.add_tensors(tensors);
  mb.add_data_size(writer_.data_size());
  mb.add_data_crc32(writer_.data_crc32());
  report_.file_size = writer_.write(mb.Finish());
  report_.folds = folds_;
  return report_;
}

flatbuffers::Offset<fb::Linear> Converter::linear(const std::string& hf, const std::string& name, uint64_t out,
                                                  uint64_t in, float scale, bool bias) {
  // An int8 checkpoint's values are taken as they are; then `w` is not needed.
  const bool stored_int8 = options_.linear_dtype == DType::kInt8 && src_.stored_int8(hf + ".weight");
  if (!stored_int8) src_.open(hf + ".weight", {out, in});
  std::vector<float> b = bias ? src_.read(hf + ".bias", {out}) : std::vector<float>();
  for (float& v : b) v *= scale;
  const float row_scale = stored_int8 ? scale : 1.0f;
  // (stored int8: matrix() takes the stored values and never calls the reader)
  RowReader w = stored_int8 ? RowReader() : src_.rows(hf + ".weight", scale);
  int32_t wi = matrix(name + ".weight", w, out, in, options_.linear_dtype, row_scale, detail::Layout::kPanel16,
                      hf + ".weight");
  int32_t bi = bias ? vector_tensor(name + ".bias", b) : -1;
  return fb::CreateLinear(fbb_, wi, bi);
}

flatbuffers::Offset<fb::Norm> Converter::norm(const std::string& hf, const std::string& name) {
  auto g = src_.read(hf + ".weight", {c_.d_model});
  auto b = src_.read(hf + ".bias", {c_.d_model});
  if (hf == output_norm_) {
    for (float& v : g) v *= output_unscale_;
    for (float& v : b) v *= output_unscale_;
    output_norm_target_ = name;
  }
  int32_t gi = vector_tensor(name + ".gamma", g);
  int32_t bi = vector_tensor(name + ".beta", b);
  return fb::CreateNorm(fbb_, gi, bi);
}

flatbuffers::Offset<fb::Attention> Converter::attention(const std::string& hf, const std::string& name) {
  const uint64_t d = c_.d_model;
  auto q = linear(hf + ".q_proj", name + ".q", d, d, attention_scale_);
  q_targets_.push_back(name + ".q.weight");
  q_targets_.push_back(name + ".q.bias");
  auto k = linear(hf + ".k_proj", name + ".k", d, d);
  auto v = linear(hf + ".v_proj", name + ".v", d, d);
  auto o = linear(hf + ".out_proj", name + ".o", d, d);
  return fb::CreateAttention(fbb_, q, k, v, o);
}

flatbuffers::Offset<fb::Stack> Converter::stack(const std::string& role, int32_t embed, const PositionDecision& pos,
                                                bool decoder) {
  const uint32_t layers = decoder ? c_.decoder_layers : c_.encoder_layers;
  int32_t table = -1;
  if (pos.info.kind == PositionKind::kLearned)  // first_index + max_positions rows
    table = matrix(role + ".positions", rows_of(pos.learned, c_.d_model), pos.learned.size() / c_.d_model, c_.d_model,
                   DType::kF32);
  auto positions = fb::CreatePositions(fbb_, static_cast<fb::PositionKind>(pos.info.kind),
                                       static_cast<fb::FrequencyConvention>(pos.info.frequency),
                                       pos.info.first_index, table);
  std::vector<flatbuffers::Offset<fb::Layer>> out;
  for (uint32_t i = 0; i < layers; ++i) {
    std::string hf = "model." + role + ".layers." + std::to_string(i);
    std::string name = role + ".layers." + std::to_string(i);
    const uint64_t d = c_.d_model;
    flatbuffers::Offset<fb::Attention> self_attn;
    flatbuffers::Offset<fb::Norm> self_norm, ssru_norm;
    flatbuffers::Offset<fb::Ssru> ssru;
    if (decoder && c_.ssru_decoder) {  // Marian's DecoderLayerRNN with an SSRU cell
      auto w = linear(hf + ".ssru", name + ".ssru.w", d, d, 1.0f, /*bias=*/false);
      auto forget = linear(hf + ".ssru_forget", name + ".ssru.forget", d, d);
      ssru = fb::CreateSsru(fbb_, w, forget);
      ssru_norm = norm(hf + ".ssru_layer_norm", name + ".ssru_norm");
    } else {
      self_attn = attention(hf + ".self_attn", name + ".self_attn");
      self_norm = norm(hf + ".self_attn_layer_norm", name + ".self_attn_norm");
    }
    flatbuffers::Offset<fb::Attention> cross_attn;
    flatbuffers::Offset<fb::Norm> cross_norm;
    if (decoder) {
      cross_attn = attention(hf + ".encoder_attn", name + ".cross_attn");
      cross_norm = norm(hf + ".encoder_attn_layer_norm", name + ".cross_attn_norm");
    }
    auto fc1 = linear(hf + ".fc1", name + ".fc1", c_.ffn, c_.d_model);
    auto fc2 = linear(hf + ".fc2", name + ".fc2", c_.d_model, c_.ffn);
    auto ffn_norm = norm(hf + ".final_layer_norm", name + ".ffn_norm");
    out.push_back(fb::CreateLayer(fbb_, self_attn, self_norm, cross_attn, cross_norm, fc1, fc2, ffn_norm, ssru, ssru_norm));
  }
  flatbuffers::Offset<fb::Norm> final_norm, embed_norm;
  if (c_.normalize_before) final_norm = norm("model." + role + ".layer_norm", role + ".final_norm");
  if (c_.family == Family::kMBart) embed_norm = norm("model." + role + ".layernorm_embedding", role + ".embed_norm");
  auto layers_vec = fbb_.CreateVector(out);
  return fb::CreateStack(fbb_, embed, positions, layers_vec, final_norm, embed_norm);
}

flatbuffers::Offset<fb::Shortlist> Converter::read_shortlist() {
  if (c_.marian_native && options_.shortlist_path.empty() && !c_.native.shortlist.empty()) {
    return write_shortlist(c_.native.shortlist, is_binary_shortlist(c_.native.shortlist));  // as Firefox does
  }
  const std::string& path = options_.shortlist_path;
  if (path.empty()) return 0;
  return write_shortlist(path, is_binary_shortlist(path));
}

flatbuffers::Offset<fb::Shortlist> Converter::write_shortlist(const std::string& path, bool binary) {
  if (vocab_.empty() && !binary)
    throw ConvertError(path + ": a shortlist names tokens, so the checkpoint needs a vocab.json");
  const bool separate = c_.marian_native ? c_.native.source_vocab != c_.native.target_vocab : c_.target_vocab != c_.vocab;
  if (separate && !binary)
    throw ConvertError(path + ": text shortlists of models with separate source and target vocabularies are not "
                       "supported yet");
  if (options_.shortlist_best == 0) throw ConvertError("--shortlist-best must be at least 1");
  // Marian adds each source token itself when source and target share a vocabulary.
  const bool shared_vocab = c_.marian_native ? c_.native.source_vocab == c_.native.target_vocab : c_.share_embeddings;
  ShortlistTable t =
      binary ? read_binary_shortlist(path, c_.vocab, c_.target_vocab, c_.eos, shared_vocab)
             : read_lexical_shortlist(path, vocab_, options_.shortlist_first, options_.shortlist_best, c_.eos);
  if (t.candidates.empty()) throw ConvertError(path + ": no source token has a candidate");
  report_.notes.push_back("shortlist: " + std::to_string(t.always.size()) + " tokens always, up to " +
                          std::to_string(t.best) + " per source token (" + std::to_string(t.candidates.size()) +
                          " in all) from " +
                          (binary ? "the binary shortlist " + path
                                  : std::to_string(t.lines) + " lines of " + path + " (" + std::to_string(t.skipped) +
                                        " skipped: NULL or not in the vocabulary)"));
  // Separate statements: the bytes must not depend on argument evaluation order.
  auto always = fbb_.CreateVector(t.always);
  auto offsets = fbb_.CreateVector(t.offsets);
  // 16-bit ids when every target id fits: half the bytes the loader checks and maps.
  const bool narrow = c_.target_vocab <= 65536;
  std::vector<uint16_t> narrow_ids;
  if (narrow) narrow_ids.assign(t.candidates.begin(), t.candidates.end());
  flatbuffers::Offset<flatbuffers::Vector<int32_t>> candidates;
  flatbuffers::Offset<flatbuffers::Vector<uint16_t>> candidates16;
  if (narrow) candidates16 = fbb_.CreateVector(narrow_ids);
  else candidates = fbb_.CreateVector(t.candidates);
  auto source = fbb_.CreateString(detail::to_valid_utf8(path.substr(path.find_last_of('/') + 1)));
  // A Marian model's shortlist is part of how Firefox runs it: on by default, its
  // selection padded to a multiple of 8 ids as Marian's (src/data/shortlist.cpp).
  return fb::CreateShortlist(fbb_, always, offsets, candidates, t.first, t.best, source, c_.marian_native,
                             c_.marian_native ? 8 : 0, candidates16);
}

}  // namespace petrel::convert
