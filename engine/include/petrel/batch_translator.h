// Many inputs at once (a file, a stream of messages): inputs are taken a window at a
// time (BatchOptions::window: tokenized, sorted by length within the window and packed
// into batches by a token budget; nothing of a later window is touched before the
// window's last result is delivered); the batches run on one or more sessions sharing
// the model (inter-op workers, each with its own intra-op threads); each input's result
// is delivered in input order as soon as it and every input before it are done.
// A caller reading a stream (petrel-run on a pipe) hands over what it has, a window or
// less, call by call.
//
// Thread-safety: one BatchTranslator translates for one thread at a time (its calls
// must not overlap, last_totals() included); any number of BatchTranslators and
// Translators may share one Model concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "petrel/export.h"
#include "petrel/translator.h"

namespace petrel {

namespace detail {
struct TranslationCacheAccess;  // engine/src/translation_cache.h
}
class TranslationCache;

// How BatchOptions::split_sentences splits a text (bergamot's ssplit-mode for the last three).
enum class SentenceSplit {
  kText,              // sentences anywhere; a line break is a space
  kSentencePerLine,   // each line is one sentence, never split further ("sentence")
  kParagraphPerLine,  // each line is a paragraph of sentences ("paragraph", Firefox's setting)
  kWrappedText,       // paragraphs end at a blank line, a line break within one is a space ("wrapped_text")
};

// The defaults keep memory near a single sentence's (Transformer-base int8, greedy:
// batches of 8 translate 3x as many sentences per second at 1.2x the peak RSS, see
// bench/README.md); raise them when memory allows.
struct BatchOptions {
  size_t max_batch_tokens = 1024;  // source tokens in one batch (inputs are packed, not padded)
  size_t max_batch_size = 8;       // inputs in one batch
  // Inputs read and sorted by length at a time; 0: 8 x max_batch_size. A larger window
  // packs batches better, a smaller one delivers the first results sooner.
  size_t window = 0;
  // Text only: translate each sentence of an input (text/sentence_splitter.h's rules) and
  // join the translations with the text that stood between the sentences. An input too
  // long for the model is then translated sentence by sentence instead of refused.
  bool split_sentences = false;
  // With split_sentences, what a line break means (bergamot's ssplit-mode):
  SentenceSplit split_mode = SentenceSplit::kText;
  // With split_sentences and a max_length_factor: each sentence may generate as many
  // tokens as the factor gives its input's longest sentence, not only its own (bergamot
  // translates a request's sentences as one batch and limits each by the batch's longest).
  bool limit_by_longest_sentence = false;
  // With split_sentences and a lexical shortlist: each sentence decodes over the union of
  // its input's sentences' shortlists, not only its own (bergamot builds one shortlist for
  // the batch a request's sentences form). Off, a sentence's translation never depends on
  // the sentences around it.
  bool shortlist_of_input = false;
  // Priorities: the first `priority_inputs` inputs are translated, in windows of their own,
  // and delivered before any later input is read (Firefox's worker sends a page's visible
  // text first). 0: none before the others.
  size_t priority_inputs = 0;
  // Cancellation: once *cancel is true (set from any thread, e.g. when the page that asked
  // has gone), no batch starts, running ones stop after their current decoder step, and
  // every input not yet delivered is delivered as an ErrorCode::kCancelled error. Must
  // outlive the call.
  const std::atomic<bool>* cancel = nullptr;
  // Sentence translations kept across calls (TranslationCache); null: none kept.
  std::shared_ptr<TranslationCache> cache;
};

// Translations of sentences (a BatchTranslator's units: an input, or one sentence of it)
// kept for later calls, as bergamot's translation cache, but correct: an entry is found
// only for the same model, the same tokens and every option that changes a translation
// (beam, lengths, shortlist, target language and prefix, alignment layer and head, token
// and quality scores, the kernel path, the activation scales, the length basis), so a
// hit gives exactly what translating again would. One cache may serve any number of
// BatchTranslators and models on any threads; the least recently used entries go when
// the cache would hold more than its capacity (the bytes of its keys and translations).
class TranslationCache {
 public:
  PETREL_API static std::shared_ptr<TranslationCache> create(size_t capacity_bytes = size_t{16} << 20);
  PETREL_API ~TranslationCache();
  TranslationCache(const TranslationCache&) = delete;
  TranslationCache& operator=(const TranslationCache&) = delete;

