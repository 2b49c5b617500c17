// petrel-run with a language model: prompts continued one at a time, or --chat.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/chat.h"
#include "run/modes.h"

namespace petrel::run {

// Each input is a prompt, continued one at a time; --chat: a conversation instead.
int run_language_model(const RunRequest& r, RunIo& io) {
  const cli::Parser& p = r.flags;
  const Model& model = *r.model;
  const TranslateOptions& options = r.translate;
  const bool text_inputs = r.text_inputs;
  const size_t threads = r.session.threads;
  const double load_ms = r.load_ms;
  GenerateOptions run = r.generate;
  for (const char* f : {"beam", "n-best", "min-new-tokens", "length-penalty", "beam-stop", "source-lang", "target-lang",
                        "target-prefix", "shortlist", "no-shortlist", "max-length-factor", "no-split",
                        "max-batch-tokens", "max-batch", "window", "workers", "alignment", "alignment-layer",
                        "alignment-head", "draft-shares-encoder"})
    if (p.has(f) && !(std::string(f) == "beam" && p.get("beam") == "1"))
      return fail("--" + std::string(f) + " applies to translation models; " + p.positionals()[0] +
                  " is a language model (decoder-only)"), 2;
  run.max_new_tokens = options.max_new_tokens;
  auto resolved = resolve_generate_options(model, run);
  if (!resolved) return setup_failure(resolved.error());
  if (!*resolved.value().do_sample)  // as transformers warns: these only shape sampling
    for (const char* flag : {"temperature", "top-k", "top-p", "min-p", "seed"})
      if (p.has(flag))
        std::fprintf(stderr, "petrel-run: warning: --%s has no effect: %s decodes greedily unless given --sample\n",
                     flag, p.positionals()[0].c_str());
  auto created = Generator::create(r.model, r.session);
  if (!created) return setup_failure(created.error());
  Generator& generator = created.value();
  if (r.draft)  // speculative decoding's draft model
    if (Status set = generator.set_draft_model(r.draft); !set) return setup_failure(set.error());
  // --prompt-cache FILE: its state first (when it exists; one made with another model file
  // is an error, as llama.cpp's), and this run's prompts' states kept in process within the
  // bytes of one f32 KV cache of the model's positions; each prompt's written back to FILE.
  const std::string prompt_cache = p.get("prompt-cache", "");
  if (!prompt_cache.empty()) {
    const ModelInfo& info = model.info();
    const uint64_t whole = uint64_t{2} * info.decoder_layers * info.max_positions * info.num_kv_heads * info.head_dim * 4 +
                           uint64_t{info.max_positions} * 4 + (uint64_t{1} << 16);
    generator.set_prompt_cache_bytes(static_cast<size_t>(std::min<uint64_t>(whole, SIZE_MAX)));
    if (access(prompt_cache.c_str(), F_OK) == 0)
      if (Status loaded = generator.load_prompt_cache(prompt_cache); !loaded) return setup_failure(loaded.error());
  }
  // After a prompt ran: its state to --prompt-cache's FILE.
  auto save_prompt_cache = [&]() -> bool {
    if (prompt_cache.empty()) return true;
    const Status saved = generator.save_prompt_cache(prompt_cache);
    if (!saved) std::fprintf(stderr, "petrel-run: %s\n", saved.error().message.c_str());
    return static_cast<bool>(saved);
  };
  if (p.has("chat")) {
    run::ChatSettings settings;
    settings.system = p.get("system", "");
    settings.template_flags = r.chat_flags;
    settings.json_lines = io.format.json_lines;
    settings.quiet = io.format.quiet;
    settings.reply_tokens = resolved.value().max_new_tokens;
    settings.prompt_cache = prompt_cache;
    return run::run_chat(generator, run, settings, r.fd);
  }
  run.stream_text = text_inputs;
  if (p.has("stream"))
    run.on_token = [&](const TokenEvent& e) {
      if (text_inputs) std::fwrite(e.text_delta.data(), 1, e.text_delta.size(), stdout);
      else if (!e.final) std::printf("%s%d", e.length > 1 ? " " : "", e.ids[e.length - 1]);
      std::fflush(stdout);
      return true;
    };
  double prefill_ms = 0, generate_ms = 0;
  size_t prompt_tokens = 0, reused_tokens = 0;
  GenerateTimings speculation;  // the counts of speculative decoding, summed
  bool cache_saved = true;
  const auto run_start = std::chrono::steady_clock::now();
  auto add_timings = [&] {
    const GenerateTimings& t = generator.last_timings();
    prefill_ms += t.prefill_ms;
    generate_ms += t.generate_ms;
    prompt_tokens += t.prompt_tokens;
    reused_tokens += t.reused_tokens;
    io.tokens += t.generated_tokens;
    speculation.verifications += t.verifications;
    speculation.drafted_tokens += t.drafted_tokens;
    speculation.accepted_tokens += t.accepted_tokens;
    speculation.draft_model_tokens += t.draft_model_tokens;
    cache_saved = save_prompt_cache() && cache_saved;
  };
  for (; io.next_window(1); io.base += io.window.size()) {
    for (size_t k = 0; k < io.window.size(); ++k) {
      const size_t i = io.base + k;
      Input& in = io.window[k];
      if (RunIo::blank(in)) {
        io.emit({{"index", i}, {"input", nlohmann::json::array()}, {"hypotheses", nlohmann::json::array()}}, "");
        continue;
      }
      if (text_inputs) {
        if (in.error) {
          io.report(i, *in.error);
          continue;
        }
        auto r = generator.generate_text(in.text, run);
        if (!r) {
          io.report(i, (io.from_lines ? io.source_name + " line " + std::to_string(i + 1) + ": " : "") + r.error().message);
          continue;
        }
        add_timings();
        const TextGeneration& g = r.value();
        io.emit({{"index", i},
              {"prompt", in.text},
              {"prompt_tokens", g.prompt_tokens},
              {"reused_tokens", g.reused_tokens},
              {"hypotheses",
               {{{"text", g.text}, {"ids", g.ids}, {"ended_on_eos", g.ended_on_eos}, {"ended_on_stop", g.ended_on_stop}}}}},
             p.has("stream") ? std::string() : g.text);
        continue;
      }
      const std::vector<int32_t> prompt = io.parse_ids(in, i);
      if (in.error) {
        io.report(i, *in.error);
        continue;
      }
      auto r = generator.generate({prompt}, run);
      if (!r) {  // prompts run one per call: "prompt 0" is this input (report names --ids inputs itself)
        std::string message = r.error().message;
        if (message.compare(0, 10, "prompt 0, ") == 0 || message.compare(0, 10, "prompt 0: ") == 0)
          message = io.from_lines ? io.source_name + " line " + std::to_string(i + 1) + message.substr(8)
                               : message.substr(10);
        io.report(i, message);
        continue;
      }
      add_timings();
      const Generation& g = r.value()[0];
      if (p.has("stream")) std::printf("\n");
      io.emit({{"index", i}, {"input", prompt}, {"reused_tokens", g.reused_tokens},
               {"hypotheses", {{{"ids", g.ids}, {"ended_on_eos", g.ended_on_eos}}}}},
           p.has("stream") ? std::string() : ids_text(g.ids));
    }
  }
  io.finish();
  const GenerateOptions& used = resolved.value();
  nlohmann::json summary;
  summary["isa"] = generator.isa();
  summary["threads"] = threads;
  summary["kv_cache"] = used.kv_cache_int8 ? "int8" : options.kv_cache_f16 ? "f16" : "f32";
  summary["generation"] = {{"max_new_tokens", used.max_new_tokens}, {"sample", *used.do_sample},
                           {"temperature", *used.temperature}, {"top_k", *used.top_k}, {"top_p", *used.top_p},
                           {"min_p", *used.min_p}, {"repetition_penalty", *used.repetition_penalty},
                           {"seed", used.seed}, {"ignore_eos", used.ignore_eos},
                           {"eos_ids", model.info().lm.eos_ids}};
  summary["timing"] = {{"load_ms", load_ms},
                       {"prefill_ms", prefill_ms},
                       {"generate_ms", generate_ms},
                       {"prompt_tokens", prompt_tokens},
                       {"reused_tokens", reused_tokens},
                       {"generated_tokens", io.tokens},
                       {"prompt_tokens_per_s", prefill_ms > 0 ? prompt_tokens / (prefill_ms / 1000) : 0},
                       {"tokens_per_s", generate_ms > 0 ? io.tokens / (generate_ms / 1000) : 0},
                       {"run_s", ms_since(run_start) / 1000}};
  if (used.lookup_ngram > 0 || p.has("draft"))
    summary["speculation"] = speculation_json(used.lookup_ngram, p.get("draft", ""), used.max_draft_tokens,
                                              speculation.verifications, speculation.drafted_tokens,
                                              speculation.accepted_tokens, speculation.draft_model_tokens);
  summary["inputs"] = io.base;
  summary["failed"] = io.failed;
  if (!io.print_summary(summary) && !io.format.quiet) {
    std::fprintf(stderr, "load %.1f ms, prompt %zu tokens in %.1f ms, %zu tokens generated in %.1f ms (%.1f tokens/s, %s, %zu thread%s)\n",
                 load_ms, prompt_tokens, prefill_ms, io.tokens, generate_ms, generate_ms > 0 ? io.tokens / (generate_ms / 1000) : 0.0,
                 generator.isa(), threads, threads == 1 ? "" : "s");
  }
  return cache_saved ? io.status() : 1;
}

}  // namespace petrel::run
