#include "petrel/batch_translator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <thread>

#include "batch_testing.h"
#include "threads/thread_pool.h"
#include "model_access.h"
#include "text_markup.h"
#include "text_sentences.h"
#include "models/encoder_decoder.h"
#include "models/output_vocabulary.h"
#include "text/sentence_splitter.h"
#include "translation_cache.h"

namespace petrel {
namespace {

// What is translated: an input, or one sentence of it.
struct Unit {
  size_t input = 0;
  std::vector<int32_t> ids;
  std::optional<Result<Translation>> result;  // set when done
  size_t length_basis = 0;  // BatchOptions::limit_by_longest_sentence: its input's longest sentence
  std::string cache_key;    // BatchOptions::cache: where its translation goes once made (empty: found there)
  const std::vector<int32_t>* shortlist = nullptr;  // BatchOptions::shortlist_of_input: its input's
  const std::vector<int32_t>* shortlist_sources = nullptr;  // the source ids that shortlist is made of, sorted
};

// Units' indices, packed for one call of Translator::translate.
using Batch = std::vector<size_t>;

// A window's units sorted by length (longest first) and packed greedily under the
// token and size budgets. Units already done (errors) are left out.
std::vector<Batch> pack(const std::vector<Unit>& units, const BatchOptions& o) {
  std::vector<size_t> order;
  for (size_t u = 0; u < units.size(); ++u)
    if (!units[u].result) order.push_back(u);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return units[a].ids.size() > units[b].ids.size(); });
  std::vector<Batch> batches;
  Batch current;
  size_t tokens = 0;
  for (size_t u : order) {
    const size_t length = units[u].ids.size();
    if (!current.empty() && (current.size() == o.max_batch_size || tokens + length > o.max_batch_tokens)) {
      batches.push_back(std::move(current));
      current.clear();
      tokens = 0;
    }
    current.push_back(u);
    tokens += length;
  }
  if (!current.empty()) batches.push_back(std::move(current));
  return batches;
}

// The test seam (batch_testing.h).
std::function<void(size_t)> batch_observer;

std::vector<text::SentenceSpan> split(std::string_view text, SentenceSplit mode) {
  switch (mode) {
    case SentenceSplit::kSentencePerLine: return text::split_lines(text);
    case SentenceSplit::kParagraphPerLine: return text::split_sentences_by_line(text);
    case SentenceSplit::kWrappedText: return text::split_sentences_by_paragraph(text);
    case SentenceSplit::kText: break;
  }
  return text::split_sentences(text);
}

bool cancelled(const BatchOptions& b) { return b.cancel && b.cancel->load(std::memory_order_relaxed); }

Error cancelled_error(size_t input) {
  return detail::input_error(input, {ErrorCode::kCancelled, "cancelled"});
}

// Whatever a batch threw, as its inputs' error.
Error batch_exception() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kOutOfMemory, "out of memory"};
  } catch (const std::exception& e) {
    return Error{ErrorCode::kInternal, std::string("translating the batch failed: ") + e.what()};
  } catch (...) {
    return Error{ErrorCode::kInternal, "translating the batch failed: an unknown exception"};
  }
}

}  // namespace

void detail::set_batch_observer(std::function<void(size_t)> observer) { batch_observer = std::move(observer); }

struct BatchTranslator::Impl {
  std::shared_ptr<const Model> model;
  TranslatorOptions translator_options;
  std::vector<Translator> sessions;
  BatchTotals totals;

  // Translates one window: `units` (inputs 0..inputs-1 of the window own units
  // [first_unit[i], first_unit[i+1])), calling ready(i) in input order as each input's
  // units are all done. When ready throws, no further batch starts; the workers finish
  // the batches they hold and the exception propagates. Units the cache holds are not
  // translated; the others' translations are stored there before they are delivered.
  Status run(std::vector<Unit>& units, const std::vector<size_t>& first_unit, size_t inputs,
             const TranslateOptions& options, const BatchOptions& batching, const std::function<void(size_t)>& ready);
};

