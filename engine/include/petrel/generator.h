// Generating with a decoder-only model (a language model: Gemma 3, Llama, Qwen). A
// Generator holds per-thread mutable state (workspace, KV caches): use one per thread;
// the Model can be shared. A call made while another runs (from its own on_token
// callback, or a Conversation's on the same Generator) fails with kInvalidArgument.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "petrel/export.h"
#include "petrel/model.h"
#include "petrel/status.h"
#include "petrel/translator.h"
#include "petrel/types.h"

namespace petrel {

// GenerateOptions::stop: how many strings, and how long each may be.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;

// The longest prompt text (generate_text's, or a chat template's rendering) a model takes:
// what its positions can hold, max_positions x min(its longest token's bytes,
// kMaxPromptBytesPerPosition) + its longest token, and kMaxPromptBytes at most. A longer
// text is refused before it is tokenized. No prompt that fits is refused unless it
// averages more than 32 bytes a token, or 8 in a context of 128k positions (English
// averages 4-5); and a model file cannot make one call tokenize more than 1 MiB, which
// its tokenizer does in about a second at the worst it may be (README, "Reliability").
constexpr size_t kMaxPromptBytesPerPosition = 32;
constexpr size_t kMaxPromptBytes = size_t{1} << 20;


// Options left unset take the model's own (ModelInfo::lm: its generation_config.json),
// as transformers' generate() does; a caller's value always wins.
struct GenerateOptions {
  // Tokens generated at most (a final EOS included); 0: the model's max_new_tokens if it
  // gives one, else 256; never past the model's positions (prompt + output).
  size_t max_new_tokens = 0;
  // Sampling (transformers' order: repetition penalty, then temperature, top-k, top-p,
  // min-p); do_sample false is greedy (the most likely token, lowest id among ties).
  std::optional<bool> do_sample;
  std::optional<float> temperature;         // in [1e-6, 1e6] (kMinSamplingScale..)
  std::optional<uint32_t> top_k;            // 0: off
  std::optional<float> top_p;               // (0, 1]; 1: off
  std::optional<float> min_p;               // [0, 1]; 0: off
  std::optional<float> repetition_penalty;  // in [1e-6, 1e6]; 1: off (applies to greedy decoding too)
  uint64_t seed = 0;                        // the same seed gives the same tokens on every CPU
  bool ignore_eos = false;                  // go on past EOS (benchmarks)
  // Store the KV cache as IEEE half precision (half the memory and the bytes attention reads).
  bool kv_cache_f16 = false;
  // Store the KV cache as int8 with an f32 scale per position and head (absmax / 127: about
  // a quarter of f32's memory); not together with kv_cache_f16.
  bool kv_cache_int8 = false;
  // Streaming: called after every generated token (TokenEvent::input is the prompt's
  // index, `ids` the tokens so far) and once at the end with `final` set. Return false
  // to stop.
  TokenCallback on_token;
  // Text generation (generate_text, Conversation::reply) only:
  // on_token's events carry the text so far (TokenEvent::text, text_delta): a delta
  // appears once it is whole characters and cannot be the start of a stop string.
  bool stream_text = false;
  // Generation stops at the first of these strings in the output text, which then ends
  // before it (as transformers' stop_strings). At most kMaxStopStrings, each 1..kMaxStopBytes bytes.
  std::vector<std::string> stop;
  // A GBNF grammar (llama.cpp's grammars/README.md; `root` is the start) the output must
  // follow; empty: none. Each step, the tokens whose bytes the grammar cannot take next
  // get -inf before the repetition penalty, greedy choice or sampling, and EOS is allowed
  // exactly when the output is a whole sentence of the grammar, so the output always
  // follows it and EOS ends it only when it is complete. A grammar that cannot be parsed
  // is kInvalidArgument naming its line:column; so is one with ignore_eos, and a step at
  // which no token of the vocabulary can continue the output (and the grammar is not
  // complete). Needs the model's tokenizer (the tokens' bytes). TextGeneration::text is
  // then the bytes the grammar matched (a tokenizer's clean_up_tokenization_spaces, which
  // would take spaces out, is not applied).
  std::string grammar;
  // A JSON Schema the output must be an instance of (empty: none), turned into a grammar as
  // llama.cpp's json_schema_to_grammar does (engine/src/text/json_schema_grammar.h: its
  // subset, and the bounds on strings, arrays, extra keys and free values that make every
  // output end); a keyword outside the subset is kUnsupported naming its JSON pointer.
  // Not together with `grammar`.
  std::string json_schema;
  // Speculative decoding: drafts of the next tokens are checked by one forward of the
  // model over all of them (a small matrix product that reads the weights once), and the
  // model's own choice at each position decides what is kept. The output is the same ids
  // as without it, greedy and seeded sampling alike (every option above applies as it
  // does without drafts); it is faster where the drafts are right. Drafts come from prompt
  // lookup (here) and from the Generator's draft model (set_draft_model); generate(),
  // generate_text() and Conversation::reply() use them, one sequence at a time
  // (generate_text_batch and generate_continuously refuse lookup_ngram and ignore the
  // draft model: their steps already read the weights once for many sequences).
  // Prompt lookup: a draft is what followed the latest earlier occurrence of the last n
  // tokens (n = lookup_ngram down to 1) in the prompt and the output so far; 0: off; at
  // most kMaxLookupNgram. Where both are on, the draft model drafts where lookup finds nothing.
  size_t lookup_ngram = 0;
  // The most tokens a draft proposes (0: kDefaultMaxDraftTokens; at most kMaxDraftTokens).
  // Below it the length adapts to how many of the last draft were accepted.
  size_t max_draft_tokens = 0;
};

// A message of a conversation: a role the model's chat template knows ("system",
// "user", "assistant") and its text.
struct ChatMessage {
  std::string role;
  std::string content;
};

struct Generation {
  std::vector<int32_t> ids;   // the generated tokens, prompt excluded, a final EOS included
  bool ended_on_eos = false;  // stopped on an EOS token, not at the length limit or by the callback
  size_t reused_tokens = 0;   // the prompt's tokens whose KV state was reused (a prompt cache's), not run
};

struct TextGeneration {
  std::string text;           // the output as text: special tokens skipped, cut before a stop string
  std::vector<int32_t> ids;   // the generated tokens (a final EOS included)
  bool ended_on_eos = false;  // an EOS token ended it
  bool ended_on_stop = false; // a stop string ended it
  size_t prompt_tokens = 0;   // the prompt's tokens (a conversation's: the whole history so far)
  size_t reused_tokens = 0;   // of those, how many the KV cache already held (a conversation's turns,
                              // a prompt cache's entry)
};

// One request of Generator::generate_text_batch: a prompt text and its options.
struct TextRequest {
  std::string prompt;
  GenerateOptions options;
  // Encode the prompt with the tokenizer's special tokens (Gemma's BOS), as generate_text
  // does; false for a chat template's rendering, which writes its own (transformers'
  // add_special_tokens=False).
  bool special_tokens = true;
};
// Generator::generate_continuously's requests in (each with the caller's id) and results out.
// `idle`: no sequence is running (the source may wait for work, or return none to end).
using BatchSource = std::function<std::vector<std::pair<size_t, TextRequest>>(bool idle)>;
using BatchSink = std::function<void(size_t id, Result<TextGeneration>&& result)>;

struct GenerateTimings {
  double prefill_ms = 0, generate_ms = 0;
  size_t prompt_tokens = 0, generated_tokens = 0;  // prompt_tokens: those run (reused ones excluded)
  size_t reused_tokens = 0;                        // prompt tokens whose KV state was reused
  // Speculative decoding: forwards that checked a draft, the tokens drafted, and those
  // of them accepted (generated_tokens / (verifications + plain steps) is the tokens
  // per forward); draft_model_tokens: the tokens the draft model ran (its prefill too).
  size_t verifications = 0, drafted_tokens = 0, accepted_tokens = 0, draft_model_tokens = 0;
};

// Generator::prompt_cache_stats.
struct PromptCacheStats {
  size_t budget = 0;   // set_prompt_cache_bytes
  size_t bytes = 0;    // what the entries are charged (KV rows, tokens, bookkeeping)
  size_t entries = 0;
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

