// petrel-convert: round trip through the loader, folds, and rejection of bad checkpoints.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/config_reader.h"
#include "convert/convert.h"
#include "convert/model_writer.h"
#include "convert/safetensors.h"
#include "format/weights.h"
#include "model_access.h"
#include "kernels/half.h"
#include "support/build_paths.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

namespace {

float element(const detail::Matrix& m, size_t r, size_t c) {
  const size_t i = m.index(r, c);
  switch (m.dtype) {
    case DType::kF32: return static_cast<const float*>(m.data)[i];
    case DType::kF16: return kernels::half_to_float(static_cast<const uint16_t*>(m.data)[i]);
    case DType::kInt8: return static_cast<const int8_t*>(m.data)[i] * m.scales[r];
    case DType::kInt4: return static_cast<float>(m.scaled_int4(r, c)) * m.scales[r];
  }
  return NAN;
}

std::shared_ptr<const Model> convert_and_load(const std::string& checkpoint, const std::string& out, DType linear,
                                              DType embeddings, convert::PositionChoice positions = convert::PositionChoice::kAuto) {
  convert::ConvertOptions o;
  o.checkpoint_dir = checkpoint;
  o.output_path = out;
  o.linear_dtype = linear;
  o.embedding_dtype = embeddings;
  use_fixture_options(o);
  if (positions != convert::PositionChoice::kAuto) o.positions = positions;
  convert::convert_checkpoint(o);
  auto m = Model::load(out);
  if (!m) FAIL(m.error().message);
  return m.value();
}

// Every stored element equals scale x original within the dtype's bound:
// exact for f32, half precision for f16, scale/2 per element for int8, half a step
// (block scale x row scale / 2) for int4 — where the converter chose a step that
// clips a block's largest values, those read back as exactly +-7 steps.
void check_matrix(const detail::Matrix& m, const RawTensor& original, float scale, const std::string& what) {
  INFO(what);
  REQUIRE(m.rows * m.cols == original.values.size());
  for (size_t r = 0; r < m.rows; ++r) {
    for (size_t c = 0; c < m.cols; ++c) {
      float expected = original.values[r * m.cols + c] * scale;
      float got = element(m, r, c);
      if (m.dtype == DType::kF32) {
        REQUIRE(got == expected);
      } else if (m.dtype == DType::kF16) {
        REQUIRE(std::fabs(got - expected) <= std::fabs(expected) * 0x1p-11f + 0x1p-24f);
      } else if (m.dtype == DType::kInt8) {
        REQUIRE(std::fabs(got - expected) <= m.scales[r] / 2 * 1.0001f + 1e-7f);
      } else {
        const float step = m.block_scale(r, c / detail::kInt4Block) * m.scales[r];
        if (std::fabs(expected) <= 7.5f * step)
          REQUIRE(std::fabs(got - expected) <= step / 2 * 1.0001f + 1e-7f);
        else
          REQUIRE(got == Approx(std::copysign(7 * step, expected)).epsilon(1e-5));
      }
    }
  }
}

void check_vector(const float* v, const RawTensor& original, float scale, const std::string& what) {
  INFO(what);
  for (size_t i = 0; i < original.values.size(); ++i) REQUIRE(v[i] == original.values[i] * scale);
}

}  // namespace

TEST_CASE("round trip: every tensor reads back as the original, with its folds", "[convert]") {
  const std::string dir = oracle_dir("post_swish_concat_tied");
  auto raw = read_checkpoint(dir + "/model.safetensors");
  auto dtype = GENERATE(DType::kF32, DType::kF16, DType::kInt8, DType::kInt4);
  TempDir tmp;
  auto model = convert_and_load(dir, tmp.file("m.petrel"), dtype, dtype);
  const auto& info = model->info();
  const auto& w = detail::ModelAccess::weights(*model);
  REQUIRE(info.d_model == 32);
  const float embed_scale = std::sqrt(32.0f);
  const float q_scale = 1.0f / std::sqrt(float(info.d_model / info.num_heads));

  // Fold: dequantized embedding row == sqrt(d_model) x original row within the bound.
  check_matrix(w.encoder.embed_tokens, raw["model.shared.weight"], embed_scale, "embed_tokens");
  REQUIRE(w.decoder.embed_tokens.data == w.encoder.embed_tokens.data);
  REQUIRE(info.tied_output);
  REQUIRE(w.output_proj.data == w.decoder.embed_tokens.data);

  auto check_attention = [&](const detail::Attention& a, const std::string& hf) {
    check_matrix(a.q.weight, raw[hf + ".q_proj.weight"], q_scale, hf + ".q");
    check_vector(a.q.bias, raw[hf + ".q_proj.bias"], q_scale, hf + ".q.bias");
    check_matrix(a.k.weight, raw[hf + ".k_proj.weight"], 1, hf + ".k");
    check_matrix(a.v.weight, raw[hf + ".v_proj.weight"], 1, hf + ".v");
    check_matrix(a.o.weight, raw[hf + ".out_proj.weight"], 1, hf + ".o");
    check_vector(a.o.bias, raw[hf + ".out_proj.bias"], 1, hf + ".o.bias");
  };
  for (size_t i = 0; i < w.encoder.layers.size(); ++i) {
    std::string hf = "model.encoder.layers." + std::to_string(i);
    const auto& l = w.encoder.layers[i];
    check_attention(l.self_attn, hf + ".self_attn");
    check_matrix(l.fc1.weight, raw[hf + ".fc1.weight"], 1, hf + ".fc1");
    check_matrix(l.fc2.weight, raw[hf + ".fc2.weight"], 1, hf + ".fc2");
    check_vector(l.ffn_norm.gamma, raw[hf + ".final_layer_norm.weight"], 1, hf + ".ffn_norm");
  }
  for (size_t i = 0; i < w.decoder.layers.size(); ++i) {
    std::string hf = "model.decoder.layers." + std::to_string(i);
    const auto& l = w.decoder.layers[i];
    check_attention(l.self_attn, hf + ".self_attn");
    check_attention(l.cross_attn, hf + ".encoder_attn");
    // Fold: the LayerNorm feeding the tied output projection carries 1/sqrt(d_model).
    float unscale = i + 1 == w.decoder.layers.size() ? 1.0f / embed_scale : 1.0f;
    check_vector(l.ffn_norm.gamma, raw[hf + ".final_layer_norm.weight"], unscale, hf + ".ffn_norm.gamma");
    check_vector(l.ffn_norm.beta, raw[hf + ".final_layer_norm.bias"], unscale, hf + ".ffn_norm.beta");
  }
  check_vector(w.final_logits_bias, raw["final_logits_bias"], 1, "final_logits_bias");

  // The folds are recorded in the file.
  std::map<std::string, double> folds;
  for (const auto& f : info.folds) folds[f.what] = f.value;
  REQUIRE(folds.at("embed_scale") == Approx(embed_scale));
  REQUIRE(folds.at("output_unscale") == Approx(1 / embed_scale));
  REQUIRE(folds.at("attention_scale") == Approx(q_scale));
  REQUIRE(info.vocab.size() == info.vocab_size);
  REQUIRE(info.vocab[0] == "</s>");
}

