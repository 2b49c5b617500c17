// Marian C++ model directories (Firefox's models; tools/reference/MARIAN_NATIVE.md): the
// directory's files, the model's options (special:model.yml) as the converter's config,
// its vocabularies and text tokenizer (convert_encoder_decoder.h).
#include "convert/convert_encoder_decoder.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "convert/marian_native.h"

namespace petrel::convert {
namespace {

std::vector<std::string> directory_files(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

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

namespace {

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

}  // namespace

// Marian C++ models: the SentencePiece ids are the model's (text::SentencePieceIdsTokenizer).
flatbuffers::Offset<fb::Tokenizer> Converter::marian_native_tokenizer() {
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

}  // namespace petrel::convert