  // Text in, text out, with the model's tokenizer (a converted tokenizer.json): `prompt`
  // is encoded with the tokenizer's special tokens (Gemma's BOS) and continued. Fails
  // for a model without a tokenizer, and as generate() does.
  PETREL_API Result<TextGeneration> generate_text(std::string_view prompt, const GenerateOptions& options = {});

  // Several requests at once, as a server gets them: each prompt is run alone, then every
  // unfinished sequence is stepped together, one token each, so that each layer's weights
  // are read once per step for all of them (the memory-bound part of generation), while
  // attention reads each sequence's own KV cache. Each result is the one generate_text()
  // gives that request alone on the same kernel path, id for id (its sampler, seed, stop
  // strings, grammar and callback are its own; TokenEvent::input is its index). A
  // request's error (an option, a prompt too long, a grammar's dead end) is its own
  // result and does not stop the others; a callback returning false ends only its request.
  // The prompt cache is neither read nor filled here. Memory: every sequence's KV cache
  // is held at once, checked before any is allocated.
  PETREL_API std::vector<Result<TextGeneration>> generate_text_batch(const std::vector<TextRequest>& requests);

  // Continuous batching, as a server runs requests: before every step, `next_requests`
  // gives the requests that join now (each is run alone, then stepped with the others, as
  // generate_text_batch runs them; TokenEvent::input is its id), and `on_result` gets each
  // one's result as it ends (errors too), on this thread. Returns once `next_requests`,
  // called with nothing running, gives none. A sequence's memory is charged while it runs
  // and released when it ends. The Generator is busy (other calls refused) meanwhile.
  PETREL_API Status generate_continuously(const BatchSource& next_requests, const BatchSink& on_result);