TEST_CASE("fold: W_q x + b_q in the file equals (W_q x + b_q)/sqrt(head_dim) on random inputs", "[convert]") {
  const std::string dir = oracle_dir("pre_gelu_interleaved_untied");
  auto raw = read_checkpoint(dir + "/model.safetensors");
  TempDir tmp;
  auto model = convert_and_load(dir, tmp.file("m.petrel"), DType::kF32, DType::kF32);
  const auto& q = detail::ModelAccess::weights(*model).decoder.layers[0].cross_attn.q;
  const auto& w = raw["model.decoder.layers.0.encoder_attn.q_proj.weight"].values;
  const auto& b = raw["model.decoder.layers.0.encoder_attn.q_proj.bias"].values;
  const size_t d = q.weight.cols;
  const double head_dim = d / model->info().num_heads;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<float> x(d);
    for (float& v : x) v = test::normal_float(rng);
    for (size_t r = 0; r < d; ++r) {
      double folded = q.bias[r], unfolded = b[r];
      for (size_t c = 0; c < d; ++c) {
        folded += double(element(q.weight, r, c)) * x[c];
        unfolded += double(w[r * d + c]) * x[c];
      }
      REQUIRE(folded == Approx(unfolded / std::sqrt(head_dim)).margin(1e-5));
    }
  }
  // Untied output and no embedding scale: nothing else folded.
  REQUIRE_FALSE(model->info().tied_output);
  for (const auto& f : model->info().folds) REQUIRE(f.what == "attention_scale");
}

TEST_CASE("positions: stored tables are verified or used, never ignored", "[convert]") {
  TempDir tmp;
  SECTION("a stored interleaved table is recognised") {
    auto m = convert_and_load(oracle_dir("pre_gelu_interleaved_untied"), tmp.file("a.petrel"), DType::kF32, DType::kF32);
    REQUIRE(m->info().encoder_positions.kind == PositionKind::kSinusoidalInterleaved);
    REQUIRE(m->info().decoder_positions.frequency == FrequencyConvention::kPaper);
  }
  SECTION("a stored concatenated table with tied copies (older exports)") {
    auto m = convert_and_load(oracle_dir("older_export_concat"), tmp.file("b.petrel"), DType::kInt8, DType::kInt8);
    REQUIRE(m->info().encoder_positions.kind == PositionKind::kSinusoidalConcatenated);
  }
  SECTION("a table that matches no formula needs --positions learned") {
    const std::string dir = oracle_dir("post_relu_learned_unshared");
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    o.output_path = tmp.file("c.petrel");
    REQUIRE_THROWS_WITH(convert::convert_checkpoint(o),
                        Contains("model.encoder.embed_positions.weight") && Contains("--positions learned"));
    REQUIRE_FALSE(exists(o.output_path));
    auto m = convert_and_load(dir, o.output_path, DType::kF32, DType::kF32, convert::PositionChoice::kLearned);
    REQUIRE(m->info().encoder_positions.kind == PositionKind::kLearned);
    REQUIRE_FALSE(m->info().shared_embeddings);
  }
}

namespace {

// A copy of the tied fixture that a test may damage.
struct BadCheckpoint {
  TempDir tmp;
  std::string dir = tmp.file("ckpt");
  std::map<std::string, RawTensor> tensors;
  nlohmann::json config;

