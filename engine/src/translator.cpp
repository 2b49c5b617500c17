#include "petrel/translator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include <unistd.h>

#include "core/checked.h"
#include "core/quoted.h"
#include "core/utf8.h"
#include "decode/decoder_steps.h"
#include "decode/speculative_steps.h"
#include "draft_model.h"
#include "kernels/isa.h"
#include "model_access.h"
#include "text_sentences.h"
#include "models/encoder_decoder.h"
#include "text/tokenizer.h"
#include "threads/thread_pool.h"

namespace petrel {

namespace {

// The bytes of every buffer a request grows (activations, KV caches, logits,
// histories), from the request's shape alone: checked before anything is allocated,
// so a huge batch or beam is refused by name instead of wrapping a 32-bit size or
// throwing std::bad_alloc.
detail::CheckedSize request_bytes(const ModelInfo& info, size_t sentences, uint64_t source_tokens, size_t beam,
                                  size_t max_steps, size_t threads, size_t cache_element, size_t alignment_width,
                                  bool token_scores) {
  using detail::CheckedSize;
  const uint64_t d = info.d_model, ffn = info.ffn_dim, widest = std::max(d, ffn) + 32;
  const uint64_t rows = uint64_t{sentences} * beam, activation_rows = std::max<uint64_t>(rows, source_tokens);
  CheckedSize total;
  total += CheckedSize(source_tokens) * d * 4 * 2;                       // encoder states, cross K/V scratch
  total += CheckedSize(activation_rows) * (6 * d + ffn) * 4;             // layer workspace
  total += CheckedSize(activation_rows) * (widest + widest / 8) * threads;  // int8 activations (+ int4 block sums) per thread
  const uint64_t layers = info.decoder_layers;
  total += CheckedSize(source_tokens) * d * cache_element * 2 * layers;  // cross-attention K/V
  total += CheckedSize(rows) * max_steps * d * cache_element * 2 * layers;  // self K/V
  total += CheckedSize(rows) * max_steps * sizeof(size_t) * 2;             // their slot lists (+ reorder spare)
  total += CheckedSize(rows) * info.target_vocab_size * 4;               // logits
  total += CheckedSize(rows) * max_steps * 4 * 2;                        // token histories
  total += CheckedSize(sentences) * 3 * beam * max_steps * 4;            // finished hypotheses
  // Alignments: each step's rows, the rows each continued, the finished hypotheses' rows
  // and the results.
  total += CheckedSize(rows) * max_steps * (alignment_width * 4 * 3 + (alignment_width ? sizeof(size_t) : 0));
  // Token scores: each row's two histories, the finished hypotheses' and the results.
  if (token_scores) total += CheckedSize(rows) * max_steps * sizeof(decode::TokenScore) * 4;
  return total;
}

// The search's per-step observer as the caller's TokenCallback: no allocation per step.
class StreamObserver final : public decode::SearchObserver {
 public:
  StreamObserver(const TokenCallback& callback, const text::Tokenizer* tokenizer, bool provisional)
      : callback_(callback), tokenizer_(tokenizer), provisional_(provisional) {}
  bool on_step(size_t sentence, const int32_t* tokens, size_t length) override {
    TokenEvent e;
    e.input = sentence;
    e.ids = tokens;
    e.length = length;
    e.provisional = provisional_;
    if (tokenizer_ != nullptr && length > 0) e.piece = tokenizer_->output_token(tokens[length - 1]).value_or("");
    return callback_(e);
  }
  void finish(size_t sentence, const int32_t* tokens, size_t length) {
    TokenEvent e;
    e.input = sentence;
    e.ids = tokens;
    e.length = length;
    e.final = true;
    if (tokenizer_ != nullptr && length > 0) e.piece = tokenizer_->output_token(tokens[length - 1]).value_or("");
    callback_(e);
  }

 private:
  const TokenCallback& callback_;
  const text::Tokenizer* tokenizer_;
  bool provisional_;
};

}  // namespace

namespace detail {
ModelWeights weights_for(const Model& model, ActivationScales scales) {
  detail::ModelWeights w = detail::ModelAccess::weights(model);
  if (scales == ActivationScales::kFile) return w;
  auto clear = [](detail::Linear& l) { l.weight.activation_scale = 0; };
  for (detail::Stack* stack : {&w.encoder, &w.decoder})
    for (detail::Layer& layer : stack->layers) {
      for (detail::Attention* a : {&layer.self_attn, &layer.cross_attn})
        for (detail::Linear* l : {&a->q, &a->k, &a->v, &a->o}) clear(*l);
      for (detail::Linear* l : {&layer.ssru_w, &layer.ssru_forget, &layer.fc1, &layer.fc2, &layer.fc_gate}) clear(*l);
    }
  w.output_proj.activation_scale = 0;
  return w;
}
}  // namespace detail

struct Translator::Impl {
  Impl(std::shared_ptr<const Model> m, const kernels::KernelTable& k, size_t threads, ActivationScales scales)
      : model(std::move(m)), kernels(k), pool(threads), weights(detail::weights_for(*model, scales)), graph(weights, k, pool),
        scales(scales) {}
  Result<std::vector<Translation>> translate(const std::vector<std::vector<int32_t>>& batch,
                                             const TranslateOptions& options,
                                             const std::vector<size_t>* length_basis = nullptr,
                                             const std::vector<const std::vector<int32_t>*>* shortlists = nullptr);

