// Generating with a decoder-only model (a language model: Gemma 3, Llama, Qwen). A
// Generator holds per-thread mutable state (workspace, KV caches): use one per thread;
// the Model can be shared.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "petrel/export.h"
#include "petrel/model.h"
#include "petrel/status.h"
#include "petrel/translator.h"
#include "petrel/types.h"

namespace petrel {

// Options left unset take the model's own (ModelInfo::lm: its generation_config.json),
// as transformers' generate() does; a caller's value always wins.
struct GenerateOptions {
  // Tokens generated at most (a final EOS included); 0: the model's max_new_tokens if it
  // gives one, else 256; never past the model's positions (prompt + output).
  size_t max_new_tokens = 0;
  // Sampling (transformers' order: repetition penalty, then temperature, top-k, top-p,
  // min-p); do_sample false is greedy (the most likely token, lowest id among ties).
  std::optional<bool> do_sample;
  std::optional<float> temperature;         // > 0
  std::optional<uint32_t> top_k;            // 0: off
  std::optional<float> top_p;               // (0, 1]; 1: off
  std::optional<float> min_p;               // [0, 1); 0: off
  std::optional<float> repetition_penalty;  // > 0; 1: off (applies to greedy decoding too)
  uint64_t seed = 0;                        // the same seed gives the same tokens on every CPU
  bool ignore_eos = false;                  // go on past EOS (benchmarks)
  // Store the KV cache as IEEE half precision (half the memory and the bytes attention reads).
  bool kv_cache_f16 = false;
  // Streaming: called after every generated token (TokenEvent::input is the prompt's
  // index, `ids` the tokens so far) and once at the end with `final` set. Return false
  // to stop.
  TokenCallback on_token;
};

struct Generation {
  std::vector<int32_t> ids;   // the generated tokens, prompt excluded, a final EOS included
  bool ended_on_eos = false;  // stopped on an EOS token, not at the length limit or by the callback
};

struct GenerateTimings {
  double prefill_ms = 0, generate_ms = 0;
  size_t prompt_tokens = 0, generated_tokens = 0;
};

// `options` with every unset field filled from the model's defaults and every value
// checked: what generate() will use. Errors name the option.
PETREL_API Result<GenerateOptions> resolve_generate_options(const Model& model, const GenerateOptions& options);

class Generator {
 public:
  // Fails for a model that is not decoder-only, or when the requested ISA is unknown
  // or this CPU cannot run it.
  PETREL_API static Result<Generator> create(std::shared_ptr<const Model> model, const TranslatorOptions& options = {});
  PETREL_API ~Generator();
  PETREL_API Generator(Generator&&) noexcept;
  PETREL_API Generator& operator=(Generator&&) noexcept;

  // Continues each prompt (ids used verbatim: no BOS is added). Prompts run one after
  // another. Errors name the prompt and position: an empty prompt, ids outside the
  // vocabulary, a prompt with no room left in the model's positions, bad options.
  // Never throws: running out of memory is ErrorCode::kOutOfMemory.
  PETREL_API Result<std::vector<Generation>> generate(const std::vector<std::vector<int32_t>>& prompts,
                                                      const GenerateOptions& options = {});

  PETREL_API const GenerateTimings& last_timings() const;
  PETREL_API const Model& model() const;
  PETREL_API const char* isa() const;
  PETREL_API size_t threads() const;

 private:
  struct Impl;
  explicit Generator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel
