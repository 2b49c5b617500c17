#include "petrel/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

#include "core/checked.h"
#include "decode/sampling.h"
#include "model_access.h"
#include "models/decoder_only.h"
#include "text/tokenizer.h"
#include "threads/thread_pool.h"

namespace petrel {

namespace {
constexpr size_t kDefaultMaxNewTokens = 256;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The bytes of the buffers one prompt's generation grows (KV caches, activations, logits).
detail::CheckedSize generation_bytes(const detail::ModelWeights& w, size_t positions, size_t threads,
                                     size_t cache_element) {
  using detail::CheckedSize;
  const ModelInfo& info = *w.info;
  // A sliding-window layer's ring lists each chunk row's keys: up to a window per row.
  size_t widest_window = 0;
  for (const detail::Layer& layer : w.decoder.layers) widest_window = std::max(widest_window, layer.sliding_window);
  const uint64_t width = std::max<uint64_t>(info.d_model, uint64_t{info.num_heads} * info.head_dim);
  const uint64_t chunk = models::DecoderOnly::kPrefillChunk, widest = std::max<uint64_t>(width, info.ffn_dim) + 32;
  CheckedSize total;
  total += CheckedSize(positions) * info.num_kv_heads * info.head_dim * cache_element * 2 * info.decoder_layers;
  total += CheckedSize(chunk) * (8 * width + 2 * info.ffn_dim) * 4;  // layer workspace
  total += CheckedSize(chunk) * (widest + widest / 8) * threads;    // int8 activations per thread
  total += CheckedSize(positions) * 4 * threads;                    // attention scores
  total += CheckedSize(chunk) * std::min(positions, widest_window) * sizeof(size_t);  // ring key lists
  total += CheckedSize(info.vocab_size) * 4 * 2;                    // logits, sampler scratch
  return total;
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

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
}  // namespace

Result<GenerateOptions> resolve_generate_options(const Model& model, const GenerateOptions& options) {
  const ModelInfo& info = model.info();
  if (!info.decoder_only)
    return Error{ErrorCode::kInvalidArgument, info.source + ": not a decoder-only model (translate it with a Translator)"};
  const LanguageModelDefaults& d = info.lm;
  GenerateOptions o = options;
  if (o.max_new_tokens == 0) o.max_new_tokens = d.max_new_tokens != 0 ? d.max_new_tokens : kDefaultMaxNewTokens;
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
  if (Status st = decode::check(sampling_options(o)); !st) return st.error();
  return o;
}

struct Generator::Impl {
  Impl(std::shared_ptr<const Model> m, const kernels::KernelTable& k, size_t threads, ActivationScales scales)
      : model(std::move(m)), kernels(k), pool(threads), weights(detail::weights_for(*model, scales)),
        graph(weights, k, pool) {}
  Result<std::vector<Generation>> generate(const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options);
  Status run(size_t index, const std::vector<int32_t>& prompt, const GenerateOptions& o, Generation& out);

  std::shared_ptr<const Model> model;
  const kernels::KernelTable& kernels;
  threads::ThreadPool pool;
  detail::ModelWeights weights;
  models::DecoderOnly graph;
  layers::Workspace workspace;
  models::LmState state;
  std::vector<float> logits;
  std::vector<int32_t> sequence;  // prompt + generated, for the repetition penalty
  GenerateTimings timings;
};

Status Generator::Impl::run(size_t index, const std::vector<int32_t>& prompt, const GenerateOptions& o,
                            Generation& out) {
  const ModelInfo& info = model->info();
  const std::string which = "prompt " + std::to_string(index);
  if (prompt.empty()) return Error{ErrorCode::kInvalidArgument, which + ": empty"};
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || static_cast<uint32_t>(prompt[i]) >= info.vocab_size)
      return Error{ErrorCode::kInvalidArgument, which + ", position " + std::to_string(i) + ": id " +
                                                    std::to_string(prompt[i]) + " is outside the vocabulary (" +
                                                    std::to_string(info.vocab_size) + " tokens)"};
  if (prompt.size() >= info.max_positions)
    return Error{ErrorCode::kInvalidArgument, which + ": " + std::to_string(prompt.size()) +
                                                  " tokens leave no room to generate within the model's " +
                                                  std::to_string(info.max_positions) + " positions"};
  const size_t max_new = std::min(o.max_new_tokens, info.max_positions - prompt.size());
  const size_t positions = prompt.size() + max_new;
  const DType cache_type = o.kv_cache_f16 ? DType::kF16 : DType::kF32;
  const detail::CheckedSize bytes =
      generation_bytes(weights, positions, pool.size(), detail::dtype_size(cache_type));
  if (!bytes.ok() || bytes.value() > kMaxRequestBytes)
    return Error{ErrorCode::kOutOfMemory, which + ": " + std::to_string(positions) + " positions need " +
                                              (bytes.ok() ? mib(bytes.value()) : std::string("more than 2^64 bytes")) +
                                              " of working memory; the limit is " + mib(kMaxRequestBytes) +
                                              ": use a smaller max_new_tokens"};

