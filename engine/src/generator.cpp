#include "petrel/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <optional>

#include "core/checked.h"
#include "core/quoted.h"
#include "core/utf8.h"
#include "decode/sampling.h"
#include "decode/speculation.h"
#include "draft_model.h"
#include "model_access.h"
#include "models/decoder_only.h"
#include "prompt_cache.h"
#include "text/chat_template.h"
#include "text/gbnf.h"
#include "text/gbnf_matcher.h"
#include "text/json_schema_grammar.h"
#include "text/hf_tokenizer.h"
#include "text/tokenizer.h"
#include "threads/thread_pool.h"

namespace petrel {

namespace {

// The bytes of the buffers one prompt's generation grows (KV caches of cache_type, whose
// rows models::cache_row_bytes gives, activations, logits).
detail::CheckedSize generation_bytes(const detail::ModelWeights& w, size_t positions, size_t threads,
                                     DType cache_type) {
  using detail::CheckedSize;
  const ModelInfo& info = *w.info;
  // A sliding-window layer's ring lists each chunk row's keys: up to a window per row.
  size_t widest_window = 0;
  for (const detail::Layer& layer : w.decoder.layers) widest_window = std::max(widest_window, layer.sliding_window);
  const uint64_t width = std::max<uint64_t>(info.d_model, uint64_t{info.num_heads} * info.head_dim);
  const uint64_t chunk = models::DecoderOnly::kPrefillChunk, widest = std::max<uint64_t>(width, info.ffn_dim) + 32;
  CheckedSize total;
  total += CheckedSize(positions) * models::cache_row_bytes(cache_type, info.num_kv_heads, info.head_dim) * 2 *
           info.decoder_layers;
  total += CheckedSize(chunk) * (8 * width + 2 * info.ffn_dim) * 4;  // layer workspace
  total += CheckedSize(chunk) * (widest + widest / 8) * threads;    // int8 activations per thread
  total += CheckedSize(info.max_positions) * 4 * threads;           // attention scores (sized for any length)
  total += CheckedSize(chunk) * std::min(positions, widest_window) * sizeof(size_t);  // ring key lists
  // Logits, and the sampler's per-token scratch: ids, logits, probabilities, exps, order,
  // penalty marks.
  total += CheckedSize(info.vocab_size) * (4 + 4 + 4 + 4 + 4 + 4 + 1);
  total += CheckedSize(chunk) * (info.head_dim / 2) * 4 * 2 * 2;      // RoPE cos/sin rows: a table per kind of layer
  return total;
}

// The sampler's options of resolved GenerateOptions (every optional set).
decode::SamplingOptions sampling_options(const GenerateOptions& o) {
  decode::SamplingOptions s;
  s.sample = *o.do_sample;
  s.temperature = *o.temperature;
  s.top_k = *o.top_k;
  s.top_p = *o.top_p;
  s.min_p = *o.min_p;
  s.repetition_penalty = *o.repetition_penalty;
  s.seed = o.seed;
  return s;
}

// The text of generated ids as they come, as transformers' TextStreamer and TGI make
// it: a window of the newest tokens decoded without and with the newest one, the
// difference taken once it does not end in an incomplete character (U+FFFD); a stop
// string ends the text, and text that may still become one is held back.
class TextStream {
 public:
  TextStream(const text::HfTokenizer& tokenizer, const std::vector<std::string>& stop)
      : tokenizer_(tokenizer), stop_(stop) {}

  // After a token was added to `ids`: true when a stop string has appeared.
  Result<bool> update(const std::vector<int32_t>& ids) {
    auto before = tokenizer_.decode_ids(ids.data() + prefix_, read_ - prefix_, true);
    if (!before) return before.error();
    auto after = tokenizer_.decode_ids(ids.data() + prefix_, ids.size() - prefix_, true);
    if (!after) return after.error();
    const std::string& now = after.value();
    if (now.size() <= before.value().size() || ends_with_replacement(now)) return false;
    const size_t searched_from = text_.size() > kMaxStopBytes ? text_.size() - kMaxStopBytes : 0;
    text_.append(now, before.value().size(), std::string::npos);
    prefix_ = read_;
    read_ = ids.size();
    for (const std::string& s : stop_) {
      const size_t at = text_.find(s, searched_from);
      if (at != std::string::npos) {
        text_.resize(at);
        stopped_ = true;
      }
    }
    return stopped_;
  }
  // The text not shown yet that cannot be the start of a stop string (all of it when
  // `final`), marked shown.
  std::string_view take_delta(bool final) {
    size_t end = text_.size();
    if (!final && !stopped_)
      for (const std::string& s : stop_)
        for (size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k)
          if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
            end = std::min(end, text_.size() - k);
            break;
          }
    end = std::max(end, shown_);
    std::string_view delta(text_.data() + shown_, end - shown_);
    shown_ = end;
    return delta;
  }
  const std::string& text() const { return text_; }
  bool stopped() const { return stopped_; }

 private:
  static bool ends_with_replacement(const std::string& s) {
    return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xef\xbf\xbd") == 0;
  }
  const text::HfTokenizer& tokenizer_;
  const std::vector<std::string>& stop_;
  size_t prefix_ = 0, read_ = 0;  // ids [prefix_, read_) were decoded last time
  std::string text_;
  size_t shown_ = 0;
  bool stopped_ = false;
};

// The model's tokenizer.json tokenizer, or an error saying the model has none.
Result<const text::HfTokenizer*> text_tokenizer(const Model& model) {
  const auto* t = dynamic_cast<const text::HfTokenizer*>(detail::ModelAccess::tokenizer(model));
  if (t == nullptr)
    return Error{ErrorCode::kInvalidArgument,
                 model.info().source + ": the model has no tokenizer (convert it with its tokenizer.json) : give ids"};
  return t;
}

// generator.h's kMaxPromptBytes: the positions times the longest token's bytes (a
// ByteLevel vocabulary's tokens are stored as characters: never fewer bytes than they
// stand for), with the longest token as a margin. Reads each token's length once, when
// a Generator is made (a quarter of a millisecond for Gemma 3's 262,144).
size_t prompt_byte_limit(const Model& model) {
  const ModelInfo& info = model.info();
  size_t longest = kMaxPromptBytesPerPosition;
  if (const auto* t = dynamic_cast<const text::HfTokenizer*>(detail::ModelAccess::tokenizer(model))) {
    longest = 0;
    for (std::string_view token : t->tables().vocab) longest = std::max(longest, token.size());
    for (const detail::HfAddedTokenEntry& added : t->tables().added_tokens) longest = std::max(longest, added.content.size());
  }
  const uint64_t per_position = std::min<uint64_t>(std::max<size_t>(longest, 1), kMaxPromptBytesPerPosition);
  return static_cast<size_t>(std::min<uint64_t>(kMaxPromptBytes, uint64_t{info.max_positions} * per_position + longest));
}

Status check_stop_strings(const std::vector<std::string>& stop) {
  if (stop.size() > kMaxStopStrings)
    return Error{ErrorCode::kInvalidArgument, "stop: more than " + std::to_string(kMaxStopStrings) + " strings"};
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty() || stop[i].size() > kMaxStopBytes)
      return Error{ErrorCode::kInvalidArgument,
                   "stop[" + std::to_string(i) + "]: must be 1.." + std::to_string(kMaxStopBytes) + " bytes"};
  return Status::ok();
}