  std::shared_ptr<const Model> model;
  const kernels::KernelTable& kernels;
  threads::ThreadPool pool;
  detail::ModelWeights weights;
  models::EncoderDecoder graph;
  layers::Workspace workspace;
  models::EncoderOutput encoded;
  models::DecoderState decoder;
  models::OutputVocabulary output;
  decode::SearchState search;
  TranslateTimings timings;
  detail::DraftModel<decode::TranslationModelDraft> draft;  // set_draft_model's
  bool draft_shares_encoder = false;
  ActivationScales scales;
  // Speculative decoding: each input of `batch` decoded alone by `so`'s greedy search.
  Result<decode::SearchResult> search_speculatively(const std::vector<std::vector<int32_t>>& batch,
                                                    const decode::SearchOptions& so, const TranslateOptions& options,
                                                    DType cache_type, size_t max_new,
                                                    const std::vector<const std::vector<int32_t>*>* shortlists,
                                                    decode::SearchObserver* observer);
  std::atomic<bool> busy{false};  // detail::SessionCall
};


std::vector<std::string> runnable_isas() {
  std::vector<std::string> out;
  for (kernels::Isa isa : kernels::runnable_isas()) out.push_back(kernels::isa_name(isa));
  return out;
}

namespace detail {
Result<const kernels::KernelTable*> session_kernels(const Model& model, const TranslatorOptions& options) {
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
  if (Status s = threads::check_thread_count("threads", options.threads, 256); !s) return s.error();
  if (options.activation_scales == ActivationScales::kFile && !model.info().static_activation_scales)
    return Error{ErrorCode::kInvalidArgument,
                 "activation scales 'file': " + model.info().source + " carries no static activation scales "
                 "(only Marian int8 models converted with their alphas do); use 'dynamic'"};
  return kernels::table_for(isa);
}
}  // namespace detail

Result<Translator> Translator::create(std::shared_ptr<const Model> model, const TranslatorOptions& options) {
  if (!model) return Error{ErrorCode::kInvalidArgument, "no model"};
  if (model->info().decoder_only)
    return Error{ErrorCode::kInvalidArgument, model->info().source + ": a decoder-only model (a language model) "
                                              "generates with petrel::Generator, not a Translator"};
  auto impl = detail::without_exceptions([&]() -> Result<std::unique_ptr<Impl>> {
    auto kernels = detail::session_kernels(*model, options);
    if (!kernels) return kernels.error();
    return std::make_unique<Impl>(std::move(model), *kernels.value(), options.threads, options.activation_scales);
  });
  if (!impl) return impl.error();
  return Translator(std::move(impl.value()));
}

Result<std::vector<TextTranslation>> Translator::translate_text(const std::vector<std::string>& texts,
                                                                const TranslateOptions& options) {
  const Model& m = *impl_->model;
  if (options.html)
    return Error{ErrorCode::kInvalidArgument, "html: HTML fragments are translated by BatchTranslator::translate_text"};
  if (Status checked = detail::check_text_options(m, options); !checked) return checked.error();
  return detail::without_exceptions([&]() -> Result<std::vector<TextTranslation>> {
    std::vector<TextTranslation> out(texts.size());
    std::vector<std::vector<int32_t>> batch;
    batch.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto tokens = tokenize(m, texts[i], options.source_language);
      if (!tokens)
        return detail::input_error(i, tokens.error());
      out[i].input = std::move(tokens.value());
      batch.push_back(out[i].input.ids);
    }
    // Streaming text: each step's hypothesis detokenized, with what it adds to the last.
    TranslateOptions with_text = options;
    std::vector<std::string> shown(texts.size());
    std::string text;
    if (options.on_token && options.stream_text) {
      with_text.on_token = [&](const TokenEvent& e) {
        TokenEvent t = e;
        auto decoded = decode_text(m, std::vector<int32_t>(e.ids, e.ids + e.length));
        text = decoded ? std::move(decoded.value()) : std::string();
        std::string& previous = shown[e.input];
        t.text = text;
        t.text_restarted = text.compare(0, previous.size(), previous) != 0;
        t.text_delta = t.text_restarted ? std::string_view(text) : std::string_view(text).substr(previous.size());
        previous = text;
        return options.on_token(t);
      };
    }
    auto translated = translate(batch, with_text);
    if (!translated) return translated.error();
    const bool sentences = detail::has_token_ranges(m);
    for (size_t i = 0; i < texts.size(); ++i) {
      auto& hyps = translated.value()[i].hypotheses;
      if (sentences && !hyps.empty()) {
        auto sentence = detail::sentence_translation(m, out[i].input, 0, hyps[0], 0, options);
        if (!sentence) return detail::input_error(i, sentence.error());
        out[i].sentences.push_back(std::move(sentence.value()));
      }
      for (Hypothesis& h : hyps) {
        auto t = detail::text_hypothesis(m, std::move(h));
        if (!t) return t.error();
        out[i].hypotheses.push_back(std::move(t.value()));
      }
    }
    return out;
  });
}