Status BatchTranslator::Impl::run(std::vector<Unit>& units, const std::vector<size_t>& first_unit, size_t inputs,
                                  const TranslateOptions& options, const BatchOptions& batching,
                                  const std::function<void(size_t)>& ready) {
  if (batching.cache) {
    const std::string options_key = detail::TranslationCacheAccess::options_key(
        *model, sessions[0].isa(), translator_options.activation_scales, options);
    for (Unit& u : units) {
      if (u.result) continue;
      const size_t basis = batching.limit_by_longest_sentence ? std::max(u.length_basis, u.ids.size()) : 0;
      u.cache_key = detail::TranslationCacheAccess::key(options_key, basis, u.ids, u.shortlist_sources);
      if (auto found = detail::TranslationCacheAccess::find(*batching.cache, u.cache_key)) {
        u.result = std::move(*found);
        u.cache_key.clear();
      }
    }
  }
  // With a cancel flag, each input stops at the first step after it is raised.
  TranslateOptions stoppable = options;
  if (batching.cancel) stoppable.on_token = [&batching](const TokenEvent&) { return !cancelled(batching); };
  const std::vector<Batch> batches = pack(units, batching);
  std::mutex mutex;
  std::condition_variable done_cv;
  size_t next_batch = 0;
  auto run_batch = [&](Translator& session, const Batch& batch) {
    // Every exception becomes the batch's inputs' error: one escaping a worker thread
    // would end the process.
    Result<std::vector<Translation>> r = Error{ErrorCode::kInternal, ""};
    try {
      if (!cancelled(batching)) {
        if (batch_observer) batch_observer(batch.size());
        std::vector<std::vector<int32_t>> ids;
        for (size_t u : batch) ids.push_back(units[u].ids);
        std::vector<size_t> basis;  // empty: each unit's own length
        if (batching.limit_by_longest_sentence)
          for (size_t u : batch) basis.push_back(std::max(units[u].length_basis, units[u].ids.size()));
        std::vector<const std::vector<int32_t>*> shortlists;  // empty: each unit's own
        if (units[batch[0]].shortlist)
          for (size_t u : batch) shortlists.push_back(units[u].shortlist);
        r = detail::TranslatorAccess::translate(session, ids, stoppable, basis, shortlists);
      }
    } catch (...) {
      r = batch_exception();
    }
    const bool stopped = cancelled(batching);  // what was cut short is not a translation
    std::lock_guard<std::mutex> lock(mutex);
    if (r) {
      const TranslateTimings& t = session.last_timings();
      totals.verifications += t.verifications;
      totals.drafted_tokens += t.drafted_tokens;
      totals.accepted_tokens += t.accepted_tokens;
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      Unit& u = units[batch[k]];
      if (stopped) u.result = cancelled_error(u.input);
      else if (r) u.result = std::move(r.value()[k]);
      else u.result = r.error();
    }
    done_cv.notify_all();
  };
  auto worker = [&](Translator& session) {
    for (;;) {
      size_t b;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next_batch == batches.size()) return;
        b = next_batch++;
      }
      run_batch(session, batches[b]);
    }
  };
  auto input_done = [&](size_t i) {
    for (size_t u = first_unit[i]; u < first_unit[i + 1]; ++u)
      if (!units[u].result) return false;
    return true;
  };
  // Stores input i's new translations in the cache, then delivers it (on the calling thread).
  auto deliver = [&](size_t i) {
    if (batching.cache)
      for (size_t u = first_unit[i]; u < first_unit[i + 1]; ++u)
        if (!units[u].cache_key.empty() && *units[u].result)
          detail::TranslationCacheAccess::store(*batching.cache, units[u].cache_key, units[u].result->value());
    ready(i);
  };

  size_t delivered = 0;
  if (sessions.size() == 1) {  // the calling thread translates, delivering after each batch
    for (const Batch& batch : batches) {
      run_batch(sessions[0], batch);
      while (delivered < inputs && input_done(delivered)) deliver(delivered++);
    }
    while (delivered < inputs) deliver(delivered++);  // inputs without units (empty, refused)
    return Status::ok();
  }
  // Joins the workers however this function is left (a sink that throws included).
  struct Workers {
    std::vector<std::thread> threads;
    ~Workers() {
      for (std::thread& t : threads) t.join();
    }
  } pool;
  pool.threads.reserve(sessions.size());
  for (Translator& s : sessions) pool.threads.emplace_back(worker, std::ref(s));
  try {
    while (delivered < inputs) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        done_cv.wait(lock, [&] { return input_done(delivered); });
      }
      deliver(delivered++);  // outside the lock: the caller's sink may take its time
    }
  } catch (...) {  // the sink threw: cancel the batches not yet started
    std::lock_guard<std::mutex> lock(mutex);
    next_batch = batches.size();
    throw;
  }
  return Status::ok();
}