  explicit BadCheckpoint(const std::string& fixture = "post_swish_concat_tied") {
    copy_dir(oracle_dir(fixture), dir);
    tensors = read_checkpoint(dir + "/model.safetensors");
    std::ifstream in(dir + "/config.json");
    config = nlohmann::json::parse(in);
  }
  void save() {
    write_checkpoint(dir + "/model.safetensors", tensors);
    std::ofstream(dir + "/config.json") << config.dump();
  }
  std::string out() const { return tmp.file("out.petrel"); }
  void expect_error(const std::string& a, const std::string& b = "", convert::ConvertOptions o = {}) {
    o.checkpoint_dir = dir;
    o.output_path = out();
    REQUIRE_THROWS_WITH(convert::convert_checkpoint(o), Contains(a) && Contains(b));
    REQUIRE_FALSE(exists(out()));
    for (const auto& entry : std::filesystem::directory_iterator(tmp.path()))  // no partial output either
      REQUIRE(entry.path().filename().string().rfind("out.petrel", 0) == std::string::npos);
  }
};

void patch_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  auto bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + n);
  edit(header);
  write_bytes(path, safetensors_bytes(header.dump(), bytes.data() + 8 + n, bytes.size() - 8 - n));
}

}  // namespace

TEST_CASE("multilingual families: model_type decides the structure, bad tensors are named", "[convert]") {
  SECTION("M2M100: a stored sinusoid table that is not M2M100's is refused") {
    BadCheckpoint c("m2m100_tiny");
    c.tensors["model.encoder.embed_positions.weights"].values[2 * 16 + 3] += 0.01f;  // row 2 = position 0
    c.save();
    c.expect_error("'model.encoder.embed_positions.weights' is not M2M100's sinusoid table");
  }
  SECTION("M2M100 has no final logits bias: one in the checkpoint is unexpected") {
    BadCheckpoint c("m2m100_tiny");
    c.tensors["final_logits_bias"] = {{1, 337}, std::vector<float>(337, 0.5f)};
    c.save();
    c.expect_error("unexpected tensor 'final_logits_bias'", "m2m_100");
  }
  SECTION("mBART needs its embedding norm and its learned positions at + 2") {
    BadCheckpoint c("mbart50_tiny");
    c.tensors.erase("model.decoder.layernorm_embedding.bias");
    c.save();
    c.expect_error("model.safetensors", "missing tensor 'model.decoder.layernorm_embedding.bias'");
    BadCheckpoint d("mbart50_tiny");
    auto& table = d.tensors["model.encoder.embed_positions.weight"];
    table.shape[0] -= 2;
    table.values.resize(table.shape[0] * table.shape[1]);
    d.save();
    d.expect_error("'model.encoder.embed_positions.weight' has shape [64, 16]", "needs [66, 16]");
  }
  SECTION("the structure flags belong to Marian; an unknown model_type is named") {
    BadCheckpoint c("m2m100_tiny");
    convert::ConvertOptions pre;
    pre.norm = NormPlacement::kPre;
    c.expect_error("--norm applies to marian checkpoints only", "", pre);
    c.config["model_type"] = "t5";
    c.save();
    c.expect_error("config.json: model_type 't5' is not supported", "m2m_100");
  }
  SECTION("check_checkpoint_json (fuzzed) reads the family tokenizer's files as the converter does") {
    const std::string dir = oracle_dir("nllb_d1024");
    auto text = [&](const std::string& f) {
      auto bytes = read_bytes(dir + "/" + f);
      return std::string(bytes.begin(), bytes.end());
    };
    convert::CheckpointJson files{text("config.json"), text("generation_config.json"), std::nullopt, std::nullopt,
                                  text("tokenizer_config.json"), false, text("sentencepiece.bpe.model")};
    convert::ConvertOptions o;
    o.checkpoint_dir = dir;
    auto v = convert::check_checkpoint_json(files, o);
    CHECK(v.family_tokenizer);
    CHECK(v.model_type == "m2m_100");
    CHECK(v.vocab.size() == nlohmann::json::parse(files.config)["vocab_size"].get<size_t>());
    files.tokenizer_config = R"({"added_tokens_decoder": {"999": {"content": "eng_Latn"}}})";
    CHECK_THROWS_WITH(convert::check_checkpoint_json(files, o), Contains("tokenizer_config.json") && Contains("999"));
  }
  SECTION("defaults come from the family's config class: mBART forces EOS, M2M100 scales embeddings") {
    BadCheckpoint c("mbart50_tiny");
    std::remove((c.dir + "/generation_config.json").c_str());
    c.config.erase("forced_eos_token_id");
    c.save();
    convert::ConvertOptions o;
    o.checkpoint_dir = c.dir;
    o.output_path = c.out();
    convert::convert_checkpoint(o);
    auto m = Model::load(c.out());
    REQUIRE(m.has_value());
    CHECK(m.value()->info().generation.forced_eos_id == 2);  // MBartConfig's default
    CHECK(m.value()->info().embedding_norm);
    BadCheckpoint d("m2m100_tiny");
    d.config.erase("scale_embedding");
    d.save();
    o.checkpoint_dir = d.dir;
    o.output_path = d.out();
    const auto report = convert::convert_checkpoint(o);
    bool scaled = false;
    for (const auto& f : report.folds) scaled |= f.what == "embed_scale" && f.value == Approx(4.0);
    CHECK(scaled);  // M2M100Config: scale_embedding defaults to true (sqrt(16))
  }
}