namespace detail {
namespace {

// The first `limit` bytes of a file, or nullopt if it cannot be read.
std::optional<std::string> read_system_file(const std::string& path, size_t limit) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  std::string text(limit, '\0');
  text.resize(std::fread(text.data(), 1, limit, f));
  std::fclose(f);
  return text;
}

// A limit file's value: a decimal number of bytes, or nullopt ("max", anything else).
std::optional<uint64_t> limit_value(const std::string& text) {
  uint64_t value = 0;
  size_t digits = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[digits] - '0');
  }
  if (digits == 0 || (digits < text.size() && text[digits] != '\n')) return std::nullopt;
  return value;
}

}  // namespace

uint64_t cgroup_memory_limit(const std::string& root) {
  constexpr size_t kMaxMembership = 64 << 10;
  auto membership = read_system_file(root + "/proc/self/cgroup", kMaxMembership);
  if (!membership) return UINT64_MAX;
  // A line cut by the read limit could name another group ("/a/b" of "/a/bc").
  if (membership->size() == kMaxMembership) membership->resize(membership->find_last_of('\n') + 1);
  uint64_t limit = UINT64_MAX;
  // Each line is "id:controllers:path". v2's unified hierarchy ("0::path") has the limit in
  // memory.max; v1's memory controller in memory.limit_in_bytes. A group's ancestors
  // limit it too, and in a container the group's own directory may be mounted as the
  // hierarchy's top, so every directory from the path up to the top is read.
  size_t at = 0;
  while (at < membership->size()) {
    size_t end = membership->find('\n', at);
    if (end == std::string::npos) end = membership->size();
    const std::string line = membership->substr(at, end - at);
    at = end + 1;
    const size_t colon1 = line.find(':'), colon2 = colon1 == std::string::npos ? colon1 : line.find(':', colon1 + 1);
    if (colon2 == std::string::npos) continue;
    const std::string controllers = "," + line.substr(colon1 + 1, colon2 - colon1 - 1) + ",";
    std::string path = line.substr(colon2 + 1);
    if (path.size() > 4096) continue;  // longer than a path can be (PATH_MAX)
    // A group outside this cgroup namespace ("/../x"): neither it nor what the walk up would
    // read is this process's.
    const bool up = path.find("/../") != std::string::npos ||
                    (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0);
    if (up) continue;
    std::string top, file;
    if (line.compare(0, colon2 + 1, "0::") == 0) {
      top = root + "/sys/fs/cgroup", file = "/memory.max";
    } else if (controllers.find(",memory,") != std::string::npos) {
      top = root + "/sys/fs/cgroup/memory", file = "/memory.limit_in_bytes";
    } else {
      continue;
    }
    while (!path.empty() && path.back() == '/') path.pop_back();  // "/" is the top itself
    while (true) {  // path, then each parent
      if (auto text = read_system_file(top + path + file, 64))
        if (auto value = limit_value(*text)) limit = std::min(limit, *value);
      const size_t slash = path.find_last_of('/');
      if (slash == std::string::npos) break;
      path.resize(slash);
    }
  }
  return limit;
}

uint64_t process_memory_limit() {
#if defined(__linux__)
  return cgroup_memory_limit("");
#else
  return UINT64_MAX;
#endif
}

