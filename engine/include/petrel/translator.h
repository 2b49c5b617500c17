// Translating with a loaded model. A Translator holds per-thread mutable state
// (workspace, KV caches): use one per thread; the Model can be shared. A call made
// while another runs (from its own on_token callback) fails with kInvalidArgument.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "petrel/export.h"
#include "petrel/model.h"
#include "petrel/types.h"
#include "petrel/status.h"

namespace petrel {

// Limits of one translate() call; beyond them it fails with a named error.
constexpr size_t kMaxBatchSize = size_t{1} << 16;  // inputs per call
constexpr size_t kMaxBeamSize = 64;
// Working memory one call may need (KV caches, logits, histories, activations),
// computed before anything is allocated; more fails with ErrorCode::kOutOfMemory. On a
// device with less memory than this, or in a cgroup (a container, a service) with a
// smaller memory limit, the limit is that.
constexpr uint64_t kMaxRequestBytes = sizeof(void*) >= 8 ? uint64_t{32} << 30 : uint64_t{3} << 29;

class QualityModel;
namespace detail {
struct TranslatorAccess;  // the engine's way in (engine/src/model_access.h)
}

// One step of a translation as it is produced (TranslateOptions::on_token): called after
// each decoder step for every input still being translated, then once per input with
// its final translation, on the translating thread.
struct TokenEvent {
  size_t input = 0;              // which input of the call
  const int32_t* ids = nullptr;  // its best live hypothesis so far, without the start token
  size_t length = 0;
  std::string_view piece;        // the newest token as the tokenizer stores it ("▁Datei");
                                 //   empty for a model without a tokenizer
  bool provisional = false;      // beam search: a later step may prefer another hypothesis
  bool final = false;            // the input's translation is done: `ids` is its best hypothesis
                                 //   (one such event per input with a hypothesis, after the last step)
  // translate_text with stream_text only (detokenizing costs a decode per step; without,
  // text.data() is null):
  std::string_view text;         // the hypothesis so far as text
  std::string_view text_delta;   // what `text` adds to this input's previous event
  bool text_restarted = false;   // `text` does not extend the previous text: show it afresh
};
// Return false to stop translating that input now: its live hypotheses finish as they are
// (the return value of a final event is ignored).
using TokenCallback = std::function<bool(const TokenEvent&)>;

// Options left unset take the model's own generation defaults (ModelInfo::generation:
// what its config.json / generation_config.json ask for), as Hugging Face's
// generate() does; a caller's value always wins.
// Speculative decoding (TranslateOptions / GenerateOptions::lookup_ngram and
// max_draft_tokens; set_draft_model): the longest n-gram prompt lookup matches, the most
// tokens one draft may propose (its verification runs them as one pass over the weights),
// and the default.
constexpr size_t kMaxLookupNgram = 8;
constexpr size_t kMaxDraftTokens = 64;
constexpr size_t kDefaultMaxDraftTokens = 16;

struct TranslateOptions {
  size_t beam_size = 0;       // 1..kMaxBeamSize, 1 = greedy; 0: the model's num_beams (1 if none)
  size_t n_best = 1;          // hypotheses returned per input, <= beam size
  // Generated tokens at most (EOS included); 0: the model's max_length - 1, else 256;
  // never more than the model's max positions.
  size_t max_new_tokens = 0;
  // With max_new_tokens 0: each sentence generates at most ceil(factor x its source
  // tokens, EOS included), within the limit above (Marian's max-length-factor).
  // 0: the model's (GenerationDefaults::max_length_factor; none if 0).
  double max_length_factor = 0;
  size_t min_new_tokens = 0;  // EOS is not allowed before this many tokens
  // score = log-probability / length^length_penalty; unset: the model's (1.0 if none)
  std::optional<double> length_penalty;
  BeamStop beam_stop = BeamStop::kDefault;  // kDefault: the model's (kHeuristic if none)
  // Decode over the model file's lexical shortlist (ModelInfo::shortlist): each
  // sentence may only produce its shortlist's tokens, normalised over them; the output
  // projection runs over those rows only. An error if the file has no shortlist.
  // Unset: the model's choice (ModelInfo::shortlist.by_default: a Marian model's, as
  // Firefox uses it; otherwise off).
  std::optional<bool> use_shortlist;
  // Store the decoder's attention keys and values (the KV cache) as IEEE half
  // precision: half the cache memory and half the bytes attention reads. Outputs then
  // differ from the f32 cache's by f16 rounding of K and V (relative 2^-11).
  bool kv_cache_f16 = false;
  // Streaming: called after every step (see TokenEvent). The decode loop stays free of
  // allocation with it; stream_text adds the detokenized text, which allocates.
  TokenCallback on_token;
  bool stream_text = false;
  // Tokens every output must start with (after the decoder start token), e.g. a target
  // language token or a text to continue. They are forced (scored 0, as Hugging Face's
  // forced-token processors do), count towards max_new_tokens and are part of each
  // hypothesis' ids; text decoding drops the special ones (language codes). A prefix
  // states the whole start: the model's forced_bos_id (GenerationDefaults) is used only
  // when neither a prefix nor a target_language is given.
  std::vector<int32_t> target_prefix;
  // Multilingual models (NLLB-200, M2M100, mBART-50; ModelInfo::tokenizer.language_codes
  // lists the codes, e.g. "eng_Latn", "__en__", "en_XX"): the output's language, whose
  // token is forced first (then target_prefix; it replaces the model's forced_bos_id;
  // resolve_options moves it into target_prefix), and, for text input, the input's
  // language (empty: the model's default source language).
  std::string target_language;
  std::string source_language;
  // Word alignments (Hypothesis::alignment): the attention probabilities of head
  // alignment_head of decoder layer alignment_layer's cross-attention, for each output
  // token over the input's. Unset layer: the one the model was trained to align
  // (ModelInfo::alignment_layer: a Marian model's guided-alignment layer), else the last;
  // head 0 is the one Marian's guided alignment trains and bergamot reads. Off: nothing is
  // computed for them.
  bool alignment = false;
  std::optional<size_t> alignment_layer;  // 0-based
  size_t alignment_head = 0;
  // Each hypothesis carries its tokens' scores (Hypothesis::token_scores).
  bool token_scores = false;
  // Text translation: quality scores per sentence and word (SentenceTranslation::quality),
  // as bergamot-translator's estimators compute them. Without a quality model, the free
  // estimator over the tokens' logits (bergamot runs Firefox's models with skip-cost:
  // the search's token scores are the model's outputs before the softmax); with one (a
  // `.quality.lr` file, load_quality_model), the logistic regression over the tokens'
  // log-probabilities (bergamot's JavaScript turns skip-cost off for it).
  bool quality_scores = false;
  std::shared_ptr<const QualityModel> quality_model;
  // Text translation (BatchTranslator::translate_text): each input is an HTML fragment, as
  // Firefox sends a web page's (bergamot's {html: true}): the tags are taken out, the text
  // is translated sentence by sentence (split at block elements and line breaks), and each
  // tag is put back around the target words the alignments tie to the source words it
  // wrapped (TextTranslation::source_html holds the source's markup as written back);
  // with quality_scores, the scores are written into the markup as bergamot writes them.
  // Malformed markup bergamot aborts on is repaired as a browser's parser would (a stray
  // end tag dropped, open elements closed at the end, '<' before a non-letter kept as
  // text); a NUL byte, nesting deeper than 512 elements or more than 64 MiB fail that input.
  // Needs a model whose tokenizer tells its tokens' bytes (a Marian C++ model's) and n_best 1.
  bool html = false;
  // Speculative decoding (greedy search: beam_size 1, n_best 1, no alignment): drafts of
  // the next tokens are checked by one pass of the decoder over all of them, and the
  // search's own choices decide what is kept, so the translations (ids, scores, stream)
  // are those without drafts; faster where the drafts are right. Each input is then
  // decoded alone. Drafts come from prompt lookup over the input's ids and the output so
  // far (lookup_ngram: the longest n-gram matched, 0: off; at most kMaxLookupNgram) and
  // from the Translator's draft model (set_draft_model), which drafts where lookup finds
  // nothing. max_draft_tokens: the most tokens one draft proposes (0:
  // kDefaultMaxDraftTokens; at most kMaxDraftTokens); below it the length adapts.
  size_t lookup_ngram = 0;
  size_t max_draft_tokens = 0;
};

struct Translation {
  std::vector<Hypothesis> hypotheses;  // best first
};

// A translation of text: the input as the model read it, and each hypothesis as
// text with its output tokens.
struct TextHypothesis {
  std::string text;
  double score = 0;
  std::vector<int32_t> ids;          // without the start token and the final EOS
  std::vector<std::string> pieces;   // the tokens of `ids`
  bool ended_on_eos = false;         // as Hypothesis; sentence by sentence: every sentence did
  // As Hypothesis::alignment: a row per piece (and the final EOS), over TextTranslation::input's pieces.
  std::vector<std::vector<float>> alignment;
  std::vector<TokenScore> token_scores;  // as Hypothesis::token_scores (sentence by sentence: as the alignment rows)
};
// A sentence's quality scores (TranslateOptions::quality_scores), bergamot's
// Response::SentenceQualityScore: its words are runs of target tokens, each but the first
// starting at a token that starts with whitespace (the EOS left out).
struct SentenceQuality {
  float score = 0;                     // the mean of the word scores (NaN when there are none)
  std::vector<TextRange> words;        // each word's bytes of the translation, its leading space left out
  std::vector<TextRange> word_tokens;  // each word's target tokens [begin, end) of the sentence's
  std::vector<float> word_scores;
};

// One sentence of a text translation, as bergamot's Response holds it: where it stands in
// the input and in the best translation, its tokens' bytes there, and what was asked of it.
struct SentenceTranslation {
  TextRange source, target;                      // bytes of the input text / of hypotheses[0].text
  std::vector<TextRange> source_tokens;          // bytes of the input text, EOS included (empty after the last)
  std::vector<TextRange> target_tokens;          // bytes of hypotheses[0].text, EOS included when it ended on one
  std::vector<std::vector<float>> alignment;     // TranslateOptions::alignment: [target token][source token]
  std::vector<TokenScore> token_scores;          // TranslateOptions::token_scores / quality_scores
  std::optional<SentenceQuality> quality;        // TranslateOptions::quality_scores
};

struct TextTranslation {
  TokenizedText input;
  std::vector<TextHypothesis> hypotheses;  // best first; empty when no token could be generated
  // The best hypothesis sentence by sentence (one sentence unless BatchOptions::
  // split_sentences split the text), when the model's tokenizer tells its tokens' bytes
  // (TokenizedText::ranges: a Marian C++ model's SentencePiece); empty otherwise.
  std::vector<SentenceTranslation> sentences;
  // TranslateOptions::html: the input's markup as written back (bergamot's original text),
  // which the sentences' source ranges point into; their target ranges point into
  // hypotheses[0].text, the translation with the markup put back.
  std::string source_html;
};

// bergamot's logistic-regression quality estimator (a `.quality.lr` file, as Firefox
// ships beside some models), read as untrusted input.
class QualityModel {
 public:
  virtual ~QualityModel() = default;
};
// Reads a `.quality.lr` file (or its bytes). Errors (kIo, kFormat) name the file and field.
PETREL_API Result<std::shared_ptr<const QualityModel>> load_quality_model(const std::string& path);
PETREL_API Result<std::shared_ptr<const QualityModel>> parse_quality_model(const void* data, size_t size,
                                                                           const std::string& name);

struct TranslateTimings {
  double encode_ms = 0, decode_ms = 0;
  size_t decode_steps = 0;
  size_t generated_tokens = 0;  // tokens in the best hypotheses
  // Speculative decoding: passes of the decoder that checked a draft, the tokens drafted
  // and those accepted; the draft model's decoder steps.
  size_t verifications = 0, drafted_tokens = 0, accepted_tokens = 0, draft_model_tokens = 0;
};

struct TranslatorOptions {
  // Kernel path: "scalar", "avx2", "avxvnni", "avx512" (x86-64), "neon", "dotprod", "i8mm" (ARM), "simd128" (WebAssembly).
  // Empty: the PETREL_ISA environment variable if set, else the best this CPU runs.
  std::string isa;
  // Intra-op threads (the caller's choice; 1 = none started).
  size_t threads = 1;
  // How int8 layers quantize their input: each row by its own max |x| (dynamic, any
  // int8 model), or with the model file's static scales (ModelInfo::
  // static_activation_scales: Marian's "alphas", as bergamot's int8shiftAlphaAll).
  ActivationScales activation_scales = ActivationScales::kDynamic;
};

// `options` with every unset field filled from the model's generation defaults and
// every value checked (beam size, n-best, lengths, length penalty, shortlist, target language and prefix):
// what translate() will use. Errors name the option.
PETREL_API Result<TranslateOptions> resolve_options(const Model& model, const TranslateOptions& options);

// Kernel paths this build contains and this CPU runs, best last.
PETREL_API std::vector<std::string> runnable_isas();

class Translator {
 public:
  // Fails when the requested ISA is unknown or this CPU cannot run it.
  PETREL_API static Result<Translator> create(std::shared_ptr<const Model> model,
                                              const TranslatorOptions& options = {});
  PETREL_API ~Translator();
  PETREL_API Translator(Translator&&) noexcept;
  PETREL_API Translator& operator=(Translator&&) noexcept;

