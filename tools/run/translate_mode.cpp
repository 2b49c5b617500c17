// petrel-run with a translation model: lines in sorted, packed batches (BatchTranslator), or
// the command line's inputs as one batch (through BatchTranslator too when they are HTML or
// split into sentences), or --stream one input at a time.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run/modes.h"

namespace petrel::run {
namespace {

std::string score_text(double score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", score);
  return buf;
}

nlohmann::json hypotheses_json(const std::vector<TextHypothesis>& hyps, std::optional<float> hard_threshold) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hyps) {
    nlohmann::json j = {{"text", h.text}, {"ids", h.ids}, {"score", score_json(h.score)}};
    if (!h.alignment.empty()) j["alignment"] = alignment_json(h.alignment, hard_threshold);
    out.push_back(j);
  }
  return out;
}
nlohmann::json hypotheses_json(const std::vector<Hypothesis>& hyps, const Model& model,
                               std::optional<float> hard_threshold) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hyps) {
    nlohmann::json j = {{"ids", h.ids}, {"score", score_json(h.score)}};
    if (model.info().has_text_tokenizer)
      if (auto text = decode_text(model, h.ids)) j["text"] = text.value();
    if (!h.alignment.empty()) j["alignment"] = alignment_json(h.alignment, hard_threshold);
    out.push_back(j);
  }
  return out;
}

// --html / --quality-scores / --ssplit-mode: the result's sentences (and the markup they
// point into, and their scores) beside its hypotheses.
void add_sentence_view(nlohmann::json& j, const TextTranslation& t, const TranslateOptions& options) {
  if (options.html) j["source"] = t.source_html;
  j["sentences"] = sentences_json(t);
  if (options.quality_scores) j["quality"] = quality_json(t);
}

}  // namespace

Result<TextTranslators> create_text_translators(const RunRequest& r) {
  auto first = BatchTranslator::create(r.model, r.session, r.workers);
  if (!first) return first.error();
  if (r.draft)  // speculative decoding's draft model (the first model's)
    if (Status set = first.value().set_draft_model(r.draft, r.flags.has("draft-shares-encoder")); !set) return set.error();
  TextTranslators out{std::move(first.value()), std::nullopt};
  if (r.pivot) {
    auto second = BatchTranslator::create(r.pivot, r.session, r.workers);
    if (!second) return second.error();
    out.pivot.emplace(std::move(second.value()));
  }
  return out;
}