// Why `prompt` cannot be continued (empty, an id outside the vocabulary, no position
// left to generate in), or nullopt; `which` names it in the error ("prompt 2"; empty: none).
std::optional<Error> prompt_problem(const std::vector<int32_t>& prompt, const ModelInfo& info, const std::string& which) {
  auto at = [&](const std::string& what) { return which.empty() ? what : which + ": " + what; };
  if (prompt.empty()) return Error{ErrorCode::kInvalidArgument, at("the prompt is empty")};
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || static_cast<uint32_t>(prompt[i]) >= info.vocab_size)
      return Error{ErrorCode::kInvalidArgument, at("position " + std::to_string(i)) + ": id " +
                                                    std::to_string(prompt[i]) + " is outside the vocabulary (" +
                                                    std::to_string(info.vocab_size) + " tokens)"};
  if (prompt.size() >= info.max_positions)
    return Error{ErrorCode::kInvalidArgument, at(std::to_string(prompt.size())) +
                                                  " tokens leave no room to generate within the model's " +
                                                  std::to_string(info.max_positions) + " positions"};
  return std::nullopt;
}

// One sequence's choices after its prefill, step by step: the grammar's mask, the
// sampler, EOS, stop strings and the caller's callback. Generator's one sequence and
// generate_text_batch's many go through it, so a sequence decodes the same either way.
class SequenceDecoder {
 public:
  // A grammar the output must follow: its matcher (at the state before any output), the
  // vocabulary's bytes, the mask's buffer [vocab]; all null for none.
  struct Grammar {
    text::GbnfMatcher* matcher = nullptr;
    const text::GbnfVocabulary* vocabulary = nullptr;
    uint8_t* allowed = nullptr;
  };

  // `which` names the sequence in errors ("prompt 2"; empty for a call's only one);
  // `index` is TokenEvent::input. `out` receives the ids.
  SequenceDecoder(size_t index, std::string which, const GenerateOptions& o, const ModelInfo& info,
                  const kernels::KernelTable& kernels, const text::Tokenizer* tokenizer, TextStream* stream,
                  Grammar grammar, const std::vector<int32_t>& prompt, size_t max_new, Generation& out)
      : index_(index), which_(std::move(which)), o_(o), info_(info), sampler_(sampling_options(o), kernels.top_k),
        tokenizer_(tokenizer), stream_(stream), grammar_(grammar), max_new_(max_new), out_(out) {
    sequence_.reserve(prompt.size() + max_new);
    sequence_.assign(prompt.begin(), prompt.end());
    out_.ids.clear();
    out_.ids.reserve(max_new);  // nothing is allocated per step once the caches have grown
    out_.ended_on_eos = false;
  }

  // Picks the next token from `logits` [vocab] (which it modifies). True: `token` is to be
  // run and its logits given to the next call; false: the sequence has ended (the
  // callback's final event sent).
  Result<bool> next(float* logits, int32_t& token) {
    const std::string at_step = at("step " + std::to_string(out_.ids.size()));
    const size_t vocab = info_.vocab_size;
    if (grammar_.matcher != nullptr) {
      auto count = grammar_.matcher->allowed_tokens(*grammar_.vocabulary, grammar_.allowed);
      if (!count) return Error{count.error().code, at_step + ": " + count.error().message};
      const bool complete = grammar_.matcher->complete();
      if (count.value() == 0 && !complete)
        return Error{ErrorCode::kInvalidArgument,
                     at_step + ": grammar: no token of the vocabulary can continue the output, and it is not complete"};
      for (const int32_t id : info_.lm.eos_ids)
        if (id >= 0 && static_cast<size_t>(id) < vocab) grammar_.allowed[static_cast<size_t>(id)] = complete ? 1 : 0;
      decode::mask_logits(logits, vocab, grammar_.allowed);
    }
    token = sampler_.next(logits, vocab, sequence_.data(), sequence_.size());
    if (token < 0 || !std::isfinite(logits[static_cast<size_t>(token)]))
      return Error{ErrorCode::kFormat, info_.source + ": " + at_step + ": the logits are not finite (corrupt weights?)"};
    out_.ids.push_back(token);
    sequence_.push_back(token);
    const std::vector<int32_t>& eos = info_.lm.eos_ids;
    const bool is_eos = !o_.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
    if (grammar_.matcher != nullptr && !is_eos) {
      auto taken = grammar_.matcher->accept(grammar_.vocabulary->token(token));
      if (!taken) return Error{taken.error().code, at_step + ": " + taken.error().message};
      if (!taken.value()) return Error{ErrorCode::kInternal, at_step + ": grammar: an allowed token was refused"};
    }
    bool stop = false;
    if (stream_ != nullptr) {
      auto stopped = stream_->update(out_.ids);
      if (!stopped) return stopped.error();
      stop = stopped.value();
    }
    bool more = !(o_.on_token && !event(false));
    if (more && is_eos) out_.ended_on_eos = true;
    more = more && !is_eos && !stop && out_.ids.size() < max_new_;
    if (!more && o_.on_token) event(true);
    return more;
  }
  // The prompt and the tokens generated so far.
  const std::vector<int32_t>& sequence() const { return sequence_; }

 private:
  std::string at(const std::string& what) const { return which_.empty() ? what : which_ + ": " + what; }
  bool event(bool final) {
    TokenEvent e;
    e.input = index_;
    e.ids = out_.ids.data();
    e.length = out_.ids.size();
    e.final = final;
    if (tokenizer_ != nullptr && !out_.ids.empty()) e.piece = tokenizer_->output_token(out_.ids.back()).value_or("");
    if (stream_ != nullptr && o_.stream_text) {
      e.text = stream_->text();
      e.text_delta = stream_->take_delta(final);
    }
    return o_.on_token(e);
  }

  size_t index_;
  std::string which_;
  const GenerateOptions& o_;
  const ModelInfo& info_;
  decode::Sampler sampler_;
  const text::Tokenizer* tokenizer_;
  TextStream* stream_;
  Grammar grammar_;
  size_t max_new_;
  Generation& out_;
  std::vector<int32_t> sequence_;  // prompt + generated, for the repetition penalty
};

// The grammar text of options' grammar or json_schema (empty: none), checked as
// far as it can be without the model.
Result<std::string> grammar_source(const GenerateOptions& o) {
  if (o.json_schema.empty()) {
    if (!o.grammar.empty() && o.ignore_eos)
      return Error{ErrorCode::kInvalidArgument, "grammar: cannot be combined with ignore_eos"};
    return o.grammar;
  }
  if (!o.grammar.empty()) return Error{ErrorCode::kInvalidArgument, "grammar and json_schema: give one of them"};
  auto converted = text::json_schema_to_gbnf(o.json_schema);
  if (!converted) return converted.error();
  if (o.ignore_eos) return Error{ErrorCode::kInvalidArgument, "grammar: cannot be combined with ignore_eos"};
  return converted;
}
}  // namespace

