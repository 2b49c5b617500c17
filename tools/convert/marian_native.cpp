#include "convert/marian_native.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "convert/config_reader.h"
#include "core/quoted.h"
#include "core/string_hash.h"

namespace petrel::convert {
namespace {

struct Suffix {
  const char* marian;
  const char* hf;
  bool transposed;  // a Marian x.W matrix
};

// A layer's items, after "{encoder,decoder}_l{i}_" (marian-dev src/models/transformer.h:
// LayerAttention's prefix + "_W{q,k,v,o}" / "_b*" / "_Wo_ln_*", LayerFFN's "_ffn_W{1,2}" /
// "_ffn_b*" / "_ffn_ffn_ln_*", DecoderLayerRNN's "_rnn_*" with the SSRU's W, Wf, bf).
constexpr Suffix kLayerItems[] = {
    {"self_Wq", "self_attn.q_proj.weight", true},       {"self_bq", "self_attn.q_proj.bias", false},
    {"self_Wk", "self_attn.k_proj.weight", true},       {"self_bk", "self_attn.k_proj.bias", false},
    {"self_Wv", "self_attn.v_proj.weight", true},       {"self_bv", "self_attn.v_proj.bias", false},
    {"self_Wo", "self_attn.out_proj.weight", true},     {"self_bo", "self_attn.out_proj.bias", false},
    {"self_Wo_ln_scale", "self_attn_layer_norm.weight", false},
    {"self_Wo_ln_bias", "self_attn_layer_norm.bias", false},
    {"context_Wq", "encoder_attn.q_proj.weight", true}, {"context_bq", "encoder_attn.q_proj.bias", false},
    {"context_Wk", "encoder_attn.k_proj.weight", true}, {"context_bk", "encoder_attn.k_proj.bias", false},
    {"context_Wv", "encoder_attn.v_proj.weight", true}, {"context_bv", "encoder_attn.v_proj.bias", false},
    {"context_Wo", "encoder_attn.out_proj.weight", true}, {"context_bo", "encoder_attn.out_proj.bias", false},
    {"context_Wo_ln_scale", "encoder_attn_layer_norm.weight", false},
    {"context_Wo_ln_bias", "encoder_attn_layer_norm.bias", false},
    {"ffn_W1", "fc1.weight", true},                     {"ffn_b1", "fc1.bias", false},
    {"ffn_W2", "fc2.weight", true},                     {"ffn_b2", "fc2.bias", false},
    {"ffn_ffn_ln_scale", "final_layer_norm.weight", false},
    {"ffn_ffn_ln_bias", "final_layer_norm.bias", false},
    {"rnn_W", "ssru.weight", true},                     {"rnn_Wf", "ssru_forget.weight", true},
    {"rnn_bf", "ssru_forget.bias", false},
    {"rnn_ffn_ln_scale", "ssru_layer_norm.weight", false},
    {"rnn_ffn_ln_bias", "ssru_layer_norm.bias", false},
};

constexpr Suffix kModelItems[] = {
    {"Wemb", "model.shared.weight", false},
    {"encoder_Wemb", "model.encoder.embed_tokens.weight", false},
    {"decoder_Wemb", "model.decoder.embed_tokens.weight", false},
    {"decoder_ff_logit_out_Wt", "lm_head.weight", false},  // "Wt": stored [V, d] already
    {"decoder_ff_logit_out_b", "final_logits_bias", false},
};

constexpr const char* kAlphaSuffix = "_QuantMultA";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> read_marian_word_vocabulary(const std::string& path) {
  const std::string text = read_text(path, "");
  if (ends_with(path, ".yml") || ends_with(path, ".yaml")) return parse_marian_yaml_vocabulary(text, path);
  std::vector<std::string> id_to_token;
  if (ends_with(path, ".json")) {
    const nlohmann::json j = parse_json(path, text);  // its nesting bounded, as every JSON input's
    if (!j.is_object() || j.empty()) throw ConvertError(path + ": expected a JSON object of token -> id");
    std::vector<bool> given;
    const size_t limit = 2 * j.size() + 1024;  // gaps allowed, a few (see parse_marian_yaml_vocabulary)
    for (const auto& [token, id] : j.items()) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= limit)
        throw ConvertError(path + ": token " + detail::quoted(token) + " has id " + json_excerpt(id) +
                           ", not an integer below " + std::to_string(limit));
      const size_t i = id.get<size_t>();
      if (i >= id_to_token.size()) {
        id_to_token.resize(i + 1);
        given.resize(i + 1);
      }
      if (given[i]) throw ConvertError(path + ": id " + std::to_string(i) + " is given to two tokens");
      given[i] = true;
      id_to_token[i] = token;
    }
    return id_to_token;
  }
  detail::StringSet<std::string_view> seen;
  size_t line = 0;
  for (size_t pos = 0; pos < text.size();) {  // text: one token per line (Marian's text vocabulary)
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    if (end == pos) throw ConvertError(path + ": line " + std::to_string(line) + " is empty (Marian refuses it)");
    id_to_token.emplace_back(text, pos, end - pos);
    pos = end + 1;
  }
  for (size_t i = 0; i < id_to_token.size(); ++i)
    if (!seen.insert(id_to_token[i]).second)
      throw ConvertError(path + ": line " + std::to_string(i + 1) + ": " + detail::quoted(id_to_token[i]) +
                         " appears twice");
  if (id_to_token.empty()) throw ConvertError(path + ": an empty vocabulary");
  return id_to_token;
}