Result<BatchTranslator> BatchTranslator::create(std::shared_ptr<const Model> model, const TranslatorOptions& options,
                                                size_t workers) {
  if (!model) return Error{ErrorCode::kInvalidArgument, "no model"};
  if (Status s = threads::check_thread_count("workers", workers, 64); !s) return s.error();
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  impl->translator_options = options;
  for (size_t w = 0; w < workers; ++w) {
    auto t = Translator::create(model, options);
    if (!t) return t.error();
    impl->sessions.push_back(std::move(t.value()));
  }
  return BatchTranslator(std::move(impl));
}

BatchTranslator::BatchTranslator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchTranslator::~BatchTranslator() = default;
BatchTranslator::BatchTranslator(BatchTranslator&&) noexcept = default;
BatchTranslator& BatchTranslator::operator=(BatchTranslator&&) noexcept = default;
BatchTotals BatchTranslator::last_totals() const { return impl_->totals; }
size_t BatchTranslator::workers() const { return impl_->sessions.size(); }

Status BatchTranslator::set_draft_model(std::shared_ptr<const Model> draft, bool shares_encoder) {
  for (Translator& session : impl_->sessions)
    if (Status set = session.set_draft_model(draft, shares_encoder); !set) return set;
  return Status::ok();
}
const std::shared_ptr<const Model>& BatchTranslator::model() const { return impl_->model; }
const char* BatchTranslator::isa() const { return impl_->sessions[0].isa(); }

namespace {

Status check_batching(const TranslateOptions& options, const BatchOptions& b) {
  if (options.on_token)
    return Error{ErrorCode::kInvalidArgument, "streaming (on_token) is not supported when translating in batches"};
  if (b.max_batch_size < 1 || b.max_batch_size > kMaxBatchSize || b.max_batch_tokens < 1)
    return Error{ErrorCode::kInvalidArgument, "batching: max_batch_size must be in 1.." +
                                                  std::to_string(kMaxBatchSize) + " and max_batch_tokens at least 1"};
  return Status::ok();
}

Error too_long(size_t input, size_t tokens, const ModelInfo& info, bool splitting) {
  return Error{ErrorCode::kInvalidArgument,
               "input " + std::to_string(input + 1) + (splitting ? " has a sentence of " : " has ") +
                   std::to_string(tokens) + " tokens; the model allows at most " +
                   std::to_string(info.max_positions) +
                   (splitting ? "" : " (split long inputs into sentences: BatchOptions::split_sentences)")};
}

// What refuses a unit before it is translated (too long: with the splitting hint), or nullopt.
std::optional<Error> unit_problem(const ModelInfo& info, const std::vector<int32_t>& ids, size_t input,
                                  bool splitting) {
  const size_t positions = models::SourceReader(info).positions(ids);
  if (positions > info.max_positions) return too_long(input, positions, info, splitting);
  return detail::source_problem(info, ids, input);
}

}  // namespace

namespace {

// How many inputs the window that starts at input i0 (of n) holds: the priority inputs'
// windows end where they end.
size_t window_length(size_t i0, size_t n, const BatchOptions& b) {
  const size_t window = b.window ? b.window : 8 * b.max_batch_size;
  const size_t end = i0 < b.priority_inputs ? std::min(b.priority_inputs, n) : n;
  return std::min(window, end - i0);
}

// After a cancellation: the inputs from i0 on, delivered as cancelled without being read.
template <class Sink>
void deliver_cancelled(size_t i0, size_t n, const Sink& deliver) {
  for (size_t i = i0; i < n; ++i) deliver(i, cancelled_error(i));
}

}  // namespace

