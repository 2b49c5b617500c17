// The engine's value types: what a model file holds (ModelInfo and its parts) and what
// translation produces (token ids, hypotheses). The ground floor of the public API:
// every layer of the engine may include it, and it includes nothing of theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "petrel/export.h"
#include "petrel/status.h"

namespace petrel {

enum class DType { kF32, kF16, kInt8, kInt4 };
enum class Activation { kRelu, kGelu, kSwish, kGeluTanh };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class NormPlacement { kPost, kPre };
enum class PositionKind { kNone, kSinusoidalInterleaved, kSinusoidalConcatenated, kLearned, kRotary };
enum class FrequencyConvention { kPaper, kMarianCpp };
enum class ActivationScales { kDynamic, kFile };

PETREL_API const char* to_string(DType dtype);
PETREL_API const char* to_string(Activation activation);
PETREL_API const char* to_string(NormPlacement norm);
PETREL_API const char* to_string(NormKind kind);
PETREL_API const char* to_string(PositionKind kind);
PETREL_API const char* to_string(FrequencyConvention frequency);
PETREL_API const char* to_string(ActivationScales scales);  // "dynamic", "file"
// "dynamic" | "file"; false for anything else.
PETREL_API bool parse_activation_scales(const std::string& text, ActivationScales* out);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  bool packed;      // stored in panels for the matmul kernels
  uint64_t offset;  // in the data section
  uint64_t bytes;   // data plus scales, row sums and block scales
  // The converter's measure of what quantization cost (since 1.2; NaN when the file
  // records none): max |stored - original| and the signal-to-noise ratio in dB
  // (+inf when exact).
  double max_abs_error;
  double snr_db;
  // Int8: the file's static activation scale for the layer this weight multiplies
  // (since 1.4; 0: none, activations are quantized per row).
  float activation_scale = 0;
};

struct FoldInfo {
  std::string what;
  double value;
  std::vector<std::string> targets;
  std::string note;
};

struct PositionInfo {
  PositionKind kind;
  FrequencyConvention frequency;
  uint32_t first_index;
};

struct ShortlistInfo {
  bool present = false;
  uint32_t first = 0, best = 0;  // as recorded by the converter
  uint64_t always = 0, candidates = 0;
  std::string source;
  bool by_default = false;  // used unless TranslateOptions::use_shortlist says otherwise
};

// When beam search stops for a sentence.
enum class BeamStop {
  kDefault,    // TranslateOptions: the model's own (GenerationDefaults::beam_stop)
  // Hugging Face's default (transformers >= 4.50, early_stopping=False): go on while
  // the best live hypothesis, normalized by its length so far, could beat the worst
  // of the K finished ones.
  kHeuristic,
  kFirstK,     // as soon as K hypotheses have finished (early_stopping=True; CTranslate2)
};
PETREL_API const char* to_string(BeamStop stop);

// How the checkpoint asks to be decoded (its config.json / generation_config.json);
// translate() uses these for the options a caller leaves unset.
struct GenerationDefaults {
  bool from_checkpoint = false;  // false: the file records none (older files); these defaults
  uint32_t num_beams = 1;
  uint32_t max_length = 0;       // tokens including the decoder start token; 0: none given
  double length_penalty = 1.0;
  BeamStop beam_stop = BeamStop::kHeuristic;
  int32_t forced_eos_id = -1;    // forced at the last allowed position; -1: none
  // Forced as the first generated token unless the caller gives a target prefix or
  // language (the target language of M2M100 / mBART-50 checkpoints); -1: none.
  int32_t forced_bos_id = -1;
  // > 0: at most ceil(factor x source tokens, EOS included) new tokens per sentence
  // (Marian's max-length-factor; Firefox's models use 2); 0: none.
  double max_length_factor = 0;
};

// The range of a temperature or repetition penalty, in a model file or a caller's
// options: logits divided by 1e-6 stay finite, where a smaller divisor (1e-38) makes
// them infinite and the step fails.
constexpr float kMinSamplingScale = 1e-6f;
constexpr float kMaxSamplingScale = 1e6f;

// How a decoder-only model asks to generate (its generation_config.json); generate()
// uses these for the options a caller leaves unset.
struct LanguageModelDefaults {
  int32_t bos_id = -1;            // -1: none
  std::vector<int32_t> eos_ids;   // generation stops at any of these
  bool do_sample = false;
  float temperature = 1.0f;
  uint32_t top_k = 0;             // 0: off
  float top_p = 1.0f;             // 1: off
  float min_p = 0.0f;             // 0: off
  float repetition_penalty = 1.0f;
  uint32_t max_new_tokens = 0;    // 0: none given
  std::string chat_template;      // Jinja, from tokenizer_config.json (empty: none)
  std::string bos_token, eos_token;  // the texts the chat template reads as bos_token / eos_token
};

