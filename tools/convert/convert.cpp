#include "convert/convert.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "convert/checkpoint_file.h"
#include "convert/config_reader.h"
#include "convert/convert_lm.h"
#include "convert/family_tokenizer.h"
#include "convert/marian_native.h"
#include "convert/model_writer.h"
#include "convert/shortlist.h"
#include "convert/spm_model.h"
#include "convert/tensor_output.h"
#include "core/string_hash.h"
#include "core/utf8.h"
#include "kernels/positions.h"

namespace petrel::convert {
namespace {

using json = nlohmann::json;

// A stored position table matches a sinusoidal variant when every entry is this
// close; variants differ by far more (up to 0.36 for d=512: the paper's and Marian's frequencies differ).
constexpr double kPositionTolerance = 2e-4;

// The Hugging Face model_type: it decides the layer structure, never leftover config
// keys (tools/reference/FAMILIES.md). NLLB-200 checkpoints are m2m_100 ones.
enum class Family { kMarian, kM2M100, kMBart };

// The files of a Marian C++ model directory, as Mozilla names them: model*.bin or
// model*.npz; vocab*.spm (shared) or srcvocab*.spm + trgvocab*.spm; optionally lex*.bin
// (binary shortlist) or lex*.s2t (text).
struct MarianNativeFiles {
  std::string model, source_vocab, target_vocab, shortlist;
  bool word_vocabularies = false;  // Marian's DefaultVocab files, not SentencePiece models
};

struct CheckpointConfig {
  Family family = Family::kMarian;
  std::string model_type = "marian";
  std::string tokenizer_class;  // config.json's, when it names one (NLLB's does)
  uint32_t d_model = 0, encoder_layers = 0, decoder_layers = 0, heads = 0, ffn = 0, vocab = 0,
           max_positions = 0;
  uint32_t target_vocab = 0;  // decoder_vocab_size: the decoder's table, the output projection's rows
  bool scale_embedding = false, normalize_before = false, tie_word_embeddings = true,
       share_embeddings = true;
  Activation activation = Activation::kSwish;
  int32_t pad = 0, eos = 0, decoder_start = 0;
  std::vector<int32_t> bad_words;
  // Generation settings (transformers' GenerationConfig): from generation_config.json
  // when the checkpoint has one, else from config.json.
  uint32_t num_beams = 1, max_length = 0;
  double length_penalty = 1.0;
  bool early_stopping = false;
  int32_t forced_eos = -1;
  int32_t forced_bos = -1;  // forced_bos_token_id: the target language of M2M100 / mBART-50 checkpoints
  std::string generation_source;        // which file they came from
  std::vector<std::string> generation_notes;  // keys Petrel does not apply
  std::vector<std::string> legacy_keys;       // ignored by transformers, consistent with Marian
  // Marian C++ models (Firefox's; marian_native.h): their conventions, recorded in the file.
  bool marian_native = false;
  bool ssru_decoder = false;     // decoder layers are SSRUs (transformer-decoder-autoreg: rnn)
  // Marian's transformer-guided-alignment-layer, 0-based (-1: none named).
  int32_t alignment_layer = -1;
  float layer_norm_eps = 1e-5f;  // transformers' LayerNorm; Marian's is 1e-6
  double max_length_factor = 0;  // generation: Marian's max-length-factor
  MarianNativeFiles native;      // the directory's files
};

void read_generation(const ConfigReader& r, CheckpointConfig& c, bool from_generation_config);

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

CheckpointConfig read_config(const ConfigReader& r, const ConvertOptions& options) {
  const std::string& path = r.path();
  CheckpointConfig c;
  c.model_type = r.text("model_type", "marian");
  if (c.model_type == "marian") c.family = Family::kMarian;
  else if (c.model_type == "m2m_100") c.family = Family::kM2M100;
  else if (c.model_type == "mbart") c.family = Family::kMBart;
  else
    throw ConvertError(path + ": model_type '" + c.model_type +
                       "' is not supported (marian, m2m_100 for M2M100 and NLLB-200, and mbart are)");
  c.tokenizer_class = r.text("tokenizer_class", "");
  const bool marian = c.family == Family::kMarian;
  if (!marian && options.norm)
    throw ConvertError("--norm applies to marian checkpoints only (" + c.model_type + " models are pre-LN by definition)");
  if (!marian && options.positions != PositionChoice::kAuto)
    throw ConvertError("--positions applies to marian checkpoints only (" + c.model_type +
                       " decides its position table)");
  c.d_model = r.positive("d_model", kMaxFileWidth, std::nullopt, kFileLimit);
  c.encoder_layers = r.positive("encoder_layers", kMaxFileLayers, std::nullopt, kFileLimit);
  c.decoder_layers = r.positive("decoder_layers", kMaxFileLayers, std::nullopt, kFileLimit);
  c.heads = r.positive("encoder_attention_heads", kMaxFileWidth, std::nullopt, kFileLimit);
  if (r.positive("decoder_attention_heads", kMaxFileWidth, c.heads, kFileLimit) != c.heads)
    throw ConvertError(path + ": encoder_attention_heads and decoder_attention_heads differ (unsupported)");
  c.ffn = r.positive("encoder_ffn_dim", kMaxFileWidth, std::nullopt, kFileLimit);
  if (r.positive("decoder_ffn_dim", kMaxFileWidth, c.ffn, kFileLimit) != c.ffn)
    throw ConvertError(path + ": encoder_ffn_dim and decoder_ffn_dim differ (unsupported)");
  c.vocab = r.positive("vocab_size", kMaxFileVocab, std::nullopt, kFileLimit);
  c.target_vocab = r.positive("decoder_vocab_size", kMaxFileVocab, c.vocab, kFileLimit);
  c.max_positions = r.positive("max_position_embeddings", kMaxFilePositions, std::nullopt, kFileLimit);
  if (c.d_model % c.heads != 0)
    throw ConvertError(path + ": d_model " + std::to_string(c.d_model) +
                       " is not divisible by encoder_attention_heads " + std::to_string(c.heads));
  // M2M100Config defaults scale_embedding to true, MarianConfig and MBartConfig to false.
  c.scale_embedding = r.flag("scale_embedding", c.family == Family::kM2M100);
  // Keys of the BART-era configs that transformers' CheckpointConfig ignores: checked
  // against what Marian is (post-LN, sinusoidal positions, no embedding norm, no
  // extra logits bias), never used to decide the structure. A contradiction is refused
  // rather than guessed; --norm / --positions state a different structure deliberately.
  struct Legacy {
    const char* key;
    bool marian_value;
    const char* overridden_by;  // the converter flag that states the structure instead
  };
  // (mBART-50's config.json carries them too; MBart's code ignores them as well.)
  for (const Legacy& k : {Legacy{"normalize_before", false, "--norm"}, Legacy{"add_final_layer_norm", false, "--norm"},
                          Legacy{"static_position_embeddings", true, "--positions"},
                          Legacy{"normalize_embedding", false, nullptr}, Legacy{"add_bias_logits", false, nullptr}}) {
    if (!marian) break;
    if (!r.raw().contains(k.key) || r.raw()[k.key].is_null()) continue;
    const bool value = r.flag(k.key, k.marian_value);
    const bool overridden = k.overridden_by != nullptr &&
                            (std::string(k.overridden_by) == "--norm" ? options.norm.has_value()
                                                                      : options.positions != PositionChoice::kAuto);
    if (value != k.marian_value && !overridden)
      throw ConvertError(path + ": " + k.key + " = " + (value ? "true" : "false") +
                         " contradicts model_type 'marian' (transformers ignores this key; a Marian model is " +
                         (k.marian_value ? "built as if it were true" : "built as if it were false") + ")" +
                         (k.overridden_by ? std::string("; pass ") + k.overridden_by +
                                                " to convert such a model deliberately"
                                          : std::string("; Petrel does not support it")));
    c.legacy_keys.push_back(std::string(k.key) + "=" + (value ? "true" : "false"));
  }
  c.normalize_before = marian ? options.norm == NormPlacement::kPre : true;
  c.tie_word_embeddings = r.flag("tie_word_embeddings", true);
  c.share_embeddings = r.flag("share_encoder_decoder_embeddings", true);
  if (c.share_embeddings && c.target_vocab != c.vocab)
    throw ConvertError(path + ": decoder_vocab_size " + std::to_string(c.target_vocab) + " differs from vocab_size " +
                       std::to_string(c.vocab) + ", but share_encoder_decoder_embeddings is true (one table)");
  std::string act = r.text("activation_function", c.family == Family::kMarian   ? "swish"
                                                  : c.family == Family::kM2M100 ? "relu"
                                                                                : "gelu");
  if (act == "swish" || act == "silu") c.activation = Activation::kSwish;
  else if (act == "relu") c.activation = Activation::kRelu;
  else if (act == "gelu") c.activation = Activation::kGelu;
  else throw ConvertError(path + ": unknown activation_function '" + act + "' (relu, gelu, swish/silu are supported)");
  c.pad = r.token("pad_token_id", c.target_vocab);
  c.eos = r.token("eos_token_id", c.target_vocab);
  read_generation(r, c, /*from_generation_config=*/false);
  return c;
}

// The generation keys of `r` into c. transformers takes generation_config.json
// whole when a checkpoint has one (GenerationConfig.from_pretrained), and otherwise
// the generation keys of config.json (GenerationConfig.from_model_config).
void read_generation(const ConfigReader& r, CheckpointConfig& c, bool from_generation_config) {
  const std::string& path = r.path();
  const json& j = r.raw();
  auto given = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  c.generation_source = path;
  if (given("decoder_start_token_id"))
    c.decoder_start = r.token("decoder_start_token_id", c.target_vocab);
  else if (!from_generation_config && c.family == Family::kMBart)  // MBartConfig has none: generate() takes bos
    c.decoder_start = given("bos_token_id") ? r.token("bos_token_id", c.target_vocab) : 0;
  else if (!from_generation_config)
    c.decoder_start = r.token("decoder_start_token_id", c.target_vocab);
  if (from_generation_config && given("eos_token_id") && r.token("eos_token_id", c.target_vocab) != c.eos)
    throw ConvertError(path + ": eos_token_id " + json_excerpt(j["eos_token_id"]) + " differs from config.json's " +
                       std::to_string(c.eos));
  c.bad_words.clear();
  if (given("bad_words_ids")) {
    const json& bw = j["bad_words_ids"];
    if (!bw.is_array()) throw ConvertError(path + ": bad_words_ids must be a list of lists");
    std::vector<bool> listed(c.target_vocab, false);  // each id once: repeats mask nothing more
    for (const json& seq : bw) {
      if (!seq.is_array() || seq.size() != 1 || !seq[0].is_number_integer() || seq[0].get<int64_t>() < 0 ||
          seq[0].get<int64_t>() >= c.target_vocab)
        throw ConvertError(path + ": bad_words_ids entry " + json_excerpt(seq) +
                           " is not supported (single token ids below vocab_size are)");
      const auto id = seq[0].get<int32_t>();
      if (!listed[static_cast<size_t>(id)]) c.bad_words.push_back(id);
      listed[static_cast<size_t>(id)] = true;
    }
  }
  c.num_beams = given("num_beams") ? r.positive("num_beams") : 1;
  if (c.num_beams > 64) throw ConvertError(path + ": num_beams " + std::to_string(c.num_beams) + " exceeds 64");
  c.max_length = given("max_length") ? r.positive("max_length") : 0;
  c.length_penalty = 1.0;
  if (given("length_penalty")) {
    if (!j["length_penalty"].is_number() || !(j["length_penalty"].get<double>() >= 0) ||
        j["length_penalty"].get<double>() > 10)
      throw ConvertError(path + ": length_penalty must be a number in 0..10, got " + json_excerpt(j["length_penalty"]));
    c.length_penalty = j["length_penalty"].get<double>();
  }
  c.early_stopping = false;
  if (given("early_stopping")) {
    if (j["early_stopping"].is_string())
      throw ConvertError(path + ": early_stopping " + json_excerpt(j["early_stopping"]) +
                         " is not supported (true or false are)");
    c.early_stopping = r.flag("early_stopping", false);
  }
  c.forced_eos = given("forced_eos_token_id") ? r.token("forced_eos_token_id", c.target_vocab) : -1;
  // MBartConfig's forced_eos_token_id defaults to 2: config.json need not say it.
  if (!given("forced_eos_token_id") && !from_generation_config && c.family == Family::kMBart && c.target_vocab > 2)
    c.forced_eos = 2;
  c.forced_bos = given("forced_bos_token_id") ? r.token("forced_bos_token_id", c.target_vocab) : -1;
  // Settings that change what generate() returns and Petrel does not apply: told, not hidden.
  c.generation_notes.clear();
  auto note_if = [&](const char* key, bool applies) {
    if (given(key) && applies) c.generation_notes.push_back(std::string(key) + " = " + j[key].dump());
  };
  note_if("do_sample", r.flag("do_sample", false));  // not j.value(): a non-bool threw nlohmann's type_error
  note_if("renormalize_logits", r.flag("renormalize_logits", false));
  note_if("repetition_penalty", given("repetition_penalty") && j["repetition_penalty"] != 1.0);
  note_if("no_repeat_ngram_size", given("no_repeat_ngram_size") && j["no_repeat_ngram_size"] != 0);
  note_if("min_length", given("min_length") && j["min_length"] != 0);
  note_if("num_beam_groups", given("num_beam_groups") && j["num_beam_groups"] != 1);
}

std::vector<std::string> directory_files(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// nullopt: no model*.bin / model*.npz (not a Marian C++ directory).
std::optional<MarianNativeFiles> find_marian_native_files(const std::string& dir) {
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  auto ends = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  // SentencePiece models, or Marian's word vocabularies (DefaultVocab: YAML, JSON, text).
  auto vocabulary = [&](const std::string& f) {
    return ends(f, ".spm") || ends(f, ".yml") || ends(f, ".yaml") || ends(f, ".json") || ends(f, ".txt");
  };
  std::vector<std::string> models, shared, source, target, binary_lex, text_lex;
  for (const std::string& f : directory_files(dir)) {
    if (starts(f, "model") && (ends(f, ".bin") || ends(f, ".npz"))) models.push_back(f);
    else if (starts(f, "vocab") && vocabulary(f)) shared.push_back(f);
    else if (starts(f, "srcvocab") && vocabulary(f)) source.push_back(f);
    else if (starts(f, "trgvocab") && vocabulary(f)) target.push_back(f);
    else if (starts(f, "lex") && ends(f, ".bin")) binary_lex.push_back(f);
    else if (starts(f, "lex") && ends(f, ".s2t")) text_lex.push_back(f);
  }
  if (models.empty()) return std::nullopt;
  auto one = [&](const std::vector<std::string>& found, const char* what) {
    if (found.size() > 1) {
      std::string list;
      for (const auto& f : found) list += (list.empty() ? "" : ", ") + f;
      throw ConvertError(dir + ": more than one " + what + " (" + list + "); keep one");
    }
    return found.empty() ? std::string() : dir + "/" + found[0];
  };
  MarianNativeFiles m;
  m.model = one(models, "Marian model file (model*.bin, model*.npz)");
  const std::string shared_vocab = one(shared, "shared vocabulary (vocab*.spm, .yml, .json, .txt)");
  m.source_vocab = one(source, "source vocabulary (srcvocab*.spm, .yml, .json, .txt)");
  m.target_vocab = one(target, "target vocabulary (trgvocab*.spm, .yml, .json, .txt)");
  if (!shared_vocab.empty() && (!m.source_vocab.empty() || !m.target_vocab.empty()))
    throw ConvertError(dir + ": both a shared vocabulary (vocab*.spm) and srcvocab/trgvocab files; keep one kind");
  if (!shared_vocab.empty()) m.source_vocab = m.target_vocab = shared_vocab;
  if (m.source_vocab.empty() || m.target_vocab.empty())
    throw ConvertError(dir + ": a Marian model needs its vocabularies: vocab*.spm (or .yml, .json, .txt), or "
                       "srcvocab* and trgvocab*");
  const bool source_spm = ends(m.source_vocab, ".spm"), target_spm = ends(m.target_vocab, ".spm");
  m.word_vocabularies = !source_spm;
  if (source_spm != target_spm)
    throw ConvertError(dir + ": one SentencePiece and one word vocabulary (" + m.source_vocab + ", " + m.target_vocab +
                       "); Petrel needs both of one kind");
  if (!binary_lex.empty() && !text_lex.empty())
    throw ConvertError(dir + ": both a binary (lex*.bin) and a text (lex*.s2t) shortlist; keep one");
  m.shortlist = one(binary_lex, "binary shortlist (lex*.bin)");
  if (m.shortlist.empty()) m.shortlist = one(text_lex, "text shortlist (lex*.s2t)");
  return m;
}

// A Marian model's vocabulary: a SentencePiece model's pieces, or a word vocabulary.
struct NativeVocabulary {
  std::string path;
  bool map = false;                  // YAML or JSON: Nematus' reserved ids apply
  std::vector<std::string> tokens;   // id -> token

  // `token`'s id; a map's id `nematus_id` also counts when that entry is empty or `nematus`.
  int32_t id_of(const std::string& token, const std::string& nematus, size_t nematus_id) const {
    if (map && nematus_id < tokens.size() && (tokens[nematus_id].empty() || tokens[nematus_id] == nematus))
      return static_cast<int32_t>(nematus_id);
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == token) return static_cast<int32_t>(i);
    throw ConvertError(path + ": no '" + token + "' (Marian needs it)");
  }
};

NativeVocabulary read_native_vocabulary(const std::string& path) {
  NativeVocabulary v;
  v.path = path;
  const bool words = path.size() < 4 || path.compare(path.size() - 4, 4, ".spm") != 0;  // DefaultVocab
  if (!words) {
    const SpmModel m = read_spm_model(path);
    v.tokens.assign(m.pieces.begin(), m.pieces.end());
    return v;
  }
  v.map = path.size() >= 4 && path.compare(path.size() - 4, 4, ".txt") != 0;
  v.tokens = read_marian_word_vocabulary(path);
  return v;
}

// A Marian model's options (special:model.yml) as the converter's config. What Petrel
// does not run is refused by name (tools/reference/MARIAN_NATIVE.md lists the keys).
CheckpointConfig read_marian_native_config(const MarianOptions& o, uint32_t source_pieces, uint32_t target_pieces) {
  const std::string& where = o.name;
  auto refuse = [&](const std::string& key, const std::string& value, const std::string& supported) {
    throw ConvertError(where + ": " + key + " '" + value + "' is not supported (" + supported + ")");
  };
  auto expect = [&](const std::string& key, const std::string& fallback, std::initializer_list<const char*> allowed) {
    const std::string value = o.text(key, fallback);
    std::string list;
    for (const char* a : allowed) {
      if (value == a) return value;
      list += (list.empty() ? "" : ", ") + (std::string(a).empty() ? std::string("\"\"") : std::string(a));
    }
    refuse(key, value, list);
    return value;
  };
  CheckpointConfig c;
  c.marian_native = true;
  c.model_type = "marian (C++)";
  expect("type", "transformer", {"transformer"});
  c.d_model = static_cast<uint32_t>(o.integer("dim-emb", 512, 2, 1 << 16));
  c.encoder_layers = static_cast<uint32_t>(o.integer("enc-depth", 6, 1, 1024));
  c.decoder_layers = static_cast<uint32_t>(o.integer("dec-depth", 6, 1, 1024));
  c.heads = static_cast<uint32_t>(o.integer("transformer-heads", 8, 1, 1024));
  c.ffn = static_cast<uint32_t>(o.integer("transformer-dim-ffn", 2048, 1, 1 << 20));
  const int64_t decoder_ffn = o.integer("transformer-decoder-dim-ffn", 0, 0, 1 << 20);
  if (decoder_ffn != 0 && decoder_ffn != c.ffn)
    throw ConvertError(where + ": transformer-decoder-dim-ffn " + std::to_string(decoder_ffn) +
                       " differs from transformer-dim-ffn " + std::to_string(c.ffn) + " (unsupported)");
  for (const char* key : {"transformer-ffn-depth", "transformer-decoder-ffn-depth"}) {
    const int64_t depth = o.integer(key, 2, 0, 1024);
    if (depth != 2 && !(depth == 0 && std::string(key) == "transformer-decoder-ffn-depth"))
      throw ConvertError(where + ": " + key + " " + std::to_string(depth) + " is not supported (2 is)");
  }
  const std::string act = expect("transformer-ffn-activation", "swish", {"relu", "swish"});
  c.activation = act == "relu" ? Activation::kRelu : Activation::kSwish;
  expect("transformer-postprocess", "dan", {"dan"});
  expect("transformer-preprocess", "", {""});
  expect("transformer-postprocess-emb", "d", {"d", ""});
  expect("transformer-postprocess-top", "", {""});
  // average-attention decoders are refused here, by name.
  const std::string autoreg = expect("transformer-decoder-autoreg", "self-attention", {"self-attention", "rnn"});
  if (autoreg == "rnn") {
    expect("dec-cell", "gru", {"ssru"});  // Marian's default cell is a GRU
    c.ssru_decoder = true;
  }
  // The layer whose cross-attention was trained to align (guided alignment): "last" or a
  // 1-based number, as marian-dev's transformer.h reads it.
  const std::string aligned = o.text("transformer-guided-alignment-layer", "last");
  if (aligned == "last") {
    c.alignment_layer = static_cast<int32_t>(c.decoder_layers) - 1;
  } else {
    char* end = nullptr;
    const unsigned long long layer = std::strtoull(aligned.c_str(), &end, 10);
    if (aligned.empty() || *end != '\0' || layer == 0 || layer > c.decoder_layers)
      throw ConvertError(where + ": transformer-guided-alignment-layer '" + aligned + "' is not 'last' or a layer 1.." +
                         std::to_string(c.decoder_layers));
    c.alignment_layer = static_cast<int32_t>(layer) - 1;
  }
  // Marian writes every option, defaults included (transformer-aan-* without an
  // average-attention decoder, factors-combine without factors): only those in effect count.
  for (const char* key : {"right-left", "layer-normalization", "transformer-no-projection", "transformer-pool", "skip",
                          "ulr"})
    if (o.flag(key, false)) throw ConvertError(where + ": " + key + ": true is not supported");
  if (!o.list("transformer-tied-layers").empty())
    throw ConvertError(where + ": transformer-tied-layers is not supported");
  if (o.integer("factors-dim-emb", 0, 0, 1 << 20) != 0)
    throw ConvertError(where + ": factored vocabularies (factors-dim-emb) are not supported");
  if (c.d_model % c.heads != 0)
    throw ConvertError(where + ": dim-emb " + std::to_string(c.d_model) + " is not divisible by transformer-heads " +
                       std::to_string(c.heads));
  if (c.d_model % 2 != 0) throw ConvertError(where + ": dim-emb must be even (sinusoidal positions)");
  const std::vector<std::string> vocabs = o.list("dim-vocabs");
  if (vocabs.size() != 2) throw ConvertError(where + ": dim-vocabs must list two sizes (source, target)");
  auto size_of = [&](const std::string& text, const char* which) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v == 0 || v > (1u << 24))
      throw ConvertError(where + ": dim-vocabs: " + which + " size '" + text + "' is not a positive integer");
    return static_cast<uint32_t>(v);
  };
  c.vocab = size_of(vocabs[0], "source");
  c.target_vocab = size_of(vocabs[1], "target");
  if (c.vocab != source_pieces || c.target_vocab != target_pieces)
    throw ConvertError(where + ": dim-vocabs [" + vocabs[0] + ", " + vocabs[1] + "] differ from the vocabularies' " +
                       std::to_string(source_pieces) + " and " + std::to_string(target_pieces) + " pieces");
  // tied-embeddings-all: one table for source, target and output; tied-embeddings: the
  // target table is the output's; tied-embeddings-src: source and target share one.
  const bool all = o.flag("tied-embeddings-all", false);
  c.share_embeddings = all || o.flag("tied-embeddings-src", false);
  c.tie_word_embeddings = all || o.flag("tied-embeddings", false);
  if (c.share_embeddings && c.vocab != c.target_vocab)
    throw ConvertError(where + ": tied source and target embeddings need one vocabulary size (dim-vocabs)");
  c.scale_embedding = true;  // Marian always multiplies embeddings by sqrt(dim-emb)
  c.normalize_before = false;
  c.layer_norm_eps = 1e-6f;
  c.max_positions = 1024;  // Marian computes sinusoids for any position; bergamot cuts inputs at 128 tokens
  c.max_length_factor = 2.0;  // Firefox's (and bergamot's) max-length-factor
  c.generation_source = where;
  return c;
}

