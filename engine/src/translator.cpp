#include "petrel/translator.h"

#include <chrono>

#include <cstdlib>

#include "decode/search.h"
#include "kernels/isa.h"
#include "models/encoder_decoder.h"
#include "threads/thread_pool.h"

namespace petrel {

namespace {
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
constexpr size_t kDefaultMaxNewTokens = 256;
constexpr size_t kMaxBeam = 64;
}  // namespace

struct Translator::Impl {
  Impl(std::shared_ptr<const Model> m, const kernels::KernelTable& k, size_t threads)
      : model(std::move(m)), kernels(k), pool(threads), graph(model->weights(), k, pool) {}
  std::shared_ptr<const Model> model;
  const kernels::KernelTable& kernels;
  threads::ThreadPool pool;
  models::EncoderDecoder graph;
  layers::Workspace workspace;
  models::EncoderOutput encoded;
  models::OutputVocabulary output;
  decode::SearchState search;
  TranslateTimings timings;
};

std::vector<std::string> runnable_isas() {
  std::vector<std::string> out;
  for (kernels::Isa isa : kernels::runnable_isas()) out.push_back(kernels::isa_name(isa));
  return out;
}

Result<Translator> Translator::create(std::shared_ptr<const Model> model, const TranslatorOptions& options) {
  if (!model) return Error{ErrorCode::kInvalidArgument, "no model"};
  std::string requested = options.isa, source = "isa option";
  if (requested.empty()) {
    const char* env = std::getenv("PETREL_ISA");
    if (env != nullptr && *env != '\0') {
      requested = env;
      source = "PETREL_ISA";
    }
  }
  kernels::Isa isa = kernels::best_isa();
  if (!requested.empty()) {
    std::string runnable;
    for (const auto& name : runnable_isas()) runnable += (runnable.empty() ? "" : ", ") + name;
    if (!kernels::parse_isa(requested, &isa))
      return Error{ErrorCode::kInvalidArgument,
                   source + "=" + requested + ": unknown kernel path (this CPU runs: " + runnable + ")"};
    if (kernels::table_for(isa) == nullptr)
      return Error{ErrorCode::kUnsupported,
                   source + "=" + requested + ": not available on this CPU or build (it runs: " + runnable + ")"};
  }
  if (options.threads < 1 || options.threads > 256)
    return Error{ErrorCode::kInvalidArgument, "threads must be in 1..256, got " + std::to_string(options.threads)};
  return Translator(std::make_unique<Impl>(std::move(model), *kernels::table_for(isa), options.threads));
}

Translator::Translator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
const char* Translator::isa() const { return impl_->kernels.isa; }
Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;
const TranslateTimings& Translator::last_timings() const { return impl_->timings; }
const Model& Translator::model() const { return *impl_->model; }

Result<std::vector<Translation>> Translator::translate(const std::vector<std::vector<int32_t>>& batch,
                                                       const TranslateOptions& options) {
  const ModelInfo& info = impl_->model->info();
  auto invalid = [](const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; };
  if (batch.empty()) return invalid("no inputs to translate");
  for (size_t s = 0; s < batch.size(); ++s) {
    const auto& ids = batch[s];
    const std::string which = "input " + std::to_string(s + 1);
    if (ids.empty()) return invalid(which + " is empty");
    if (ids.size() > info.max_positions)
      return invalid(which + " has " + std::to_string(ids.size()) + " tokens; the model allows at most " +
                     std::to_string(info.max_positions));
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || static_cast<uint32_t>(ids[i]) >= info.vocab_size)
        return invalid(which + ", position " + std::to_string(i + 1) + ": token id " + std::to_string(ids[i]) +
                       " is out of range (vocabulary of " + std::to_string(info.vocab_size) + ")");
  }
  if (options.beam_size < 1 || options.beam_size > kMaxBeam)
    return invalid("beam size must be in 1.." + std::to_string(kMaxBeam) + ", got " + std::to_string(options.beam_size));
  if (options.n_best < 1 || options.n_best > options.beam_size)
    return invalid("n-best must be in 1..beam size (" + std::to_string(options.beam_size) + "), got " +
                   std::to_string(options.n_best));
  size_t max_new = options.max_new_tokens;
  if (max_new == 0) max_new = std::min<size_t>(kDefaultMaxNewTokens, info.max_positions);
  if (max_new > info.max_positions)
    return invalid("max new tokens " + std::to_string(max_new) + " exceeds the model's " +
                   std::to_string(info.max_positions) + " positions");
  if (!(options.length_penalty >= 0 && options.length_penalty <= 10))
    return invalid("length penalty must be in 0..10");
  if (options.use_shortlist && !info.shortlist.present)
    return invalid("this model file has no shortlist (petrel-convert --shortlist adds one)");

  decode::SearchOptions so;
  so.beam = options.beam_size;
  so.n_best = options.n_best;
  so.max_new_tokens = max_new;
  so.min_new_tokens = std::min(options.min_new_tokens, max_new);
  so.length_penalty = options.length_penalty;
  so.cache_type = options.kv_cache_f16 ? DType::kF16 : DType::kF32;

  auto start = std::chrono::steady_clock::now();
  const detail::ModelWeights& weights = impl_->model->weights();
  if (options.use_shortlist) impl_->output.use_shortlist(weights, batch);
  else impl_->output.use_all(weights);
  impl_->graph.encode(batch, impl_->encoded, impl_->workspace);
  impl_->timings.encode_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  decode::SearchResult found = decode::search(impl_->graph, impl_->encoded, impl_->output, so, impl_->search,
                                                 impl_->workspace);
  impl_->timings.decode_ms = ms_since(start);
  impl_->timings.decode_steps = found.steps;

  std::vector<Translation> out(batch.size());
  size_t generated = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    for (auto& h : found.hypotheses[s]) out[s].hypotheses.push_back({std::move(h.ids), h.score});
    if (!out[s].hypotheses.empty()) generated += out[s].hypotheses[0].ids.size();
  }
  impl_->timings.generated_tokens = generated;
  return out;
}

}  // namespace petrel