uint64_t working_memory_limit() {
  // A phone with 4 GiB would let a 20 GiB request through kMaxRequestBytes and be killed by
  // the OOM killer instead of returning an error; so would a container given 2 GiB of a
  // larger machine. (Under emscripten sysconf gives the heap's maximum.)
  static const uint64_t limit = [] {
    uint64_t device = kMaxRequestBytes;
    const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0) device = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
    return std::min({kMaxRequestBytes, device, process_memory_limit()});
  }();
  return limit;
}

std::optional<Error> working_memory_problem(const CheckedSize& bytes, const std::string& request, const char* remedy) {
  const uint64_t limit = working_memory_limit();
  if (bytes.ok() && bytes.value() <= limit) return std::nullopt;
  auto mib = [](uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MiB"; };
  return Error{ErrorCode::kOutOfMemory,
               request + " " + (bytes.ok() ? mib(bytes.value()) : std::string("more than 2^64 bytes")) +
                   " of working memory; the limit is " + mib(limit) +
                   (limit < kMaxRequestBytes ? " (the memory this process may use)" : "") + ": " + remedy};
}

std::optional<Error> source_problem(const ModelInfo& info, const std::vector<int32_t>& ids, size_t input) {
  auto invalid = [&](const std::string& what) {
    return Error{ErrorCode::kInvalidArgument, "input " + std::to_string(input + 1) + what};
  };
  if (ids.empty()) return invalid(" is empty");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || static_cast<uint32_t>(ids[i]) >= info.vocab_size)
      return invalid(", position " + std::to_string(i + 1) + ": token id " + std::to_string(ids[i]) +
                     " is out of range (vocabulary of " + std::to_string(info.vocab_size) + ")");
  const models::SourceReader reader(info);
  const size_t positions = reader.positions(ids);
  if (positions > info.max_positions)
    return invalid(" has " + std::to_string(positions) + " tokens" +
                   (positions < ids.size() ? " besides its pads" : "") + "; the model allows at most " +
                   std::to_string(info.max_positions));
  if (reader.tokens_read(ids) == 0)
    return invalid(" holds nothing but pad tokens (id " + std::to_string(info.pad_id) +
                   "), which the model masks: nothing to translate");
  return std::nullopt;
}
}  // namespace detail

namespace {
// Why speculative decoding (asked for by `what`) cannot run with options `o`, or nullopt.
std::optional<Error> speculation_problem(const TranslateOptions& o, const std::string& what) {
  auto refused = [&](const std::string& option) {
    return Error{ErrorCode::kInvalidArgument,
                 what + ": speculative decoding runs greedy search only; not with " + option};
  };
  if (o.beam_size > 1) return refused("beam_size " + std::to_string(o.beam_size));
  if (o.alignment) return refused("alignment");
  return std::nullopt;
}
}  // namespace

