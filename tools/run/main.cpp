// petrel-run: translate token ids (or text, where the model carries a vocabulary).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "petrel/translator.h"

using namespace petrel;

int main(int argc, char** argv) {
  cli::Parser p("petrel-run", "MODEL.petrel (--ids \"12 7 99 0\" | --text \"...\")... [options]",
                "Translates with a Petrel model. Input ids are used verbatim (no EOS is appended);\n"
                "--text tokenizes with the model's vocabulary and appends EOS. Several --ids/--text\n"
                "make one batch (packed: no padding is computed). Output hypotheses exclude the start\n"
                "token and the final EOS.");
  p.flag("ids", "\"ID ...\"", "one input as space-separated token ids (repeatable)", true);
  p.flag("text", "TEXT", "one input as text (repeatable; needs a vocabulary in the model)", true);
  p.flag("beam", "K", "beam size, 1 = greedy (default: the model's num_beams, else 1)");
  p.flag("n-best", "N", "hypotheses to print per input (default 1, at most K)");
  p.flag("max-new-tokens", "L", "generated tokens at most (default: the model's max_length - 1, else 256)");
  p.flag("min-new-tokens", "L", "EOS is not allowed before L tokens (default 0)");
  p.flag("length-penalty", "A", "score = log-probability / length^A (default: the model's, else 1.0)");
  p.flag("beam-stop", "RULE", "heuristic (Hugging Face's default: go on while a live hypothesis could\n"
                              "                              still win) or first-k (stop once K have finished)\n"
                              "                              (default: the model's, else heuristic)");
  p.flag("threads", "T", "intra-op threads (default 1)");
  p.toggle("shortlist", "decode over the model file's lexical shortlist (petrel-convert --shortlist)");
  p.flag("kv-cache", "TYPE", "f32 (default) or f16: attention keys/values in half precision, half the memory");
  p.flag("isa", "PATH", "kernel path: scalar, avx2, avx512, neon, dotprod (default: $PETREL_ISA or the best)");
  p.toggle("json", "print one JSON object (results + timing)");
  TranslateOptions options;
  size_t threads = 1;
  std::vector<std::vector<int32_t>> batch;
  bool text_mode = false;
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
    if (p.has("ids") == p.has("text")) throw cli::UsageError("give inputs with --ids or with --text (not both)");
    if (p.has("beam")) options.beam_size = static_cast<size_t>(p.get_int("beam", 1, 1, 64));
    options.n_best = static_cast<size_t>(p.get_int("n-best", 1, 1, 64));
    if (p.has("beam") && options.n_best > options.beam_size)
      throw cli::UsageError("--n-best " + std::to_string(options.n_best) + " exceeds --beam " +
                            std::to_string(options.beam_size));
    options.max_new_tokens = static_cast<size_t>(p.get_int("max-new-tokens", 0, 1, 1 << 20));
    options.min_new_tokens = static_cast<size_t>(p.get_int("min-new-tokens", 0, 0, 1 << 20));
    if (p.has("length-penalty")) {
      options.length_penalty = p.get_double("length-penalty", 1.0);
      if (!(*options.length_penalty >= 0 && *options.length_penalty <= 10))
        throw cli::UsageError("--length-penalty must be in 0..10");
    }
    const std::string stop = p.get_choice("beam-stop", "default", {"default", "heuristic", "first-k"});
    options.beam_stop = stop == "heuristic" ? BeamStop::kHeuristic
                        : stop == "first-k" ? BeamStop::kFirstK
                                            : BeamStop::kDefault;
    threads = static_cast<size_t>(p.get_int("threads", 1, 1, 256));
    options.use_shortlist = p.has("shortlist");
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";
    for (const auto& ids : p.all("ids")) {
      batch.push_back(cli::parse_id_list(ids, "--ids"));
    }
    text_mode = p.has("text");
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-run: %s\n", e.what());
    return 2;
  }

  auto start = std::chrono::steady_clock::now();
  auto loaded = Model::load(p.positionals()[0]);
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!loaded) {
    std::fprintf(stderr, "petrel-run: error: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const Model& model = *loaded.value();
  for (const auto& text : p.all("text")) {
    auto ids = encode_text(model, text);
    if (!ids) {
      std::fprintf(stderr, "petrel-run: error: --text \"%s\": %s\n", text.c_str(), ids.error().message.c_str());
      return 1;
    }
    batch.push_back(std::move(ids.value()));
  }

  TranslatorOptions translator_options;
  translator_options.isa = p.get("isa");
  translator_options.threads = threads;
  auto created = Translator::create(loaded.value(), translator_options);
  if (!created) {
    std::fprintf(stderr, "petrel-run: error: %s\n", created.error().message.c_str());
    return 1;
  }
  Translator& translator = created.value();
  auto effective = resolve_options(model.info(), options);  // the model's defaults filled in
  if (!effective) {
    std::fprintf(stderr, "petrel-run: error: %s\n", effective.error().message.c_str());
    return 1;
  }
  auto result = translator.translate(batch, options);
  if (!result) {
    std::fprintf(stderr, "petrel-run: error: %s\n", result.error().message.c_str());
    return 1;
  }
  const TranslateTimings& t = translator.last_timings();
  const double tokens_per_s = t.decode_ms > 0 ? t.generated_tokens / (t.decode_ms / 1000.0) : 0;
  auto text_of = [&](const std::vector<int32_t>& ids) {
    auto s = decode_text(model, ids);
    return s ? s.value() : std::string();
  };

  if (p.has("json")) {
    nlohmann::json j;
    j["results"] = nlohmann::json::array();
    for (size_t i = 0; i < batch.size(); ++i) {
      nlohmann::json r = {{"input", batch[i]}, {"hypotheses", nlohmann::json::array()}};
      if (text_mode) r["input_text"] = p.all("text")[i];
      for (const auto& h : result.value()[i].hypotheses) {
        nlohmann::json hj = {{"ids", h.ids}, {"score", h.score}};
        if (!model.info().vocab.empty()) hj["text"] = text_of(h.ids);
        r["hypotheses"].push_back(hj);
      }
      j["results"].push_back(r);
    }
    j["isa"] = translator.isa();
    j["threads"] = translator.threads();
    const TranslateOptions& used = effective.value();
    j["decoding"] = {{"beam", used.beam_size},
                     {"beam_stop", to_string(used.beam_stop)},
                     {"length_penalty", *used.length_penalty},
                     {"max_new_tokens", used.max_new_tokens},
                     {"min_new_tokens", used.min_new_tokens},
                     {"forced_eos_id", model.info().generation.forced_eos_id}};
    j["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
    j["timing"] = {{"load_ms", load_ms},
                   {"encode_ms", t.encode_ms},
                   {"decode_ms", t.decode_ms},
                   {"decode_steps", t.decode_steps},
                   {"tokens_per_s", tokens_per_s}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& hyps = result.value()[i].hypotheses;
    for (size_t k = 0; k < hyps.size(); ++k) {
      std::string ids;
      for (int32_t id : hyps[k].ids) ids += (ids.empty() ? "" : " ") + std::to_string(id);
      std::string prefix = text_mode ? p.all("text")[i] + " -> " : "";
      if (text_mode || !model.info().vocab.empty())
        std::printf("%s%s\t(score %.4f; ids %s)\n", prefix.c_str(), text_of(hyps[k].ids).c_str(), hyps[k].score,
                    ids.c_str());
      else
        std::printf("%s\t(score %.4f)\n", ids.c_str(), hyps[k].score);
    }
  }
  std::fprintf(stderr, "load %.1f ms, encode %.1f ms, decode %.1f ms (%zu steps, %.0f tokens/s, %s, %zu thread%s)\n",
               load_ms, t.encode_ms, t.decode_ms, t.decode_steps, tokens_per_s, translator.isa(), translator.threads(),
               translator.threads() == 1 ? "" : "s");
  return 0;
}
