#include "convert/convert_lm.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "convert/hf_tokenizer.h"
#include "convert/tensor_output.h"
#include "core/utf8.h"
#include "format/format_version.h"
#include "format/tokenizer_tables.h"
#include "kernels/half.h"
#include "petrel/types.h"
#include "text/chat_template.h"

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

// RoPE's base: pair i turns theta^(-2i / head_dim) radians per position, from 1 down to
// about 1 / theta. At or below 1 no pair turns slower than a radian per position (no long
// wavelengths: far positions alias near ones); real models use 1e4 .. 1e7, and past 1e12
// half the pairs (those below theta^-1/2 = 1e-6) would turn less than a radian over the
// longest context a model file can hold (2^20 positions).
const NumberRange kRopeTheta{1, 1e12, true, false};
const char* const kRopeThetaWhy = " (RoPE's base: its frequencies fall from 1 to 1/theta)";

// transformers' compute_default_rope_parameters: inv_freq[i] = 1 / base^(2i / dim), in
// f32 there (computed here in double and rounded: within an ulp of torch's).
std::vector<float> default_inv_freq(double base, uint32_t dim) {
  std::vector<float> f(dim / 2);
  for (uint32_t i = 0; i < dim / 2; ++i) f[i] = static_cast<float>(1.0 / std::pow(base, 2.0 * i / dim));
  return f;
}

// rope_scaling / rope_parameters (`s`): "default", "linear" (inv_freq / factor) and
// "llama3" (_compute_llama3_parameters); others are refused by name. Each number is
// checked where it is read: the frequencies stay positive and finite.
void apply_rope_scaling(const ConfigReader& s, std::vector<float>& inv_freq, std::string& note) {
  // transformers: rope_scaling.get("rope_type", rope_scaling.get("type"))
  const std::string type = s.given("rope_type") ? s.text("rope_type", "") : s.text("type", "default");
  if (type == "default") return;
  // A factor stretches the context: below 1 it would shrink it, above the positions a
  // model file can hold (2^20) it stretches past any context.
  const NumberRange factor_range{1, kMaxFilePositions};
  const char* const factor_why = " (how many times the trained context is stretched)";
  if (type == "linear") {
    const double factor = s.number("factor", std::nullopt, factor_range, factor_why);
    for (float& f : inv_freq) f = static_cast<float>(f / factor);
    note += ", linear scaling factor " + number_text(factor);
    return;
  }
  if (type == "llama3") {
    const double factor = s.number("factor", std::nullopt, factor_range, factor_why);
    const NumberRange band{0, 1e6, true, false};
    const double low = s.number("low_freq_factor", std::nullopt, band),
                 high = s.number("high_freq_factor", std::nullopt, band);
    const double old_context =
        s.integer("original_max_position_embeddings", 1, kMaxFilePositions, std::nullopt, kFileLimit);
    if (!(high > low))
      s.fail("high_freq_factor", "must exceed low_freq_factor " + number_text(low) + ", got " + number_text(high));
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
    note += ", llama3 scaling (factor " + number_text(factor) + ")";
    return;
  }
  s.fail(s.given("rope_type") ? "rope_type" : "type",
         "names rope scaling type '" + type + "', which is not supported (default, linear, llama3 are)");
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
  std::string chat_template, bos_token, eos_token;
  std::string chat_template_from;   // the file it came from, for the log
  std::string chat_template_where;  // the file and key, for errors
};