// A matrix's values a block of rows at a time: fills out[count][cols] with rows
// [first, first + count). Big tables pass through the converter this way, never whole.
struct PositionDecision {
  PositionInfo info{PositionKind::kNone, FrequencyConvention::kPaper, 0};
  std::vector<float> learned;  // kLearned only
};

PositionDecision decide_positions(Source& src, const std::string& tensor, const CheckpointConfig& c,
                                  PositionChoice choice, const std::string& role,
                                  std::vector<std::string>* notes) {
  PositionDecision d;
  const size_t rows = c.max_positions, cols = c.d_model;
  if (!src.has(tensor)) {
    switch (choice) {
      case PositionChoice::kLearned:
        throw ConvertError(src.path() + ": --positions learned needs tensor '" + tensor + "'");
      case PositionChoice::kNone:
        d.info.kind = PositionKind::kNone;
        break;
      case PositionChoice::kSinusoidalInterleaved:
        d.info.kind = PositionKind::kSinusoidalInterleaved;
        break;
      default:  // Hugging Face Marian's table
        d.info.kind = PositionKind::kSinusoidalConcatenated;
    }
    if (d.info.kind != PositionKind::kNone && cols % 2 != 0)  // the engine generates pairs of sin and cos
      throw ConvertError(src.path() + ": d_model " + std::to_string(cols) + " is odd, and sinusoidal position "
                         "tables need an even one; pass --positions none or store a learned table");
    notes->push_back(role + " positions: " + to_string(d.info.kind) +
                     (d.info.kind == PositionKind::kNone ? "" : " (paper frequencies, first index 0)") +
                     "; no table stored in the checkpoint");
    return d;
  }
  std::vector<float> stored = src.read(tensor, {rows, cols});
  if (choice == PositionChoice::kLearned) {
    d.info.kind = PositionKind::kLearned;
    d.learned = std::move(stored);
    notes->push_back(role + " positions: learned table from '" + tensor + "'");
    return d;
  }
  if (choice == PositionChoice::kNone)
    throw ConvertError(src.path() + ": tensor '" + tensor +
                       "' holds a position table but --positions none was given");
  if (cols % 2 != 0)
    throw ConvertError(src.path() + ": tensor '" + tensor +
                       "': sinusoidal tables need an even d_model; pass --positions learned");
  std::vector<PositionKind> kinds;
  if (choice != PositionChoice::kSinusoidalInterleaved) kinds.push_back(PositionKind::kSinusoidalConcatenated);
  if (choice != PositionChoice::kSinusoidalConcatenated) kinds.push_back(PositionKind::kSinusoidalInterleaved);
  std::vector<float> table(rows * cols);
  double best = INFINITY;
  PositionInfo best_info{};
  for (PositionKind kind : kinds) {
    for (FrequencyConvention freq : {FrequencyConvention::kPaper, FrequencyConvention::kMarianCpp}) {
      for (uint32_t first : {0u, 1u, 2u}) {
        PositionInfo candidate{kind, freq, first};
        kernels::sinusoidal_table(candidate, rows, cols, table.data());
        double diff = 0;
        for (size_t i = 0; i < table.size(); ++i) diff = std::max(diff, std::fabs(double(table[i]) - stored[i]));
        if (diff < best) {
          best = diff;
          best_info = candidate;
        }
      }
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", best);
  if (best > kPositionTolerance)
    throw ConvertError(src.path() + ": tensor '" + tensor + "' matches no sinusoidal position variant (closest: " +
                       to_string(best_info.kind) + ", " + to_string(best_info.frequency) + " frequencies, first index " +
                       std::to_string(best_info.first_index) + ", max difference " + buf +
                       "); pass --positions learned to use the stored table as it is");
  d.info = best_info;
  notes->push_back(role + " positions: stored table '" + tensor + "' verified as " + to_string(best_info.kind) +
                   " (" + to_string(best_info.frequency) + " frequencies, first index " +
                   std::to_string(best_info.first_index) + "), max difference " + buf);
  return d;
}

// The position table of an M2M100 / NLLB or mBART stack (FAMILIES.md §3): both read
// row p + 2 for position p. M2M100's is tensor2tensor's sinusoid (Marian C++'s
// frequencies, sin | cos), which exports may store (`embed_positions.weights`, max_pos
// + 2 or + 4 rows, row 1 the zero padding row): checked, not kept. mBART's is learned.
PositionDecision family_positions(Source& src, const std::string& role, const CheckpointConfig& c,
                                  std::vector<std::string>* notes) {
  PositionDecision d;
  const std::string prefix = "model." + role + ".embed_positions.";
  if (c.family == Family::kMBart) {
    d.info = {PositionKind::kLearned, FrequencyConvention::kPaper, 2};
    d.learned = src.read(prefix + "weight", {uint64_t{c.max_positions} + 2, c.d_model});
    notes->push_back(role + " positions: learned table '" + prefix + "weight', position p at row p + 2");
    return d;
  }
  d.info = {PositionKind::kSinusoidalConcatenated, FrequencyConvention::kMarianCpp, 2};
  if (c.d_model % 2 != 0)
    throw ConvertError(src.path() + ": d_model " + std::to_string(c.d_model) +
                       " is odd; Petrel's sinusoidal position tables need an even one");
  std::string checked = "no table stored in the checkpoint";
  if (src.has(prefix + "weights")) {
    std::vector<uint64_t> shape;
    std::vector<float> stored = src.read_any(prefix + "weights", &shape);
    if (shape.size() != 2 || shape[1] != c.d_model || shape[0] < 3)
      throw ConvertError(src.path() + ": tensor '" + prefix + "weights' has shape " + Source::shape_text(shape) +
                         ", a sinusoid table of width " + std::to_string(c.d_model) + " was expected");
    const size_t rows = std::min<uint64_t>(shape[0] - 2, c.max_positions), cols = c.d_model;
    std::vector<float> table(rows * cols);
    kernels::sinusoidal_table(d.info, rows, cols, table.data());
    double diff = 0;
    for (size_t i = 0; i < table.size(); ++i) diff = std::max(diff, std::fabs(double(table[i]) - stored[2 * cols + i]));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", diff);
    if (!(diff <= kPositionTolerance))
      throw ConvertError(src.path() + ": tensor '" + prefix + "weights' is not M2M100's sinusoid table (max difference " +
                         buf + " from rows 2..)");
    checked = "stored table '" + prefix + "weights' verified, max difference " + std::string(buf);
  }
  notes->push_back(role + " positions: " + to_string(d.info.kind) + " (" + to_string(d.info.frequency) +
                   " frequencies, first index 2); " + checked);
  return d;
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

// The checkpoint's vocabulary files, read and checked (read_vocab and
// check_checkpoint_json share this, so the fuzz target checks what the converter does).
struct VocabularyFiles {
  std::vector<std::string> vocab;         // vocab.json: id -> token
  std::vector<std::string> target_vocab;  // target_vocab.json, when the target vocabulary is separate
  bool marian = false;                    // source.spm + target.spm and every vocabulary they need
  int32_t eos = -1, unk = -1, pad = -1;   // marian: "</s>", "<unk>", "<pad>" in vocab
  bool clean_up = true;                   // marian: tokenizer_config.json's clean_up_tokenization_spaces
};

// The files' texts (nullopt: absent); `spm_files`: source.spm and target.spm exist.
VocabularyFiles read_vocabulary_files(const std::string& dir, const CheckpointConfig& c, const std::string& vocab_text,
                                      const std::optional<std::string>& target_vocab_text,
                                      const std::optional<std::string>& tokenizer_config_text, bool spm_files) {
  VocabularyFiles v;
  const std::string path = dir + "/vocab.json";
  v.vocab = parse_vocab(path, vocab_text, c.vocab, "vocab_size");
  const bool separate = c.target_vocab != c.vocab;
  if (separate && target_vocab_text)
    v.target_vocab = parse_vocab(dir + "/target_vocab.json", *target_vocab_text, c.target_vocab, "decoder_vocab_size");
  v.marian = spm_files && (!separate || target_vocab_text);
  if (!v.marian) return v;
  auto id_of = [&](const char* token) -> int32_t {
    auto it = std::find(v.vocab.begin(), v.vocab.end(), token);
    if (it == v.vocab.end()) throw ConvertError(path + ": no '" + token + "' (a Marian vocabulary has it)");
    return static_cast<int32_t>(it - v.vocab.begin());
  };
  v.eos = id_of("</s>");
  v.unk = id_of("<unk>");
  v.pad = id_of("<pad>");
  if (tokenizer_config_text) {
    const ConfigReader tc(dir + "/tokenizer_config.json", *tokenizer_config_text);
    v.clean_up = tc.flag("clean_up_tokenization_spaces", true);  // the tokenizer base class's default
  }
  return v;
}

class Converter : TensorOutput {
 public:
  Converter(const ConvertOptions& o, const CheckpointConfig& c, Source& src) : TensorOutput(o, src), c_(c) {}

  ConvertReport run() {
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
    mb.add_format_major(kFormatMajor);
    mb.add_format_minor(kFormatMinor);
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

 private:
  flatbuffers::Offset<fb::Linear> linear(const std::string& hf, const std::string& name, uint64_t out, uint64_t in,
                                         float scale = 1.0f, bool bias = true) {
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

  flatbuffers::Offset<fb::Norm> norm(const std::string& hf, const std::string& name) {
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

  flatbuffers::Offset<fb::Attention> attention(const std::string& hf, const std::string& name) {
    const uint64_t d = c_.d_model;
    auto q = linear(hf + ".q_proj", name + ".q", d, d, attention_scale_);
    q_targets_.push_back(name + ".q.weight");
    q_targets_.push_back(name + ".q.bias");
    auto k = linear(hf + ".k_proj", name + ".k", d, d);
    auto v = linear(hf + ".v_proj", name + ".v", d, d);
    auto o = linear(hf + ".out_proj", name + ".o", d, d);
    return fb::CreateAttention(fbb_, q, k, v, o);
  }

  flatbuffers::Offset<fb::Stack> stack(const std::string& role, int32_t embed, const PositionDecision& pos,
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

  // A .spm model as the engine stores it; vocab_ids maps its pieces to `vocab` ids
  // (-1: absent) when vocab is given.
  flatbuffers::Offset<fb::SentencePieceModel> sentencepiece_table(const SpmModel& m, const std::vector<std::string>* vocab,
                                                                  TokenizerStrings& strings) {
    if (vocab == nullptr) return write_sentencepiece_model(fbb_, m, nullptr, strings);
    detail::StringMap<std::string_view, int32_t> id_of;
    for (size_t i = 0; i < vocab->size(); ++i) id_of.emplace((*vocab)[i], static_cast<int32_t>(i));
    std::vector<int32_t> ids;
    size_t missing = 0;
    for (std::string_view p : m.pieces) {
      auto it = id_of.find(p);
      ids.push_back(it == id_of.end() ? -1 : it->second);
      missing += it == id_of.end();
    }
    report_.notes.push_back(m.path.substr(m.path.find_last_of('/') + 1) + ": " + std::to_string(m.pieces.size()) +
                            " pieces, " + std::to_string(missing) + " of them not in vocab.json (encoded as <unk>)");
    return write_sentencepiece_model(fbb_, m, &ids, strings);
  }

  // The text tokenizer: opus-mt's (source.spm + target.spm + vocab.json [+
  // target_vocab.json]), else the demo's word tokenizer over vocab.json, else none.
  flatbuffers::Offset<fb::Tokenizer> read_vocab() {
    const std::string& dir = options_.checkpoint_dir;
    const std::string path = dir + "/vocab.json";
    if (c_.marian_native) return marian_native_tokenizer();
    if (c_.family != Family::kMarian) {  // NLLB, M2M100, mBART-50: nullopt, with a note, without the files
      const auto family = read_family_tokenizer(dir, c_.model_type, c_.tokenizer_class, c_.vocab, &report_.notes);
      return family ? write_family_tokenizer(fbb_, *family, options_.tokenizer_strings) : 0;
    }
    if (!file_exists(path)) {
      report_.notes.push_back("vocabulary: none (no vocab.json); use token ids");
      return 0;
    }
    auto text_if_exists = [&](const std::string& file) -> std::optional<std::string> {
      if (!file_exists(dir + "/" + file)) return std::nullopt;
      return read_text(dir + "/" + file, "");
    };
    const bool spm_files = file_exists(dir + "/source.spm") && file_exists(dir + "/target.spm");
    const bool separate = c_.target_vocab != c_.vocab;
    const VocabularyFiles files =
        read_vocabulary_files(dir, c_, read_text(path, ""), separate ? text_if_exists("target_vocab.json") : std::nullopt,
                              spm_files ? text_if_exists("tokenizer_config.json") : std::nullopt, spm_files);
    const std::vector<std::string>& vocab = files.vocab;
    const std::vector<std::string>& target_vocab = files.target_vocab;
    vocab_ = vocab;
    TokenizerStrings strings(fbb_, options_.tokenizer_strings);
    const TokenizerStrings::Table vocab_table = strings.add(vocab);

    if (files.marian) {
      const SpmModel source = read_spm_model(dir + "/source.spm");
      const SpmModel target = read_spm_model(dir + "/target.spm");
      const bool clean_up = files.clean_up;
      TokenizerStrings::Table target_vocab_table;
      if (!target_vocab.empty()) target_vocab_table = strings.add(target_vocab);
      auto source_table = sentencepiece_table(source, &vocab, strings);
      auto target_table = sentencepiece_table(target, nullptr, strings);
      auto blob = strings.blob();
      report_.notes.push_back("text tokenizer: Marian (transformers 4.22-4.33 MarianTokenizer rules): " +
                              std::string(source.algorithm == text::SpmAlgorithm::kBpe ? "BPE" : "unigram") +
                              " source.spm, " + (target.algorithm == text::SpmAlgorithm::kBpe ? "BPE" : "unigram") +
                              " target.spm, " + std::to_string(vocab.size()) + " vocabulary tokens" +
                              (separate ? " + " + std::to_string(target_vocab.size()) + " target tokens" : "") +
                              (clean_up ? ", tokenization spaces cleaned up" : ""));
      fb::TokenizerBuilder b(fbb_);
      b.add_kind(fb::TokenizerKind::Marian);
      TokenizerStrings::add_vocab(b, vocab_table);
      TokenizerStrings::add_target_vocab(b, target_vocab_table);
      TokenizerStrings::add_blob(b, blob);
      b.add_source(source_table);
      b.add_target(target_table);
      b.add_eos_id(files.eos);
      b.add_unk_id(files.unk);
      b.add_pad_id(files.pad);
      b.add_clean_up_spaces(clean_up);
      return b.Finish();
    }
    const bool word_tokenizer = !spm_files && !separate;
    report_.notes.push_back(std::string("vocabulary: ") + std::to_string(c_.vocab) + " tokens" +
                            (word_tokenizer ? ", text tokenizer: words, unknown words as characters"
                             : spm_files    ? " (no target_vocab.json for the separate target vocabulary: no text "
                                              "tokenizer; use token ids)"
                                            : " (no source.spm/target.spm: use token ids)"));
    auto blob = strings.blob();
    fb::TokenizerBuilder b(fbb_);
    b.add_kind(word_tokenizer ? fb::TokenizerKind::WordsThenChars : fb::TokenizerKind::None);
    TokenizerStrings::add_vocab(b, vocab_table);
    TokenizerStrings::add_blob(b, blob);
    return b.Finish();
  }

  // Marian C++ models: the SentencePiece ids are the model's (text::SentencePieceIdsTokenizer).
  flatbuffers::Offset<fb::Tokenizer> marian_native_tokenizer() {
    const bool shared = c_.native.target_vocab == c_.native.source_vocab;
    auto name = [](const std::string& p) { return p.substr(p.find_last_of('/') + 1); };
    TokenizerStrings strings(fbb_, options_.tokenizer_strings);
    if (c_.native.word_vocabularies) {  // Marian's DefaultVocab
      vocab_ = read_marian_word_vocabulary(c_.native.source_vocab);
      const TokenizerStrings::Table vocab = strings.add(vocab_);
      TokenizerStrings::Table target;
      if (!shared) target = strings.add(read_marian_word_vocabulary(c_.native.target_vocab));
      auto blob = strings.blob();
      report_.notes.push_back("text tokenizer: Marian C++'s word vocabulary (DefaultVocab: words split at spaces, "
                              "EOS appended; text must be segmented as for training): " + name(c_.native.source_vocab) +
                              (shared ? " (shared)" : " + " + name(c_.native.target_vocab)) + ", " +
                              std::to_string(vocab_.size()) + " tokens");
      fb::TokenizerBuilder b(fbb_);
      b.add_kind(fb::TokenizerKind::MarianWords);
      TokenizerStrings::add_vocab(b, vocab);
      TokenizerStrings::add_target_vocab(b, target);
      TokenizerStrings::add_blob(b, blob);
      b.add_eos_id(c_.eos);
      b.add_unk_id(bad_unk());
      b.add_clean_up_spaces(false);
      return b.Finish();
    }
    const SpmModel source = read_spm_model(c_.native.source_vocab);
    const SpmModel target = shared ? source : read_spm_model(c_.native.target_vocab);
    // The pieces serve as the vocabulary of a text shortlist (lex.s2t names tokens).
    vocab_.assign(source.pieces.begin(), source.pieces.end());
    auto source_table = write_sentencepiece_model(fbb_, source, nullptr, strings);
    auto target_table = shared ? source_table : write_sentencepiece_model(fbb_, target, nullptr, strings);
    auto blob = strings.blob();
    report_.notes.push_back("text tokenizer: Marian C++'s (SentencePiece ids are the model's, EOS appended, spm "
                            "decoding): " + name(c_.native.source_vocab) +
                            (shared ? " (shared)" : " + " + name(c_.native.target_vocab)) + ", " +
                            std::to_string(source.pieces.size()) + " pieces; </s> " + std::to_string(c_.eos) +
                            ", <unk> " + std::to_string(bad_unk()) + " (never generated)");
    fb::TokenizerBuilder b(fbb_);
    b.add_kind(fb::TokenizerKind::SentencePieceIds);
    TokenizerStrings::add_blob(b, blob);
    b.add_source(source_table);
    b.add_target(target_table);
    b.add_eos_id(c_.eos);
    b.add_unk_id(bad_unk());
    b.add_clean_up_spaces(false);
    return b.Finish();
  }
  int32_t bad_unk() const { return c_.bad_words.empty() ? -1 : c_.bad_words[0]; }

  flatbuffers::Offset<fb::Shortlist> read_shortlist() {
    if (c_.marian_native && options_.shortlist_path.empty() && !c_.native.shortlist.empty()) {
      return write_shortlist(c_.native.shortlist, is_binary_shortlist(c_.native.shortlist));  // as Firefox does
    }
    const std::string& path = options_.shortlist_path;
    if (path.empty()) return 0;
    return write_shortlist(path, is_binary_shortlist(path));
  }

  flatbuffers::Offset<fb::Shortlist> write_shortlist(const std::string& path, bool binary) {
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

  const CheckpointConfig& c_;
  std::vector<std::string> vocab_;  // id -> token, when the checkpoint has vocab.json
  std::vector<std::string> q_targets_;
  float attention_scale_ = 1.0f;
  std::string output_norm_, output_norm_target_;
  float output_unscale_ = 1.0f;
};

}  // namespace

bool valid_embed_scale(double scale) { return scale >= 1e-6 && scale <= 1e6; }  // NaN fails: its fold and unscale stay finite f32

DType parse_dtype(const std::string& text, const std::string& flag) {
  if (text == "f32") return DType::kF32;
  if (text == "f16") return DType::kF16;
  if (text == "int8") return DType::kInt8;
  if (text == "int4") return DType::kInt4;
  throw ConvertError(flag + ": unknown dtype '" + text + "' (f32, f16, int8, int4)");
}

NormPlacement parse_norm(const std::string& text) {
  if (text == "pre") return NormPlacement::kPre;
  if (text == "post") return NormPlacement::kPost;
  throw ConvertError("--norm: unknown value '" + text + "' (pre, post)");
}

PositionChoice parse_position_choice(const std::string& text) {
  if (text == "auto") return PositionChoice::kAuto;
  if (text == "sinusoidal-concatenated") return PositionChoice::kSinusoidalConcatenated;
  if (text == "sinusoidal-interleaved") return PositionChoice::kSinusoidalInterleaved;
  if (text == "learned") return PositionChoice::kLearned;
  if (text == "none") return PositionChoice::kNone;
  throw ConvertError("--positions: unknown value '" + text +
                     "' (auto, sinusoidal-concatenated, sinusoidal-interleaved, learned, none)");
}

namespace {

// A Marian C++ model directory (Firefox's models) -> a Petrel file.
ConvertReport convert_marian_native(const ConvertOptions& options, const MarianNativeFiles& files) {
  if (options.norm || options.positions != PositionChoice::kAuto || options.embed_scale)
    throw ConvertError("--norm, --positions and --embed-scale apply to Hugging Face checkpoints only (a Marian model's "
                       "model.yml states its structure)");
  auto weights = std::make_unique<MarianNativeCheckpoint>(open_marian_model(files.model));
  const NativeVocabulary source = read_native_vocabulary(files.source_vocab);
  const NativeVocabulary target =
      files.target_vocab == files.source_vocab ? source : read_native_vocabulary(files.target_vocab);
  CheckpointConfig config = read_marian_native_config(weights->options(), static_cast<uint32_t>(source.tokens.size()),
                                                      static_cast<uint32_t>(target.tokens.size()));
  config.native = files;
  // Marian takes EOS and UNK from the vocabulary: the pieces "</s>" and "<unk>"
  // (SentencePieceVocab), or DefaultVocab's entries, which in YAML/JSON files may also
  // be ids 0 and 1 when those are empty or Nematus' "eos" / "UNK" (addRequiredVocabulary).
  config.eos = source.id_of("</s>", "eos", 0);
  const int32_t unk = source.id_of("<unk>", "UNK", 1);
  if (target.id_of("</s>", "eos", 0) != config.eos || target.id_of("<unk>", "UNK", 1) != unk)
    throw ConvertError(files.target_vocab + ": '</s>' and '<unk>' have other ids than in " + files.source_vocab);
  config.pad = config.decoder_start = config.eos;  // no pad; the start is a zero embedding
  config.bad_words = {unk};                        // Marian's allow-unk: false
  Source src(*weights, options);
  ConvertReport report = Converter(options, config, src).run();
  report.notes.insert(report.notes.begin(),
                      "weights: read " + files.model.substr(files.model.find_last_of('/') + 1) + " (" +
                          weights->format() + (weights->has_intgemm8() ? ", intgemm8 weights taken as stored" : "") +
                          (weights->has_activation_scales() ? ", with activation scales (alphas)" : "") + ")");
  return report;
}

}  // namespace

namespace {
// The output is written beside itself and renamed into place, which replaces whatever the
// path names: refuse what must not be replaced (a device, FIFO, symlink or directory, or
// one of the checkpoint's own files: its weights were overwritten).
void check_output_path(const std::string& output, const std::string& dir) {
  if (output.empty()) throw ConvertError("no output path given");
  struct stat out {};
  if (::lstat(output.c_str(), &out) != 0) return;  // a new file
  if (!S_ISREG(out.st_mode))
    throw ConvertError(output + ": exists and is not a regular file (a device, FIFO, symlink or directory): not replaced");
  if (DIR* d = ::opendir(dir.c_str())) {
    bool input = false;
    for (const dirent* e; !input && (e = ::readdir(d)) != nullptr;) {
      struct stat in {};
      input = ::stat((dir + "/" + e->d_name).c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
    }
    ::closedir(d);
    if (input) throw ConvertError(output + ": is a file of the checkpoint being converted: not replaced");
  }
}
}  // namespace

ConvertReport convert_checkpoint(const ConvertOptions& options) {
  const std::string& dir = options.checkpoint_dir;
  struct stat dir_stat {};
  if (::stat(dir.c_str(), &dir_stat) != 0 || !S_ISDIR(dir_stat.st_mode))
    throw ConvertError(dir + ": not a checkpoint directory");
  check_output_path(options.output_path, dir);
  if (options.embed_scale && !valid_embed_scale(*options.embed_scale))
    throw ConvertError("--embed-scale must be in [1e-6, 1e6]");
  if (!file_exists(dir + "/config.json"))
    if (auto native = find_marian_native_files(dir)) return convert_marian_native(options, *native);
  const std::string config_path = dir + "/config.json", generation_path = dir + "/generation_config.json";
  const ConfigReader config_json(config_path, read_text(config_path, " (a checkpoint directory needs config.json)"));
  if (is_decoder_only_type(config_json.text("model_type", ""))) {
    std::optional<ConfigReader> generation;
    if (file_exists(generation_path)) generation.emplace(generation_path, read_text(generation_path, ""));
    std::unique_ptr<CheckpointFile> weights = open_checkpoint_weights(dir);
    ConvertReport report = convert_decoder_only(options, config_json, generation ? &*generation : nullptr, *weights);
    const std::string& path = weights->path();
    report.notes.insert(report.notes.begin(),
                        "weights: read " + path.substr(path.find_last_of('/') + 1) + " (" + weights->format() + ")");
    return report;
  }
  CheckpointConfig config = read_config(config_json, options);
  if (file_exists(generation_path))
    read_generation(ConfigReader(generation_path, read_text(generation_path, "")), config,
                    /*from_generation_config=*/true);
  std::unique_ptr<CheckpointFile> weights = open_checkpoint_weights(dir);
  Source src(*weights, options);
  ConvertReport report = Converter(options, config, src).run();
  const std::string& path = weights->path();
  report.notes.insert(report.notes.begin(),
                      "weights: read " + path.substr(path.find_last_of('/') + 1) + " (" + weights->format() + ")");
  return report;
}

CheckedVocabulary check_checkpoint_json(const CheckpointJson& files, const ConvertOptions& options) {
  const std::string& dir = options.checkpoint_dir;
  const ConfigReader config_json(dir + "/config.json", files.config);
  if (is_decoder_only_type(config_json.text("model_type", ""))) {  // a language model: no vocabulary files yet
    std::optional<ConfigReader> generation;
    if (files.generation_config) generation.emplace(dir + "/generation_config.json", *files.generation_config);
    check_decoder_only_json(config_json, generation ? &*generation : nullptr, dir, files.tokenizer_config);
    return {{}, {}, false, config_json.text("model_type", "")};
  }
  CheckpointConfig c = read_config(config_json, options);
  if (files.generation_config)
    read_generation(ConfigReader(dir + "/generation_config.json", *files.generation_config), c,
                    /*from_generation_config=*/true);
  if (c.family != Family::kMarian) {
    const FamilyTokenizerFiles family{dir, files.tokenizer_config, files.vocab, files.family_sentencepiece};
    const auto t = family_tokenizer_from(family, c.model_type, c.tokenizer_class, c.vocab, nullptr);
    return {t ? t->vocab : std::vector<std::string>{}, {}, false, c.model_type, t.has_value()};
  }
  if (!files.vocab) return {{}, {}, false, c.model_type};
  const VocabularyFiles v = read_vocabulary_files(dir, c, *files.vocab, files.target_vocab, files.tokenizer_config,
                                                  files.sentencepiece);
  return {v.vocab, v.target_vocab, v.marian, c.model_type};
}

}  // namespace petrel::convert