TEST_CASE("converter rejects bad checkpoints with a message naming file and tensor", "[convert]") {
  BadCheckpoint c;
  const std::string weights = c.dir + "/model.safetensors";
  SECTION("missing tensor") {
    c.tensors.erase("model.decoder.layers.1.fc2.bias");
    c.save();
    c.expect_error("model.safetensors", "missing tensor 'model.decoder.layers.1.fc2.bias'");
  }
  SECTION("unexpected tensor") {
    c.tensors["model.encoder.layers.7.fc1.weight"] = {{2, 2}, {1, 2, 3, 4}};
    c.save();
    c.expect_error("model.safetensors", "unexpected tensor 'model.encoder.layers.7.fc1.weight'");
  }
  SECTION("shape mismatch against the config") {
    c.tensors["model.encoder.layers.0.fc1.weight"] = {{64, 31}, std::vector<float>(64 * 31, 0.1f)};
    c.save();
    c.expect_error("'model.encoder.layers.0.fc1.weight' has shape [64, 31]", "needs [64, 32]");
  }
  SECTION("NaN and Inf weights") {
    c.tensors["model.decoder.layers.0.self_attn.k_proj.weight"].values[5] = NAN;
    c.save();
    c.expect_error("'model.decoder.layers.0.self_attn.k_proj.weight'", "NaN or Inf");
    c.tensors["model.decoder.layers.0.self_attn.k_proj.weight"].values[5] = 0;
    c.tensors["model.shared.weight"].values[3] = INFINITY;
    c.save();
    c.expect_error("'model.shared.weight'", "non-finite");
  }
  SECTION("unknown activation") {
    c.config["activation_function"] = "tanh";
    c.save();
    c.expect_error("config.json", "unknown activation_function 'tanh'");
  }
  SECTION("config keys transformers ignores may not contradict the model type") {
    c.config["normalize_before"] = true;
    c.save();
    c.expect_error("config.json: normalize_before = true contradicts model_type 'marian'", "pass --norm");
    c.config["normalize_before"] = false;
    c.config["normalize_embedding"] = true;
    c.save();
    c.expect_error("config.json: normalize_embedding = true contradicts model_type 'marian'",
                   "Petrel does not support it");
    c.config["normalize_embedding"] = false;
    c.config["static_position_embeddings"] = false;
    c.save();
    c.expect_error("static_position_embeddings = false", "pass --positions");
  }
  SECTION("one shared table needs one vocabulary") {
    c.config["decoder_vocab_size"] = c.config["vocab_size"].get<int>() - 2;
    c.save();
    c.expect_error("config.json: decoder_vocab_size", "share_encoder_decoder_embeddings is true");
  }
  SECTION("a target vocabulary that is not UTF-8 is refused by name") {
    BadCheckpoint s("separate_vocab_untied");
    auto numbered = [](size_t n, const std::string& bad) {
      std::string j = "{";
      for (size_t i = 0; i < n; ++i) j += (i ? ",\"t" : "\"t") + std::to_string(i) + (i == 1 ? bad : "") + "\":" + std::to_string(i);
      return j + "}";
    };
    std::ofstream(s.dir + "/vocab.json") << numbered(s.config["vocab_size"].get<size_t>(), "");
    std::ofstream(s.dir + "/target_vocab.json", std::ios::binary)
        << numbered(s.config["decoder_vocab_size"].get<size_t>(), "\xff\xfe");
    s.expect_error("target_vocab.json", "not valid JSON");
  }
  SECTION("missing config key") {
    c.config.erase("d_model");
    c.save();
    c.expect_error("config.json", "missing key 'd_model'");
  }
  SECTION("unknown safetensors dtype") {
    patch_header(weights, [](nlohmann::json& h) { h["final_logits_bias"]["dtype"] = "I64"; });
    c.expect_error("tensor 'final_logits_bias'", "unsupported dtype I64");
  }
  SECTION("bad header length") {
    auto bytes = read_bytes(weights);
    bytes[6] = 0x7f;
    write_bytes(weights, bytes);
    c.expect_error("model.safetensors", "bad header length");
  }
  SECTION("truncated file: offsets past the end") {
    auto bytes = read_bytes(weights);
    bytes.resize(bytes.size() - 100);
    write_bytes(weights, bytes);
    c.expect_error("model.safetensors", "past the end");
  }
  SECTION("overlapping ranges") {
    patch_header(weights, [](nlohmann::json& h) {
      auto& a = h["model.encoder.layers.0.fc1.bias"]["data_offsets"];
      auto& b = h["model.encoder.layers.0.fc2.bias"]["data_offsets"];
      uint64_t size = b[1].get<uint64_t>() - b[0].get<uint64_t>();
      b[0] = a[0].get<uint64_t>();
      b[1] = b[0].get<uint64_t>() + size;
    });
    c.expect_error("model.safetensors", "overlapping data ranges");
  }
  SECTION("header that is not JSON") {
    auto bytes = read_bytes(weights);
    bytes[9] = '{';
    bytes[10] = '{';
    write_bytes(weights, bytes);
    c.expect_error("model.safetensors", "not valid JSON");
  }
  SECTION("size that does not match shape and dtype") {
    patch_header(weights, [](nlohmann::json& h) { h["final_logits_bias"]["shape"] = {1, 47}; });
    c.expect_error("tensor 'final_logits_bias'", "shape and dtype need");
  }
  SECTION("a pytorch_model.bin that is not one (test_pytorch_checkpoint.cpp tests real ones)") {
    std::filesystem::rename(weights, c.dir + "/pytorch_model.bin");
    c.expect_error("pytorch_model.bin", "not a PyTorch checkpoint");
  }
  SECTION("no weights at all") {
    std::filesystem::remove(weights);
    c.expect_error("no model.safetensors or pytorch_model.bin");
  }
  SECTION("tied copies that differ") {
    c.tensors["lm_head.weight"] = c.tensors["model.shared.weight"];
    c.tensors["lm_head.weight"].values[0] += 1;
    c.save();
    c.expect_error("'model.shared.weight' and 'lm_head.weight'", "differ");
  }
  SECTION("token id outside the vocabulary") {
    c.config["eos_token_id"] = 48;
    c.save();
    c.expect_error("config.json", "eos_token_id");
  }
  SECTION("a size past the model file's limits, by its key and the limit") {
    c.config["max_position_embeddings"] = 1 << 21;  // the engine reads up to 2^20
    c.save();
    c.expect_error("config.json: key 'max_position_embeddings' must be a positive integer at most 1048576 (the "
                   "model file's limit), got 2097152");
  }
}