// tokenizer_config.json's token texts and chat template (`config`: its text, when the
// checkpoint has one) and chat_template.jinja's template (`jinja`), which wins as
// transformers >= 4.43 saves it apart. The template is parsed here, as the engine will
// parse it when a chat starts: a construct the engine does not run is refused at
// conversion, naming the file (and key) it came from and its line:column.
void read_chat_parts(LmText& t, const std::string& dir, const std::optional<std::string>& config_text,
                     const std::optional<std::string>& jinja) {
  if (config_text) {
    const ConfigReader config(dir + "/tokenizer_config.json", *config_text);
    auto token_text = [&](const char* key) -> std::string {
      if (!config.given(key)) return "";
      const nlohmann::json& v = config.raw()[key];
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      config.fail(key, "must be a token's text (a string or {\"content\": string}), got " + json_excerpt(v));
    };
    t.bos_token = token_text("bos_token");
    t.eos_token = token_text("eos_token");
    for (const std::string* token : {&t.bos_token, &t.eos_token})
      if (token->size() > detail::kMaxPieceBytes)
        config.fail(token == &t.bos_token ? "bos_token" : "eos_token",
                    "is " + std::to_string(token->size()) + " bytes, more than " +
                        std::to_string(detail::kMaxPieceBytes) + " (the model file's limit)");
    if (config.given("chat_template")) {
      const nlohmann::json& v = config.raw()["chat_template"];
      t.chat_template_from = "tokenizer_config.json";
      t.chat_template_where = config.key_name("chat_template");
      if (v.is_string()) {
        t.chat_template = v.get<std::string>();
      } else if (v.is_array()) {  // named templates, as transformers saves several: the one called "default"
        bool found = false;
        for (size_t i = 0; i < v.size(); ++i) {
          const std::string at = "chat_template[" + std::to_string(i) + "]";
          if (!v[i].is_object())
            config.fail(at, "must be {\"name\": string, \"template\": string}, got " + json_excerpt(v[i]));
          for (const char* key : {"name", "template"})
            if (!v[i].contains(key) || !v[i][key].is_string())
              config.fail(at + "." + key,
                          "must be a string, got " + (v[i].contains(key) ? json_excerpt(v[i][key]) : "nothing"));
          if (v[i]["name"].get_ref<const std::string&>() != "default") continue;
          t.chat_template = v[i]["template"].get<std::string>();
          t.chat_template_where = config.key_name(at + ".template");
          found = true;
        }
        if (!found) config.fail("chat_template", "lists no template named 'default'");
      } else {
        config.fail("chat_template", "must be a string or a list of named templates, got " + json_excerpt(v));
      }
    }
  }
  if (jinja) {
    t.chat_template = *jinja;
    t.chat_template_from = "chat_template.jinja";
    t.chat_template_where = dir + "/chat_template.jinja";
  }
  if (t.chat_template.empty()) return;
  if (!detail::is_valid_utf8(t.chat_template)) throw ConvertError(t.chat_template_where + ": the chat template is not UTF-8");
  if (t.chat_template.size() > text::ChatTemplate::kMaxTemplateBytes)
    throw ConvertError(t.chat_template_where + ": the chat template is " + std::to_string(t.chat_template.size()) +
                       " bytes, more than " + std::to_string(text::ChatTemplate::kMaxTemplateBytes) +
                       " (the model file's limit)");
  auto parsed = text::ChatTemplate::parse(t.chat_template);
  if (!parsed) {  // the parser's message: "chat template LINE:COLUMN: what"
    const std::string& why = parsed.error().message;
    throw ConvertError(t.chat_template_where + ": " + (why.rfind("chat template", 0) == 0 ? "" : "chat template: ") + why);
  }
}

LmText read_lm_text(const std::string& dir) {
  LmText t;
  std::optional<std::string> config;
  if (file_exists(dir + "/tokenizer.json")) {
    t.tokenizer = read_hf_tokenizer_files(dir);
    config = t.tokenizer->tokenizer_config;
  } else if (file_exists(dir + "/tokenizer_config.json")) {
    config = read_text(dir + "/tokenizer_config.json", "");
  }
  std::optional<std::string> jinja;
  if (file_exists(dir + "/chat_template.jinja")) jinja = read_text(dir + "/chat_template.jinja", "");
  read_chat_parts(t, dir, config, jinja);
  return t;
}