Result<GenerateOptions> resolve_generate_options(const Model& model, const GenerateOptions& options) {
  const ModelInfo& info = model.info();
  if (!info.decoder_only)
    return Error{ErrorCode::kInvalidArgument, info.source + ": not a decoder-only model (translate it with a Translator)"};
  const LanguageModelDefaults& d = info.lm;
  GenerateOptions o = options;
  if (o.max_new_tokens == 0)  // the model's default (within its positions, by the loader), or ours within them
    o.max_new_tokens = d.max_new_tokens != 0 ? d.max_new_tokens
                                             : std::min<size_t>(detail::kDefaultMaxNewTokens, info.max_positions);
  if (o.max_new_tokens > info.max_positions)
    return Error{ErrorCode::kInvalidArgument, "max_new_tokens " + std::to_string(o.max_new_tokens) +
                                                  " is more than the model's positions (" +
                                                  std::to_string(info.max_positions) + ")"};
  o.do_sample = o.do_sample.value_or(d.do_sample);
  o.temperature = o.temperature.value_or(d.temperature);
  o.top_k = o.top_k.value_or(d.top_k);
  o.top_p = o.top_p.value_or(d.top_p);
  o.min_p = o.min_p.value_or(d.min_p);
  o.repetition_penalty = o.repetition_penalty.value_or(d.repetition_penalty);
  if (o.kv_cache_f16 && o.kv_cache_int8)
    return Error{ErrorCode::kInvalidArgument, "kv_cache_f16 and kv_cache_int8: choose one type for the KV cache"};
  if (o.lookup_ngram > kMaxLookupNgram)
    return Error{ErrorCode::kInvalidArgument, "lookup_ngram " + std::to_string(o.lookup_ngram) + ": at most " +
                                                  std::to_string(kMaxLookupNgram)};
  if (o.max_draft_tokens > kMaxDraftTokens)
    return Error{ErrorCode::kInvalidArgument, "max_draft_tokens " + std::to_string(o.max_draft_tokens) + ": at most " +
                                                  std::to_string(kMaxDraftTokens)};
  if (o.max_draft_tokens == 0) o.max_draft_tokens = kDefaultMaxDraftTokens;
  if (Status st = decode::check(sampling_options(o)); !st) return st.error();
  return o;
}

// A sequence's KV caches and the tokens they hold: the Generator's own (restarted for
// every prompt) or a Conversation's (kept between turns).
struct LmSession {
  models::LmState state;
  std::vector<int32_t> cached;  // the tokens in the caches, in order
  bool keep = false;            // reuse the caches' common prefix with the next prompt
};

struct Generator::Impl {
  Impl(std::shared_ptr<const Model> m, const kernels::KernelTable& k, size_t threads, ActivationScales scales)
      : model(std::move(m)), kernels(k), pool(threads), scales(scales), weights(detail::weights_for(*model, scales)),
        graph(weights, k, pool) {}
  Result<std::vector<Generation>> generate(const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options);
  // Generates after `prompt` in `session`; with `stream` (text generation), also the
  // text, stopping at a stop string. Returns how many prompt tokens the caches held.
  // `which` names the prompt in errors ("prompt 2: ..."); empty for a call's only one.
  Result<size_t> run(size_t index, const std::string& which, const std::vector<int32_t>& prompt, const GenerateOptions& o, Generation& out,
                     LmSession& session, TextStream* stream);
  // run()'s steps after the prompt with drafts (lookup, the draft model) verified, from
  // the prompt's logits: the ids and the caches those of the plain steps.
  Status speculate(SequenceDecoder& decoder, const GenerateOptions& o, size_t positions, size_t max_new,
                   const Generation& out, LmSession& session);
  Result<TextGeneration> generate_text(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                       LmSession& session);
  std::vector<Result<TextGeneration>> generate_text_batch(const std::vector<TextRequest>& requests);
  void generate_continuously(const BatchSource& next_requests, const BatchSink& on_result);
  // The TextGeneration of `generation`, whose stream held its text.
  Result<TextGeneration> text_of(Generation& generation, const TextStream& stream, const text::HfTokenizer& tokenizer,
                                 size_t prompt_tokens, bool grammar) const;
  // Makes `grammar_matcher` the compiled options.grammar (kept while the text is the same:
  // the stacks it has met stay), or clears it for none; builds the vocabulary's index once.
  Status prepare_grammar(const GenerateOptions& options);
  // Builds the vocabulary's bytes for grammars (once).
  Status prepare_grammar_vocabulary();
  // The error for a prompt text of `bytes` bytes that the model's positions cannot hold
  // (`what` names it: "the prompt has"), before anything tokenizes it.
  std::optional<Error> prompt_too_long(size_t bytes, const char* what) const {
    if (bytes <= max_prompt_bytes) return std::nullopt;
    return Error{ErrorCode::kInvalidArgument,
                 std::string(what) + " " + std::to_string(bytes) + " bytes: more than the " + std::to_string(max_prompt_bytes) +
                     " a prompt may have (" + model->info().source + ": " + std::to_string(model->info().max_positions) +
                     " positions; generator.h's kMaxPromptBytes)"};
  }

  std::shared_ptr<const Model> model;
  const kernels::KernelTable& kernels;
  threads::ThreadPool pool;
  ActivationScales scales;
  detail::ModelWeights weights;
  models::DecoderOnly graph;
  detail::DraftModel<decode::ModelDraft> draft;  // set_draft_model's
  std::vector<float> verify_logits;  // [draft + 1, vocab]
  layers::Workspace workspace;
  LmSession session;
  std::vector<float> logits;
  GenerateTimings timings;
  std::atomic<bool> busy{false};  // detail::SessionCall
  const size_t max_prompt_bytes = prompt_byte_limit(*model);
  // GenerateOptions::grammar: the tokens' bytes, sorted (built at the first grammar), the
  // matcher of the last grammar text and its state before any output, the step's mask.
  std::optional<text::GbnfVocabulary> grammar_vocabulary;
  std::string grammar_text;
  std::string schema_text;  // the JSON schema grammar_text was made from (empty: none)
  std::optional<text::GbnfMatcher> grammar_matcher;
  text::GbnfMatcher::State grammar_start;
  bool grammar_on = false;
  std::vector<uint8_t> allowed;
  // Prompt caches (set_prompt_cache_bytes): the kept states, which holds the last run's
  // prompt (its serial; 0: none), and what a file of them must match (made at the first
  // save or load: it hashes the model file's metadata).
  detail::PromptCache prompt_cache;
  uint64_t last_prompt_state = 0;
  std::optional<detail::KvLayout> layout;

  // Whether sessions start for the model's positions, so that every kept state has the
  // rings of every other (DecoderOnly::start sizes them by the positions it is given).
  bool prompt_caching() const { return prompt_cache.budget() > 0 || !prompt_cache.empty(); }
  // Whether `entry`, restored and rewound to `length`, still holds what its sliding-window
  // layers need: DecoderOnly::rewind's rule (which the restore then goes through), checked
  // before anything is copied.
  bool rewindable(const detail::KvSnapshot& entry, size_t length) const {
    const auto& layers = weights.decoder.layers;
    if (entry.ring.size() != layers.size() || !graph.holds_window(entry.from, length)) return false;
    for (size_t l = 0; l < layers.size(); ++l)
      if (entry.ring[l] != 0 && entry.tokens.size() - length > entry.ring[l] - layers[l].sliding_window) return false;
    return true;
  }
  // Restores the kept state sharing the longest beginning with `prompt` (more than
  // `reused` tokens of it) into `session`; returns the tokens it holds, or `reused` when
  // none is better (the session then as it was), or 0 when the restore failed.
  size_t restore_prompt_state(const std::vector<int32_t>& prompt, DType cache_type, size_t reused, LmSession& session);
  // Keeps the state `session` holds after `prompt`'s prefill (within the budget).
  void keep_prompt_state(const std::vector<int32_t>& prompt, LmSession& session);
  const detail::KvLayout& kv_layout();
};