Status BatchTranslator::translate(const std::vector<std::vector<int32_t>>& inputs, const TranslateOptions& options,
                                  const BatchOptions& batching, const IdSink& deliver) {
  Status s = check_batching(options, batching);
  if (!s) return s;
  const auto start = std::chrono::steady_clock::now();
  impl_->totals = BatchTotals{};
  BatchTotals& totals = impl_->totals;
  return detail::without_exceptions([&]() -> Status {
    const ModelInfo& info = impl_->model->info();
    for (size_t i0 = 0, count; i0 < inputs.size(); i0 += count) {  // a window at a time: memory stays bounded
      if (cancelled(batching)) {
        deliver_cancelled(i0, inputs.size(), deliver);
        break;
      }
      count = window_length(i0, inputs.size(), batching);
      std::vector<Unit> units;
      std::vector<size_t> first_unit;
      for (size_t i = i0; i < i0 + count; ++i) {
        first_unit.push_back(units.size());
        if (inputs[i].empty()) continue;
        Unit u;
        u.input = i;
        u.ids = inputs[i];
        totals.source_tokens += u.ids.size();
        if (auto problem = unit_problem(info, u.ids, i, false)) u.result = std::move(*problem);
        units.push_back(std::move(u));
      }
      first_unit.push_back(units.size());
      totals.inputs += count;
      totals.sentences += units.size();
      s = impl_->run(units, first_unit, count, options, batching, [&](size_t k) {
        if (cancelled(batching)) return deliver(i0 + k, cancelled_error(i0 + k));
        if (first_unit[k] == first_unit[k + 1]) {  // an empty input: an empty translation
          deliver(i0 + k, Translation{{Hypothesis{}}});
          return;
        }
        Unit& u = units[first_unit[k]];
        if (*u.result && !u.result->value().hypotheses.empty())
          totals.generated_tokens += u.result->value().hypotheses[0].ids.size();
        deliver(i0 + k, std::move(*u.result));
      });
      totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!s) return s;
    }
    return Status::ok();
  });
}