// What the converter cannot see is the loader's: every file is loaded before it is renamed
// into place. A tokenizer.json whose normalizers would grow an added token's text past the
// engine's budget (checked when the model loads and builds its tokenizer) is refused so.
TEST_CASE("a model the engine would refuse is not written (its loader checks the output)", "[convert]") {
  TempDir tmp;
  const std::string dir = tmp.file("lm");
  copy_dir(fixture_dir() + "/decoder_only/gemma3_f32", dir);
  const std::string big(4096, 'a');
  const nlohmann::json grow = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", big}};
  const nlohmann::json tokenizer = {
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 3}, {"b", 4}, {"ab", 5}}}, {"merges", {"a b"}}}},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {grow, grow}}}},
      {"added_tokens", {{{"id", 6}, {"content", "a"}, {"normalized", true}}}}};
  std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("out.petrel");
  REQUIRE_THROWS_WITH(convert::convert_checkpoint(o),
                      Contains("out.petrel: not written: the engine would refuse the model") &&
                          Contains("tokenizer.hf.normalizers[1] (Replace) would make the text longer"));
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path()))  // no output, no partial output
    CHECK(entry.path().filename().string().rfind("out.petrel", 0) == std::string::npos);
}

#ifndef __EMSCRIPTEN__  // (no FIFOs or device files under Node)
namespace {
// Whether `call`, which opens `fifo`, returns within 10 s. One blocked in open() is let go
// by opening the FIFO's other end (the test fails instead of hanging).
bool returns_promptly(const std::string& fifo, const std::function<void()>& call) {
  auto done = std::async(std::launch::async, call);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return true;
  const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  done.wait();
  if (writer >= 0) ::close(writer);
  return false;
}
}  // namespace

TEST_CASE("a checkpoint file that is not a regular file is refused, not read forever", "[convert]") {
  // A cloned checkpoint may hold symlinks: config.json -> /dev/zero was read until memory
  // ran out, a FIFO blocked the converter.
  TempDir tmp;
  const std::string dir = tmp.file("odd");
  std::filesystem::create_directory(dir);
  std::filesystem::create_symlink(oracle_dir("post_swish_concat_tied") + "/model.safetensors", dir + "/model.safetensors");
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("odd.petrel");
  std::filesystem::create_symlink("/dev/zero", dir + "/config.json");
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("config.json: not a regular file"));
  std::filesystem::remove(dir + "/config.json");
  REQUIRE(mkfifo((dir + "/config.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("config.json: not a regular file"));
  // The files the converter and the loader map: a FIFO as model.safetensors or as the
  // model blocked them in open(), before fstat could tell (found by review).
  std::filesystem::remove(dir + "/config.json");
  std::filesystem::create_symlink(oracle_dir("post_swish_concat_tied") + "/config.json", dir + "/config.json");
  std::filesystem::remove(dir + "/model.safetensors");
  REQUIRE(mkfifo((dir + "/model.safetensors").c_str(), 0600) == 0);
  std::string converted;
  CHECK(returns_promptly(dir + "/model.safetensors", [&] {
    try {
      convert::convert_checkpoint(o);
    } catch (const std::exception& e) {
      converted = e.what();
    }
  }));
  CHECK_THAT(converted, Contains("model.safetensors: not a regular file"));
  std::string loaded;
  CHECK(returns_promptly(dir + "/model.safetensors", [&] {
    auto m = Model::load(dir + "/model.safetensors");
    if (!m) loaded = m.error().message;
  }));
  CHECK_THAT(loaded, Contains("model.safetensors: not a regular file"));
  // Nor is a FIFO or a symlink as the output replaced by a regular file.
  REQUIRE(mkfifo(tmp.file("fifo.petrel").c_str(), 0600) == 0);
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("fifo.petrel");
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("fifo.petrel: exists and is not a regular file"));
  std::filesystem::create_symlink(tmp.file("elsewhere.petrel"), tmp.file("link.petrel"));
  o.output_path = tmp.file("link.petrel");
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("link.petrel: exists and is not a regular file"));
}
#endif

// The output replaces what its path names: never one of the checkpoint's own files (its
// weights were overwritten, found by review), and never with a scale that folds to
// infinity or zero in f32 (1e39, 1e-300 converted, then failed to run).
TEST_CASE("petrel-convert refuses an output that is one of its inputs, and scales f32 cannot fold", "[convert]") {
  TempDir tmp;
  const std::string dir = tmp.file("ck");
  copy_dir(oracle_dir("post_swish_concat_tied"), dir);
  const auto weights = read_bytes(dir + "/model.safetensors");
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = dir + "/model.safetensors";
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("is a file of the checkpoint being converted"));
  CHECK(read_bytes(dir + "/model.safetensors") == weights);
  o.output_path = "";
  CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("no output path"));
  o.output_path = tmp.file("out.petrel");
  for (double scale : {1e39, 1e300, 1e-300, 0.0, -1.0}) {
    INFO(scale);
    o.embed_scale = scale;
    CHECK_THROWS_WITH(convert::convert_checkpoint(o), Contains("--embed-scale must be in [1e-6, 1e6]"));
  }
}