  // Input ids are used verbatim (no EOS is appended), except that the model's pad id is
  // masked wherever it occurs, as transformers' generate() masks it (unless pad is also
  // EOS, as in Marian C++ models): the encoder leaves pads out, and the other tokens keep
  // their positions (Marian, mBART: their index in the input; M2M100 / NLLB: their count
  // among the tokens that are not pads). Errors name the input and position: ids outside
  // the vocabulary, inputs longer than the model's positions (counted that way), empty
  // inputs and inputs of nothing but pads, bad options, requests over the limits above.
  // A hypothesis list may be empty when no token could be generated (e.g. min_new_tokens
  // with a shortlist that allows only EOS). Never throws: running out of memory is
  // ErrorCode::kOutOfMemory.
  PETREL_API Result<std::vector<Translation>> translate(const std::vector<std::vector<int32_t>>& batch,
                                                        const TranslateOptions& options = {});

  // Text in, text out, through the model's tokenizer (an error if the file carries
  // none). Errors name the input: one that tokenizes longer than the model's positions
  // is refused (split it into sentences first).
  PETREL_API Result<std::vector<TextTranslation>> translate_text(const std::vector<std::string>& texts,
                                                                  const TranslateOptions& options = {});

  // Speculative decoding's draft model (TranslateOptions::lookup_ngram's comment): a
  // translation model with this one's vocabulary (the same source and target tokens, id
  // for id: refused by name otherwise) and attention decoder layers, run on this
  // Translator's kernel path and threads; it encodes each input itself, or with
  // shares_encoder reads this model's encoder states instead (a draft trained on this
  // model's encoder, frozen, as tools/en-de-draft: the encoders' shapes must match).
  // Null: none.
  PETREL_API Status set_draft_model(std::shared_ptr<const Model> draft, bool shares_encoder = false);