LmConfig read_lm_config(const ConfigReader& top, const ConfigReader* generation) {
  LmConfig c;
  c.model_type = top.text("model_type", "");
  // A multimodal Gemma 3 (Gemma3ForConditionalGeneration): its text tower, configured by
  // text_config (Gemma3TextConfig's defaults for what it leaves out).
  std::optional<ConfigReader> text_config;
  if (c.model_type == "gemma3") {
    text_config.emplace(top.object("text_config"));
    c.multimodal = true;
  }
  const ConfigReader& r = text_config ? *text_config : top;
  c.gemma = c.model_type == "gemma3_text" || c.multimodal;
  const bool qwen2 = c.model_type == "qwen2", qwen3 = c.model_type == "qwen3";
  c.qk_norm = c.gemma || qwen3;
  // Gemma3TextConfig's defaults fill what a multimodal text_config leaves out.
  auto or_gemma = [&](uint32_t v) { return c.multimodal ? std::optional<uint32_t>(v) : std::nullopt; };
  c.hidden = r.positive("hidden_size", kMaxFileWidth, or_gemma(2304), kFileLimit);
  c.ffn = r.positive("intermediate_size", kMaxFileWidth, or_gemma(9216), kFileLimit);
  c.layers = r.positive("num_hidden_layers", kMaxFileLayers, or_gemma(26), kFileLimit);
  c.heads = r.positive("num_attention_heads", kMaxFileWidth, or_gemma(8), kFileLimit);
  c.kv_heads = r.positive("num_key_value_heads", kMaxFileWidth, c.multimodal ? 4 : c.heads, kFileLimit);
  c.vocab = r.positive("vocab_size", kMaxFileVocab, or_gemma(262208), kFileLimit);
  c.max_positions = r.positive("max_position_embeddings", kMaxFilePositions, or_gemma(131072), kFileLimit);
  if (c.heads % c.kv_heads != 0)
    throw ConvertError(r.key_name("num_attention_heads") + " = " + std::to_string(c.heads) +
                       " is not a multiple of num_key_value_heads " + std::to_string(c.kv_heads));
  // head_dim: given, else hidden_size / num_attention_heads (transformers' floor division).
  c.head_dim = r.given("head_dim") ? r.positive("head_dim", kMaxFileWidth, std::nullopt, kFileLimit)
                                   : c.multimodal ? 256 : c.hidden / c.heads;
  if (c.head_dim == 0 || c.head_dim % 2 != 0)
    r.fail("head_dim", "must be even and positive (rotary positions turn pairs of dimensions), got " +
                           (r.given("head_dim") ? std::to_string(c.head_dim)
                                                : "none: hidden_size / num_attention_heads = " +
                                                      std::to_string(c.hidden) + " / " + std::to_string(c.heads) +
                                                      " = " + std::to_string(c.head_dim)));
  if (uint64_t{c.heads} * c.head_dim > kMaxFileWidth)
    throw ConvertError(r.path() + ": num_attention_heads x head_dim = " + std::to_string(c.heads) + " x " +
                       std::to_string(c.head_dim) + " = " + std::to_string(uint64_t{c.heads} * c.head_dim) +
                       " is more than " + std::to_string(kMaxFileWidth) + kFileLimit);
  // RMSNorm's eps is added to a mean of squares in f32: below 1e-30 (real models: 1e-5,
  // 1e-6) it would be no eps at all, or round to 0 in the model file.
  c.eps = static_cast<float>(r.number("rms_norm_eps", 1e-6, NumberRange{1e-30, 1, false, true},
                                      " (RMSNorm's epsilon, stored as f32)"));
  const char* const act_key = c.gemma ? "hidden_activation" : "hidden_act";
  const std::string act = r.text(act_key, c.gemma ? "gelu_pytorch_tanh" : "silu");
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") c.activation = Activation::kGeluTanh;
  else if (act == "silu" || act == "swish") c.activation = Activation::kSwish;
  else if (act == "gelu") c.activation = Activation::kGelu;
  else r.fail(act_key, "names activation '" + act + "', which is not supported (gelu_pytorch_tanh, silu, gelu are)");
  c.tied = r.flag("tie_word_embeddings", top.flag("tie_word_embeddings", c.gemma));
  c.qkv_bias = qwen2 || r.flag("attention_bias", false);
  c.mlp_bias = r.flag("mlp_bias", false);
  c.dtype = r.text("torch_dtype", r.text("dtype", "float32"));
  if (const double f = r.number("partial_rotary_factor", 1.0); f != 1.0)
    r.fail("partial_rotary_factor", "must be 1 (partial rotary embeddings are not supported), got " + number_text(f));
  // Gemma 3 stores attn_logit_softcapping but never applies it (Gemma3Attention passes no
  // softcap); the others would apply it, which the engine does not.
  if (const double cap = r.number("attn_logit_softcapping", 0); cap != 0 && !c.gemma)
    r.fail("attn_logit_softcapping", "must be null (attention logit soft-capping is not supported), got " +
                                         number_text(cap));
  // logits = cap * tanh(logits / cap): a cap below 1 would flatten every distribution to
  // near uniform; 1e6 is the model file's limit. null: no cap.
  c.final_softcap = static_cast<float>(
      r.number("final_logit_softcapping", 0.0, NumberRange{1, 1e6}, " (null: no cap)"));
  // Gemma scales queries by query_pre_attn_scalar^-1/2 instead of head_dim^-1/2: it stands
  // for a head width (Gemma 3: head_dim, or hidden_size / num_attention_heads), so it is
  // at least 1 (below, the scale would sharpen attention beyond an unscaled dot product)
  // and at most the widest a model file's attention can be. 0, negative or tiny values
  // gave an infinite or absurd scale and logits that were not finite at the first step.
  if (c.gemma)
    c.attention_scale =
        1.0 / std::sqrt(r.number("query_pre_attn_scalar", c.head_dim, NumberRange{1, kMaxFileWidth},
                                 " (a head width: the attention scale is its -1/2 power)"));
  else
    c.attention_scale = 1.0 / std::sqrt(double(c.head_dim));

  // Layer types: layer_types, else Gemma 3's sliding_window_pattern (every pattern-th
  // layer global), else Qwen's use_sliding_window from max_window_layers on.
  std::vector<bool> sliding(c.layers, false);
  if (r.given("layer_types")) {
    const nlohmann::json& types = r.raw()["layer_types"];
    if (!types.is_array() || types.size() != c.layers)
      r.fail("layer_types", "must list num_hidden_layers (" + std::to_string(c.layers) + ") entries, got " +
                                json_excerpt(types));
    for (uint32_t i = 0; i < c.layers; ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention")
        r.fail("layer_types[" + std::to_string(i) + "]",
               "must be \"sliding_attention\" or \"full_attention\", got " + json_excerpt(types[i]));
      sliding[i] = t == "sliding_attention";
    }
  } else if (c.gemma) {
    const uint32_t pattern = r.positive("sliding_window_pattern", 6);
    for (uint32_t i = 0; i < c.layers; ++i) sliding[i] = (i + 1) % pattern != 0;
  } else if (r.flag("use_sliding_window", false)) {
    const uint32_t from = r.integer("max_window_layers", 0, kMaxConfigInteger, c.layers);
    for (uint32_t i = from; i < c.layers; ++i) sliding[i] = true;
  }
  const bool any_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
  const uint32_t window = any_sliding ? r.positive("sliding_window", kMaxFilePositions, std::nullopt, kFileLimit) : 0;
  for (uint32_t i = 0; i < c.layers; ++i) c.window.push_back(sliding[i] ? window : 0);

  // RoPE: global layers rope_theta with rope_scaling; Gemma 3's sliding layers
  // rope_local_base_freq, unscaled. Configs saved by transformers 5 say the same in
  // rope_parameters: one object (rope_type, rope_theta, the scaling's keys), or Gemma 3's
  // one per layer type.
  auto rope_of = [&](const ConfigReader& params, double default_theta, std::vector<float>& inv_freq,
                     std::string& note) {
    const double theta = params.number("rope_theta", default_theta, kRopeTheta, kRopeThetaWhy);
    if (const double f = params.number("partial_rotary_factor", 1.0); f != 1.0)
      params.fail("partial_rotary_factor",
                  "must be 1 (partial rotary embeddings are not supported), got " + number_text(f));
    inv_freq = default_inv_freq(theta, c.head_dim);
    note = "theta " + number_text(theta);
    apply_rope_scaling(params, inv_freq, note);
  };
  if (r.given("rope_parameters")) {
    const ConfigReader params = r.object("rope_parameters");
    if (params.given("full_attention")) {
      rope_of(params.object("full_attention"), 1e6, c.rope_full, c.rope_full_note);
      rope_of(params.object("sliding_attention"), 10000.0, c.rope_sliding, c.rope_sliding_note);
    } else {
      rope_of(params, c.gemma ? 1e6 : 10000.0, c.rope_full, c.rope_full_note);
      c.rope_sliding = c.rope_full;
      c.rope_sliding_note = c.rope_full_note;
    }
  } else {
    const double theta = r.number("rope_theta", c.gemma ? 1e6 : 10000.0, kRopeTheta, kRopeThetaWhy);
    c.rope_full = default_inv_freq(theta, c.head_dim);
    c.rope_full_note = "theta " + number_text(theta);
    if (r.given("rope_scaling")) apply_rope_scaling(r.object("rope_scaling"), c.rope_full, c.rope_full_note);
    if (c.gemma) {
      const double local = r.number("rope_local_base_freq", 10000.0, kRopeTheta, kRopeThetaWhy);
      c.rope_sliding = default_inv_freq(local, c.head_dim);
      c.rope_sliding_note = "theta " + number_text(local);
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
    // The engine's ranges (petrel/types.h's kMinSamplingScale .. kMaxSamplingScale, the
    // loader's for top_p and min_p).
    static_assert(kMinSamplingScale == 1e-6f && kMaxSamplingScale == 1e6f, "the ranges below are the engine's");
    const NumberRange scale{1e-6, 1e6};
    c.temperature = static_cast<float>(g.number("temperature", 1.0, scale));
    c.top_k = std::min(g.integer("top_k", 0, kMaxConfigInteger, 0u, " (0: no top-k)"), c.vocab);
    c.top_p = static_cast<float>(g.number("top_p", 1.0, NumberRange{1e-6, 1}));
    c.min_p = static_cast<float>(g.number("min_p", 0.0, NumberRange{0, 1}));
    c.repetition_penalty = static_cast<float>(g.number("repetition_penalty", 1.0, scale));
    c.max_new_tokens = g.positive("max_new_tokens", 0u);
  }
  if (c.eos.empty()) throw ConvertError(r.path() + ": no eos_token_id (in config.json or generation_config.json)");
  return c;
}

class LmConverter : TensorOutput {
 public:
  LmConverter(const ConvertOptions& o, const LmConfig& c, const LmText& text, Source& src)
      : TensorOutput(o, src), c_(c), text_(text) {}

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
    // The tokenizer before the weights are read, so that its problems are found first;
    // after the embedding's shape is checked, so that the tables it builds per id
    // (vocab_size of them) are charged to a checkpoint that holds that many rows.
    flatbuffers::Offset<fb::Tokenizer> tokenizer;
    if (text_.tokenizer) {
      HfTokenizerSummary summary;
      tokenizer = write_hf_tokenizer(fbb_, *text_.tokenizer, c_.vocab, &summary);
      check_hf_regexes(*text_.tokenizer, summary);
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
    if (!text_.chat_template.empty())
      report_.notes.push_back("chat template: " + std::to_string(text_.chat_template.size()) + " bytes from " +
                              text_.chat_template_from);
    auto chat_template = text_.chat_template.empty() ? 0 : fbb_.CreateString(text_.chat_template);
    auto bos_token = text_.bos_token.empty() ? 0 : fbb_.CreateString(text_.bos_token);
    auto eos_token = text_.eos_token.empty() ? 0 : fbb_.CreateString(text_.eos_token);
    auto lm = fb::CreateLanguageModel(fbb_, c_.bos, eos, c_.do_sample, c_.temperature, c_.top_k, c_.top_p, c_.min_p,
                                      c_.repetition_penalty, c_.max_new_tokens, chat_template, bos_token, eos_token);
    auto tensors = writer_.tensor_table();

    fb::ModelBuilder mb(fbb_);
    mb.add_format_major(detail::kFormatMajor);
    mb.add_format_minor(detail::kFormatMinor);
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
  const LmText& text_;
  std::string prefix_ = c_.prefix, lm_head_ = c_.lm_head;
  std::vector<std::string> scale_targets_;
  float final_norm_scale_ = 1.0f;
};

}  // namespace

bool is_decoder_only_type(const std::string& model_type) {
  return model_type == "gemma3_text" || model_type == "gemma3" || model_type == "llama" || model_type == "qwen2" ||
         model_type == "qwen3";
}

void check_decoder_only_json(const ConfigReader& config, const ConfigReader* generation_config,
                             const std::string& dir, const std::optional<std::string>& tokenizer_config) {
  read_lm_config(config, generation_config);
  LmText text;
  read_chat_parts(text, dir, tokenizer_config, std::nullopt);
}

ConvertReport convert_decoder_only(const ConvertOptions& options, const ConfigReader& config,
                                   const ConfigReader* generation_config, const CheckpointFile& weights) {
  if (options.norm || options.positions != PositionChoice::kAuto || options.embed_scale || !options.shortlist_path.empty())
    throw ConvertError("--norm, --positions, --embed-scale and --shortlist apply to translation models only (" +
                       config.text("model_type", "") + " is a decoder-only language model)");
  const LmConfig c = read_lm_config(config, generation_config);
  const LmText text = read_lm_text(options.checkpoint_dir);
  Source src(weights, options);
  return LmConverter(options, c, text, src).run();
}

}  // namespace petrel::convert