size_t Generator::Impl::restore_prompt_state(const std::vector<int32_t>& prompt, DType cache_type, size_t reused,
                                             LmSession& session) {
  size_t length = 0;
  const detail::KvSnapshot* entry = prompt_cache.best(
      prompt, cache_type, prompt.size() - 1,
      [&](const detail::KvSnapshot& e, size_t common) { return common > reused && rewindable(e, common); }, length);
  if (entry == nullptr) return reused;
  try {
    graph.start(model->info().max_positions, cache_type, session.state);
    if (!detail::restore(*entry, session.state) || !graph.rewind(length, session.state)) return 0;
    session.cached.assign(entry->tokens.begin(), entry->tokens.begin() + static_cast<std::ptrdiff_t>(length));
    return length;
  } catch (const std::bad_alloc&) {  // the prompt runs in full instead
    return 0;
  }
}

void Generator::Impl::keep_prompt_state(const std::vector<int32_t>& prompt, LmSession& session) {
  const models::LmState& state = session.state;
  if (const detail::KvSnapshot* same = prompt_cache.find_exact(prompt, state.cache_type)) {
    last_prompt_state = same->serial;
    return;
  }
  if (prompt_cache.budget() == 0 || state.length != prompt.size()) return;
  const ModelInfo& info = model->info();
  const size_t row_bytes = models::cache_row_bytes(state.cache_type, info.num_kv_heads, info.head_dim);
  for (size_t l = 0; l < state.k.size(); ++l)  // the caches as rows of row_bytes
    if (state.k[l].size() < detail::held_rows(state.length, state.ring[l]) * row_bytes ||
        state.v[l].size() < detail::held_rows(state.length, state.ring[l]) * row_bytes)
      return;
  const std::optional<size_t> bytes = detail::snapshot_bytes(state, row_bytes);
  if (!bytes || !prompt_cache.admits(*bytes)) return;
  prompt_cache.make_room(*bytes);
  try {
    last_prompt_state = prompt_cache.insert(detail::capture(state, prompt, row_bytes, graph.held_from(session.state)));
  } catch (const std::bad_alloc&) {  // not kept; the generation goes on
  }
}

const detail::KvLayout& Generator::Impl::kv_layout() {
  if (layout) return *layout;
  const ModelInfo& info = model->info();
  detail::KvLayout l;
  l.model_name = info.source;
  l.file_size = info.file_size;
  const detail::ModelAccess::Bytes file = detail::ModelAccess::file_bytes(*model);
  l.metadata_hash = detail::prompt_cache_metadata_hash(file.data, file.size);
  l.data_crc32 = info.data_crc32;
  l.layers = static_cast<uint32_t>(weights.decoder.layers.size());
  l.kv_heads = info.num_kv_heads;
  l.head_dim = info.head_dim;
  l.vocab_size = info.vocab_size;
  l.max_positions = info.max_positions;
  models::LmState sessions;  // the rings of a session started for the model's positions
  graph.start(info.max_positions, DType::kF32, sessions);
  l.ring = sessions.ring;
  layout = std::move(l);
  return *layout;
}

Status Generator::Impl::prepare_grammar_vocabulary() {
  if (grammar_vocabulary) return Status::ok();
  const auto* tokenizer = dynamic_cast<const text::HfTokenizer*>(detail::ModelAccess::tokenizer(*model));
  if (tokenizer == nullptr)
    return Error{ErrorCode::kInvalidArgument,
                 model->info().source + ": grammar: the model has no tokenizer (the tokens' bytes are needed)"};
  auto bytes = text::hf_token_bytes(*tokenizer, model->info().vocab_size);
  if (!bytes) return bytes.error();
  for (const int32_t id : model->info().lm.eos_ids)  // EOS is the caller's: allowed when complete
    if (id >= 0 && static_cast<size_t>(id) < bytes.value().excluded.size()) bytes.value().excluded[static_cast<size_t>(id)] = 1;
  auto vocabulary = text::make_gbnf_vocabulary(bytes.value().bytes, bytes.value().excluded);
  if (!vocabulary) return vocabulary.error();
  grammar_vocabulary = std::move(vocabulary.value());
  return Status::ok();
}

Status Generator::Impl::prepare_grammar(const GenerateOptions& o) {
  // The schema the last call converted is not converted again (a server's requests
  // repeat one schema).
  const bool same_schema = !o.json_schema.empty() && o.grammar.empty() && !o.ignore_eos && o.json_schema == schema_text;
  auto source = same_schema ? Result<std::string>(grammar_text) : grammar_source(o);
  if (!source) return source.error();
  grammar_on = !source.value().empty();
  if (!grammar_on) return Status::ok();
  if (Status st = prepare_grammar_vocabulary(); !st) return st.error();
  // A matcher keeps every stack it has met: one used for many calls starts afresh once
  // half its limit is reached, rather than fail a call on it.
  if (!grammar_matcher || grammar_text != source.value() || grammar_matcher->nodes() > text::kMaxGbnfNodes / 2) {
    grammar_matcher.reset();
    auto grammar = text::parse_gbnf(source.value());
    if (!grammar) return grammar.error();
    auto matcher = text::GbnfMatcher::create(std::move(grammar.value()));
    if (!matcher) return matcher.error();
    grammar_matcher = std::move(matcher.value());
    grammar_start = grammar_matcher->state();
    grammar_text = source.value();
  }
  schema_text = o.json_schema;
  allowed.resize(model->info().vocab_size);
  return Status::ok();
}