  // The model's chat template (tokenizer_config.json's) applied to `messages`, ending
  // with the assistant's turn opened when add_generation_prompt, as
  // transformers' apply_chat_template(tokenize=False) renders it. Errors name what the
  // template refused (raise_exception) or does not support.
  // `template_flags`: boolean variables the template reads (Qwen3's enable_thinking).
  PETREL_API Result<std::string> apply_chat_template(
      const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
      const std::vector<std::pair<std::string, bool>>& template_flags = {}) const;

  // The longest prompt text this model takes (kMaxPromptBytes above); 0 without a tokenizer.
  PETREL_API size_t max_prompt_bytes() const;

  // Prompt caches. With a budget (0, the default: off), the KV state after each prompt's
  // prefill (its tokens, and each layer's keys and values) is kept, and a later prompt of
  // generate() or generate_text() (or a Conversation's turn, beyond what its own caches
  // hold) runs only the tokens after the longest beginning it shares with a kept state of
  // the same KV cache type (at least one token is run: its logits give the first new
  // token); Generation / TextGeneration::reused_tokens say how many were not run. The
  // outputs are those of a run without the cache. Entries are charged their bytes and
  // dropped least recently used first, so the total never exceeds the budget; a state
  // larger than the budget, or one memory cannot be had for, is not kept. A state whose
  // sliding-window rings no longer hold the window the shared beginning needs is not
  // used. Setting the budget drops entries until the rest fit it.
  PETREL_API void set_prompt_cache_bytes(size_t bytes);
  PETREL_API PromptCacheStats prompt_cache_stats() const;
  // Writes the state after the last call's prompt (kept by the prompt cache: a budget must
  // hold it) to `path`, atomically (a temporary file beside it, renamed). The file is bound
  // to this model file (its size, data CRC-32 and a hash of its metadata) and KV cache type.
  PETREL_API Status save_prompt_cache(const std::string& path) const;
  // Reads a file save_prompt_cache wrote, verifying all of it (a model file is no more
  // trusted: errors name the file and the field), and makes it the most recently used
  // entry of the prompt cache, which the next prompts can reuse when they begin with its
  // tokens. The loaded entry is kept even past the budget (a budget of 0 included) until
  // the next state is kept or the budget is set.
  PETREL_API Status load_prompt_cache(const std::string& path);

  // Speculative decoding's draft model (GenerateOptions above): a decoder-only model with
  // this one's vocabulary (the same tokens, id for id: refused by name otherwise), run on
  // this Generator's kernel path and threads; its greedy tokens are the drafts. Null: none.
  PETREL_API Status set_draft_model(std::shared_ptr<const Model> draft);

  PETREL_API const GenerateTimings& last_timings() const;
  PETREL_API const Model& model() const;
  PETREL_API const char* isa() const;
  PETREL_API size_t threads() const;

 private:
  struct Impl;
  friend class Conversation;
  explicit Generator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A multi-turn chat with a language model: each reply renders the whole conversation
// with the chat template, but runs only the tokens after what the KV cache already holds
// (the previous turns), so a turn costs its own tokens, not the history's.
class Conversation {
 public:
  // `generator` must outlive the conversation. `system`: a system message (empty: none);
  // `template_flags`: boolean variables its chat template reads (enable_thinking).
  PETREL_API static Result<Conversation> create(Generator& generator, std::string_view system = {},
                                                std::vector<std::pair<std::string, bool>> template_flags = {});
  PETREL_API ~Conversation();
  PETREL_API Conversation(Conversation&&) noexcept;
  PETREL_API Conversation& operator=(Conversation&&) noexcept;

  // Adds the user's message, generates the assistant's reply and adds it. On an error
  // the conversation is as it was before the call.
  PETREL_API Result<TextGeneration> reply(std::string_view user_message, const GenerateOptions& options = {});
  // For a conversation grown to the model's positions: when the conversation with
  // `user_message` does not leave room for `new_tokens` generated tokens, drops the oldest
  // exchanges (a user message and the reply to it; the system message stays), oldest
  // first, until it leaves half the model's positions free, or where it cannot, that room
  // (when even the message alone does not leave that many: all of them, and reply()
  // generates what fits). Returns how many it dropped (0 when it already fits, or when the
  // message alone leaves no room at all: reply() then says why). The next reply re-reads
  // the history kept; dropping down to half the positions lets the turns after it reuse
  // the caches instead of re-reading the history every turn. A reply() to the same
  // message next takes the prompt make_room rendered and tokenized.
  PETREL_API Result<size_t> make_room(std::string_view user_message, size_t new_tokens);
  PETREL_API const std::vector<ChatMessage>& messages() const;

 private:
  struct Impl;
  explicit Conversation(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petrel