  struct Stats {
    size_t hits = 0, misses = 0, entries = 0, bytes = 0;
  };
  PETREL_API Stats stats() const;
  PETREL_API void clear();

 private:
  friend struct detail::TranslationCacheAccess;
  struct Impl;
  explicit TranslationCache(size_t capacity_bytes);
  std::unique_ptr<Impl> impl_;
};

struct BatchTotals {
  size_t inputs = 0, sentences = 0;  // sentences: units translated (after splitting)
  size_t source_tokens = 0, generated_tokens = 0;
  double seconds = 0;
  // Speculative decoding (TranslateTimings' counts, summed over the batches)
  size_t verifications = 0, drafted_tokens = 0, accepted_tokens = 0;
};

class BatchTranslator {
 public:
  // `workers` sessions (1..64) with `options.threads` intra-op threads each.
  PETREL_API static Result<BatchTranslator> create(std::shared_ptr<const Model> model,
                                                   const TranslatorOptions& options = {}, size_t workers = 1);
  PETREL_API ~BatchTranslator();
  PETREL_API BatchTranslator(BatchTranslator&&) noexcept;
  PETREL_API BatchTranslator& operator=(BatchTranslator&&) noexcept;

  // deliver(index, result) is called once per input, in input order, on the calling
  // thread. A result is an error for that input alone (e.g. one too long for the model
  // without sentence splitting, or anything a worker threw while translating its
  // batch); an empty text gives an empty translation. Streaming callbacks
  // (TranslateOptions::on_token) are not supported here. The returned status fails only
  // for bad options or when delivery cannot go on (out of memory, no worker thread).
  // When deliver throws, no further batch starts, the workers finish the batches they
  // hold and the exception propagates to the caller.
  using TextSink = std::function<void(size_t index, Result<TextTranslation>&& result)>;
  PETREL_API Status translate_text(const std::vector<std::string>& texts, const TranslateOptions& options,
                                   const BatchOptions& batching, const TextSink& deliver);
  using IdSink = std::function<void(size_t index, Result<Translation>&& result)>;
  PETREL_API Status translate(const std::vector<std::vector<int32_t>>& inputs, const TranslateOptions& options,
                              const BatchOptions& batching, const IdSink& deliver);

  // The totals of the last translate / translate_text call (so far, if it failed).
  // Every session's draft model for speculative decoding (Translator::set_draft_model).
  PETREL_API Status set_draft_model(std::shared_ptr<const Model> draft, bool shares_encoder = false);
  PETREL_API BatchTotals last_totals() const;
  PETREL_API size_t workers() const;
  PETREL_API const std::shared_ptr<const Model>& model() const;
  PETREL_API const char* isa() const;

 private:
  struct Impl;
  explicit BatchTranslator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Source -> pivot -> target through two models, as bergamot's translateViaPivoting (Mozilla's
// models all go to or from English): `first` translates each text (split into sentences as
// `batching` says), `second` translates that translation sentence by sentence (not split
// again). The result holds the input and the sentences' source side from the first hop;
// the translation, the sentences' target side, token scores and quality scores from the
// second; with `options.alignment` each sentence's alignment composed through the pivot
// text as bergamot composes it (its remapAlignments); with `options.html` the markup is
// taken out before the first hop and put back once, at the end. Needs models whose
// tokenizers tell their tokens' bytes (Marian C++ models) and n_best 1. `deliver` as in
// BatchTranslator::translate_text; the two translators may share threads, not calls.
PETREL_API Status translate_via_pivot(BatchTranslator& first, BatchTranslator& second,
                                      const std::vector<std::string>& texts, const TranslateOptions& options,
                                      const BatchOptions& batching, const BatchTranslator::TextSink& deliver);

}  // namespace petrel