Result<TranslateOptions> resolve_options(const Model& petrel_model, const TranslateOptions& requested) {
  const ModelInfo& info = petrel_model.info();
  auto invalid = [](const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; };
  const GenerationDefaults& model = info.generation;
  TranslateOptions o = requested;
  if (o.beam_size == 0) o.beam_size = model.num_beams;
  if (o.beam_size < 1 || o.beam_size > kMaxBeamSize)
    return invalid("beam size must be in 1.." + std::to_string(kMaxBeamSize) + ", got " + std::to_string(o.beam_size));
  if (o.n_best < 1 || o.n_best > o.beam_size)
    return invalid("n-best must be in 1..beam size (" + std::to_string(o.beam_size) + "), got " +
                   std::to_string(o.n_best));
  if (o.max_length_factor == 0 && o.max_new_tokens == 0) o.max_length_factor = model.max_length_factor;
  if (!(o.max_length_factor >= 0 && o.max_length_factor <= 1000))
    return invalid("max length factor must be in 0..1000");
  if (o.max_new_tokens == 0)
    o.max_new_tokens = std::min<size_t>(model.max_length > 1 ? model.max_length - 1 : detail::kDefaultMaxNewTokens,
                                        info.max_positions);
  if (o.max_new_tokens > info.max_positions)
    return invalid("max new tokens " + std::to_string(o.max_new_tokens) + " exceeds the model's " +
                   std::to_string(info.max_positions) + " positions");
  o.min_new_tokens = std::min(o.min_new_tokens, o.max_new_tokens);
  if (!o.length_penalty) o.length_penalty = model.length_penalty;
  if (!(*o.length_penalty >= 0 && *o.length_penalty <= 10)) return invalid("length penalty must be in 0..10");
  if (o.beam_stop == BeamStop::kDefault) o.beam_stop = model.beam_stop;
  if (!o.target_language.empty()) {
    const text::Tokenizer* tokenizer = detail::ModelAccess::tokenizer(petrel_model);
    const std::optional<int32_t> id = tokenizer ? tokenizer->language_id(o.target_language) : std::nullopt;
    if (!id) {
      std::string known;
      if (tokenizer)
        for (const auto& [code, lang_id] : tokenizer->languages()) {
          if (known.size() > 60) { known += ", ..."; break; }
          known += (known.empty() ? "" : ", ") + code;
        }
      return invalid("unknown target language '" + detail::to_valid_utf8(o.target_language) + "' (" +
                     (known.empty() ? std::string("this model has no language codes") : "this model's: " + known) + ")");
    }
    o.target_prefix.insert(o.target_prefix.begin(), *id);
    o.target_language.clear();  // now part of the prefix: resolving the result again changes nothing
  } else if (o.target_prefix.empty() && model.forced_bos_id >= 0) {
    o.target_prefix = {model.forced_bos_id};
  }
  if (o.target_prefix.size() > o.max_new_tokens)
    return invalid("the target prefix has " + std::to_string(o.target_prefix.size()) +
                   " tokens, more than max new tokens " + std::to_string(o.max_new_tokens));
  for (size_t i = 0; i < o.target_prefix.size(); ++i)
    if (o.target_prefix[i] < 0 || static_cast<uint32_t>(o.target_prefix[i]) >= info.target_vocab_size)
      return invalid("target prefix, position " + std::to_string(i + 1) + ": token id " +
                     std::to_string(o.target_prefix[i]) + " is out of range (target vocabulary of " +
                     std::to_string(info.target_vocab_size) + ")");
  if (!o.use_shortlist) o.use_shortlist = info.shortlist.present && info.shortlist.by_default;
  if (*o.use_shortlist && !info.shortlist.present)
    return invalid("this model file has no shortlist (petrel-convert --shortlist adds one)");
  if (o.alignment) {
    if (!o.alignment_layer) o.alignment_layer = info.alignment_layer >= 0 ? static_cast<size_t>(info.alignment_layer)
                                                                          : info.decoder_layers - 1;
    if (*o.alignment_layer >= info.decoder_layers)
      return invalid("alignment layer " + std::to_string(*o.alignment_layer) + " is not one of the model's " +
                     std::to_string(info.decoder_layers) + " decoder layers (0-based)");
    if (o.alignment_head >= info.num_heads)
      return invalid("alignment head " + std::to_string(o.alignment_head) + " is not one of the model's " +
                     std::to_string(info.num_heads) + " attention heads (0-based)");
  }
  if (o.lookup_ngram > kMaxLookupNgram)
    return invalid("lookup_ngram " + std::to_string(o.lookup_ngram) + ": at most " + std::to_string(kMaxLookupNgram));
  if (o.max_draft_tokens > kMaxDraftTokens)
    return invalid("max_draft_tokens " + std::to_string(o.max_draft_tokens) + ": at most " + std::to_string(kMaxDraftTokens));
  if (o.max_draft_tokens == 0) o.max_draft_tokens = kDefaultMaxDraftTokens;
  if (o.lookup_ngram > 0)
    if (auto problem = speculation_problem(o, "lookup_ngram")) return *problem;
  return o;
}


std::vector<std::pair<size_t, size_t>> hard_alignment(const std::vector<std::vector<float>>& soft, float threshold) {
  std::vector<std::pair<size_t, size_t>> pairs;  // (source, target) while sorting
  for (size_t t = 0; t < soft.size(); ++t) {
    const std::vector<float>& row = soft[t];
    if (threshold == 1.0f) {
      size_t best = 0;
      for (size_t s = 1; s < row.size(); ++s)
        if (row[best] < row[s]) best = s;
      if (!row.empty()) pairs.emplace_back(best, t);
    } else {
      for (size_t s = 0; s < row.size(); ++s)
        if (row[s] > threshold) pairs.emplace_back(s, t);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  for (auto& [first, second] : pairs) std::swap(first, second);
  return pairs;
}

Translator::Translator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
const char* Translator::isa() const { return impl_->kernels.isa; }
Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;
const TranslateTimings& Translator::last_timings() const { return impl_->timings; }
const Model& Translator::model() const { return *impl_->model; }
size_t Translator::threads() const { return impl_->pool.size(); }

Result<std::vector<Translation>> Translator::translate(const std::vector<std::vector<int32_t>>& batch,
                                                       const TranslateOptions& options) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Translator")) return *refused;
  try {
    return impl_->translate(batch, options);
  } catch (const std::bad_alloc&) {  // the API never throws: memory ran out while buffers grew
    return Error{ErrorCode::kOutOfMemory, "out of memory"};  // short enough to need no allocation
  }
}

Result<std::vector<Translation>> detail::TranslatorAccess::translate(Translator& t,
                                                                     const std::vector<std::vector<int32_t>>& batch,
                                                                     const TranslateOptions& options,
                                                                     const std::vector<size_t>& length_basis,
                                                                     const std::vector<const std::vector<int32_t>*>& shortlists) {
  const detail::SessionCall call(t.impl_->busy);
  if (auto refused = call.refused("Translator")) return *refused;
  if ((!length_basis.empty() && length_basis.size() != batch.size()) ||
      (!shortlists.empty() && shortlists.size() != batch.size()))
    return Error{ErrorCode::kInternal, "a length basis and a shortlist per input are needed"};
  try {
    return t.impl_->translate(batch, options, length_basis.empty() ? nullptr : &length_basis,
                              shortlists.empty() ? nullptr : &shortlists);
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "out of memory"};
  }
}