  graph.start(positions, cache_type, state);
  graph.reserve(workspace);
  logits.resize(info.vocab_size);
  sequence.assign(prompt.begin(), prompt.end());
  sequence.reserve(positions);
  decode::Sampler sampler(sampling_options(o), kernels.top_k);
  const std::vector<int32_t>& eos = info.lm.eos_ids;
  const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(*model);

  auto start = std::chrono::steady_clock::now();
  graph.forward(prompt.data(), prompt.size(), state, workspace, logits.data());
  timings.prefill_ms += ms_since(start);
  timings.prompt_tokens += prompt.size();
  start = std::chrono::steady_clock::now();
  out.ids.clear();
  out.ids.reserve(max_new);  // the loop below allocates nothing once the caches have grown
  out.ended_on_eos = false;
  auto event = [&](bool final) {
    TokenEvent e;
    e.input = index;
    e.ids = out.ids.data();
    e.length = out.ids.size();
    e.final = final;
    if (tokenizer != nullptr && !out.ids.empty()) e.piece = tokenizer->output_token(out.ids.back()).value_or("");
    return o.on_token(e);
  };
  for (size_t step = 0; step < max_new; ++step) {
    const int32_t token = sampler.next(logits.data(), logits.size(), sequence.data(), sequence.size());
    if (token < 0 || !std::isfinite(logits[static_cast<size_t>(token)]))
      return Error{ErrorCode::kFormat, info.source + ": " + which + ", step " + std::to_string(step) +
                                           ": the logits are not finite (corrupt weights?)"};
    out.ids.push_back(token);
    sequence.push_back(token);
    const bool is_eos = !o.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
    if (o.on_token && !event(false)) break;
    if (is_eos) {
      out.ended_on_eos = true;
      break;
    }
    if (step + 1 < max_new) graph.forward(&token, 1, state, workspace, logits.data());
  }
  if (o.on_token) event(true);
  timings.generate_ms += ms_since(start);
  timings.generated_tokens += out.ids.size();
  return Status::ok();
}

Result<std::vector<Generation>> Generator::Impl::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                          const GenerateOptions& options) {
  auto resolved = resolve_generate_options(*model, options);
  if (!resolved) return resolved.error();
  timings = {};
  try {
    std::vector<Generation> out(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      if (Status s = run(i, prompts[i], resolved.value(), out[i]); !s) return s.error();
    return out;
  } catch (const std::bad_alloc&) {  // the API never throws: memory ran out while buffers grew
    return Error{ErrorCode::kOutOfMemory, "out of memory"};
  }
}

Result<Generator> Generator::create(std::shared_ptr<const Model> model, const TranslatorOptions& options) {
  if (!model) return Error{ErrorCode::kInvalidArgument, "no model"};
  if (!model->info().decoder_only)
    return Error{ErrorCode::kInvalidArgument,
                 model->info().source + ": not a decoder-only model (translate it with a Translator)"};
  auto kernels = detail::session_kernels(*model, options);
  if (!kernels) return kernels.error();
  return Generator(std::make_unique<Impl>(std::move(model), *kernels.value(), options.threads,
                                          options.activation_scales));
}

Generator::Generator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generator::~Generator() = default;
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;

Result<std::vector<Generation>> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& options) {
  return impl_->generate(prompts, options);
}
const GenerateTimings& Generator::last_timings() const { return impl_->timings; }
const Model& Generator::model() const { return *impl_->model; }
const char* Generator::isa() const { return impl_->kernels.isa; }
size_t Generator::threads() const { return impl_->pool.size(); }

}  // namespace petrel
