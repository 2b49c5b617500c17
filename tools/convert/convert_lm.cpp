#include "convert/convert_lm.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "convert/hf_tokenizer.h"
#include "convert/tensor_output.h"
#include "core/utf8.h"
#include "kernels/half.h"

namespace petrel::convert {
namespace {

// What config.json (and generation_config.json) say about a decoder-only model, read as
// transformers reads them (tools/reference/decoder_only_semantics.md, transformers
// 4.57 / 5.0.0.dev0 modeling_gemma3.py, modeling_llama.py, modeling_qwen2.py,
// modeling_qwen3.py, modeling_rope_utils.py).
struct LmConfig {
  std::string model_type;
  // Where the text model's tensors are: "model." (a causal LM), or a multimodal gemma3
  // checkpoint's text tower ("model.language_model.", legacy "language_model.model.").
  std::string prefix = "model.", lm_head = "lm_head.weight";
  bool multimodal = false;
  bool gemma = false;     // Gemma 3: x (1 + w) norms, four norms per layer, scaled embeddings
  bool qk_norm = false;   // Gemma 3, Qwen3
  bool qkv_bias = false;  // Qwen2 (always), attention_bias elsewhere
  bool mlp_bias = false;
  uint32_t hidden = 0, ffn = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, max_positions = 0;
  float eps = 1e-6f;
  Activation activation = Activation::kSwish;
  bool tied = false;
  double attention_scale = 1.0;
  float final_softcap = 0;
  std::string dtype;  // config.json's torch_dtype / dtype: the embedding scale is rounded to it
  // RoPE: the frequencies of full-attention and sliding-window layers.
  std::vector<float> rope_full, rope_sliding;
  std::string rope_full_note, rope_sliding_note;
  std::vector<uint32_t> window;  // per layer; 0: full attention
  int32_t bos = -1, pad = -1;
  std::vector<int32_t> eos;
  // generation_config.json
  bool do_sample = false;
  float temperature = 1, top_p = 1, min_p = 0, repetition_penalty = 1;
  uint32_t top_k = 0, max_new_tokens = 0;
};

// transformers' compute_default_rope_parameters: inv_freq[i] = 1 / base^(2i / dim), in
// f32 there (computed here in double and rounded: within an ulp of torch's).
std::vector<float> default_inv_freq(double base, uint32_t dim) {
  std::vector<float> f(dim / 2);
  for (uint32_t i = 0; i < dim / 2; ++i) f[i] = static_cast<float>(1.0 / std::pow(base, 2.0 * i / dim));
  return f;
}

// rope_scaling / rope_parameters: "default", "linear" (inv_freq / factor) and "llama3"
// (_compute_llama3_parameters); others are refused by name.
void apply_rope_scaling(const nlohmann::json& scaling, const std::string& where, std::vector<float>& inv_freq,
                        std::string& note) {
  if (scaling.is_null()) return;
  if (!scaling.is_object()) throw ConvertError(where + ": rope_scaling must be an object");
  auto number = [&](const char* key) {
    if (!scaling.contains(key) || !scaling[key].is_number() || !(scaling[key].get<double>() > 0))
      throw ConvertError(where + ": rope_scaling." + key + " must be a positive number");
    return scaling[key].get<double>();
  };
  std::string type = scaling.value("rope_type", scaling.value("type", std::string("default")));
  if (type == "default") return;
  if (type == "linear") {
    const double factor = number("factor");
    for (float& f : inv_freq) f = static_cast<float>(f / factor);
    note += ", linear scaling factor " + std::to_string(factor);
    return;
  }
  if (type == "llama3") {
    const double factor = number("factor"), low = number("low_freq_factor"), high = number("high_freq_factor"),
                 old_context = number("original_max_position_embeddings");
    if (!(high > low)) throw ConvertError(where + ": rope_scaling.high_freq_factor must exceed low_freq_factor");
    const double low_wavelen = old_context / low, high_wavelen = old_context / high, pi = 3.14159265358979323846;
    for (float& f : inv_freq) {
      const double wavelen = 2 * pi / f;
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / factor);
      } else if (!(wavelen < high_wavelen)) {  // between: interpolate
        const double smooth = (old_context / wavelen - low) / (high - low);
        f = static_cast<float>((1 - smooth) * f / factor + smooth * f);
      }
    }
    note += ", llama3 scaling (factor " + std::to_string(factor) + ")";
    return;
  }
  throw ConvertError(where + ": rope scaling type '" + type + "' is not supported (default, linear, llama3 are)");
}