Result<std::vector<Translation>> Translator::Impl::translate(const std::vector<std::vector<int32_t>>& batch,
                                                             const TranslateOptions& requested,
                                                             const std::vector<size_t>* length_basis,
                                                             const std::vector<const std::vector<int32_t>*>* shortlists) {
  const ModelInfo& info = model->info();
  auto invalid = [](const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; };
  if (batch.empty()) return invalid("no inputs to translate");
  if (batch.size() > kMaxBatchSize)
    return invalid(std::to_string(batch.size()) + " inputs in one call; at most " + std::to_string(kMaxBatchSize));
  uint64_t source_tokens = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    if (auto problem = detail::source_problem(info, batch[s], s)) return *problem;
    source_tokens += batch[s].size();
  }
  auto resolved = resolve_options(*model, requested);
  if (!resolved) return resolved.error();
  const TranslateOptions& options = resolved.value();
  size_t max_new = options.max_new_tokens;
  // Marian's max-length-factor: a limit per sentence from its length, within max_new.
  std::vector<size_t> sentence_limits;
  if (requested.max_new_tokens == 0 && options.max_length_factor > 0) {
    size_t longest = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t basis = length_basis != nullptr ? (*length_basis)[i] : batch[i].size();
      const double limit = std::ceil(options.max_length_factor * static_cast<double>(basis));
      sentence_limits.push_back(std::clamp<size_t>(static_cast<size_t>(limit), 1, max_new));
      longest = std::max(longest, sentence_limits.back());
    }
    max_new = std::max(longest, options.target_prefix.size());
    for (size_t& limit : sentence_limits) limit = std::max(limit, options.target_prefix.size());
  }

  const DType cache_type = options.kv_cache_f16 ? DType::kF16 : DType::kF32;
  // Alignment rows are as wide as the longest input (in tokens the encoder reads).
  size_t alignment_width = 0;
  if (options.alignment) {
    const models::SourceReader reader(info);
    for (const auto& ids : batch) alignment_width = std::max(alignment_width, reader.tokens_read(ids));
  }
  const detail::CheckedSize needed = request_bytes(info, batch.size(), source_tokens, options.beam_size, max_new,
                                                   pool.size(), detail::dtype_size(cache_type), alignment_width,
                                                   options.token_scores || options.quality_scores);
  if (auto problem = detail::working_memory_problem(
          needed,
          std::to_string(batch.size()) + " inputs (" + std::to_string(source_tokens) + " tokens) with beam " +
              std::to_string(options.beam_size) + " over " + std::to_string(max_new) + " new tokens need",
          "translate fewer inputs per call, or use a smaller beam or max_new_tokens"))
    return *problem;

  decode::SearchOptions so;
  so.beam = options.beam_size;
  so.n_best = options.n_best;
  so.max_new_tokens = max_new;
  if (!sentence_limits.empty()) so.sentence_max_new_tokens = &sentence_limits;
  so.min_new_tokens = std::min(options.min_new_tokens, max_new);
  so.length_penalty = *options.length_penalty;
  so.stop = options.beam_stop == BeamStop::kFirstK ? decode::BeamStop::kFirstK : decode::BeamStop::kHeuristic;
  so.forced_eos_id = info.generation.forced_eos_id;
  so.decoder_start_id = info.decoder_start_id;
  so.eos_id = info.eos_id;
  so.bad_word_ids = info.bad_word_ids;
  so.alignment_width = alignment_width;
  so.token_scores = options.token_scores || options.quality_scores;
  std::vector<std::vector<int32_t>> forced;
  if (!options.target_prefix.empty()) {
    forced.assign(batch.size(), options.target_prefix);
    so.forced = &forced;
  }

  StreamObserver stream(options.on_token, detail::ModelAccess::tokenizer(*model), so.beam > 1);
  if (options.on_token) so.observer = &stream;
  const bool speculating = options.lookup_ngram > 0 || draft.drafter != nullptr;
  if (speculating)
    if (auto problem = speculation_problem(options, options.lookup_ngram > 0 ? "lookup_ngram" : "the draft model"))
      return *problem;
  Result<decode::SearchResult> found = decode::SearchResult{};
  auto start = std::chrono::steady_clock::now();
  timings.verifications = timings.drafted_tokens = timings.accepted_tokens = timings.draft_model_tokens = 0;
  if (speculating) {
    found = search_speculatively(batch, so, options, cache_type, max_new, shortlists, so.observer);
  } else {
    if (*options.use_shortlist && shortlists) output.use_shortlist_sets(weights, *shortlists);
    else if (*options.use_shortlist) output.use_shortlist(weights, batch);
    else output.use_all(weights);
    graph.encode(batch, encoded, workspace);
    timings.encode_ms = detail::ms_since(start);
    start = std::chrono::steady_clock::now();
    std::vector<size_t> sentence_of_row(batch.size() * so.beam);
    for (size_t r = 0; r < sentence_of_row.size(); ++r) sentence_of_row[r] = r / so.beam;
    graph.start_decoding(encoded, sentence_of_row, max_new, cache_type, decoder, workspace);
    if (options.alignment) {
      decoder.alignment_layer = *options.alignment_layer;
      decoder.alignment_head = options.alignment_head;
      decoder.alignment_width = alignment_width;
    }
    decode::DecoderSteps steps(graph, decoder, workspace, output);
    found = decode::search(steps, batch.size(), output, kernels, so, search);
    timings.decode_ms = detail::ms_since(start);
  }
  if (!found) return found.error();
  timings.decode_steps = found.value().steps;
  if (options.on_token) {  // each input's final translation, after the step-by-step events
    for (size_t s = 0; s < batch.size(); ++s) {
      const auto& hyps = found.value().hypotheses[s];
      if (hyps.empty()) continue;
      stream.finish(s, hyps[0].ids.data(), hyps[0].ids.size());
    }
  }

  std::vector<Translation> out(batch.size());
  size_t generated = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    for (auto& h : found.value().hypotheses[s]) {
      out[s].hypotheses.push_back({std::move(h.ids), h.score, h.ended_on_eos, {}, {}});
      for (const decode::TokenScore& t : h.token_scores)
        out[s].hypotheses.back().token_scores.push_back({t.log_probability, t.logit});
      // The search's rows are the batch's widest: each keeps its own input's tokens.
      for (size_t at = 0; at < h.alignment.size(); at += alignment_width)
        out[s].hypotheses.back().alignment.emplace_back(h.alignment.begin() + static_cast<std::ptrdiff_t>(at),
                                                        h.alignment.begin() + static_cast<std::ptrdiff_t>(at + encoded.length[s]));
    }
    if (!out[s].hypotheses.empty()) generated += out[s].hypotheses[0].ids.size();
  }
  timings.generated_tokens = generated;
  return out;
}

