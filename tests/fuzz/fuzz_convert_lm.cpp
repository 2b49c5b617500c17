// Fuzz target: a decoder-only language model's conversion, then the engine, from a
// recipe. The input's first kRecipeBytes bytes choose the model_type (gemma3_text, llama,
// qwen2, qwen3), every size from 1 (hidden, query and K/V heads, head_dim, odd ones
// included, which the converter must refuse), layers and their types (sliding windows),
// tied or separate output, a soft cap, RoPE scaling (none, linear, llama3), the
// quantization of layers and tables, EOS lists; the rest are the weights (int8 steps of a
// chosen power-of-two scale). Bits 5-7 of the first byte may add one crafted value (a
// class a review found converting and failing only when run, or escaping as nlohmann's
// type_error: an attention scale or RoPE base out of range, a rope type that is not a
// string, sizes past the model file's limits, a norm epsilon or soft cap out of range,
// a chat template the engine cannot parse, sampling defaults out of the engine's
// ranges): it must be refused. The checkpoint is written to a temporary directory and
// converted by convert_checkpoint: it may refuse with ConvertError; a file it writes must
// load and generate (exercise_model.h) on the kernel path the recipe picks.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "exercise_model.h"
#include "marian_checkpoint.h"

namespace {

using petrel::fuzz::require;
using json = nlohmann::json;

constexpr size_t kRecipeBytes = 13;

const petrel::fuzz::ScratchDir& scratch() {
  static const petrel::fuzz::ScratchDir s("petrel-fuzz-convert-lm");
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel;
  if (size < kRecipeBytes) return 0;
  const uint8_t* r = data;
  static const char* const kTypes[] = {"gemma3_text", "llama", "qwen2", "qwen3"};
  const std::string type = kTypes[r[0] % 4];
  const bool gemma = type == "gemma3_text", qk_norm = gemma || type == "qwen3", bias = type == "qwen2";
  const bool tied = r[0] & 4, softcap = gemma && (r[0] & 8), mlp_bias = type == "llama" && (r[0] & 16);
  const uint32_t hidden = 1 + r[1] % 72, heads = 1 + r[2] % 6;
  std::vector<uint32_t> divisors;
  for (uint32_t h = 1; h <= heads; ++h)
    if (heads % h == 0) divisors.push_back(h);
  const uint32_t kv_heads = divisors[r[3] % divisors.size()];
  const uint32_t head_dim = (r[4] & 0x80) ? 1 + 2 * (r[4] % 20) : 2 * (1 + r[4] % 40);  // odd: refused
  const uint32_t layers = 1 + r[5] % 4, ffn = 1 + r[6] % 72, vocab = 2 + r[7] % 60, positions = 1 + r[8] % 40;
  const uint32_t window = 1 + r[9] % 8;
  static const char* const kDtypes[] = {"f32", "f16", "int8", "int4"};
  const char* linear_dtype = kDtypes[r[10] % 4];
  const char* embedding_dtype = kDtypes[(r[10] / 4) % 4];
  const int exponent = r[11] % 100 - 40;
  const int32_t eos = r[12] % vocab, eos2 = (r[12] / 8) % vocab;

  fuzz::Weights weights(data + kRecipeBytes, size - kRecipeBytes, exponent);
  fuzz::Tensors tensors;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape) {
    size_t n = 1;
    for (uint64_t s : shape) n *= s;
    std::vector<float> values(n);
    for (float& v : values) v = weights.next();
    tensors[name] = {std::move(shape), std::move(values)};
  };
  const uint64_t q_width = uint64_t{heads} * head_dim, kv_width = uint64_t{kv_heads} * head_dim;
  add("model.embed_tokens.weight", {vocab, hidden});
  for (uint32_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    add(p + ".self_attn.q_proj.weight", {q_width, hidden});
    add(p + ".self_attn.k_proj.weight", {kv_width, hidden});
    add(p + ".self_attn.v_proj.weight", {kv_width, hidden});
    add(p + ".self_attn.o_proj.weight", {hidden, q_width});
    if (bias) {
      add(p + ".self_attn.q_proj.bias", {q_width});
      add(p + ".self_attn.k_proj.bias", {kv_width});
      add(p + ".self_attn.v_proj.bias", {kv_width});
    }
    if (qk_norm) {
      add(p + ".self_attn.q_norm.weight", {head_dim});
      add(p + ".self_attn.k_norm.weight", {head_dim});
    }
    add(p + ".input_layernorm.weight", {hidden});
    add(p + ".post_attention_layernorm.weight", {hidden});
    if (gemma) {
      add(p + ".pre_feedforward_layernorm.weight", {hidden});
      add(p + ".post_feedforward_layernorm.weight", {hidden});
    }
    for (const char* m : {"gate_proj", "up_proj"}) {
      add(p + ".mlp." + m + ".weight", {ffn, hidden});
      if (mlp_bias) add(p + ".mlp." + m + ".bias", {ffn});
    }
    add(p + ".mlp.down_proj.weight", {hidden, ffn});
    if (mlp_bias) add(p + ".mlp.down_proj.bias", {hidden});
  }
  add("model.norm.weight", {hidden});
  if (!tied) add("lm_head.weight", {vocab, hidden});