int run_translation(const RunRequest& r, RunIo& io) {
  const cli::Parser& p = r.flags;
  const Model& model = *r.model;
  const TranslateOptions& options = r.translate;
  const BatchOptions& batching = r.batching;
  const bool text_inputs = r.text_inputs, has_text = model.info().has_text_tokenizer;
  const size_t threads = r.session.threads;
  const double load_ms = r.load_ms;
  const bool sentence_view = r.sentence_view;
  const std::optional<float> hard_threshold = r.alignment_threshold;
  auto effective = resolve_options(model, options);  // the model's defaults filled in
  if (!effective) return setup_failure(effective.error());
  double encode_ms = 0, decode_ms = 0, run_seconds = 0;
  size_t steps = 0;
  size_t verifications = 0, drafted = 0, accepted = 0;  // speculative decoding
  std::string isa;
  size_t sessions = 1;

  // Lines: windows sorted, packed, printed in order as ready; the command line's texts too when
  // they are HTML, split into sentences or translated through a pivot (BatchTranslator does
  // all three).
  const bool batched = (io.from_lines || sentence_view || r.pivot) && !p.has("stream");
  if (batched) {
    auto batch = create_text_translators(r);
    if (!batch) return setup_failure(batch.error());
    isa = batch.value().model.isa();
    sessions = batch.value().model.workers();
    const auto run_start = std::chrono::steady_clock::now();
    for (; io.next_window(batching.window); io.base += io.window.size()) {
      auto deliver = [&](size_t k, auto&& r, auto&& describe) {
        const size_t i = io.base + k;
        Input& in = io.window[k];
        if (in.error) return io.report(i, *in.error);
        if (!r) return io.report(i, io.as_line(r.error().message, k));
        describe(i, in, r.value());
      };
      Status s;
      if (text_inputs) {
        std::vector<std::string> texts;
        for (const Input& in : io.window) texts.push_back(in.error ? std::string() : in.text);
        s = batch.value().translate_text(texts, options, batching, [&](size_t k, Result<TextTranslation>&& r) {
          deliver(k, r, [&](size_t i, const Input& in, const TextTranslation& t) {
            const auto& hyps = t.hypotheses;
            if (!hyps.empty()) io.tokens += hyps[0].ids.size();
            nlohmann::json j = {{"index", i},
                                {"input_text", in.text},
                                {"input", t.input.ids},
                                {"hypotheses", hypotheses_json(hyps, hard_threshold)}};
            if (sentence_view) add_sentence_view(j, t, options);
            io.emit(std::move(j), hyps.empty() ? std::string() : hyps[0].text);
          });
        });
      } else {
        std::vector<std::vector<int32_t>> ids;
        for (size_t k = 0; k < io.window.size(); ++k) ids.push_back(io.parse_ids(io.window[k], io.base + k));
        s = batch.value().model.translate(ids, options, batching, [&](size_t k, Result<Translation>&& r) {
          deliver(k, r, [&](size_t i, const Input&, const Translation& t) {
            const auto& hyps = t.hypotheses;
            if (!hyps.empty()) io.tokens += hyps[0].ids.size();
            io.emit({{"index", i}, {"input", ids[k]}, {"hypotheses", hypotheses_json(hyps, model, hard_threshold)}},
                 hyps.empty() ? std::string() : ids_text(hyps[0].ids));
          });
        });
      }
      if (!s) return fail(s.error().message), 1;
      const BatchTotals totals = batch.value().model.last_totals();
      verifications += totals.verifications;
      drafted += totals.drafted_tokens;
      accepted += totals.accepted_tokens;
    }
    run_seconds = ms_since(run_start) / 1000;
  } else {  // --text / --ids: one batch; --stream: one input at a time, printed as produced
    auto created = Translator::create(r.model, r.session);
    if (!created) return setup_failure(created.error());
    Translator& translator = created.value();
    if (r.draft)
      if (Status set = translator.set_draft_model(r.draft, p.has("draft-shares-encoder")); !set) return setup_failure(set.error());
    isa = translator.isa();
    auto add_timings = [&] {
      const TranslateTimings& t = translator.last_timings();
      encode_ms += t.encode_ms;
      decode_ms += t.decode_ms;
      steps += t.decode_steps;
      io.tokens += t.generated_tokens;
      verifications += t.verifications;
      drafted += t.drafted_tokens;
      accepted += t.accepted_tokens;
    };
    if (p.has("stream")) {
      // On a terminal the text grows in place, redrawn when a beam changes its mind and
      // once more for the final best hypothesis; into a pipe or a file, which cannot be
      // redrawn, each input's final text when it is done (one line per input, as produced).
      const bool redraw = isatty(STDOUT_FILENO) != 0;
      std::string shown;
      TranslateOptions streaming = options;
      streaming.stream_text = true;
      streaming.on_token = [&](const TokenEvent& e) {
        if (!redraw && !e.final) return true;
        if (e.text.compare(0, shown.size(), shown) == 0) {
          std::printf("%.*s", static_cast<int>(e.text.size() - shown.size()), e.text.data() + shown.size());
        } else {
          std::printf("\r\033[K%.*s", static_cast<int>(e.text.size()), e.text.data());
        }
        shown.assign(e.text);
        std::fflush(stdout);
        return true;
      };
      for (; io.next_window(1); io.base += io.window.size()) {
        Input& in = io.window[0];
        if (in.error) {
          io.report(io.base, *in.error);
          continue;
        }
        shown.clear();
        if (!RunIo::blank(in)) {
          auto r = translator.translate_text({in.text}, streaming);
          if (!r) {
            io.report(io.base, io.as_line(r.error().message, 0));  // its newline ends what was printed of it
            continue;
          }
          add_timings();
        }
        std::printf("\n");
        std::fflush(stdout);
        io.progress.update(++io.done, io.tokens);
      }
    } else {
      io.next_window(0);  // the command line's inputs
      auto describe_text = [&](size_t i, const TextTranslation& t) {
        std::string plain;
        for (size_t h = 0; h < t.hypotheses.size(); ++h)
          plain += std::string(h ? "\n" : "") + io.window[i].text + " -> " + t.hypotheses[h].text + "\t(score " +
                   score_text(t.hypotheses[h].score) + "; ids " + ids_text(t.hypotheses[h].ids) + ")";
        io.emit({{"input_text", io.window[i].text},
                 {"input", t.input.ids},
                 {"hypotheses", hypotheses_json(t.hypotheses, hard_threshold)}},
                plain);
      };
      std::vector<std::vector<int32_t>> ids;
      for (size_t i = 0; i < io.window.size(); ++i) ids.push_back(io.parse_ids(io.window[i], i));
      auto describe_ids = [&](size_t i, const Translation& t) {
        std::string plain;
        for (size_t h = 0; h < t.hypotheses.size(); ++h) {
          const Hypothesis& hyp = t.hypotheses[h];
          std::string line = ids_text(hyp.ids) + "\t(score " + score_text(hyp.score) + ")";
          if (has_text)
            if (auto text = decode_text(model, hyp.ids))
              line = text.value() + "\t(score " + score_text(hyp.score) + "; ids " + ids_text(hyp.ids) + ")";
          plain += (h ? "\n" : "") + line;
        }
        io.emit({{"input", ids[i]}, {"hypotheses", hypotheses_json(t.hypotheses, model, hard_threshold)}}, plain);
      };
      // One batch; when it fails, each input alone, so one bad input does not take the others with it.
      auto batch_then_alone = [&](const auto& inputs, auto translate, auto describe) {
        auto all = translate(inputs);
        if (all) add_timings();
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (all) {
            describe(i, all.value()[i]);
            continue;
          }
          auto one = translate(std::decay_t<decltype(inputs)>{inputs[i]});
          if (!one) {
            io.report(i, io.renumber(one.error().message, 0, i));
            continue;
          }
          add_timings();
          describe(i, one.value()[0]);
        }
      };
      if (text_inputs) {
        std::vector<std::string> texts;
        for (const Input& in : io.window) texts.push_back(in.text);
        batch_then_alone(texts, [&](const std::vector<std::string>& t) { return translator.translate_text(t, options); },
                         describe_text);
      } else {
        batch_then_alone(ids, [&](const std::vector<std::vector<int32_t>>& t) { return translator.translate(t, options); },
                         describe_ids);
      }
    }
  }
  io.finish();

  const size_t inputs = io.base + (batched || io.from_lines ? 0 : io.window.size());  // windows counted as done
  const double tokens_per_s = decode_ms > 0 ? io.tokens / (decode_ms / 1000.0) : run_seconds > 0 ? io.tokens / run_seconds : 0;
  const TranslateOptions& used = effective.value();
  nlohmann::json summary;
  if (r.pivot) summary["pivot"] = p.get("pivot");
  summary["isa"] = isa;
  summary["threads"] = threads;
  summary["workers"] = sessions;
  summary["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
  summary["activation_scales"] = to_string(r.session.activation_scales);
  summary["decoding"] = {{"beam", used.beam_size},
                         {"beam_stop", to_string(used.beam_stop)},
                         {"length_penalty", *used.length_penalty},
                         {"max_new_tokens", used.max_new_tokens},
                         {"max_length_factor", used.max_length_factor},
                         {"shortlist", used.use_shortlist.value_or(false)},
                         {"min_new_tokens", used.min_new_tokens},
                         {"forced_eos_id", model.info().generation.forced_eos_id},
                         {"target_prefix", used.target_prefix}};
  summary["timing"] = {{"load_ms", load_ms},     {"encode_ms", encode_ms},       {"decode_ms", decode_ms},
                       {"decode_steps", steps},  {"tokens_per_s", tokens_per_s}, {"run_s", run_seconds}};
  if (used.lookup_ngram > 0 || r.draft)
    summary["speculation"] =
        speculation_json(used.lookup_ngram, p.get("draft", ""), used.max_draft_tokens, verifications, drafted, accepted);
  summary["inputs"] = inputs;
  summary["failed"] = io.failed;
  if (!io.print_summary(summary) && !io.format.quiet) {
    if (run_seconds > 0)
      std::fprintf(stderr, "load %.1f ms, %zu inputs in %.2f s (%.1f inputs/s, %.0f tokens/s, %s, %zu worker%s x %zu thread%s)\n",
                   load_ms, inputs, run_seconds, inputs / run_seconds, tokens_per_s, isa.c_str(), sessions,
                   sessions == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
    else
      std::fprintf(stderr, "load %.1f ms, encode %.1f ms, decode %.1f ms (%zu steps, %.0f tokens/s, %s, %zu thread%s)\n",
                   load_ms, encode_ms, decode_ms, steps, tokens_per_s, isa.c_str(), threads, threads == 1 ? "" : "s");
  }
  return io.status();
}

}  // namespace petrel::run
