// petrel-run's modes, each given the command line as parsed and checked (main.cpp) and
// the model loaded: the tokenizer alone (--tokenize, --detokenize), a language model
// continuing prompts or holding a chat, a translation model translating (inputs, or
// bergamot-style requests, --requests).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "petrel/batch_translator.h"
#include "petrel/generator.h"
#include "petrel/translator.h"
#include "run/run_io.h"

namespace petrel::run {

struct RunRequest {
  RunRequest(const cli::Parser& flags, std::shared_ptr<const Model> model) : flags(flags), model(std::move(model)) {}
  const cli::Parser& flags;
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Model> pivot;  // --pivot: the second model, which translates the first's translation
  std::shared_ptr<const Model> draft;  // --draft: speculative decoding's draft model
  double load_ms = 0;
  bool text_inputs = false;  // inputs are text (else token ids)
  int fd = -1;               // the lines' file (--chat reads its messages there)
  TranslatorOptions session;  // --isa, --threads, --activation-scales
  size_t workers = 1;
  TranslateOptions translate;
  BatchOptions batching;
  // --html, --quality-scores or --ssplit-mode: text inputs go through BatchTranslator (which
  // splits and reads markup) and JSON results gain their sentences (and quality scores).
  bool sentence_view = false;
  std::optional<float> alignment_threshold;  // --alignment-threshold: hard alignment pairs
  GenerateOptions generate;
  std::vector<std::pair<std::string, bool>> chat_flags;  // --template-flag
};

// What text translations run on: the model's BatchTranslator, and with --pivot the second
// model's, each text then going source -> pivot -> target through both (translate_via_pivot,
// bergamot's translateViaPivoting), the result shaped as one model's.
struct TextTranslators {
  BatchTranslator model;
  std::optional<BatchTranslator> pivot;

  Status translate_text(const std::vector<std::string>& texts, const TranslateOptions& options,
                        const BatchOptions& batching, const BatchTranslator::TextSink& deliver) {
    if (pivot) return translate_via_pivot(model, *pivot, texts, options, batching, deliver);
    return model.translate_text(texts, options, batching, deliver);
  }
};
// Each with r.workers sessions of r.session's threads and kernel path.
Result<TextTranslators> create_text_translators(const RunRequest& r);

int run_tokenizer(const RunRequest& r, RunIo& io);
int run_language_model(const RunRequest& r, RunIo& io);
int run_translation(const RunRequest& r, RunIo& io);
int run_requests(const RunRequest& r, RunIo& io);

}  // namespace petrel::run