Result<size_t> Generator::Impl::run(size_t index, const std::string& which, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                                    Generation& out, LmSession& session, TextStream* stream) {
  const ModelInfo& info = model->info();
  auto at = [&](const std::string& what) { return which.empty() ? what : which + ": " + what; };
  if (auto problem = prompt_problem(prompt, info, which)) return *problem;
  const size_t max_new = std::min(o.max_new_tokens, info.max_positions - prompt.size());
  const size_t positions = prompt.size() + max_new;
  const DType cache_type = o.kv_cache_int8 ? DType::kInt8 : o.kv_cache_f16 ? DType::kF16 : DType::kF32;
  const detail::CheckedSize bytes =
      generation_bytes(weights, positions, pool.size(), cache_type);
  const bool speculating = o.lookup_ngram > 0 || draft.drafter != nullptr;
  detail::CheckedSize needed = bytes;
  if (speculating) {  // the verified rows' logits, and the draft model's own buffers
    needed += detail::CheckedSize(o.max_draft_tokens + 1) * info.vocab_size * 4;
    if (draft.drafter != nullptr) needed += generation_bytes(*draft.weights, positions, pool.size(), DType::kF32);
  }
  if (auto problem = detail::working_memory_problem(needed, at(std::to_string(positions)) + " positions need",
                                                    "use a smaller max_new_tokens"))
    return *problem;

  // The caches' tokens that begin the prompt stay (at least one prompt token is run:
  // its logits give the first new token), or a kept prompt state's that begin it.
  models::LmState& state = session.state;
  size_t reused = 0;
  if (session.keep && state.cache_type == cache_type && !session.cached.empty()) {
    const size_t limit = std::min(session.cached.size(), prompt.size() - 1);
    while (reused < limit && session.cached[reused] == prompt[reused]) ++reused;
    if (reused == 0 || !graph.rewind(reused, state)) reused = 0;
  }
  const bool caching = prompt_caching();
  last_prompt_state = 0;
  if (caching && reused + 1 < prompt.size()) reused = restore_prompt_state(prompt, cache_type, reused, session);
  if (reused == 0) {
    graph.start(session.keep || caching ? info.max_positions : positions, cache_type, state);
  }
  session.cached.resize(reused);
  graph.reserve(workspace);
  logits.resize(info.vocab_size);

  auto start = std::chrono::steady_clock::now();
  graph.forward(prompt.data() + reused, prompt.size() - reused, state, workspace, logits.data());
  session.cached.insert(session.cached.end(), prompt.begin() + static_cast<std::ptrdiff_t>(reused), prompt.end());
  if (caching) keep_prompt_state(prompt, session);
  timings.prefill_ms += detail::ms_since(start);
  timings.prompt_tokens += prompt.size() - reused;
  timings.reused_tokens += reused;
  start = std::chrono::steady_clock::now();
  out.reused_tokens = reused;
  SequenceDecoder::Grammar grammar;
  if (grammar_on) {
    grammar_matcher->set_state(grammar_start);
    grammar = {&*grammar_matcher, &*grammar_vocabulary, allowed.data()};
  }
  SequenceDecoder decoder(index, which, o, info, kernels, detail::ModelAccess::tokenizer(*model), stream, grammar,
                          prompt, max_new, out);
  if (speculating) {
    if (Status st = speculate(decoder, o, positions, max_new, out, session); !st) return st.error();
  } else {
    for (int32_t token = 0;;) {
      auto more = decoder.next(logits.data(), token);
      if (!more) return more.error();
      if (!more.value()) break;
      graph.forward(&token, 1, state, workspace, logits.data());
      session.cached.push_back(token);
    }
  }
  timings.generate_ms += detail::ms_since(start);
  timings.generated_tokens += out.ids.size();
  return reused;
}

Status Generator::Impl::speculate(SequenceDecoder& decoder, const GenerateOptions& o, size_t positions, size_t max_new,
                                  const Generation& out, LmSession& session) {
  const size_t vocab = model->info().vocab_size;
  models::LmState& state = session.state;
  std::optional<decode::PromptLookup> lookup;
  if (o.lookup_ngram > 0) lookup.emplace(o.lookup_ngram);
  if (draft.drafter != nullptr) draft.drafter->start(std::min<size_t>(positions, draft.model->info().max_positions));
  const size_t draft_ran = draft.drafter != nullptr ? draft.drafter->tokens_run() : 0;
  decode::DraftLength length(o.max_draft_tokens);
  verify_logits.resize((o.max_draft_tokens + 1) * vocab);
  std::vector<int32_t> rows;  // the token chosen last, then the draft after it
  std::vector<int32_t> drafted;
  int32_t token = 0;
  auto more = decoder.next(logits.data(), token);
  if (!more) return more.error();
  while (more.value()) {
    // `token` ends the sequence, chosen and not run yet; the draft continues after it, and
    // positions past the generation's limit are never drafted.
    const size_t limit = std::min(length.next(), max_new - out.ids.size());
    drafted.clear();
    if (limit > 0 && lookup) lookup->propose(decoder.sequence(), limit, drafted);
    if (limit > 0 && drafted.empty() && draft.drafter != nullptr) draft.drafter->propose(decoder.sequence(), limit, drafted);
    rows.assign(1, token);
    rows.insert(rows.end(), drafted.begin(), drafted.end());
    const size_t base = state.length;
    float* row_logits = drafted.empty() ? logits.data() : verify_logits.data();
    graph.forward(rows.data(), rows.size(), state, workspace, row_logits, !drafted.empty());
    // Each row's logits choose the next token as a plain step would; the draft's token
    // after the row stays only while it is the one chosen.
    size_t row = 0;
    for (;; ++row) {
      more = decoder.next(row_logits + row * vocab, token);
      if (!more) return more.error();
      if (!more.value() || row + 1 == rows.size() || token != rows[row + 1]) break;
    }
    if (row + 1 < rows.size() && !graph.rewind(base + row + 1, state))
      return Error{ErrorCode::kInternal, "speculative decoding: the caches could not drop a rejected draft"};
    session.cached.insert(session.cached.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(row + 1));
    if (!drafted.empty()) {
      ++timings.verifications;
      timings.drafted_tokens += drafted.size();
      timings.accepted_tokens += row;
      length.update(drafted.size(), row);
    }
  }
  if (draft.drafter != nullptr) timings.draft_model_tokens += draft.drafter->tokens_run() - draft_ran;
  return Status::ok();
}

Result<std::vector<Generation>> Generator::Impl::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                          const GenerateOptions& options) {
  auto resolved = resolve_generate_options(*model, options);
  if (!resolved) return resolved.error();
  timings = {};
  try {
    if (Status st = prepare_grammar(resolved.value()); !st) return st.error();
    std::vector<Generation> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      if (auto r = run(i, prompts.size() > 1 ? "prompt " + std::to_string(i + 1) : "", prompts[i], resolved.value(), out[i],
                       session, nullptr);
          !r)
        return r.error();
    return out;
  } catch (const std::bad_alloc&) {  // the API never throws: memory ran out while buffers grew
    return Error{ErrorCode::kOutOfMemory, "out of memory"};
  }
}

Result<TextGeneration> Generator::Impl::generate_text(const std::vector<int32_t>& prompt,
                                                      const GenerateOptions& options, LmSession& lm) {
  auto tokenizer = text_tokenizer(*model);
  if (!tokenizer) return tokenizer.error();
  auto resolved = resolve_generate_options(*model, options);
  if (!resolved) return resolved.error();
  if (Status s = check_stop_strings(options.stop); !s) return s.error();
  timings = {};
  try {
    if (Status st = prepare_grammar(resolved.value()); !st) return st.error();
    TextStream stream(*tokenizer.value(), options.stop);
    Generation generation;
    if (auto reused = run(0, "", prompt, resolved.value(), generation, lm, &stream); !reused) return reused.error();
    return text_of(generation, stream, *tokenizer.value(), prompt.size(), grammar_on);
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "out of memory"};
  }
}

Result<TextGeneration> Generator::Impl::text_of(Generation& generation, const TextStream& stream,
                                                const text::HfTokenizer& tokenizer, size_t prompt_tokens,
                                                bool grammar) const {
  TextGeneration out;
  out.ended_on_eos = generation.ended_on_eos;
  out.ended_on_stop = stream.stopped();
  out.ids = std::move(generation.ids);
  out.prompt_tokens = prompt_tokens;
  out.reused_tokens = generation.reused_tokens;
  if (out.ended_on_stop) {
    out.text = stream.text();
  } else if (grammar) {  // the bytes the grammar matched (no clean_up_tokenization_spaces)
    const std::vector<int32_t>& eos = model->info().lm.eos_ids;
    for (const int32_t id : out.ids)
      if (std::find(eos.begin(), eos.end(), id) == eos.end()) out.text += grammar_vocabulary->token(id);
    if (!detail::is_valid_utf8(out.text)) out.text = detail::to_valid_utf8(out.text);  // cut inside a character
  } else {  // all of it, whatever the stream held back
    auto text = tokenizer.decode_ids(out.ids.data(), out.ids.size(), true);
    if (!text) return text.error();
    out.text = std::move(text.value());
  }
  return out;
}