Result<decode::SearchResult> Translator::Impl::search_speculatively(
    const std::vector<std::vector<int32_t>>& batch, const decode::SearchOptions& so, const TranslateOptions& options,
    DType cache_type, size_t max_new, const std::vector<const std::vector<int32_t>*>* shortlists,
    decode::SearchObserver* observer) {
  // The caller's observer sees input s where the one-input search says input 0.
  struct OneInput final : decode::SearchObserver {
    decode::SearchObserver* all = nullptr;
    size_t input = 0;
    bool on_step(size_t, const int32_t* tokens, size_t length) override { return all->on_step(input, tokens, length); }
  };
  decode::SearchResult result;
  result.hypotheses.resize(batch.size());
  // decode_positions' rows: the token chosen, then the draft; all of the one input.
  const std::vector<size_t> sentence_of_row(options.max_draft_tokens + 1, 0);
  std::vector<size_t> limit(1);
  std::vector<std::vector<int32_t>> forced(1);
  const size_t draft_ran = draft.drafter != nullptr ? draft.drafter->tokens_run() : 0;
  decode::SpeculationCounts counts;
  double encode_ms = 0, decode_ms = 0;
  // The batch's output vocabulary, as the plain search has it: a shortlist's outputs
  // are then laid out alike, and their normalization sums them in the same order.
  if (*options.use_shortlist && shortlists) output.use_shortlist_sets(weights, *shortlists);
  else if (*options.use_shortlist) output.use_shortlist(weights, batch);
  else output.use_all(weights);
  for (size_t s = 0; s < batch.size(); ++s) {
    auto start = std::chrono::steady_clock::now();
    graph.encode({batch[s]}, encoded, workspace);
    encode_ms += detail::ms_since(start);
    start = std::chrono::steady_clock::now();
    decode::SearchOptions one = so;
    one.first_sentence = s;
    size_t steps = max_new;
    if (so.sentence_max_new_tokens != nullptr) {
      steps = limit[0] = (*so.sentence_max_new_tokens)[s];
      one.sentence_max_new_tokens = &limit;
    }
    if (so.forced != nullptr) {
      forced[0] = (*so.forced)[s];
      one.forced = &forced;
    }
    OneInput watcher;
    if (observer != nullptr) {
      watcher.all = observer;
      watcher.input = s;
      one.observer = &watcher;
    }
    graph.start_decoding(encoded, sentence_of_row, max_new, cache_type, decoder, workspace);
    decode::TranslationLookup lookup(batch[s], options.lookup_ngram);
    if (draft.drafter != nullptr) draft.drafter->start(batch[s], steps, draft_shares_encoder ? &encoded : nullptr);
    decode::CombinedDrafter drafter(&lookup, draft.drafter.get());
    decode::SpeculativeSteps speculative(graph, decoder, workspace, output, drafter, options.max_draft_tokens, steps);
    auto found = decode::search(speculative, 1, output, kernels, one, search);
    decode_ms += detail::ms_since(start);
    if (!found) return found.error();
    result.hypotheses[s] = std::move(found.value().hypotheses[0]);
    result.steps += found.value().steps;
    const decode::SpeculationCounts c = speculative.counts();
    counts.verifications += c.verifications;
    counts.drafted += c.drafted;
    counts.accepted += c.accepted;
  }
  timings.encode_ms = encode_ms;
  timings.decode_ms = decode_ms;
  timings.verifications = counts.verifications;
  timings.drafted_tokens = counts.drafted;
  timings.accepted_tokens = counts.accepted;
  if (draft.drafter != nullptr) timings.draft_model_tokens = draft.drafter->tokens_run() - draft_ran;
  return result;
}