namespace detail {
struct StringTableAccess;  // the engine's way to make a StringTable of a model file's strings
}

// A read-only table of strings, index -> text (a vocabulary: id -> token). The engine's
// tables view a model's bytes in place, so loading copies no string, and each copy of
// the table keeps the model's bytes alive (it stays valid after the Model is released).
// A table made from string_views copies the views, not the bytes they view.
class StringTable {
 public:
  StringTable() = default;
  explicit StringTable(std::vector<std::string_view> views)
      : size_(views.size()), owner_(std::make_shared<const std::vector<std::string_view>>(std::move(views))) {
    views_ = static_cast<const std::vector<std::string_view>*>(owner_.get())->data();
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // i < size().
  std::string_view operator[](size_t i) const {
    if (spans_ != nullptr) {  // (offset, size) pairs of 32 bits into one blob (format 1.6)
      const unsigned char* span = spans_ + 8 * i;
      return {blob_ + load32(span), load32(span + 4)};
    }
    if (views_ != nullptr) return views_[i];
    // A FlatBuffers vector of strings (little-endian; the loader refuses other hosts):
    // slot i holds the offset from itself to a string, a 32-bit length then the bytes.
    const unsigned char* slot = offsets_ + 4 * i;
    const unsigned char* text = slot + load32(slot);
    return {reinterpret_cast<const char*>(text + 4), load32(text)};
  }
  std::string_view front() const { return (*this)[0]; }
  std::string_view back() const { return (*this)[size_ - 1]; }
  std::vector<std::string> to_vector() const { return {begin(), end()}; }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;
    const_iterator() = default;
    const_iterator(const StringTable* table, size_t i) : table_(table), i_(i) {}
    std::string_view operator*() const { return (*table_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const StringTable* table_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  friend struct detail::StringTableAccess;
  static uint32_t load32(const unsigned char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  // One of: spans_ of blob_, views_, or offsets_ (a FlatBuffers [string]).
  const unsigned char* spans_ = nullptr;
  const char* blob_ = nullptr;
  const std::string_view* views_ = nullptr;
  const unsigned char* offsets_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;  // views_'s vector, or the model's bytes
};

struct SentencePieceInfo {
  std::string algorithm;   // "unigram" or "bpe"
  uint32_t pieces = 0;
  std::string normalizer;  // "nmt_nfkc", "identity", ...
  bool byte_fallback = false;
  uint32_t stored_trie_nodes = 0;  // the converter's piece trie (since 1.5); 0: built at load
};

// The model file's text tokenizer (has_text_tokenizer).
struct TokenizerInfo {
  std::string kind = "none";  // "none", "words" (the demo's), "marian" (opus-mt: SentencePiece),
                              // "fairseq" (NLLB, M2M100, mBART-50: SentencePiece + language codes),
                              // "sentencepiece" (Marian C++ models: the SentencePiece ids are the model's),
                              // "marian-words" (Marian C++ models with word vocabularies),
                              // "huggingface" (a language model's tokenizer.json: BPE or WordPiece)
  SentencePieceInfo source, target;         // marian, sentencepiece
  bool separate_target_vocab = false;       // marian: target_vocab.json
  std::vector<std::string> language_codes;  // ">>xx<<" tokens of the vocabulary; fairseq: its languages
  std::string family;                       // fairseq: "nllb", "m2m100", "mbart50"
  std::string default_source_language;      // fairseq: tokenizer_config.json's src_lang (empty: none)
  // huggingface:
  uint32_t merges = 0, added_tokens = 0;
  std::vector<std::string> special_tokens;  // skipped when decoding (EOS, turn markers, ...)
  std::string pipeline;                     // its steps, e.g. "NFC | Split ByteLevel | BPE | ByteLevel"
};

struct ModelInfo {
  uint32_t format_major = 0, format_minor = 0;
  std::string producer, source;
  std::string architecture;  // "encoder-decoder" or "decoder-only"
  std::string model_type;    // the checkpoint's (decoder-only models: "gemma3_text", "llama", "qwen2", "qwen3")
  bool decoder_only = false;
  uint32_t d_model = 0, num_heads = 0, ffn_dim = 0, max_positions = 0;
  uint32_t num_kv_heads = 0;  // K/V heads (grouped-query attention); = num_heads without
  uint32_t head_dim = 0;      // d_model / num_heads unless the model says otherwise
  NormKind norm_kind = NormKind::kLayerNorm;
  uint32_t sliding_window_layers = 0;  // decoder-only: layers attending a sliding window
  float final_logit_softcap = 0;       // > 0: logits = cap x tanh(logits / cap)
  LanguageModelDefaults lm;            // decoder-only models
  uint32_t vocab_size = 0;         // the encoder's (source) vocabulary: input ids are below it
  uint32_t target_vocab_size = 0;  // the decoder's: output ids are below it (= vocab_size unless separate)
  uint32_t encoder_layers = 0, decoder_layers = 0;
  NormPlacement norm = NormPlacement::kPost;
  Activation activation = Activation::kSwish;
  float layer_norm_eps = 1e-5f;
  int32_t pad_id = -1, eos_id = -1, decoder_start_id = -1;  // target ids
  std::vector<int32_t> bad_word_ids;
  PositionInfo encoder_positions{}, decoder_positions{};
  bool shared_embeddings = false;  // encoder and decoder use one table
  bool tied_output = false;        // output projection uses the decoder embedding table
  bool final_logits_bias = false;
  bool embedding_norm = false;     // a LayerNorm on embedding + position (mBART)
  // Decoder layers with an SSRU instead of self-attention (Marian's, since 1.4).
  uint32_t ssru_layers = 0;
  // The decoder reads an all-zero embedding (plus position 0) at step 0 instead of the
  // start token's row (Marian C++; since 1.4).
  bool decoder_start_zeros = false;
  // Some int8 weights carry static activation scales (Marian's alphas; since 1.4):
  // TranslatorOptions::activation_scales can use them.
  bool static_activation_scales = false;
  // The decoder layer (0-based) whose cross-attention the model was trained to align
  // with (Marian's transformer-guided-alignment-layer; since 1.9), or -1: none named.
  // TranslateOptions::alignment_layer defaults to it, else to the last layer.
  int32_t alignment_layer = -1;
  bool has_text_tokenizer = false;  // vocab + a tokenizer Petrel implements
  TokenizerInfo tokenizer;
  StringTable vocab;                // id -> token, viewing the model file; may be empty (a Marian C++ model's: see output_tokens())
  std::vector<TensorInfo> tensors;
  std::vector<FoldInfo> folds;
  ShortlistInfo shortlist;          // TranslateOptions::use_shortlist
  GenerationDefaults generation;
  uint64_t file_size = 0;
  uint64_t parameter_count = 0;
  // CRC-32 of the data section as the converter recorded it (none in older files);
  // Model::verify_data compares it.
  std::optional<uint32_t> data_crc32;
};

// What the search knew of an output token when it chose it (TranslateOptions::token_scores).
struct TokenScore {
  float log_probability = 0;  // over the allowed outputs (a shortlist's); 0 for a forced token
  float logit = 0;            // the model's output for it before the softmax; 0 for a forced token
};

struct Hypothesis {
  std::vector<int32_t> ids;  // without the decoder start token and the final EOS
  double score = 0;
  bool ended_on_eos = false;  // it stopped on EOS, not at the length limit or by a token callback
  // With TranslateOptions::alignment: per output token, the final EOS included when it
  // ended on one (ids.size() + ended_on_eos rows), the attention probabilities over the
  // input's tokens as the encoder read them (its EOS included; pads a model masks left
  // out): the cross-attention of the step that produced the token, of one head of one
  // decoder layer (TranslateOptions::alignment_layer, alignment_head). Each row sums to 1.
  std::vector<std::vector<float>> alignment;
  // With TranslateOptions::token_scores (or quality_scores): one per output token, the
  // final EOS included when it ended on one.
  std::vector<TokenScore> token_scores;
};

// Bytes [begin, end) of a text.
struct TextRange {
  size_t begin = 0, end = 0;
};

// A text as a translation sees it (bergamot's AnnotatedText): its sentences, each a run
// of consecutive token ranges of `text` (a source token's range holds the whitespace
// SentencePiece folds into it: " world"); the bytes between sentences, before the first
// and after the last belong to no sentence. A sentence's last token is its EOS: an empty
// range at the sentence's end.
struct AnnotatedText {
  std::string text;
  std::vector<std::vector<TextRange>> sentences;
};

// A text as the model reads it: its tokens (SentencePiece pieces, words, language
// codes; EOS as "</s>") and their vocabulary ids, EOS included.
struct TokenizedText {
  std::vector<std::string> pieces;
  std::vector<int32_t> ids;
  // Each token's bytes of the text (a SentencePiece surface: " world" for ▁world; EOS
  // empty where the last token ends), when the model's tokenizer tells them (a Marian C++ model's
  // SentencePiece); empty otherwise.
  std::vector<TextRange> ranges;
};

}  // namespace petrel