namespace {

// A request of generate_text_batch while it runs: its own caches, sampler, stream,
// grammar and logits.
struct BatchSequence {
  size_t id = 0;  // the caller's
  GenerateOptions options;  // resolved
  std::vector<int32_t> prompt;
  models::LmState state;
  std::optional<TextStream> stream;
  std::optional<text::GbnfMatcher> grammar;
  std::vector<uint8_t> allowed;
  std::vector<float> logits;
  Generation generation;
  std::optional<SequenceDecoder> decoder;
  int32_t token = 0;            // the token to run next
  detail::CheckedSize bytes;    // what it holds (caches, hidden states, logits)
};

}  // namespace

void Generator::Impl::generate_continuously(const BatchSource& next_requests, const BatchSink& on_result) {
  timings = {};
  auto tokenizer = text_tokenizer(*model);
  const ModelInfo& info = model->info();
  const detail::CheckedSize shared = generation_bytes(weights, 0, pool.size(), DType::kF32);  // workspace, logits
  std::vector<std::unique_ptr<BatchSequence>> running;  // each with the token to run next
  // A request's checks, tokens and resources (charged to `held` once it fits).
  auto prepare = [&](size_t id, const TextRequest& request) -> Result<std::unique_ptr<BatchSequence>> {
    if (!tokenizer) return tokenizer.error();
    if (auto too_long = prompt_too_long(request.prompt.size(), "the prompt has")) return *too_long;
    auto resolved = resolve_generate_options(*model, request.options);
    if (!resolved) return resolved.error();
    if (request.options.lookup_ngram > 0)
      return Error{ErrorCode::kInvalidArgument,
                   "lookup_ngram: speculative decoding runs one sequence at a time (generate_text); a batch's steps "
                   "read the weights once for all its sequences instead"};
    if (Status st = check_stop_strings(request.options.stop); !st) return st.error();
    auto seq = std::make_unique<BatchSequence>();
    seq->id = id;
    seq->options = std::move(resolved.value());
    auto ids = tokenizer.value()->encode_text(request.prompt, request.special_tokens);
    if (!ids) return ids.error();
    seq->prompt = std::move(ids.value());
    const std::vector<int32_t>& prompt = seq->prompt;
    if (auto problem = prompt_problem(prompt, info, "")) return *problem;
    auto source = grammar_source(seq->options);
    if (!source) return source.error();
    if (!source.value().empty()) {
      if (Status st = prepare_grammar_vocabulary(); !st) return st.error();
      auto grammar = text::parse_gbnf(source.value());
      if (!grammar) return grammar.error();
      auto matcher = text::GbnfMatcher::create(std::move(grammar.value()));
      if (!matcher) return matcher.error();
      seq->grammar = std::move(matcher.value());
      seq->allowed.resize(info.vocab_size);
    }
    const GenerateOptions& o = seq->options;
    const size_t max_new = std::min(o.max_new_tokens, info.max_positions - prompt.size());
    const DType cache_type = o.kv_cache_int8 ? DType::kInt8 : o.kv_cache_f16 ? DType::kF16 : DType::kF32;
    // Its caches, hidden states and logits, on top of what the running ones hold.
    detail::CheckedSize bytes;
    bytes += detail::CheckedSize(prompt.size() + max_new) *
             models::cache_row_bytes(cache_type, info.num_kv_heads, info.head_dim) * 2 * info.decoder_layers;
    bytes += detail::CheckedSize(models::DecoderOnly::kPrefillChunk) * info.d_model * 4;
    bytes += detail::CheckedSize(info.vocab_size) * (4 * 7 + 1);
    detail::CheckedSize total = shared;
    for (const auto& other : running) total += other->bytes;
    total += bytes;
    if (auto problem = detail::working_memory_problem(
            total, "the running sequences and this one (" + std::to_string(prompt.size() + max_new) + " positions) need",
            "send fewer requests at once or a smaller max_new_tokens"))
      return *problem;
    seq->bytes = bytes;
    graph.start(prompt.size() + max_new, cache_type, seq->state);
    seq->stream.emplace(*tokenizer.value(), o.stop);
    seq->logits.resize(info.vocab_size);
    SequenceDecoder::Grammar grammar;
    if (seq->grammar) grammar = {&*seq->grammar, &*grammar_vocabulary, seq->allowed.data()};
    seq->decoder.emplace(id, "", o, info, kernels, detail::ModelAccess::tokenizer(*model), &*seq->stream, grammar,
                         prompt, max_new, seq->generation);
    return seq;
  };
  // Picks a sequence's next token; false when it has ended (its result given).
  auto choose = [&](BatchSequence& seq, float* logits) {
    auto more = seq.decoder->next(logits, seq.token);
    if (more && more.value()) return true;
    timings.generated_tokens += seq.generation.ids.size();
    if (!more) on_result(seq.id, more.error());
    else on_result(seq.id, text_of(seq.generation, *seq.stream, *tokenizer.value(), seq.prompt.size(),
                                   seq.grammar.has_value()));
    return false;
  };
  std::vector<int32_t> tokens;
  std::vector<models::LmState*> states;
  for (;;) {
    std::vector<std::pair<size_t, TextRequest>> joining = next_requests(running.empty());
    if (joining.empty() && running.empty()) return;
    try {
      graph.reserve(workspace);
      // Each new prompt alone (as generate_text runs it), then its first token.
      for (const auto& [id, request] : joining) {
        auto made = detail::without_exceptions([&, &id = id, &request = request] { return prepare(id, request); });
        if (!made) {
          on_result(id, made.error());
          continue;
        }
        std::unique_ptr<BatchSequence> seq = std::move(made.value());
        auto start = std::chrono::steady_clock::now();
        graph.forward(seq->prompt.data(), seq->prompt.size(), seq->state, workspace, seq->logits.data());
        timings.prompt_tokens += seq->prompt.size();
        timings.prefill_ms += detail::ms_since(start);
        if (choose(*seq, seq->logits.data())) running.push_back(std::move(seq));
      }
      if (running.empty()) continue;
      // Then every running sequence one token, together.
      auto start = std::chrono::steady_clock::now();
      tokens.clear();
      states.clear();
      for (const auto& seq : running) {
        tokens.push_back(seq->token);
        states.push_back(&seq->state);
      }
      logits.resize(running.size() * info.vocab_size);
      graph.step(tokens.data(), states.data(), running.size(), workspace, logits.data());
      size_t kept = 0;
      for (size_t j = 0; j < running.size(); ++j) {
        if (choose(*running[j], logits.data() + j * info.vocab_size)) running[kept++] = std::move(running[j]);
      }
      running.resize(kept);
      timings.generate_ms += detail::ms_since(start);
    } catch (const std::bad_alloc&) {  // buffers growing: every running request fails
      for (const auto& seq : running) on_result(seq->id, Error{ErrorCode::kOutOfMemory, "out of memory"});
      running.clear();
    }
  }
}