namespace {
// Why `draft` cannot draft for `model`, or nullopt: not a translation model, another
// vocabulary (sizes, then the target tokens id for id), or SSRU decoder layers (their
// recurrent state is not kept per position, so a draft could not be rewound).
std::optional<Error> translation_draft_problem(const Model& model, const Model& draft) {
  const ModelInfo &target = model.info(), &d = draft.info();
  const std::string both = d.source + " cannot draft for " + target.source + ": ";
  if (d.decoder_only) return Error{ErrorCode::kInvalidArgument, both + "not a translation (encoder-decoder) model"};
  if (d.vocab_size != target.vocab_size || d.target_vocab_size != target.target_vocab_size)
    return Error{ErrorCode::kInvalidArgument,
                 both + "its vocabularies have " + std::to_string(d.vocab_size) + " source and " +
                     std::to_string(d.target_vocab_size) + " target tokens, not " + std::to_string(target.vocab_size) +
                     " and " + std::to_string(target.target_vocab_size)};
  if (d.decoder_start_id != target.decoder_start_id || d.eos_id != target.eos_id)
    return Error{ErrorCode::kInvalidArgument, both + "its start or end token differs"};
  if (auto different = detail::output_token_difference(model, draft, target.target_vocab_size, both)) return different;
  for (const detail::Layer& layer : detail::ModelAccess::weights(draft).decoder.layers)
    if (layer.ssru())
      return Error{ErrorCode::kUnsupported,
                   both + "its decoder has SSRU (recurrent) layers, whose state a rejected draft cannot rewind"};
  return std::nullopt;
}
}  // namespace

Status Translator::set_draft_model(std::shared_ptr<const Model> draft, bool shares_encoder) {
  const detail::SessionCall call(impl_->busy);
  if (auto refused = call.refused("Translator")) return *refused;
  return detail::without_exceptions([&]() -> Status {
    std::optional<Error> problem = draft ? translation_draft_problem(*impl_->model, *draft) : std::nullopt;
    if (draft && shares_encoder && !problem) {
      const ModelInfo &a = impl_->model->info(), &b = draft->info();
      if (a.d_model != b.d_model || a.encoder_layers != b.encoder_layers)
        problem = Error{ErrorCode::kInvalidArgument, b.source + " cannot share " + a.source +
                                                         "'s encoder: the encoders' shapes differ (d_model, layers)"};
    }
    impl_->draft_shares_encoder = shares_encoder && draft != nullptr && !problem;
    return impl_->draft.set(draft, problem, impl_->kernels, impl_->pool, impl_->scales);
  }, draft != nullptr ? draft->info().source : std::string());
}

}  // namespace petrel
