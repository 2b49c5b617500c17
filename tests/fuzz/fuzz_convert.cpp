// Fuzz target: a whole conversion, then the engine, from a recipe. The input's first
// kRecipeBytes bytes choose a checkpoint's family (MarianMT, M2M100 / NLLB, mBART), shape and options — every size
// from 1 (widths below, at and above the SIMD widths), tied/shared/separate tables,
// pre/post-LN, activation, stored or generated positions, every weight and embedding
// dtype, a vocabulary with a shortlist, generation defaults — and the rest are its
// weights (int8 steps of a chosen power-of-two scale, so values can be tiny, huge or
// overflow in use). The checkpoint is written to a temporary directory and converted
// by convert_checkpoint. The converter may refuse it with ConvertError; a file it
// writes must load and run (exercise_model.h) on the kernel path the recipe picks.
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

constexpr size_t kRecipeBytes = 14;

// The checkpoint and the output, made once and removed at exit.
const petrel::fuzz::ScratchDir& scratch() {
  static const petrel::fuzz::ScratchDir s("petrel-fuzz-convert");
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel;
  if (size < kRecipeBytes) return 0;
  const uint8_t* r = data;
  const uint32_t d = 1 + r[0] % 72;
  std::vector<uint32_t> divisors;
  for (uint32_t h = 1; h <= d; ++h)
    if (d % h == 0) divisors.push_back(h);
  const uint32_t heads = divisors[r[1] % divisors.size()];
  const uint32_t ffn = 1 + r[2] % 72, vocab = 1 + r[3] % 40;
  const bool separate_vocab = r[4] & 0x80;
  const uint32_t target_vocab = separate_vocab ? 1 + (r[4] & 0x7f) % 40 : vocab;
  const uint32_t encoder_layers = 1 + (r[5] & 1), decoder_layers = 1 + ((r[5] >> 1) & 1);
  const uint32_t positions = 1 + r[6] % 20;
  const bool tied = r[7] & 1, shared = (r[7] & 2) && !separate_vocab, pre_ln = r[7] & 4, scale_embedding = r[7] & 8,
             logits_bias = r[7] & 16, stored_positions = r[7] & 32, learned = r[7] & 64, interleaved = r[7] & 128;
  static const char* const kActivations[] = {"relu", "gelu", "swish"};
  static const char* const kDtypes[] = {"f32", "f16", "int8"};
  const char* activation = kActivations[r[8] % 3];
  const char* linear_dtype = kDtypes[(r[8] / 3) % 3];
  const char* embedding_dtype = kDtypes[(r[8] / 9) % 3];
  const int32_t pad = r[9] % target_vocab, eos = (r[9] / 16) % target_vocab;
  const bool generation = r[10] & 1, with_vocab = (r[10] & 2) && !separate_vocab, shortlist = with_vocab && (r[10] & 4);
  fuzz::Weights weights(data + kRecipeBytes, size - kRecipeBytes, r[12] % 160 - 64);  // up to 2^95: overflows in use
  static const char* const kModelTypes[] = {"marian", "m2m_100", "mbart"};
  const auto family = static_cast<fuzz::Family>(r[13] % 3);
  const bool marian = family == fuzz::Family::kMarian;

  // The checkpoint, in Hugging Face's MarianMT layout.
  fuzz::MarianShape shape;
  shape.family = family;
  shape.d = d;
  shape.ffn = ffn;
  shape.vocab = vocab;
  shape.target_vocab = target_vocab;
  shape.encoder_layers = encoder_layers;
  shape.decoder_layers = decoder_layers;
  shape.positions = positions;
  shape.tied = tied;
  shape.shared = shared || !marian;  // the families have one table (model.shared)
  shape.pre_ln = pre_ln || !marian;
  shape.logits_bias = logits_bias && family != fuzz::Family::kM2M100;
  shape.stored_positions = stored_positions;
  const fuzz::Tensors tensors = fuzz::marian_tensors(shape, [&] { return weights.next(); });
  json config = {{"model_type", kModelTypes[r[13] % 3]}, {"d_model", d}, {"encoder_layers", encoder_layers},
                 {"decoder_layers", decoder_layers}, {"encoder_attention_heads", heads},
                 {"decoder_attention_heads", heads}, {"encoder_ffn_dim", ffn}, {"decoder_ffn_dim", ffn},
                 {"vocab_size", vocab}, {"decoder_vocab_size", target_vocab}, {"max_position_embeddings", positions},
                 {"scale_embedding", scale_embedding}, {"activation_function", activation}, {"pad_token_id", pad},
                 {"eos_token_id", eos}, {"decoder_start_token_id", pad}, {"tie_word_embeddings", tied},
                 {"share_encoder_decoder_embeddings", shape.shared}, {"bad_words_ids", {{pad}}}};
  if (!marian && (r[13] & 8)) config["forced_bos_token_id"] = eos;  // a target-language token
  const std::string& dir = scratch().dir();
  scratch().clear();
  fuzz::write_file(dir + "/config.json", config.dump());
  fuzz::write_file(dir + "/model.safetensors", fuzz::safetensors(tensors));
  if (generation) {
    json g = {{"num_beams", 1 + r[11] % 4}, {"max_length", r[11] / 4 % 8}, {"early_stopping", (r[11] & 32) != 0},
              {"length_penalty", (r[11] & 64) ? 0.0 : 1.5}};
    if (r[11] & 128) g["forced_eos_token_id"] = eos;
    if (g["max_length"] == 0) g.erase("max_length");
    fuzz::write_file(dir + "/generation_config.json", g.dump());
  }
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = dir + "/out.petrel";
  o.linear_dtype = convert::parse_dtype(linear_dtype, "--quantize");
  o.embedding_dtype = convert::parse_dtype(embedding_dtype, "--embeddings");
  if (marian) {  // the families decide both themselves (a flag for them is refused)
    o.positions = learned       ? convert::PositionChoice::kLearned
                  : interleaved ? convert::PositionChoice::kSinusoidalInterleaved
                                : convert::PositionChoice::kAuto;
    if (pre_ln) o.norm = NormPlacement::kPre;
  }
  if (with_vocab) {
    json v = json::object();
    for (uint32_t i = 0; i < vocab; ++i) v["t" + std::to_string(i)] = i;
    fuzz::write_file(dir + "/vocab.json", v.dump());
    if (shortlist) {
      std::string lex;
      for (uint32_t i = 0; i < vocab; ++i)
        lex += "t" + std::to_string((i * 7 + r[11]) % vocab) + " t" + std::to_string(i) + " 0.5\n";
      fuzz::write_file(dir + "/lex.s2t", lex);
      o.shortlist_path = dir + "/lex.s2t";
      o.shortlist_first = r[11] % 3;
      o.shortlist_best = 1 + r[11] / 3 % 3;
    }
  }
  try {
    convert::convert_checkpoint(o);
  } catch (const convert::ConvertError& e) {
    // Refused, by name: e.g. a stored position table that is no sinusoid.
    static const bool verbose = std::getenv("PETREL_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "fuzz_convert: refused: %s\n", e.what());
    return 0;
  }
  const std::string file = fuzz::read_file(o.output_path);
  auto loaded = Model::load_from_memory(file.data(), file.size(), "converted.petrel");
  if (!loaded) std::fprintf(stderr, "fuzz_convert: %s\n", loaded.error().message.c_str());
  require(loaded.has_value(), "what the converter writes, the engine loads");
  require(loaded.value()->verify_data().has_value(), "a converted file's checksum matches");
  // One kernel path per input (fuzz_model_file runs them all): conversions are slow enough.
  const std::vector<std::string> isas = runnable_isas();
  petrel::fuzz::exercise(loaded.value(), {isas[r[10] / 8 % isas.size()]});
  return 0;
}
