// petrel-convert for encoder-decoder (translation) models. What every such family
// shares is here and in convert_encoder_decoder.cpp: the checkpoint's config as the
// converter reads it (CheckpointConfig), and the Converter that maps its tensors onto the
// model file's encoder and decoder stacks. Each family's own reading is in its file:
// convert_hf_translation.cpp, Hugging Face checkpoints (Marian, M2M100 / NLLB-200,
// mBART) with their config.json, positions and vocabulary files; convert_marian_native.cpp,
// Marian C++ model directories (Firefox's). Decoder-only models are convert_lm.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/config_reader.h"
#include "convert/convert.h"
#include "convert/family_tokenizer.h"
#include "convert/spm_model.h"
#include "convert/tensor_output.h"

namespace petrel::convert {

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

// A matrix's values a block of rows at a time: fills out[count][cols] with rows
// [first, first + count). Big tables pass through the converter this way, never whole.
struct PositionDecision {
  PositionInfo info{PositionKind::kNone, FrequencyConvention::kPaper, 0};
  std::vector<float> learned;  // kLearned only
};

// convert_hf_translation.cpp: a Hugging Face checkpoint's config.json, then (read_generation
// with from_generation_config) its generation_config.json, when it has one.
CheckpointConfig read_config(const ConfigReader& r, const ConvertOptions& options);
void read_generation(const ConfigReader& r, CheckpointConfig& c, bool from_generation_config);

// convert_hf_translation.cpp: how a Hugging Face Marian stack's positions are stored or
// computed (`choice`: --positions), and an M2M100 / NLLB or mBART stack's.
PositionDecision decide_positions(Source& src, const std::string& tensor, const CheckpointConfig& c,
                                  PositionChoice choice, const std::string& role,
                                  std::vector<std::string>* notes);
PositionDecision family_positions(Source& src, const std::string& role, const CheckpointConfig& c,
                                  std::vector<std::string>* notes);

// The checkpoint's vocabulary files, read and checked (read_vocab and
// check_checkpoint_json share this, so the fuzz target checks what the converter does).
struct VocabularyFiles {
  std::vector<std::string> vocab;         // vocab.json: id -> token
  std::vector<std::string> target_vocab;  // target_vocab.json, when the target vocabulary is separate
  bool marian = false;                    // source.spm + target.spm and every vocabulary they need
  int32_t eos = -1, unk = -1, pad = -1;   // marian: "</s>", "<unk>", "<pad>" in vocab
  bool clean_up = true;                   // marian: tokenizer_config.json's clean_up_tokenization_spaces
};

VocabularyFiles read_vocabulary_files(const std::string& dir, const CheckpointConfig& c, const std::string& vocab_text,
                                      const std::optional<std::string>& target_vocab_text,
                                      const std::optional<std::string>& tokenizer_config_text, bool spm_files);

// convert_marian_native.cpp: the Marian C++ model in `dir`; nullopt: none (no
// model*.bin / model*.npz).
std::optional<MarianNativeFiles> find_marian_native_files(const std::string& dir);
// A Marian C++ model directory (Firefox's models) -> a Petrel file.
ConvertReport convert_marian_native(const ConvertOptions& options, const MarianNativeFiles& files);

// An encoder-decoder checkpoint (`c`, its tensors in `src`) as a model file: the stacks
// and the shortlist (convert_encoder_decoder.cpp); the text tokenizer
// (convert_hf_translation.cpp's read_vocab, convert_marian_native.cpp's for Marian C++).
class Converter : TensorOutput {
 public:
  Converter(const ConvertOptions& o, const CheckpointConfig& c, Source& src) : TensorOutput(o, src), c_(c) {}

  ConvertReport run();

 private:
  flatbuffers::Offset<fb::Linear> linear(const std::string& hf, const std::string& name, uint64_t out, uint64_t in,
                                         float scale = 1.0f, bool bias = true);
  flatbuffers::Offset<fb::Norm> norm(const std::string& hf, const std::string& name);
  flatbuffers::Offset<fb::Attention> attention(const std::string& hf, const std::string& name);
  flatbuffers::Offset<fb::Stack> stack(const std::string& role, int32_t embed, const PositionDecision& pos,
                                       bool decoder);

  // The text tokenizer (convert_hf_translation.cpp; a Marian C++ model's: convert_marian_native.cpp)
  flatbuffers::Offset<fb::SentencePieceModel> sentencepiece_table(const SpmModel& m, const std::vector<std::string>* vocab,
                                                                  TokenizerStrings& strings);
  flatbuffers::Offset<fb::Tokenizer> read_vocab();
  flatbuffers::Offset<fb::Tokenizer> marian_native_tokenizer();
  int32_t bad_unk() const { return c_.bad_words.empty() ? -1 : c_.bad_words[0]; }

  flatbuffers::Offset<fb::Shortlist> read_shortlist();
  flatbuffers::Offset<fb::Shortlist> write_shortlist(const std::string& path, bool binary);

  const CheckpointConfig& c_;
  std::vector<std::string> vocab_;  // id -> token, when the checkpoint has vocab.json
  std::vector<std::string> q_targets_;
  float attention_scale_ = 1.0f;
  std::string output_norm_, output_norm_target_;
  float output_unscale_ = 1.0f;
};

}  // namespace petrel::convert