  PETREL_API const TranslateTimings& last_timings() const;
  PETREL_API const Model& model() const;
  PETREL_API const char* isa() const;   // the kernel path in use
  PETREL_API size_t threads() const;    // intra-op threads, the caller's included

 private:
  friend struct detail::TranslatorAccess;
  struct Impl;
  explicit Translator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Marian's hard alignment of a soft one (marian-dev data/alignment.cpp,
// ConvertSoftAlignToHardAlign): threshold 1 takes each row's first largest entry, any
// other threshold every entry greater than it. Pairs (target row, source column), sorted
// by source then target, as Marian prints them ("s-t").
PETREL_API std::vector<std::pair<size_t, size_t>> hard_alignment(const std::vector<std::vector<float>>& soft,
                                                                 float threshold = 1.0f);

// Text I/O through the model file's tokenizer (ModelInfo::has_text_tokenizer): opus-mt's
// SentencePiece models with their vocabulary (as Hugging Face's MarianTokenizer), the
// multilingual families', a Marian C++ model's SentencePiece ids (as bergamot), or the
// demo's word tokenizer. The ids the encoder reads for `text`, EOS appended.
PETREL_API Result<std::vector<int32_t>> encode_text(const Model& model, const std::string& text);
// The same with the tokens (what `petrel-run --tokenize` shows). `source_language`:
// the text's language code for multilingual models (empty: the model's default).
PETREL_API Result<TokenizedText> tokenize(const Model& model, const std::string& text,
                                          const std::string& source_language = "");
// Output ids as text; special tokens (EOS, pad, unknown) are skipped (a Marian C++
// model's are decoded as SentencePiece decodes ids: control pieces print nothing).
PETREL_API Result<std::string> decode_text(const Model& model, const std::vector<int32_t>& ids);
// The token of each output id (target vocabulary).
PETREL_API Result<std::vector<std::string>> output_tokens(const Model& model, const std::vector<int32_t>& ids);

}  // namespace petrel
