// petrel-run --chat: a multi-turn conversation with a language model on standard input
// and output (one user message per line), each reply streamed as it is generated.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "petrel/generator.h"

namespace petrel::run {

struct ChatSettings {
  std::string system;        // --system (empty: none)
  std::vector<std::pair<std::string, bool>> template_flags;  // --template-flag NAME=true|false
  bool json_lines = false;   // one JSON object per reply instead of streamed text
  bool quiet = false;        // no prompt marks or timing on standard error
  // Room kept for each reply (the resolved max_new_tokens): a conversation that would not
  // leave it within the model's positions drops its oldest exchanges first.
  size_t reply_tokens = 1;
  // --prompt-cache FILE: after each turn, the state after its prompt is written there.
  std::string prompt_cache;
};

// Reads messages from `fd` until its end; returns the process exit status.
int run_chat(Generator& generator, const GenerateOptions& options, const ChatSettings& settings, int fd);

}  // namespace petrel::run