float embed_scale_in(const std::string& dtype, double scale) {
  const float f = static_cast<float>(scale);
  if (dtype == "bfloat16") {  // round to nearest even at 16 bits
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
    float r;
    std::memcpy(&r, &bits, 4);
    return r;
  }
  if (dtype == "float16") return kernels::half_to_float(kernels::float_to_half(f));
  return f;
}

// A language model's text side: tokenizer.json and the chat template with the token
// texts it reads (tokenizer_config.json's bos_token / eos_token: a string, or an
// AddedToken object as older transformers saved it).
struct LmText {
  std::optional<HfTokenizerFiles> tokenizer;
  std::string chat_template, chat_template_from, bos_token, eos_token;
};

LmText read_lm_text(const std::string& dir) {
  LmText t;
  if (file_exists(dir + "/tokenizer.json")) t.tokenizer = read_hf_tokenizer_files(dir);
  const std::string config_path = dir + "/tokenizer_config.json";
  std::optional<ConfigReader> config;
  if (t.tokenizer && t.tokenizer->tokenizer_config) config.emplace(config_path, *t.tokenizer->tokenizer_config);
  else if (file_exists(config_path)) config.emplace(config_path, read_text(config_path, ""));
  if (config) {
    auto token_text = [&](const char* key) -> std::string {
      const nlohmann::json& j = config->raw();
      if (!j.contains(key) || j[key].is_null()) return "";
      const nlohmann::json& v = j[key];
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      throw ConvertError(config_path + ": key '" + key + "' must be a token's text, got " + json_excerpt(v));
    };
    t.bos_token = token_text("bos_token");
    t.eos_token = token_text("eos_token");
    const nlohmann::json& j = config->raw();
    if (j.contains("chat_template") && !j["chat_template"].is_null()) {
      const nlohmann::json& v = j["chat_template"];
      t.chat_template_from = "tokenizer_config.json";
      if (v.is_string()) {
        t.chat_template = v.get<std::string>();
      } else if (v.is_array()) {  // named templates: the one called "default"
        for (const nlohmann::json& named : v)
          if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
              named["template"].is_string())
            t.chat_template = named["template"].get<std::string>();
        if (t.chat_template.empty())
          throw ConvertError(config_path + ": chat_template lists no template named 'default'");
      } else {
        throw ConvertError(config_path + ": chat_template must be a string or a list of named templates");
      }
    }
  }
  if (file_exists(dir + "/chat_template.jinja")) {  // transformers >= 4.43 saves it apart; it wins
    t.chat_template = read_text(dir + "/chat_template.jinja", "");
    t.chat_template_from = "chat_template.jinja";
  }
  for (const std::string* s : {&t.chat_template, &t.bos_token, &t.eos_token})
    if (!detail::is_valid_utf8(*s)) throw ConvertError(dir + ": the chat template or its token texts are not UTF-8");
  if (t.chat_template.size() > (size_t{1} << 20))
    throw ConvertError(dir + ": the chat template is longer than 1 MiB");
  return t;
}