std::vector<Result<TextGeneration>> Generator::Impl::generate_text_batch(const std::vector<TextRequest>& requests) {
  std::vector<Result<TextGeneration>> results(requests.size(), Error{ErrorCode::kInternal, "not run"});
  bool given = false;
  generate_continuously(
      [&](bool) {
        std::vector<std::pair<size_t, TextRequest>> all;
        if (given) return all;
        given = true;
        all.reserve(requests.size());
        for (size_t i = 0; i < requests.size(); ++i) all.emplace_back(i, requests[i]);
        return all;
      },
      [&](size_t id, Result<TextGeneration>&& result) { results[id] = std::move(result); });
  return results;
}

Result<Generator> Generator::create(std::shared_ptr<const Model> model, const TranslatorOptions& options) {
  if (!model) return Error{ErrorCode::kInvalidArgument, "no model"};
  if (!model->info().decoder_only)
    return Error{ErrorCode::kInvalidArgument,
                 model->info().source + ": not a decoder-only model (translate it with a Translator)"};
  auto impl = detail::without_exceptions([&]() -> Result<std::unique_ptr<Impl>> {
    auto kernels = detail::session_kernels(*model, options);
    if (!kernels) return kernels.error();
    return std::make_unique<Impl>(std::move(model), *kernels.value(), options.threads, options.activation_scales);
  });
  if (!impl) return impl.error();
  return Generator(std::move(impl.value()));
}

Generator::Generator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

Result<std::vector<Generation>> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& options) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return impl_->generate(prompts, options);
}
Result<TextGeneration> Generator::generate_text(std::string_view prompt, const GenerateOptions& options) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  auto tokenizer = text_tokenizer(*impl_->model);
  if (!tokenizer) return tokenizer.error();
  if (auto too_long = impl_->prompt_too_long(prompt.size(), "the prompt has")) return *too_long;
  auto ids = detail::without_exceptions([&] { return tokenizer.value()->encode_text(prompt, true); });
  if (!ids) return ids.error();
  impl_->session.keep = false;
  return impl_->generate_text(ids.value(), options, impl_->session);
}

std::vector<Result<TextGeneration>> Generator::generate_text_batch(const std::vector<TextRequest>& requests) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return std::vector<Result<TextGeneration>>(requests.size(), *refused);
  return impl_->generate_text_batch(requests);
}

Status Generator::generate_continuously(const BatchSource& next_requests, const BatchSink& on_result) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  impl_->generate_continuously(next_requests, on_result);
  return Status::ok();
}

Result<std::string> Generator::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                   const std::vector<std::pair<std::string, bool>>& template_flags) const {
  const LanguageModelDefaults& lm = impl_->model->info().lm;
  const text::ChatTemplate* chat_template = detail::ModelAccess::chat_template(*impl_->model);
  if (chat_template == nullptr)
    return Error{ErrorCode::kInvalidArgument,
                 impl_->model->info().source + ": the model has no chat template (tokenizer_config.json's chat_template)"};
  return detail::without_exceptions([&]() -> Result<std::string> {
    text::ChatTemplateInputs inputs;
    size_t bytes = 0;
    for (const ChatMessage& m : messages) {
      bytes += m.role.size() + m.content.size();
      // What the template is given counts against the output it may write: messages a
      // prompt could not hold are refused before they are copied.
      if (auto too_long = impl_->prompt_too_long(bytes, "the conversation's messages have")) return *too_long;
      inputs.messages.push_back({m.role, m.content});
    }
    inputs.add_generation_prompt = add_generation_prompt;
    inputs.strings = {{"bos_token", lm.bos_token}, {"eos_token", lm.eos_token}};
    inputs.flags = template_flags;
    inputs.max_output_bytes = impl_->max_prompt_bytes;
    return chat_template->render(inputs);
  });
}

size_t Generator::max_prompt_bytes() const { return impl_->max_prompt_bytes; }

void Generator::set_prompt_cache_bytes(size_t bytes) {
  const detail::SessionCall call(impl_->busy);
  if (call.refused("Generator")) return;  // from a token callback: the budget stays
  impl_->prompt_cache.set_budget(bytes);
}

PromptCacheStats Generator::prompt_cache_stats() const {
  PromptCacheStats s;
  s.budget = impl_->prompt_cache.budget();
  s.bytes = impl_->prompt_cache.bytes();
  s.entries = impl_->prompt_cache.entries();
  return s;
}

namespace {
// Why `draft` cannot draft for `model` (a vocabulary that differs), or nullopt. Models with
// tokenizers must have the same tokens, id for id; models without (which take and give
// ids) the same number of them.
std::optional<Error> draft_vocabulary_problem(const Model& model, const Model& draft) {
  const ModelInfo &target = model.info(), &d = draft.info();
  const std::string both = d.source + " cannot draft for " + target.source + ": ";
  if (!d.decoder_only) return Error{ErrorCode::kInvalidArgument, both + "not a decoder-only model"};
  if (d.vocab_size != target.vocab_size)
    return Error{ErrorCode::kInvalidArgument, both + "its vocabulary has " + std::to_string(d.vocab_size) +
                                                  " tokens, not " + std::to_string(target.vocab_size)};
  return detail::output_token_difference(model, draft, target.vocab_size, both);
}
}  // namespace

Status Generator::set_draft_model(std::shared_ptr<const Model> draft) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return detail::without_exceptions([&]() -> Status {
    const std::optional<Error> problem = draft ? draft_vocabulary_problem(*impl_->model, *draft) : std::nullopt;
    return impl_->draft.set(draft, problem, impl_->kernels, impl_->pool, impl_->scales);
  }, draft != nullptr ? draft->info().source : std::string());
}

Status Generator::save_prompt_cache(const std::string& path) const {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return detail::without_exceptions([&]() -> Status {
    const detail::KvSnapshot* state = impl_->prompt_cache.find_serial(impl_->last_prompt_state);
    if (state == nullptr)
      return Error{ErrorCode::kInvalidArgument,
                   path + ": no prompt state to save: the prompt cache does not hold the last call's (give "
                          "set_prompt_cache_bytes a budget that holds it before the call)"};
    return detail::write_prompt_cache(path, *state, impl_->kv_layout());
  }, path);
}

Status Generator::load_prompt_cache(const std::string& path) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return detail::without_exceptions([&]() -> Status {
    auto loaded = detail::read_prompt_cache(path, impl_->kv_layout());
    if (!loaded) return loaded.error();
    impl_->prompt_cache.insert(std::move(loaded.value()));
    return Status::ok();
  }, path);
}

const GenerateTimings& Generator::last_timings() const { return impl_->timings; }
const Model& Generator::model() const { return *impl_->model; }
const char* Generator::isa() const { return impl_->kernels.isa; }
size_t Generator::threads() const { return impl_->pool.size(); }

}  // namespace petrel

namespace petrel {

struct Conversation::Impl {
  Generator::Impl& generator;
  const Generator& owner;
  std::vector<std::pair<std::string, bool>> template_flags;
  std::vector<ChatMessage> messages;
  LmSession session;
  // make_room's prompt for the messages it kept and its user message, which reply() with
  // that message takes instead of rendering and tokenizing the whole conversation again.
  std::string prepared_message;
  std::optional<std::vector<int32_t>> prepared_prompt;

