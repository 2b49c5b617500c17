// Hugging Face translation checkpoints (Marian, M2M100 / NLLB-200, mBART; their
// model_type decides the family, tools/reference/FAMILIES.md): config.json and
// generation_config.json as transformers reads them, the position tables, and the
// vocabulary files and text tokenizer (convert_encoder_decoder.h).
#include "convert/convert_encoder_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/string_hash.h"
#include "kernels/positions.h"

namespace petrel::convert {
namespace {

using json = nlohmann::json;

// A stored position table matches a sinusoidal variant when every entry is this
// close; variants differ by far more (up to 0.36 for d=512: the paper's and Marian's frequencies differ).
constexpr double kPositionTolerance = 2e-4;

}  // namespace

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

// A .spm model as the engine stores it; vocab_ids maps its pieces to `vocab` ids
// (-1: absent) when vocab is given.
flatbuffers::Offset<fb::SentencePieceModel> Converter::sentencepiece_table(const SpmModel& m,
                                                                           const std::vector<std::string>* vocab,
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
flatbuffers::Offset<fb::Tokenizer> Converter::read_vocab() {
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

}  // namespace petrel::convert