TEST_CASE("petrel-convert writes beside the output through files of its own, never a file that exists", "[convert]") {
  // It wrote MODEL.partial and MODEL.data.partial with O_TRUNC: a user's files of those
  // names were emptied (and the second deleted), and two conversions to one path wrote
  // into each other's.
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("out.petrel");
  const std::vector<uint8_t> mine = {'m', 'i', 'n', 'e'};
  for (const char* suffix : {".partial", ".data.partial"}) write_bytes(o.output_path + suffix, mine);
  convert::convert_checkpoint(o);
  REQUIRE(load_model(o.output_path) != nullptr);
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) {
    ++files;
    if (entry.path() != o.output_path) CHECK(read_bytes(entry.path().string()) == mine);
  }
  CHECK(files == 3);
}

#ifndef __EMSCRIPTEN__
TEST_CASE("a signal during the final write removes the partial output, then ends the process as before",
          "[convert]") {
  // Ctrl-C while write() copied and verified the file left MODEL.<pid>-<n>.partial behind.
  // In a child: petrel-convert's handlers, a registered partial file (as write() holds
  // one), then the signal; the child must die of it, with the file gone.
  // A signal the process was started ignoring (nohup, `&` in a script) stays ignored.
  TempDir tmp;
  const std::string partial = tmp.file("model.petrel.1-0.partial");
  // The status of a child that installs the handlers (with `signal_number` ignored or at its
  // default), registers `partial` (released again unless `still_registered`) and raises it.
  auto child_status = [&](int signal_number, bool ignored, bool still_registered) {
    write_bytes(partial, {'p'});
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (const int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);  // whatever the test run has
      if (ignored) signal(signal_number, SIG_IGN);
      convert::remove_partial_outputs_on_signals();
      convert::PartialRegistration other(tmp.file("other.partial"));  // another slot, no file
      std::optional<convert::PartialRegistration> registered(partial);
      if (!still_registered) registered.reset();  // renamed into place: not to be removed
      raise(signal_number);
      _exit(7);  // reached only when the signal is ignored
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    return status;
  };
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP})
    for (const bool still_registered : {true, false}) {
      INFO("signal " << signal_number << (still_registered ? ", registered" : ", released"));
      const int status = child_status(signal_number, false, still_registered);
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == signal_number);
      CHECK(std::filesystem::exists(partial) == !still_registered);
    }
  for (const int signal_number : {SIGINT, SIGHUP}) {
    INFO("ignored signal " << signal_number);
    const int status = child_status(signal_number, true, true);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
    CHECK(std::filesystem::exists(partial));
  }
}
#endif