  // `messages` with `user_message` after them, rendered by the chat template (the
  // assistant's turn opened) and tokenized. `too_long` (if given) is set when the error
  // is that the text is longer than a prompt may be (dropping messages may help).
  Result<std::vector<int32_t>> prompt(std::vector<ChatMessage>& messages, std::string_view user_message,
                                      bool* too_long = nullptr) const;
};

Result<Conversation> Conversation::create(Generator& generator, std::string_view system,
                                          std::vector<std::pair<std::string, bool>> template_flags) {
  auto tokenizer = text_tokenizer(*generator.impl_->model);
  if (!tokenizer) return tokenizer.error();
  if (auto too_long = generator.impl_->prompt_too_long(system.size(), "the system message has")) return *too_long;
  return detail::without_exceptions([&]() -> Result<Conversation> {
    std::unique_ptr<Impl> impl(new Impl{*generator.impl_, generator, std::move(template_flags), {}, {}, {}, {}});
    if (!system.empty()) impl->messages.push_back({"system", std::string(system)});
    impl->session.keep = true;
    // The template renders.
    auto probe = generator.apply_chat_template(impl->messages, true, impl->template_flags);
    if (!probe) return probe.error();
    return Conversation(std::move(impl));
  });
}

Conversation::Conversation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Conversation::~Conversation() = default;
Conversation::Conversation(Conversation&&) noexcept = default;
Conversation& Conversation::operator=(Conversation&&) noexcept = default;
const std::vector<ChatMessage>& Conversation::messages() const { return impl_->messages; }

Result<std::vector<int32_t>> Conversation::Impl::prompt(std::vector<ChatMessage>& messages,
                                                        std::string_view user_message, bool* too_long) const {
  size_t bytes = user_message.size();
  for (const ChatMessage& m : messages) bytes += m.role.size() + m.content.size();
  if (auto error = generator.prompt_too_long(bytes, "the conversation's messages have")) {
    if (too_long != nullptr) *too_long = true;
    return *error;
  }
  messages.push_back({"user", std::string(user_message)});
  auto text = owner.apply_chat_template(messages, true, template_flags);
  if (!text) {
    // The rendering would be longer than a prompt may be (text::ChatTemplate's output
    // limit, generator.h's kMaxPromptBytes), or the render's values more than it may hold.
    if (too_long != nullptr && text.error().code == ErrorCode::kOutOfMemory) *too_long = true;
    return text.error();
  }
  auto tokenizer = text_tokenizer(*generator.model);
  if (!tokenizer) return tokenizer.error();
  return tokenizer.value()->encode_text(text.value(), false);  // the template wrote the special tokens
}

Result<size_t> Conversation::make_room(std::string_view user_message, size_t new_tokens) {
  const detail::SessionCall call(impl_->generator.busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return detail::without_exceptions([&]() -> Result<size_t> {
    const size_t positions = impl_->generator.model->info().max_positions;
    const std::vector<ChatMessage>& kept = impl_->messages;
    const size_t first = !kept.empty() && kept[0].role == "system" ? 1 : 0;
    const size_t exchanges = (kept.size() - first) / 2;  // each reply added a user message and the assistant's
    impl_->prepared_prompt.reset();
    // The prompt of the last count of exchanges seen to fit: the one kept, for reply().
    std::optional<std::vector<int32_t>> fitting;
    size_t fitting_k = 0;
    // The whole conversation's prompt, rendered first: when nothing is dropped, reply()
    // takes it, whether it fits or not (and says why not) without rendering it again.
    std::optional<std::vector<int32_t>> whole;
    // Whether the conversation without its oldest `k` exchanges leaves `room` positions.
    auto fits = [&](size_t k, size_t room) -> Result<bool> {
      std::vector<ChatMessage> messages(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(first));
      messages.insert(messages.end(), kept.begin() + static_cast<std::ptrdiff_t>(first + 2 * k), kept.end());
      bool too_long = false;
      auto ids = impl_->prompt(messages, user_message, &too_long);
      if (!ids) {
        if (too_long) return false;
        return ids.error();
      }
      const size_t length = ids.value().size();
      if (length >= positions || room > positions - length) {
        if (k == 0) whole = std::move(ids.value());
        return false;
      }
      fitting = std::move(ids.value());
      fitting_k = k;
      return true;
    };
    // Drops the oldest `k` exchanges, keeps their prompt for reply() and returns k.
    auto drop = [&](size_t k) {
      std::string message(user_message);  // before anything changes: a failed copy changes nothing
      std::optional<std::vector<int32_t>> prepared;
      if (fitting && fitting_k == k) prepared = std::move(fitting);
      else if (k == 0 && whole) prepared = std::move(whole);
      impl_->messages.erase(impl_->messages.begin() + static_cast<std::ptrdiff_t>(first),
                            impl_->messages.begin() + static_cast<std::ptrdiff_t>(first + 2 * k));
      if (prepared) {
        impl_->prepared_message = std::move(message);
        impl_->prepared_prompt = std::move(prepared);
      }
      return k;
    };
    const size_t room = std::max<size_t>(new_tokens, 1);
    auto now = fits(0, room);
    if (!now) return now.error();
    if (now.value() || exchanges == 0) return drop(0);
    // Once it must drop, it drops down to half the positions where it can: a drop makes the
    // next reply re-read the whole history kept (its tokens sit at other positions now), and
    // dropping just enough would do that on every turn from then on; with half the positions
    // free the turns after it reuse the caches, and the history is re-read at most once per
    // half the positions of new conversation.
    const size_t half = std::max(room, positions / 2);
    size_t want = 0;  // the room left: `half`, else `room`, else (0) all there is
    auto without_all = fits(exchanges, half);
    if (!without_all) return without_all.error();
    if (without_all.value()) {
      want = half;
    } else if (half > room) {
      without_all = fits(exchanges, room);
      if (!without_all) return without_all.error();
      if (without_all.value()) want = room;
    }
    size_t hi = exchanges;  // fits `want`, or is the most room there is
    if (want > 0) {
      // The fewest exchanges to drop, by bisection (fewer exchanges, fewer tokens): a few
      // renderings of the conversation, not one per exchange. Only a count that was seen
      // to fit is used.
      size_t lo = 0;  // does not fit (it did not leave `room`, so not `want` either)
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        auto f = fits(mid, want);
        if (!f) return f.error();
        (f.value() ? hi : lo) = mid;
      }
    } else {  // not even the message alone leaves `room`: all the room there is, if any
      auto one = fits(exchanges, 1);
      if (!one) return one.error();
      if (!one.value()) return drop(0);  // no room at all: reply() says why
    }
    return drop(hi);
  });
}

Result<TextGeneration> Conversation::reply(std::string_view user_message, const GenerateOptions& options) {
  const detail::SessionCall call(impl_->generator.busy);
  if (auto refused = call.refused("Generator")) return *refused;
  return detail::without_exceptions([&]() -> Result<TextGeneration> {
    std::vector<ChatMessage> messages = impl_->messages;
    std::optional<std::vector<int32_t>> prepared;
    prepared.swap(impl_->prepared_prompt);
    Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
    if (prepared && impl_->prepared_message == user_message) {  // make_room rendered it
      messages.push_back({"user", std::string(user_message)});
      ids = std::move(*prepared);
    } else {
      ids = impl_->prompt(messages, user_message);
    }
    if (!ids) return ids.error();
    auto reply = impl_->generator.generate_text(ids.value(), options, impl_->session);
    if (!reply) {
      impl_->session.state.length = 0;  // whatever the caches hold now, the next turn starts afresh
      impl_->session.cached.clear();
      return reply.error();
    }
    messages.push_back({"assistant", reply.value().text});
    impl_->messages = std::move(messages);
    return reply;
  });
}

}  // namespace petrel