  json config = {{"model_type", type}, {"hidden_size", hidden}, {"intermediate_size", ffn},
                 {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads},
                 {"head_dim", head_dim}, {"vocab_size", vocab}, {"max_position_embeddings", positions},
                 {"rms_norm_eps", (r[11] & 1) ? 1e-6 : 1e-5}, {"tie_word_embeddings", tied},
                 {"eos_token_id", eos}, {"torch_dtype", (r[12] & 1) ? "bfloat16" : "float32"},
                 {"mlp_bias", mlp_bias}};
  if (gemma) {
    config["query_pre_attn_scalar"] = 1 + r[9] / 8 % 64;
    config["sliding_window"] = window;
    if (r[5] & 0x80) {  // explicit layer types, else the pattern
      json types = json::array();
      for (uint32_t l = 0; l < layers; ++l) types.push_back((r[5] >> (2 + l % 5)) & 1 ? "full_attention" : "sliding_attention");
      config["layer_types"] = types;
    } else {
      config["sliding_window_pattern"] = 1 + r[5] / 4 % 4;
    }
    if (softcap) config["final_logit_softcapping"] = 1.0 + r[6] / 16;
  } else if (r[5] & 0x80) {
    config["use_sliding_window"] = true;
    config["sliding_window"] = window;
    config["max_window_layers"] = 1 + r[5] / 4 % 4;
  }
  switch (r[9] / 64) {
    case 1: config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 1 + r[8] % 8}}; break;
    case 2:
      config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1 + r[8] % 64}};
      break;
    default: break;
  }
  json generation;
  if (r[12] & 2)
    generation = {{"eos_token_id", {eos, eos2}}, {"do_sample", (r[12] & 4) != 0}, {"top_k", r[12] % 7},
                  {"top_p", 0.5 + (r[12] & 8) / 32.0}};
  // The crafted value (r[0] bits 5-7; r[7] / 64 picks one of its class). Every one of
  // them but the two chat templates that parse must be refused.
  json tokenizer_config;
  bool crafted_refused = true;
  const size_t pick = r[7] / 64;
  switch (r[0] >> 5) {
    case 0: crafted_refused = false; break;
    case 1: config[gemma ? "query_pre_attn_scalar" : "rope_theta"] = json::array({0.0, -24.0, 1e-300, 1e300})[pick]; break;
    case 2: config[gemma && (pick & 1) ? "rope_local_base_freq" : "rope_theta"] = json::array({0.0, -1.0, 1.0, 1e13})[pick]; break;
    case 3:
      config["rope_scaling"] = json::array(
          {{{"rope_type", 3}, {"factor", 2.0}},
           {{"type", {"linear"}}, {"factor", 2.0}},
           {{"rope_type", "linear"}, {"factor", 0.0}},
           {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
            {"original_max_position_embeddings", 64}}})[pick];
      break;
    case 4: {
      static const char* const keys[] = {"vocab_size", "max_position_embeddings", "num_hidden_layers", "hidden_size"};
      static const uint64_t values[] = {uint64_t{1} << 31, (1u << 20) + 1, 1025, 65537};
      config[keys[pick]] = values[pick];
      break;
    }
    case 5: {
      static const char* const keys[] = {"rms_norm_eps", "rms_norm_eps", "final_logit_softcapping", "final_logit_softcapping"};
      config[keys[pick]] = json::array({1e-300, 1.0, 0.0, 1e7})[pick];
      break;
    }
    case 6: {
      // The engine's subset has no macros; named templates need string names.
      const std::string macro = "{% macro m() %}x{% endmacro %}{{ m() }}";
      const std::string runs = "{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}";
      tokenizer_config = json::array({{{"chat_template", macro}},
                                      {{"chat_template", {{{"name", 3}, {"template", runs}}}}},
                                      {{"chat_template", {{{"name", "default"}, {"template", runs}}}}},
                                      {{"chat_template", runs}}})[pick];
      crafted_refused = pick < 2;
      break;
    }
    default: {
      static const char* const keys[] = {"temperature", "top_k", "top_p", "repetition_penalty"};
      if (generation.is_null()) generation = json::object();
      generation[keys[pick]] = json::array({1e-9, -1, 0.0, 1e7})[pick];
      break;
    }
  }
  const std::string& dir = scratch().dir();
  scratch().clear();
  fuzz::write_file(dir + "/config.json", config.dump());
  fuzz::write_file(dir + "/model.safetensors", fuzz::safetensors(tensors));
  if (!generation.is_null()) fuzz::write_file(dir + "/generation_config.json", generation.dump());
  if (!tokenizer_config.is_null()) fuzz::write_file(dir + "/tokenizer_config.json", tokenizer_config.dump());
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = dir + "/out.petrel";
  o.linear_dtype = convert::parse_dtype(linear_dtype, "--quantize");
  o.embedding_dtype = convert::parse_dtype(embedding_dtype, "--embeddings");
  try {
    convert::convert_checkpoint(o);
  } catch (const convert::ConvertError& e) {
    static const bool verbose = std::getenv("PETREL_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "fuzz_convert_lm: refused: %s\n", e.what());
    return 0;
  }
  require(head_dim % 2 == 0, "an odd head_dim is refused (rotary positions rotate pairs)");
  require(!crafted_refused, "a crafted value out of its range is refused at conversion");
  const std::string file = fuzz::read_file(o.output_path);
  auto loaded = Model::load_from_memory(file.data(), file.size(), "converted.petrel");
  if (!loaded) std::fprintf(stderr, "fuzz_convert_lm: %s\n", loaded.error().message.c_str());
  require(loaded.has_value(), "what the converter writes, the engine loads");
  require(loaded.value()->info().decoder_only, "a language model converts to a decoder-only file");
  const std::vector<std::string> isas = runnable_isas();
  petrel::fuzz::exercise(loaded.value(), {isas[r[10] / 16 % isas.size()]});
  return 0;
}
