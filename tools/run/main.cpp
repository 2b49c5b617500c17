// petrel-run: translate text (through the model file's tokenizer) or token ids.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli.h"
#include "petrel/translator.h"

using namespace petrel;

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Any bytes (a model file's strings, a user's text) as valid JSON: invalid UTF-8 is replaced.
std::string json_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void fail(const std::string& message) { std::fprintf(stderr, "petrel-run: error: %s\n", message.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("petrel-run", "MODEL.petrel [--text \"...\"]... [--ids \"12 7 99 0\"]... [options]",
                "Translates with a Petrel model. Inputs: --text (repeatable; tokenized by the model file's\n"
                "tokenizer, EOS appended), --ids (repeatable; used verbatim, no EOS appended), or, when\n"
                "neither is given, one input per line of standard input (text, or ids for models without\n"
                "a tokenizer): `cat file | petrel-run model.petrel` prints one translation per line, in\n"
                "order, an empty line for an empty line. Inputs are translated in batches (packed: no\n"
                "padding is computed). Output hypotheses exclude the start token and the final EOS.");
  p.flag("text", "TEXT", "one input as text (repeatable)", true);
  p.flag("ids", "\"ID ...\"", "one input as space-separated token ids (repeatable)", true);
  p.toggle("tokenize", "show how the inputs tokenize (pieces and ids) instead of translating");
  p.toggle("detokenize", "show the inputs (ids) as text instead of translating");
  p.flag("batch", "N", "standard input: lines translated together (default 16)");
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
  size_t threads = 1, batch_lines = 16;
  std::vector<std::vector<int32_t>> id_inputs;
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
    if (p.has("ids") && p.has("text")) throw cli::UsageError("give inputs with --ids or with --text (not both)");
    if (p.has("tokenize") && p.has("detokenize")) throw cli::UsageError("--tokenize or --detokenize, not both");
    if (p.has("tokenize") && p.has("ids")) throw cli::UsageError("--tokenize takes text inputs, not --ids");
    if (p.has("detokenize") && p.has("text")) throw cli::UsageError("--detokenize takes --ids, not --text");
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
    batch_lines = static_cast<size_t>(p.get_int("batch", 16, 1, 4096));
    options.use_shortlist = p.has("shortlist");
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";
    for (const auto& ids : p.all("ids")) id_inputs.push_back(cli::parse_id_list(ids, "--ids"));
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-run: %s\n", e.what());
    return 2;
  }

  auto start = std::chrono::steady_clock::now();
  auto loaded = Model::load(p.positionals()[0]);
  const double load_ms = ms_since(start);
  if (!loaded) {
    fail(loaded.error().message);
    return 1;
  }
  const Model& model = *loaded.value();
  const bool has_text = model.info().has_text_tokenizer;
  const bool from_stdin = !p.has("ids") && !p.has("text");
  const bool text_inputs = p.has("text") || (from_stdin && has_text && !p.has("detokenize"));
  if (text_inputs && !has_text) {
    fail(p.positionals()[0] + " carries no text tokenizer: give inputs with --ids");
    return 1;
  }
  std::vector<std::string> texts = p.all("text");
  if (from_stdin) {  // one input per line
    std::string line;
    size_t number = 0;
    while (std::getline(std::cin, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (text_inputs) {
        texts.push_back(line);
        continue;
      }
      try {
        id_inputs.push_back(line.find_first_not_of(" \t") == std::string::npos
                                ? std::vector<int32_t>{}
                                : cli::parse_id_list(line, "standard input line " + std::to_string(number)));
      } catch (const cli::UsageError& e) {
        fail(e.what());
        return 1;
      }
    }
  }
  const bool json = p.has("json");
  nlohmann::json results = nlohmann::json::array();
  auto emit = [&](const nlohmann::json& r, const std::string& plain) {
    if (json) results.push_back(r);
    else std::printf("%s\n", plain.c_str());
  };

  if (p.has("tokenize") || p.has("detokenize")) {  // no translation: the tokenizer alone
    const size_t count = p.has("tokenize") ? texts.size() : id_inputs.size();
    for (size_t i = 0; i < count; ++i) {
      if (p.has("tokenize")) {
        auto t = tokenize(model, texts[i]);
        if (!t) return fail("input " + std::to_string(i + 1) + ": " + t.error().message), 1;
        std::string pieces;
        for (const auto& piece : t.value().pieces) pieces += (pieces.empty() ? "" : " ") + piece;
        emit({{"text", texts[i]}, {"pieces", t.value().pieces}, {"ids", t.value().ids}},
             pieces + "\t" + ids_text(t.value().ids));
      } else {
        auto t = decode_text(model, id_inputs[i]);
        if (!t) return fail("input " + std::to_string(i + 1) + ": " + t.error().message), 1;
        emit({{"ids", id_inputs[i]}, {"text", t.value()}}, t.value());
      }
    }
    if (json) std::cout << json_text({{"results", results}}) << "\n";
    return 0;
  }

  TranslatorOptions translator_options;
  translator_options.isa = p.get("isa");
  translator_options.threads = threads;
  auto created = Translator::create(loaded.value(), translator_options);
  if (!created) {
    fail(created.error().message);
    return 1;
  }
  Translator& translator = created.value();
  auto effective = resolve_options(model.info(), options);  // the model's defaults filled in
  if (!effective) {
    fail(effective.error().message);
    return 1;
  }

  // Inputs go in batches (standard input: --batch lines; flags: all at once); an empty
  // input gives an empty output in place.
  const size_t inputs = text_inputs ? texts.size() : id_inputs.size();
  const size_t chunk = from_stdin ? batch_lines : std::max<size_t>(inputs, 1);
  double encode_ms = 0, decode_ms = 0;
  size_t steps = 0, tokens = 0;
  for (size_t first = 0; first < inputs; first += chunk) {
    const size_t last = std::min(inputs, first + chunk);
    std::vector<size_t> which;  // inputs of this batch that are not empty
    for (size_t i = first; i < last; ++i)
      if (text_inputs ? !texts[i].empty() || !from_stdin : !id_inputs[i].empty() || !from_stdin) which.push_back(i);
    std::vector<TextTranslation> translated_texts;
    std::vector<Translation> translated_ids;
    if (!which.empty()) {
      if (text_inputs) {
        std::vector<std::string> batch;
        for (size_t i : which) batch.push_back(texts[i]);
        auto r = translator.translate_text(batch, options);
        if (!r) return fail(r.error().message), 1;
        translated_texts = std::move(r.value());
      } else {
        std::vector<std::vector<int32_t>> batch;
        for (size_t i : which) batch.push_back(id_inputs[i]);
        auto r = translator.translate(batch, options);
        if (!r) return fail(r.error().message), 1;
        translated_ids = std::move(r.value());
      }
      const TranslateTimings& t = translator.last_timings();
      encode_ms += t.encode_ms;
      decode_ms += t.decode_ms;
      steps += t.decode_steps;
      tokens += t.generated_tokens;
    }
    for (size_t i = first, k = 0; i < last; ++i) {
      const bool translated = k < which.size() && which[k] == i;
      nlohmann::json r = {{"hypotheses", nlohmann::json::array()}};
      std::string plain;
      if (text_inputs) {
        r["input_text"] = texts[i];
        if (translated) {
          const TextTranslation& t = translated_texts[k];
          r["input"] = t.input.ids;
          for (size_t h = 0; h < t.hypotheses.size(); ++h) {
            const TextHypothesis& hyp = t.hypotheses[h];
            r["hypotheses"].push_back({{"text", hyp.text}, {"ids", hyp.ids}, {"score", hyp.score}});
            char score[32];
            std::snprintf(score, sizeof score, "%.4f", hyp.score);
            if (from_stdin) plain += (h ? "\n" : "") + hyp.text;
            else plain += std::string(h ? "\n" : "") + texts[i] + " -> " + hyp.text + "\t(score " + score + "; ids " +
                          ids_text(hyp.ids) + ")";
          }
        }
      } else {
        r["input"] = id_inputs[i];
        if (translated) {
          const auto& hyps = translated_ids[k].hypotheses;
          for (size_t h = 0; h < hyps.size(); ++h) {
            nlohmann::json hj = {{"ids", hyps[h].ids}, {"score", hyps[h].score}};
            char score[32];
            std::snprintf(score, sizeof score, "%.4f", hyps[h].score);
            std::string line = ids_text(hyps[h].ids);
            if (has_text) {
              auto text = decode_text(model, hyps[h].ids);
              if (text) {
                hj["text"] = text.value();
                line = text.value() + "\t(score " + score + "; ids " + line + ")";
              }
            } else if (!from_stdin) {
              line += std::string("\t(score ") + score + ")";
            }
            r["hypotheses"].push_back(hj);
            plain += (h ? "\n" : "") + line;
          }
        }
      }
      k += translated;
      emit(r, plain);
    }
    std::fflush(stdout);
  }

  const double tokens_per_s = decode_ms > 0 ? tokens / (decode_ms / 1000.0) : 0;
  if (json) {
    const TranslateOptions& used = effective.value();
    nlohmann::json j;
    j["results"] = results;
    j["isa"] = translator.isa();
    j["threads"] = translator.threads();
    j["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
    j["decoding"] = {{"beam", used.beam_size},
                     {"beam_stop", to_string(used.beam_stop)},
                     {"length_penalty", *used.length_penalty},
                     {"max_new_tokens", used.max_new_tokens},
                     {"min_new_tokens", used.min_new_tokens},
                     {"forced_eos_id", model.info().generation.forced_eos_id}};
    j["timing"] = {{"load_ms", load_ms},
                   {"encode_ms", encode_ms},
                   {"decode_ms", decode_ms},
                   {"decode_steps", steps},
                   {"tokens_per_s", tokens_per_s}};
    std::cout << json_text(j) << "\n";
    return 0;
  }
  std::fprintf(stderr, "load %.1f ms, encode %.1f ms, decode %.1f ms (%zu steps, %.0f tokens/s, %s, %zu thread%s)\n",
               load_ms, encode_ms, decode_ms, steps, tokens_per_s, translator.isa(), translator.threads(),
               translator.threads() == 1 ? "" : "s");
  return 0;
}