LmConfig read_lm_config(const ConfigReader& top, const ConfigReader* generation) {
  LmConfig c;
  c.model_type = top.text("model_type", "");
  // A multimodal Gemma 3 (Gemma3ForConditionalGeneration): its text tower, configured by
  // text_config (Gemma3TextConfig's defaults for what it leaves out).
  std::optional<ConfigReader> text_config;
  if (c.model_type == "gemma3") {
    const nlohmann::json& raw = top.raw();
    if (!raw.contains("text_config") || !raw["text_config"].is_object())
      throw ConvertError(top.path() + ": a gemma3 config needs a text_config object");
    text_config.emplace(top.path() + " text_config", raw["text_config"].dump());
    c.multimodal = true;
  }
  const ConfigReader& r = text_config ? *text_config : top;
  c.gemma = c.model_type == "gemma3_text" || c.multimodal;
  const bool qwen2 = c.model_type == "qwen2", qwen3 = c.model_type == "qwen3";
  c.qk_norm = c.gemma || qwen3;
  // Gemma3TextConfig's defaults fill what a multimodal text_config leaves out.
  auto or_gemma = [&](uint32_t v) { return c.multimodal ? std::optional<uint32_t>(v) : std::nullopt; };
  c.hidden = r.positive("hidden_size", or_gemma(2304));
  c.ffn = r.positive("intermediate_size", or_gemma(9216));
  c.layers = r.positive("num_hidden_layers", or_gemma(26));
  c.heads = r.positive("num_attention_heads", or_gemma(8));
  c.kv_heads = r.positive("num_key_value_heads", c.multimodal ? 4 : c.heads);
  c.vocab = r.positive("vocab_size", or_gemma(262208));
  c.max_positions = r.positive("max_position_embeddings", or_gemma(131072));
  if (c.heads % c.kv_heads != 0)
    throw ConvertError(r.path() + ": num_attention_heads " + std::to_string(c.heads) +
                       " is not a multiple of num_key_value_heads " + std::to_string(c.kv_heads));
  c.head_dim = r.positive("head_dim", c.multimodal ? 256 : c.hidden / c.heads);
  if (c.head_dim % 2 != 0) throw ConvertError(r.path() + ": head_dim must be even (rotary positions)");
  c.eps = static_cast<float>(r.number("rms_norm_eps", 1e-6));
  if (!(c.eps > 0 && c.eps < 1)) throw ConvertError(r.path() + ": rms_norm_eps must be in (0, 1)");
  const std::string act = c.gemma ? r.text("hidden_activation", "gelu_pytorch_tanh") : r.text("hidden_act", "silu");
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") c.activation = Activation::kGeluTanh;
  else if (act == "silu" || act == "swish") c.activation = Activation::kSwish;
  else if (act == "gelu") c.activation = Activation::kGelu;
  else throw ConvertError(r.path() + ": activation '" + act + "' is not supported (gelu_pytorch_tanh, silu, gelu are)");
  c.tied = r.flag("tie_word_embeddings", top.flag("tie_word_embeddings", c.gemma));
  c.qkv_bias = qwen2 || r.flag("attention_bias", false);
  c.mlp_bias = r.flag("mlp_bias", false);
  c.dtype = r.text("torch_dtype", r.text("dtype", "float32"));
  if (r.number("partial_rotary_factor", 1.0) != 1.0)
    throw ConvertError(r.path() + ": partial_rotary_factor other than 1 is not supported");
  if (r.number("attn_logit_softcapping", 0) != 0 && !c.gemma)
    throw ConvertError(r.path() + ": attn_logit_softcapping is not supported");
  // Gemma 3 stores attn_logit_softcapping but never applies it (Gemma3Attention passes no softcap).
  c.final_softcap = static_cast<float>(r.number("final_logit_softcapping", 0));
  if (c.final_softcap < 0) throw ConvertError(r.path() + ": final_logit_softcapping must be positive");
  c.attention_scale = c.gemma ? 1.0 / std::sqrt(r.number("query_pre_attn_scalar", c.head_dim))
                              : 1.0 / std::sqrt(double(c.head_dim));

  // Layer types: layer_types, else Gemma 3's sliding_window_pattern (every pattern-th
  // layer global), else Qwen's use_sliding_window from max_window_layers on.
  std::vector<bool> sliding(c.layers, false);
  const nlohmann::json& raw = r.raw();
  if (raw.contains("layer_types") && !raw["layer_types"].is_null()) {
    const nlohmann::json& types = raw["layer_types"];
    if (!types.is_array() || types.size() != c.layers)
      throw ConvertError(r.path() + ": layer_types must list num_hidden_layers entries");
    for (uint32_t i = 0; i < c.layers; ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention")
        throw ConvertError(r.path() + ": layer_types[" + std::to_string(i) +
                           "] must be \"sliding_attention\" or \"full_attention\"");
      sliding[i] = t == "sliding_attention";
    }
  } else if (c.gemma) {
    const uint32_t pattern = r.positive("sliding_window_pattern", 6);
    for (uint32_t i = 0; i < c.layers; ++i) sliding[i] = (i + 1) % pattern != 0;
  } else if (r.flag("use_sliding_window", false)) {
    const uint32_t from = r.positive("max_window_layers", c.layers);
    for (uint32_t i = from; i < c.layers; ++i) sliding[i] = true;
  }
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  const uint32_t window = any_sliding ? r.positive("sliding_window") : 0;
  for (uint32_t i = 0; i < c.layers; ++i) c.window.push_back(sliding[i] ? window : 0);

  // RoPE: global layers rope_theta with rope_scaling; Gemma 3's sliding layers
  // rope_local_base_freq, unscaled. Configs saved by transformers 5 say the same in
  // rope_parameters: one object (rope_type, rope_theta, the scaling's keys), or Gemma 3's
  // one per layer type.
  auto rope_of = [&](const nlohmann::json& params, const std::string& where, double default_theta,
                     std::vector<float>& inv_freq, std::string& note) {
    if (!params.is_object()) throw ConvertError(where + " must be an object");
    double theta = default_theta;
    if (params.contains("rope_theta")) {
      if (!params["rope_theta"].is_number() || !(params["rope_theta"].get<double>() > 0))
        throw ConvertError(where + ".rope_theta must be a positive number");
      theta = params["rope_theta"].get<double>();
    }
    inv_freq = default_inv_freq(theta, c.head_dim);
    note = "theta " + std::to_string(theta);
    apply_rope_scaling(params, where, inv_freq, note);
  };
  if (raw.contains("rope_parameters") && !raw["rope_parameters"].is_null()) {
    const nlohmann::json& params = raw["rope_parameters"];
    const std::string where = r.path() + ": rope_parameters";
    if (params.is_object() && params.contains("full_attention")) {
      rope_of(params["full_attention"], where + ".full_attention", 1e6, c.rope_full, c.rope_full_note);
      if (!params.contains("sliding_attention")) throw ConvertError(where + ": full_attention without sliding_attention");
      rope_of(params["sliding_attention"], where + ".sliding_attention", 10000.0, c.rope_sliding, c.rope_sliding_note);
    } else {
      rope_of(params, where, c.gemma ? 1e6 : 10000.0, c.rope_full, c.rope_full_note);
      c.rope_sliding = c.rope_full;
      c.rope_sliding_note = c.rope_full_note;
    }
  } else {
    const double theta = r.number("rope_theta", c.gemma ? 1e6 : 10000.0);
    c.rope_full = default_inv_freq(theta, c.head_dim);
    c.rope_full_note = "theta " + std::to_string(theta);
    apply_rope_scaling(raw.contains("rope_scaling") ? raw["rope_scaling"] : nlohmann::json(), r.path(), c.rope_full,
                       c.rope_full_note);
    if (c.gemma) {
      const double local = r.number("rope_local_base_freq", 10000.0);
      c.rope_sliding = default_inv_freq(local, c.head_dim);
      c.rope_sliding_note = "theta " + std::to_string(local);
    } else {
      c.rope_sliding = c.rope_full;
      c.rope_sliding_note = c.rope_full_note;
    }
  }

  auto one = [&](const ConfigReader& from, const char* key) {
    const auto ids = from.tokens(key, c.vocab);
    return ids.empty() ? -1 : ids.front();
  };
  // Special tokens: the text config's, else (multimodal) the top-level config's.
  c.bos = one(r, "bos_token_id") >= 0 ? one(r, "bos_token_id") : one(top, "bos_token_id");
  c.pad = one(r, "pad_token_id") >= 0 ? one(r, "pad_token_id") : one(top, "pad_token_id");
  c.eos = r.tokens("eos_token_id", c.vocab);
  if (c.eos.empty()) c.eos = top.tokens("eos_token_id", c.vocab);
  if (generation != nullptr) {
    const ConfigReader& g = *generation;
    if (auto eos = g.tokens("eos_token_id", c.vocab); !eos.empty()) c.eos = eos;
    if (int32_t bos = one(g, "bos_token_id"); bos >= 0) c.bos = bos;
    if (int32_t pad = one(g, "pad_token_id"); pad >= 0) c.pad = pad;
    c.do_sample = g.flag("do_sample", false);
    c.temperature = static_cast<float>(g.number("temperature", 1.0));
    c.top_k = static_cast<uint32_t>(std::min<double>(std::max(0.0, g.number("top_k", 0)), c.vocab));
    c.top_p = static_cast<float>(g.number("top_p", 1.0));
    c.min_p = static_cast<float>(g.number("min_p", 0.0));
    c.repetition_penalty = static_cast<float>(g.number("repetition_penalty", 1.0));
    if (!(c.temperature > 0) || !(c.top_p > 0 && c.top_p <= 1) || !(c.min_p >= 0 && c.min_p <= 1) ||
        !(c.repetition_penalty > 0))
      throw ConvertError(g.path() + ": temperature, top_p, min_p or repetition_penalty out of range");
    if (g.raw().contains("max_new_tokens") && !g.raw()["max_new_tokens"].is_null())
      c.max_new_tokens = g.positive("max_new_tokens");
  }
  if (c.eos.empty()) throw ConvertError(r.path() + ": no eos_token_id (in config.json or generation_config.json)");
  return c;
}