#ifndef __EMSCRIPTEN__
// Memory that runs out is an error message and exit status 1 from the command line, not
// an abort ("terminate called after throwing an instance of 'std::bad_alloc'"). The
// checkpoint is a language model of 2^22 ids whose tokenizer's per-id tables (128 MiB of
// them) cannot fit under an address-space limit of 100 MiB; its weights (32 MiB) can.
TEST_CASE("petrel-convert reports memory that runs out as an error and exit status 1", "[convert][cli]") {
  if (built_with_sanitizer()) {
    WARN("not under a sanitizer: an address-space limit stops its runtime");
    return;
  }
  if (!can_run_programs()) return;
  TempDir tmp;
  const std::string dir = tmp.file("lm");
  std::filesystem::create_directories(dir);
  constexpr uint64_t kIds = uint64_t{1} << 22;
  const nlohmann::json config = {{"model_type", "llama"}, {"hidden_size", 2}, {"intermediate_size", 2},
                                 {"num_hidden_layers", 1}, {"num_attention_heads", 1}, {"num_key_value_heads", 1},
                                 {"head_dim", 2}, {"vocab_size", kIds}, {"max_position_embeddings", 16},
                                 {"tie_word_embeddings", true}, {"eos_token_id", 0}};
  std::ofstream(dir + "/config.json") << config.dump();
  std::ofstream(dir + "/tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 3, "b": 4, "ab": 5}, "merges": ["a b"]}})";
  std::map<std::string, RawTensor> tensors;
  tensors["model.embed_tokens.weight"] = {{kIds, 2}, std::vector<float>(kIds * 2, 0.25f)};
  for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"})
    tensors[std::string("model.layers.0.self_attn.") + name + ".weight"] = {{2, 2}, {1, 0, 0, 1}};
  for (const char* name : {"gate_proj", "up_proj", "down_proj"})
    tensors[std::string("model.layers.0.mlp.") + name + ".weight"] = {{2, 2}, {1, 0, 0, 1}};
  for (const char* name : {"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                           "model.norm.weight"})
    tensors[name] = {{2}, {1, 1}};
  write_checkpoint(dir + "/model.safetensors", tensors);
  tensors.clear();
  const std::string out = tmp.file("lm.petrel");
  int status = 0;
  run_command("ulimit -v 102400 && " + petrel_convert_command() + " --help", &status);
  if (status != 0) {  // an emulator reserving the guest's address space cannot start under it
    WARN("petrel-convert does not start under an address-space limit of 100 MiB here: not tested");
    return;
  }
  const std::string output =
      run_command("ulimit -v 102400 && " + petrel_convert_command() + " '" + dir + "' -o '" + out + "' --quiet", &status);
  INFO(output);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    WARN("the address-space limit does not hold here (an emulated CPU): not tested");
    return;
  }
  REQUIRE(WIFEXITED(status));  // not killed by SIGABRT
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(output, Contains("petrel-convert: error: out of memory"));
  CHECK_THAT(output, !Contains("terminate called"));
  size_t files = 0;  // no output, and no partial output left beside it
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) files += entry.path() != dir;
  CHECK(files == 0);
}
#endif

TEST_CASE("JSON nested deeper than 64 levels is refused before it is parsed", "[convert][json]") {
  // nlohmann::json copies and dump()s values recursively: a config.json value nested
  // 100,000 deep overflowed the stack when an error message showed it.
  const std::string dir = oracle_dir("post_swish_concat_tied");
  auto text = [&](const std::string& f) {
    auto bytes = read_bytes(dir + "/" + f);
    return std::string(bytes.begin(), bytes.end());
  };
  auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // config.json with `key` set to `value` (JSON text).
  auto config_with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(text("config.json"));
    j[key] = "@@";
    std::string s = j.dump();
    return s.replace(s.find("\"@@\""), 4, value);
  };
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  auto check = [&](const std::string& config, const std::optional<std::string>& tokenizer_config = std::nullopt) {
    convert::CheckpointJson files{config, std::nullopt, text("vocab.json"), std::nullopt, tokenizer_config, false,
                                  std::nullopt};
    convert::check_checkpoint_json(files, o);
  };
  CHECK_THROWS_WITH(check(config_with("d_model", nested(100000))),
                    Contains("config.json: JSON nested deeper than 64 levels (byte "));
  CHECK_THROWS_WITH(check(config_with("task_specific_params", nested(100000))), Contains("nested deeper than 64"));
  // 64 levels (the config object and 63 in it) are parsed, and refused for what they are;
  // brackets in strings are text.
  CHECK_THROWS_WITH(check(config_with("d_model", nested(63))), Contains("key 'd_model' must be a positive integer"));
  CHECK_THROWS_WITH(check(config_with("d_model", nested(64))), Contains("nested deeper than 64"));
  CHECK_NOTHROW(check(config_with("note", "\"" + std::string(100, '[') + "\\\"{{\"")));
  // An over-long value, or a parse error quoting an over-long number, is shown in part.
  std::string ones = "[1";
  for (int i = 0; i < 50000; ++i) ones += ",1";
  for (const std::string& value : {ones + "]", std::string(100000, '1')}) {
    try {
      check(config_with("d_model", value));
      FAIL("accepted");
    } catch (const convert::ConvertError& e) {
      INFO(std::string(e.what()).substr(0, 300));
      CHECK(std::string(e.what()).size() < 1000);
    }
  }

  // M2M100's tokenizer_config.json: an added token's "content" was copied (recursively).
  const std::string m2m = oracle_dir("m2m100_tiny");
  auto m2m_text = [&](const std::string& f) {
    auto bytes = read_bytes(m2m + "/" + f);
    return std::string(bytes.begin(), bytes.end());
  };
  convert::CheckpointJson family{m2m_text("config.json"), std::nullopt, m2m_text("vocab.json"), std::nullopt,
                                 "{\"added_tokens_decoder\": {\"5\": {\"content\": " + nested(100000) + "}}}", false,
                                 m2m_text("sentencepiece.bpe.model")};
  o.checkpoint_dir = m2m;
  CHECK_THROWS_WITH(convert::check_checkpoint_json(family, o),
                    Contains("tokenizer_config.json: JSON nested deeper than 64"));
  family.tokenizer_config = "{\"added_tokens_decoder\": {\"5\": {\"content\": " + nested(10) + "}}}";
  CHECK_THROWS_WITH(convert::check_checkpoint_json(family, o), Contains("no \"content\" string"));
  family.tokenizer_config.reset();
  family.vocab = "{\"a\": " + nested(100) + "}";
  CHECK_THROWS_WITH(convert::check_checkpoint_json(family, o), Contains("vocab.json: JSON nested deeper than 64"));

  // A safetensors header of 1 MB of '[' (about 40 MB of parsed nesting before).
  for (const std::string& header : {nested(500000), "{\"__metadata__\": " + nested(500000) + "}"}) {
    const auto bytes = safetensors_bytes(header, nullptr, 0);
    CHECK_THROWS_WITH(convert::SafetensorsFile(bytes.data(), bytes.size(), "deep.safetensors"),
                      Contains("deep.safetensors: header: JSON nested deeper than 64 levels"));
  }
}