std::string hugging_face_name(const std::string& marian, bool* transposed) {
  *transposed = false;
  for (const Suffix& s : kModelItems)
    if (marian == s.marian) return s.hf;
  for (const char* role : {"encoder", "decoder"}) {
    const std::string prefix = std::string(role) + "_l";
    if (marian.compare(0, prefix.size(), prefix) != 0) continue;
    size_t i = prefix.size(), layer = 0;
    for (; i < marian.size() && i < prefix.size() + 4 && marian[i] >= '0' && marian[i] <= '9'; ++i)
      layer = layer * 10 + static_cast<size_t>(marian[i] - '0');
    if (i == prefix.size() || i >= marian.size() || marian[i] != '_' || layer == 0) return marian;
    const std::string rest = marian.substr(i + 1);
    for (const Suffix& s : kLayerItems) {
      if (rest != s.marian) continue;
      *transposed = s.transposed;
      return "model." + std::string(role) + ".layers." + std::to_string(layer - 1) + "." + s.hf;
    }
  }
  return marian;  // not a tensor Petrel knows: reported as unexpected under its own name
}

MarianNativeCheckpoint::MarianNativeCheckpoint(std::unique_ptr<MarianModelFile> file) : file_(std::move(file)) {
  std::map<std::string, std::string> alpha_items;  // weight's Marian name -> alpha item
  for (const std::string& name : file_->names()) {
    if (ends_with(name, kAlphaSuffix)) {
      alpha_items[name.substr(0, name.size() - std::string(kAlphaSuffix).size())] = name;
      continue;
    }
    Entry e;
    e.marian = name;
    const std::string hf = hugging_face_name(name, &e.transposed);
    e.info = file_->info(name);
    intgemm8_ |= e.info.dtype == kInt8DType;
    std::vector<uint64_t>& shape = e.info.shape;
    if (e.transposed && shape.size() == 2) {
      std::swap(shape[0], shape[1]);
    } else if (hf != "final_logits_bias" && shape.size() == 2 && shape[0] == 1 && hf != name) {
      shape.erase(shape.begin());  // Marian's [1, n] vectors
    }
    if (!entries_.emplace(hf, std::move(e)).second)
      throw ConvertError(file_->path() + ": items '" + entries_.at(hf).marian + "' and '" + name +
                         "' both name tensor '" + hf + "'");
  }
  for (const auto& [weight, alpha] : alpha_items) {
    if (weight == "none") continue;  // marian-conv writes it for an unnamed node; nothing uses it
    bool transposed = false;
    std::string hf = hugging_face_name(weight, &transposed);
    // The output layer's alpha is named after the table it multiplies by.
    if (weight == "Wemb" || weight == "decoder_Wemb" || weight == "decoder_ff_logit_out_Wt") hf = "lm_head.weight";
    if (hf == weight)
      throw ConvertError(file_->path() + ": item '" + alpha + "' is the activation scale of no known weight");
    if (!alphas_.emplace(hf, alpha).second)
      throw ConvertError(file_->path() + ": items '" + alphas_.at(hf) + "' and '" + alpha +
                         "' are both the output layer's activation scale");
  }
}