Status BatchTranslator::translate_text(const std::vector<std::string>& texts, const TranslateOptions& options,
                                       const BatchOptions& batching, const TextSink& deliver) {
  Status s = check_batching(options, batching);
  if (!s) return s;
  const Model& model = *impl_->model;
  if (!model.info().has_text_tokenizer)
    return Error{ErrorCode::kUnsupported, "this model file carries no text tokenizer; pass token ids"};
  if (Status checked = detail::check_text_options(model, options); !checked) return checked;
  if (options.html) {
    return detail::translate_markup(
        [this](const std::vector<std::string>& plain, const TranslateOptions& o, const BatchOptions& b,
               const TextSink& sink) { return translate_text(plain, o, b, sink); },
        texts, options, batching, deliver);
  }
  const auto start = std::chrono::steady_clock::now();
  impl_->totals = BatchTotals{};
  BatchTotals& totals = impl_->totals;
  return detail::without_exceptions([&]() -> Status {
    const ModelInfo& info = model.info();
    // Sentences decode over their input's shortlist only when splitting and with a shortlist in use.
    bool of_input_shortlists = false;
    if (batching.shortlist_of_input && batching.split_sentences) {
      auto resolved = resolve_options(model, options);
      if (!resolved) return resolved.error();
      of_input_shortlists = resolved.value().use_shortlist.value_or(false);
    }
    for (size_t i0 = 0, count; i0 < texts.size(); i0 += count) {  // tokenized a window at a time
      if (cancelled(batching)) {
        deliver_cancelled(i0, texts.size(), deliver);
        break;
      }
      count = window_length(i0, texts.size(), batching);
      std::vector<Unit> units;
      std::vector<size_t> first_unit;
      std::vector<TokenizedText> unit_tokens;            // per unit
      std::vector<size_t> unit_offset;                   // per unit: where its sentence starts in its input
      std::vector<std::vector<std::string>> separators;  // per input: the text between its sentences
      for (size_t i = i0; i < i0 + count; ++i) {
        first_unit.push_back(units.size());
        std::vector<text::SentenceSpan> spans;
        if (batching.split_sentences)
          spans = split(texts[i], batching.split_mode);
        else if (texts[i].find_first_not_of(" \t\r\n\f\v") != std::string::npos) spans.push_back({0, texts[i].size()});
        separators.emplace_back();
        for (size_t k = 0; k < spans.size(); ++k) {
          if (k > 0)
            separators.back().push_back(texts[i].substr(spans[k - 1].end, spans[k].begin - spans[k - 1].end));
          Unit u;
          u.input = i;
          unit_offset.push_back(spans[k].begin);
          auto t = tokenize(model, texts[i].substr(spans[k].begin, spans[k].end - spans[k].begin),
                            options.source_language);
          if (!t) {
            u.result = detail::input_error(i, t.error());
            unit_tokens.emplace_back();
          } else {
            totals.source_tokens += t.value().ids.size();
            if (auto problem = unit_problem(info, t.value().ids, i, batching.split_sentences)) {
              // Refused: its tokens go now, so a window of token-dense lines holds one
              // line's tokens at a time, not all of them.
              u.result = std::move(*problem);
              unit_tokens.emplace_back();
            } else {
              u.ids = t.value().ids;
              unit_tokens.push_back(std::move(t.value()));
            }
          }
          units.push_back(std::move(u));
        }
      }
      first_unit.push_back(units.size());
      totals.inputs += count;
      totals.sentences += units.size();
      for (size_t k = 0; k < count; ++k) {  // each sentence's length limit from its input's longest
        size_t longest = 0;
        for (size_t u = first_unit[k]; u < first_unit[k + 1]; ++u) longest = std::max(longest, units[u].ids.size());
        for (size_t u = first_unit[k]; u < first_unit[k + 1]; ++u) units[u].length_basis = longest;
      }
      // shortlist_of_input: per input of the window, its sentences' distinct source ids (what
      // a cache key names: usually far fewer than the shortlist they make) and the shortlist.
      std::vector<std::vector<int32_t>> input_sources, input_shortlists;
      if (of_input_shortlists) {
        input_sources.resize(count);
        input_shortlists.resize(count);
        for (size_t k = 0; k < count; ++k) {
          std::vector<int32_t>& sources = input_sources[k];
          for (size_t u = first_unit[k]; u < first_unit[k + 1]; ++u)
            if (!units[u].result) sources.insert(sources.end(), units[u].ids.begin(), units[u].ids.end());
          std::sort(sources.begin(), sources.end());
          sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
          input_shortlists[k] = models::OutputVocabulary::shortlist_tokens(detail::ModelAccess::weights(model), sources);
          for (size_t u = first_unit[k]; u < first_unit[k + 1]; ++u) {
            units[u].shortlist = &input_shortlists[k];
            units[u].shortlist_sources = &sources;
          }
        }
      }

      const bool with_sentences = detail::has_token_ranges(model);
      s = impl_->run(units, first_unit, count, options, batching, [&](size_t k) {
        const size_t i = i0 + k;
        if (cancelled(batching)) return deliver(i, cancelled_error(i));
        const size_t u0 = first_unit[k], u1 = first_unit[k + 1];
        TextTranslation out;
        if (u0 == u1) {  // an empty input (or only whitespace): an empty translation
          out.hypotheses.emplace_back();
          deliver(i, std::move(out));
          return;
        }
        for (size_t u = u0; u < u1; ++u)
          if (!*units[u].result) {
            deliver(i, units[u].result->error());
            return;
          }
        if (u1 - u0 == 1) {  // one sentence: its own hypotheses
          auto& hyps = units[u0].result->value().hypotheses;
          if (with_sentences && !hyps.empty()) {
            auto sentence = detail::sentence_translation(model, unit_tokens[u0], unit_offset[u0], hyps[0], 0, options);
            if (!sentence)
              return deliver(i, detail::input_error(i, sentence.error()));
            out.sentences.push_back(std::move(sentence.value()));
          }
          out.input = std::move(unit_tokens[u0]);
          for (Hypothesis& h : hyps) {
            auto t = detail::text_hypothesis(model, std::move(h));
            if (!t) return deliver(i, t.error());
            out.hypotheses.push_back(std::move(t.value()));
          }
        } else {  // sentences: their best translations joined with the text that stood between them
          TextHypothesis joined;
          joined.ended_on_eos = true;
          double score = 0;
          // Alignments: each sentence's rows (its EOS row dropped but the last's) over
          // its own columns of the joined input: a block per sentence, zeros elsewhere.
          struct Block {
            size_t first_column, tokens;
            std::vector<std::vector<float>> rows;
          };
          std::vector<Block> blocks;
          for (size_t u = u0; u < u1; ++u) {
            auto& tokens = unit_tokens[u];
            const size_t first_column = out.input.pieces.size();
            out.input.pieces.insert(out.input.pieces.end(), tokens.pieces.begin(), tokens.pieces.end());
            out.input.ids.insert(out.input.ids.end(), tokens.ids.begin(), tokens.ids.end());
            for (const TextRange& r : tokens.ranges)  // into the whole input
              out.input.ranges.push_back({r.begin + unit_offset[u], r.end + unit_offset[u]});
            auto& hyps = units[u].result->value().hypotheses;
            if (hyps.empty()) {
              joined.ended_on_eos = false;
              continue;
            }
            if (u > u0) joined.text += separators[k][u - u0 - 1];
            if (with_sentences) {
              auto sentence = detail::sentence_translation(model, tokens, unit_offset[u], hyps[0], joined.text.size(), options);
              if (!sentence)
                return deliver(i, detail::input_error(i, sentence.error()));
              out.sentences.push_back(std::move(sentence.value()));
            }
            const bool last = u + 1 == u1;
            auto t = detail::text_hypothesis(model, std::move(hyps[0]));
            if (!t) return deliver(i, t.error());
            // Token scores as the alignment rows: each sentence's EOS dropped but the last's.
            auto& scores = t.value().token_scores;
            if (!last) scores.resize(std::min(scores.size(), t.value().ids.size()));
            joined.token_scores.insert(joined.token_scores.end(), scores.begin(), scores.end());
            joined.text += t.value().text;
            joined.ids.insert(joined.ids.end(), t.value().ids.begin(), t.value().ids.end());
            joined.pieces.insert(joined.pieces.end(), t.value().pieces.begin(), t.value().pieces.end());
            score += t.value().score;
            joined.ended_on_eos = joined.ended_on_eos && t.value().ended_on_eos;
            if (!t.value().alignment.empty())
              blocks.push_back({first_column, t.value().ids.size(), std::move(t.value().alignment)});
          }
          if (!joined.ended_on_eos) joined.token_scores.resize(std::min(joined.token_scores.size(), joined.ids.size()));
          for (size_t b = 0; b < blocks.size(); ++b) {
            auto& rows = blocks[b].rows;
            if (b + 1 < blocks.size() || !joined.ended_on_eos) rows.resize(std::min(rows.size(), blocks[b].tokens));
            for (auto& row : rows) {
              std::vector<float> wide(out.input.pieces.size(), 0.0f);
              std::copy(row.begin(), row.end(), wide.begin() + static_cast<std::ptrdiff_t>(blocks[b].first_column));
              joined.alignment.push_back(std::move(wide));
            }
          }
          joined.score = score / static_cast<double>(u1 - u0);
          out.hypotheses.push_back(std::move(joined));
        }
        if (!out.hypotheses.empty()) totals.generated_tokens += out.hypotheses[0].ids.size();
        deliver(i, std::move(out));
      });
      totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!s) return s;
    }
    return Status::ok();
  });
}

}  // namespace petrel