TEST_CASE("an error shows a JSON value's first 200 bytes without writing it all out", "[convert][json]") {
  // The oracle: nlohmann::json's own dump, cut at 200 bytes.
  auto expected = [](const nlohmann::json& v) {
    const std::string d = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    size_t cut = 200;
    while (cut < d.size() && (static_cast<unsigned char>(d[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    return d.size() <= 200 ? d : d.substr(0, cut) + "...";
  };
  std::mt19937 rng(7);
  // Random values nested a few levels: numbers, strings with escapes and UTF-8, empty
  // and full containers, small and over the limit.
  auto random_value = [&](size_t elements) {
    using json = nlohmann::json;
    const char* strings[] = {"a", "\"q\"\n", "\xC3\xA9t\xC3\xA9", "", "k\\"};
    std::vector<json> pool;  // built bottom-up: a container takes the last few values made
    for (size_t n = 0; n < elements; ++n) {
      json item;
      switch (rng() % 9) {
        case 0: item = static_cast<int>(rng() % 2000) - 1000; break;
        case 1: item = std::ldexp(static_cast<double>(rng() % 1000), -static_cast<int>(rng() % 20)); break;
        case 2: item = strings[rng() % 5]; break;
        case 3: item = (rng() % 2) == 0; break;
        case 4: item = nullptr; break;
        case 5: item = std::string(rng() % 300, 'x'); break;
        case 6: case 7: {
          const size_t take = std::min<size_t>(pool.size(), rng() % 5);
          item = json::array();
          for (size_t k = pool.size() - take; k < pool.size(); ++k) item.push_back(pool[k]);
          pool.resize(pool.size() - take);
          break;
        }
        default: {
          const size_t take = std::min<size_t>(pool.size(), rng() % 5);
          item = json::object();
          for (size_t k = pool.size() - take; k < pool.size(); ++k) item[strings[rng() % 5] + std::to_string(k)] = pool[k];
          pool.resize(pool.size() - take);
        }
      }
      pool.push_back(std::move(item));
    }
    return json(pool);
  };
  for (int round = 0; round < 300; ++round) {
    const nlohmann::json v = random_value(rng() % 40);
    INFO(v.dump());
    REQUIRE(convert::json_excerpt(v) == expected(v));
    for (const auto& item : v) REQUIRE(convert::json_excerpt(item) == expected(item));
  }
  // Huge values: the same text, and a string cut inside a UTF-8 sequence stays valid.
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 1000000; ++i) many.push_back(i);
  CHECK(convert::json_excerpt(many) == expected(many));
  nlohmann::json keys;
  for (int i = 0; i < 100000; ++i) keys[std::to_string(i)] = std::string(50, 'v');
  CHECK(convert::json_excerpt(keys) == expected(keys));
  const nlohmann::json text = std::string(1 << 24, 'e');
  CHECK(convert::json_excerpt(text) == expected(text));
  // Cut at a character's start: "aa" and 2000 x U+00E9 (2 bytes) would end inside one.
  nlohmann::json accents = "aa";
  for (int i = 0; i < 2000; ++i) accents.get_ref<std::string&>() += "\xC3\xA9";
  const std::string cut = convert::json_excerpt(accents);
  CHECK(cut.size() == 199 + 3);
  CHECK(cut.compare(0, 199, expected(accents), 0, 199) == 0);
  CHECK_NOTHROW(nlohmann::json(cut).dump());  // valid UTF-8, or dump() throws
}

TEST_CASE("a vocab.json with fewer tokens than its size names the first id without one", "[convert][json]") {
  // It allocated a slot per id of vocab_size first (2^24 ids: 512 MB for a 2-token file).
  auto parse = [](const std::string& text, uint32_t size) { return convert::parse_vocab("v.json", text, size, "vocab_size"); };
  CHECK(parse(R"({"b": 1, "a": 0})", 2) == std::vector<std::string>{"a", "b"});
  CHECK_THROWS_WITH(parse(R"({"a": 0, "c": 2})", 3), "v.json: no token for id 1 (2 tokens for vocab_size 3)");
  CHECK_THROWS_WITH(parse(R"({"a": 0, "b": 1})", 1u << 24), "v.json: no token for id 2 (2 tokens for vocab_size 16777216)");
  CHECK_THROWS_WITH(parse(R"({"a": 0, "b": 1, "c": 1, "d": 2})", 5), "v.json: id 1 is used by two tokens");
  CHECK_THROWS_WITH(parse(R"({"a": 0, "b": 1, "c": 1})", 3), "v.json: id 1 is used by two tokens");
  CHECK_THROWS_WITH(parse(R"({"a": 0, "b": "1"})", 1u << 24), Contains("token \"b\" has id \"1\", outside vocab_size"));
  CHECK_THROWS_WITH(parse(R"({"a": 0, "b": 7})", 3), Contains("token \"b\" has id 7, outside vocab_size 3"));
}

TEST_CASE("a safetensors shape of more than 16 dimensions is refused by name", "[convert][safetensors]") {
  const float one = 1.0f;
  auto file = [&](size_t dims) {
    std::string shape = "[1";
    for (size_t d = 1; d < dims; ++d) shape += ",1";
    return safetensors_bytes(R"({"w":{"dtype":"F32","shape":)" + shape + R"(],"data_offsets":[0,4]}})",
                             reinterpret_cast<const uint8_t*>(&one), 4);
  };
  const auto sixteen = file(16), seventeen = file(17);
  CHECK(convert::SafetensorsFile(sixteen.data(), sixteen.size(), "w.safetensors").read_f32("w") ==
        std::vector<float>{1.0f});
  CHECK_THROWS_WITH(convert::SafetensorsFile(seventeen.data(), seventeen.size(), "w.safetensors"),
                    Contains("w.safetensors: tensor 'w': shape has 17 dimensions, more than the limit of 16"));
}

TEST_CASE("generation flags that are not true or false are refused by name", "[convert][json]") {
  const std::string dir = oracle_dir("post_swish_concat_tied");
  const auto config = read_bytes(dir + "/config.json");
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  for (const char* key : {"do_sample", "renormalize_logits"}) {
    convert::CheckpointJson files{std::string(config.begin(), config.end()), "{\"" + std::string(key) + "\": \"yes\"}",
                                  std::nullopt, std::nullopt, std::nullopt, false, std::nullopt};
    CHECK_THROWS_AS(convert::check_checkpoint_json(files, o), convert::ConvertError);
    CHECK_THROWS_WITH(convert::check_checkpoint_json(files, o),
                      Contains("generation_config.json: key '" + std::string(key) + "' must be true or false"));
  }
}