std::vector<std::string> MarianNativeCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

const TensorInfo* MarianNativeCheckpoint::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.info;
}

std::vector<float> MarianNativeCheckpoint::read_f32(const std::string& name) const {
  const Entry& e = entries_.at(name);
  std::vector<float> values = file_->read_f32(e.marian);
  if (!e.transposed || e.info.shape.size() != 2) return values;
  const size_t rows = e.info.shape[0], cols = e.info.shape[1];  // Hugging Face's [out, in]
  std::vector<float> out(values.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = values[c * rows + r];
  return out;
}

std::optional<CheckpointFile::Int8Values> MarianNativeCheckpoint::read_int8(const std::string& name) const {
  const Entry& e = entries_.at(name);
  if (e.info.dtype != kInt8DType) return std::nullopt;
  Intgemm8Matrix m = file_->read_intgemm8(e.marian);
  // intgemm8 stores x.W matrices transposed and tables as they are: [out][in] either way,
  // except the untied output `decoder_ff_logit_out_Wt` ([V, d] already, yet transposed
  // too: expression_graph_packable.h leaves only *Wemb* names as they are).
  if (e.marian == "decoder_ff_logit_out_Wt" && m.rows * m.cols > 0) {
    std::vector<int8_t> t(m.values.size());
    for (uint64_t r = 0; r < m.rows; ++r)
      for (uint64_t c = 0; c < m.cols; ++c) t[c * m.rows + r] = m.values[r * m.cols + c];
    m.values = std::move(t);
    std::swap(m.rows, m.cols);
  }
  if (e.info.shape.size() != 2 || m.rows != e.info.shape[0] || m.cols != e.info.shape[1])
    throw ConvertError(path() + ": intgemm8 item '" + e.marian + "' holds " + std::to_string(m.rows) + " x " +
                       std::to_string(m.cols) + " values, expected [out, in] = " + std::to_string(e.info.shape[0]) +
                       " x " + std::to_string(e.info.shape[1]));
  // intgemm never writes -128 (its quantizer clamps to +-127), and Petrel's int8 kernels
  // assume that range (AVX2's sign trick cannot negate -128).
  for (size_t i = 0; i < m.values.size(); ++i)
    if (m.values[i] == -128)
      throw ConvertError(path() + ": intgemm8 item '" + e.marian + "' holds -128 at element " + std::to_string(i) +
                         " (intgemm quantizes to -127..127)");
  if (!(std::isfinite(m.multiplier) && m.multiplier > 0))
    throw ConvertError(path() + ": intgemm8 item '" + e.marian + "' has quantization multiplier " +
                       std::to_string(m.multiplier) + " (a positive number is needed)");
  return Int8Values{std::move(m.values), 1.0f / m.multiplier};
}

std::optional<float> MarianNativeCheckpoint::activation_scale(const std::string& name) const {
  auto it = alphas_.find(name);
  if (it == alphas_.end()) return std::nullopt;
  const std::vector<float> v = file_->read_f32(it->second);
  const float scale = v.size() == 1 ? 1.0f / v[0] : 0.0f;
  if (v.size() != 1 || !(std::isfinite(v[0]) && v[0] > 0) || !(scale >= std::numeric_limits<float>::min()))
    throw ConvertError(path() + ": item '" + it->second + "' must hold one positive activation multiplier (below 1e37)");
  return scale;
}

}  // namespace petrel::convert