class LmConverter : TensorOutput {
 public:
  LmConverter(const ConvertOptions& o, const LmConfig& c, Source& src) : TensorOutput(o, src), c_(c) {}

  ConvertReport run() {
    const uint64_t d = c_.hidden, hd = c_.head_dim, q_width = uint64_t{c_.heads} * hd,
                   kv_width = uint64_t{c_.kv_heads} * hd;
    // √hidden for Gemma, rounded to the dtype the checkpoint runs in (transformers
    // multiplies by embed_scale.to(weight.dtype)), folded into the table's rows.
    const float embed_scale = c_.gemma ? embed_scale_in(c_.dtype, std::sqrt(double(c_.hidden))) : 1.0f;
    const DType output_dtype = c_.tied ? options_.output_dtype.value_or(options_.embedding_dtype)
                                       : options_.output_dtype.value_or(options_.linear_dtype);
    if (c_.multimodal) {  // the text tower's layout decides the names; the vision tower is left out
      if (src_.has("language_model.model.embed_tokens.weight")) {
        prefix_ = "language_model.model.";
        lm_head_ = "language_model.lm_head.weight";
      } else {
        prefix_ = "model.language_model.";
      }
      const size_t skipped = src_.skip({"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                        "model.multi_modal_projector."});
      report_.notes.push_back("gemma3 (multimodal): the text tower (" + prefix_ + "*) converted, " +
                              std::to_string(skipped) + " vision tensors left out");
    }
    const std::string embed_name = prefix_ + "embed_tokens.weight";
    src_.open(embed_name, {c_.vocab, d});
    const int32_t embed = matrix("embed_tokens", src_.rows(embed_name), c_.vocab, d,
                                 c_.tied ? output_dtype : options_.embedding_dtype, embed_scale,
                                 c_.tied ? detail::Layout::kPanel16 : detail::Layout::kRowMajor, embed_name);
    if (embed_scale != 1.0f)
      folds_.push_back({"embed_scale", embed_scale, {"embed_tokens"},
                        "sqrt(hidden_size) rounded to " + c_.dtype + " (Gemma3TextScaledWordEmbedding)"});
    // The output's input carries what the output must not: the tied table's scale and
    // the soft cap's 1/cap, folded into the final norm (tied) or the projection (untied).
    const float softcap_scale = c_.final_softcap > 0 ? 1.0f / c_.final_softcap : 1.0f;
    final_norm_scale_ = (c_.tied ? 1.0f / embed_scale : 1.0f) * softcap_scale;

    auto positions = fb::CreatePositions(fbb_, fb::PositionKind::Rotary, fb::FrequencyConvention::Paper, 0, -1);
    const int32_t rope_full = vector_tensor("rope.full_attention.inv_freq", c_.rope_full);
    const int32_t rope_sliding = c_.rope_sliding == c_.rope_full
                                     ? rope_full
                                     : vector_tensor("rope.sliding_attention.inv_freq", c_.rope_sliding);
    report_.notes.push_back("rotary positions: full-attention layers " + c_.rope_full_note +
                            (c_.gemma ? "; sliding-window layers " + c_.rope_sliding_note : std::string()));

    std::vector<flatbuffers::Offset<fb::Layer>> layers;
    for (uint32_t i = 0; i < c_.layers; ++i) {
      const std::string hf = prefix_ + "layers." + std::to_string(i), name = "decoder.layers." + std::to_string(i);
      // The attention scale goes into W_q, or with a q norm (which would undo it) into its gamma.
      const float q_scale = c_.qk_norm ? 1.0f : static_cast<float>(c_.attention_scale);
      auto q = linear(hf + ".self_attn.q_proj", name + ".self_attn.q", q_width, d, c_.qkv_bias, q_scale);
      auto k = linear(hf + ".self_attn.k_proj", name + ".self_attn.k", kv_width, d, c_.qkv_bias);
      auto v = linear(hf + ".self_attn.v_proj", name + ".self_attn.v", kv_width, d, c_.qkv_bias);
      auto o = linear(hf + ".self_attn.o_proj", name + ".self_attn.o", d, q_width, false);
      auto attention = fb::CreateAttention(fbb_, q, k, v, o);
      scale_targets_.push_back(name + (c_.qk_norm ? ".q_norm.gamma" : ".self_attn.q.weight"));
      flatbuffers::Offset<fb::Norm> q_norm, k_norm, post_attn, post_ffn, ffn_norm;
      if (c_.qk_norm) {
        q_norm = norm(hf + ".self_attn.q_norm", name + ".q_norm", hd, static_cast<float>(c_.attention_scale));
        k_norm = norm(hf + ".self_attn.k_norm", name + ".k_norm", hd);
      }
      auto attn_norm = norm(hf + ".input_layernorm", name + ".self_attn_norm", d);
      if (c_.gemma) {  // Gemma: norms on both blocks' outputs, and its own pre-FFN norm
        post_attn = norm(hf + ".post_attention_layernorm", name + ".post_attn_norm", d);
        ffn_norm = norm(hf + ".pre_feedforward_layernorm", name + ".ffn_norm", d);
        post_ffn = norm(hf + ".post_feedforward_layernorm", name + ".post_ffn_norm", d);
      } else {  // Llama / Qwen: post_attention_layernorm is the FFN block's (pre-)norm
        ffn_norm = norm(hf + ".post_attention_layernorm", name + ".ffn_norm", d);
      }
      auto gate = linear(hf + ".mlp.gate_proj", name + ".fc_gate", c_.ffn, d, c_.mlp_bias);
      auto up = linear(hf + ".mlp.up_proj", name + ".fc1", c_.ffn, d, c_.mlp_bias);
      auto down = linear(hf + ".mlp.down_proj", name + ".fc2", d, c_.ffn, c_.mlp_bias);
      fb::LayerBuilder lb(fbb_);
      lb.add_self_attn(attention);
      lb.add_self_attn_norm(attn_norm);
      lb.add_fc1(up);
      lb.add_fc2(down);
      lb.add_ffn_norm(ffn_norm);
      if (c_.qk_norm) {
        lb.add_q_norm(q_norm);
        lb.add_k_norm(k_norm);
      }
      if (c_.gemma) {
        lb.add_post_attn_norm(post_attn);
        lb.add_post_ffn_norm(post_ffn);
      }
      lb.add_fc_gate(gate);
      lb.add_sliding_window(c_.window[i]);
      lb.add_rope_inv_freq(c_.window[i] != 0 ? rope_sliding : rope_full);
      layers.push_back(lb.Finish());
    }
    auto final_norm = norm(prefix_ + "norm", "decoder.final_norm", d, final_norm_scale_);
    if (final_norm_scale_ != 1.0f && c_.tied)
      folds_.push_back({"output_unscale", final_norm_scale_, {"decoder.final_norm.gamma"},
                        "1/embed_scale" + std::string(c_.final_softcap > 0 ? " and 1/final_logit_softcapping" : "") +
                            " for the tied output projection, folded into the final norm"});
    auto layers_vec = fbb_.CreateVector(layers);
    auto decoder = fb::CreateStack(fbb_, embed, positions, layers_vec, final_norm);

    int32_t output_proj = -1;
    if (!c_.tied) {
      src_.open(lm_head_, {c_.vocab, d});
      output_proj = matrix("output_proj", src_.rows(lm_head_), c_.vocab, d, output_dtype, softcap_scale,
                           detail::Layout::kPanel16, lm_head_);
      if (softcap_scale != 1.0f)
        folds_.push_back({"softcap_unscale", softcap_scale, {"output_proj"},
                          "1/final_logit_softcapping folded into the output projection"});
    } else if (src_.has(lm_head_)) {  // a tied checkpoint may store the table twice
      src_.open(lm_head_, {c_.vocab, d});
      if (!src_.same_values(lm_head_, embed_name, c_.vocab, d))
        throw ConvertError(src_.path() + ": tie_word_embeddings is true but " + lm_head_ + " differs from " +
                           embed_name);
    }
    folds_.push_back({"attention_scale", c_.attention_scale, scale_targets_,
                      std::string(c_.gemma ? "query_pre_attn_scalar^-1/2" : "1/sqrt(head_dim)") +
                          (c_.qk_norm ? " folded into the q norm's gamma (a norm after W_q would undo it in W_q)"
                                      : " folded into W_q and b_q")});
    if (c_.gemma)
      folds_.push_back({"norm_offset", 1.0, {"every norm's gamma"},
                        "Gemma's RMSNorm x (1 + w): gamma = 1 + w, computed in f32 as Gemma3RMSNorm does"});
    src_.check_all_consumed(c_.model_type);
    report_.notes.push_back(std::string("decoder-only ") + c_.model_type + ": " + std::to_string(c_.layers) +
                            " layers, " + std::to_string(c_.heads) + " query heads, " + std::to_string(c_.kv_heads) +
                            " K/V heads of " + std::to_string(c_.head_dim) + ", " +
                            std::to_string(std::count_if(c_.window.begin(), c_.window.end(),
                                                         [](uint32_t w) { return w != 0; })) +
                            " sliding-window layers" + (c_.tied ? ", tied output" : ""));
    report_.notes.push_back(std::string("weights: linear layers ") + to_string(options_.linear_dtype) +
                            ", output projection " + to_string(output_dtype) +
                            (c_.tied ? " (tied: the embedding table)" : ""));

    auto folds_vec = fold_table();
    auto producer = fbb_.CreateString(kProducer);
    std::string dir = options_.checkpoint_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    auto source = fbb_.CreateString(detail::to_valid_utf8(dir.substr(dir.find_last_of('/') + 1)));
    auto model_type = fbb_.CreateString(c_.model_type);
    auto eos = fbb_.CreateVector(c_.eos);
    const LmText text = read_lm_text(options_.checkpoint_dir);
    flatbuffers::Offset<fb::Tokenizer> tokenizer;
    if (text.tokenizer) {
      HfTokenizerSummary summary;
      tokenizer = write_hf_tokenizer(fbb_, *text.tokenizer, c_.vocab, &summary);
      report_.notes.push_back("tokenizer.json: BPE, " + std::to_string(summary.tokens) + " tokens, " +
                              std::to_string(summary.merges) + " merges, " + std::to_string(summary.added_tokens) +
                              " added tokens" +
                              (summary.dropped_added ? " (" + std::to_string(summary.dropped_added) +
                                                           " beyond the model's vocabulary left out)"
                                                     : "") +
                              "; " + summary.pipeline);
    } else {
      report_.notes.push_back("no tokenizer.json: the model takes and gives token ids only");
    }
    if (!text.chat_template.empty())
      report_.notes.push_back("chat template: " + std::to_string(text.chat_template.size()) + " bytes from " +
                              text.chat_template_from);
    auto chat_template = text.chat_template.empty() ? 0 : fbb_.CreateString(text.chat_template);
    auto bos_token = text.bos_token.empty() ? 0 : fbb_.CreateString(text.bos_token);
    auto eos_token = text.eos_token.empty() ? 0 : fbb_.CreateString(text.eos_token);
    auto lm = fb::CreateLanguageModel(fbb_, c_.bos, eos, c_.do_sample, c_.temperature, c_.top_k, c_.top_p, c_.min_p,
                                      c_.repetition_penalty, c_.max_new_tokens, chat_template, bos_token, eos_token);
    auto tensors = writer_.tensor_table();

    fb::ModelBuilder mb(fbb_);
    mb.add_format_major(kFormatMajor);
    mb.add_format_minor(kFormatMinor);
    mb.add_producer(producer);
    mb.add_source(source);
    mb.add_architecture(fb::Architecture::DecoderOnly);
    mb.add_d_model(c_.hidden);
    mb.add_num_heads(c_.heads);
    mb.add_num_kv_heads(c_.kv_heads);
    mb.add_head_dim(c_.head_dim);
    mb.add_ffn_dim(c_.ffn);
    mb.add_vocab_size(c_.vocab);
    mb.add_max_positions(c_.max_positions);
    mb.add_norm(fb::NormPlacement::Pre);
    mb.add_norm_kind(fb::NormKind::RmsNorm);
    mb.add_activation(static_cast<fb::Activation>(c_.activation));
    mb.add_layer_norm_eps(c_.eps);
    const int32_t eos0 = c_.eos.front();
    mb.add_pad_id(c_.pad >= 0 ? c_.pad : eos0);
    mb.add_eos_id(eos0);
    mb.add_decoder_start_id(c_.bos >= 0 ? c_.bos : eos0);
    mb.add_decoder(decoder);
    mb.add_output_proj(output_proj);
    mb.add_final_logits_bias(-1);  // written all the same: a file states every field it relies on
    mb.add_final_logit_softcap(c_.final_softcap);
    mb.add_folds(folds_vec);
    mb.add_lm(lm);
    if (!tokenizer.IsNull()) mb.add_tokenizer(tokenizer);
    mb.add_model_type(model_type);
    mb.add_tensors(tensors);
    mb.add_data_size(writer_.data_size());
    mb.add_data_crc32(writer_.data_crc32());
    report_.file_size = writer_.write(mb.Finish());
    report_.folds = folds_;
    return report_;
  }

 private:
  flatbuffers::Offset<fb::Linear> linear(const std::string& hf, const std::string& name, uint64_t out, uint64_t in,
                                         bool bias, float scale = 1.0f) {
    src_.open(hf + ".weight", {out, in});
    int32_t wi = matrix(name + ".weight", src_.rows(hf + ".weight", scale), out, in, options_.linear_dtype, 1.0f,
                        detail::Layout::kPanel16, hf + ".weight");
    int32_t bi = -1;
    if (bias) {
      std::vector<float> b = src_.read(hf + ".bias", {out});
      for (float& v : b) v *= scale;
      bi = vector_tensor(name + ".bias", b);
    }
    return fb::CreateLinear(fbb_, wi, bi);
  }

  // An RMSNorm's gamma: Gemma's 1 + w (in f32, as Gemma3RMSNorm), else w; times `scale`
  // (a fold: the attention scale in the q norm, the output's in the final norm).
  flatbuffers::Offset<fb::Norm> norm(const std::string& hf, const std::string& name, uint64_t size,
                                     float scale = 1.0f) {
    std::vector<float> g = src_.read(hf + ".weight", {size});
    for (float& v : g) {
      if (c_.gemma) v = 1.0f + v;
      v *= scale;
    }
    return fb::CreateNorm(fbb_, vector_tensor(name + ".gamma", g), -1);
  }

  const LmConfig& c_;
  std::string prefix_ = c_.prefix, lm_head_ = c_.lm_head;
  std::vector<std::string> scale_targets_;
  float final_norm_scale_ = 1.0f;
};

}  // namespace

bool is_decoder_only_type(const std::string& model_type) {
  return model_type == "gemma3_text" || model_type == "gemma3" || model_type == "llama" || model_type == "qwen2" ||
         model_type == "qwen3";
}

void check_decoder_only_json(const ConfigReader& config, const ConfigReader* generation_config) {
  read_lm_config(config, generation_config);
}

ConvertReport convert_decoder_only(const ConvertOptions& options, const ConfigReader& config,
                                   const ConfigReader* generation_config, const CheckpointFile& weights) {
  if (options.norm || options.positions != PositionChoice::kAuto || options.embed_scale || !options.shortlist_path.empty())
    throw ConvertError("--norm, --positions, --embed-scale and --shortlist apply to translation models only (" +
                       config.text("model_type", "") + " is a decoder-only language model)");
  const LmConfig c = read_lm_config(config, generation_config);
  Source src(weights, options);
  return LmConverter(options, c, src).run();
}

}  // namespace petrel::convert
