// petrel-run's modes, each given the command line as parsed and checked (main.cpp) and
// the model loaded: the tokenizer alone (--tokenize, --detokenize), a language model
// continuing prompts or holding a chat, a translation model translating.
#pragma once

#include <memory>
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
  double load_ms = 0;
  bool text_inputs = false;  // inputs are text (else token ids)
  int fd = -1;               // the lines' file (--chat reads its messages there)
  TranslatorOptions session;  // --isa, --threads, --activation-scales
  size_t workers = 1;
  TranslateOptions translate;
  BatchOptions batching;
  GenerateOptions generate;
  std::vector<std::pair<std::string, bool>> chat_flags;  // --template-flag
};

int run_tokenizer(const RunRequest& r, RunIo& io);
int run_language_model(const RunRequest& r, RunIo& io);
int run_translation(const RunRequest& r, RunIo& io);

}  // namespace petrel::run
