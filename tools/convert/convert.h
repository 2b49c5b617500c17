// petrel-convert's library: a Hugging Face MarianMT checkpoint directory
// (config.json + model.safetensors or pytorch_model.bin [+ vocab.json]) -> one
// .petrel file.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert_error.h"
#include "petrel/model.h"

namespace petrel::convert {

// How a tokenizer's string tables (vocabularies, pieces) are written: since format 1.6
// as spans of one blob, Tokenizer.strings, holding each distinct string once; or as
// [string], as files before 1.6 hold them (tests of old files write those).
enum class StringLayout { kSpans, kStringVectors };

enum class PositionChoice { kAuto, kSinusoidalConcatenated, kSinusoidalInterleaved, kLearned, kNone };

struct ConvertOptions {
  std::string checkpoint_dir;
  std::string output_path;
  DType linear_dtype = DType::kInt8;     // --quantize: the layers' linear weights
  DType embedding_dtype = DType::kInt8;  // --embeddings: embedding tables
  // --output: the output projection. When it is tied to the decoder's embedding table
  // (and so, with shared embeddings, the encoder's too) this is that table's dtype.
  // Unset: the table's (tied) or linear_dtype (untied).
  std::optional<DType> output_dtype;
  std::optional<double> embed_scale;  // overrides config's scale_embedding
  PositionChoice positions = PositionChoice::kAuto;
  // Layer-norm placement. Unset: what the model type implies (Marian: post-LN);
  // config keys transformers ignores (normalize_before) never decide it.
  std::optional<NormPlacement> norm;
  // A lexical shortlist to store (Marian lex.s2t format; needs vocab.json): the
  // `first` target ids and each source token's `best` most likely targets.
  std::string shortlist_path;
  uint32_t shortlist_first = 100, shortlist_best = 100;
  // How the tokenizer's strings are stored: format 1.6's blob and spans; [string] as
  // before 1.6 only to make old-format files (tests).
  StringLayout tokenizer_strings = StringLayout::kSpans;
  // Called before each tensor is encoded: (petrel tensor name, index, total).
  std::function<void(const std::string&, size_t, size_t)> progress;
};

struct TensorReport {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
  double max_abs_error = 0;
  double snr_db = 0;
};

struct ConvertReport {
  uint64_t parameters = 0;
  uint64_t file_size = 0;
  std::vector<TensorReport> tensors;
  std::vector<FoldInfo> folds;
  std::vector<std::string> notes;  // decisions worth telling the user (positions, vocab)
};

// Throws ConvertError naming the file and tensor on any problem; leaves no output
// file behind on failure.
ConvertReport convert_checkpoint(const ConvertOptions& options);

// A checkpoint's JSON inputs as text; nullopt: the file is absent.
struct CheckpointJson {
  std::string config;
  std::optional<std::string> generation_config, vocab, target_vocab, tokenizer_config;
  bool sentencepiece = false;  // source.spm and target.spm are present (their bytes are not checked here)
  std::optional<std::string> family_sentencepiece;  // M2M100 / NLLB / mBART-50: sentencepiece.bpe.model's bytes
};
struct CheckedVocabulary {
  std::vector<std::string> vocab;         // id -> token; empty without vocab.json
  std::vector<std::string> target_vocab;  // target_vocab.json's, when read (a separate target vocabulary)
  bool marian = false;                    // the file would carry a Marian (SentencePiece) tokenizer
  std::string model_type;                 // config.json's
  bool family_tokenizer = false;          // M2M100 / NLLB / mBART-50: vocab is its tokenizer's (every model id)
};

// The JSON inputs checked exactly as convert_checkpoint checks the files: config.json,
// then generation_config.json, vocab.json, target_vocab.json (used when the target
// vocabulary is separate) and tokenizer_config.json (used with the .spm files, or with
// family_sentencepiece by the multilingual families' tokenizers) when given. Errors name the files as in options.checkpoint_dir. Throws ConvertError.
CheckedVocabulary check_checkpoint_json(const CheckpointJson& files, const ConvertOptions& options = {});

// Parses "f32" | "f16" | "int8" | "int4"; throws on anything else.
// Whether an embedding scale (ConvertOptions::embed_scale) can be folded: in [1e-6, 1e6].
bool valid_embed_scale(double scale);
DType parse_dtype(const std::string& text, const std::string& flag);
PositionChoice parse_position_choice(const std::string& text);
// Parses "pre" | "post"; throws on anything else.
NormPlacement parse_norm(const std::string& text);

}  // namespace petrel::convert
