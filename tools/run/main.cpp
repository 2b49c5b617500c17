// petrel-run: translate text (through the model file's tokenizer) or token ids.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli.h"
#include "petrel/batch_translator.h"
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

std::string score_text(double score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", score);
  return buf;
}

// Any bytes (a model file's strings, a user's text) as valid JSON: invalid UTF-8 is replaced.
std::string json_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void fail(const std::string& message) { std::fprintf(stderr, "petrel-run: error: %s\n", message.c_str()); }

nlohmann::json hypotheses_json(const std::vector<TextHypothesis>& hyps) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hyps) out.push_back({{"text", h.text}, {"ids", h.ids}, {"score", h.score}});
  return out;
}
nlohmann::json hypotheses_json(const std::vector<Hypothesis>& hyps, const Model& model) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : hyps) {
    nlohmann::json j = {{"ids", h.ids}, {"score", h.score}};
    if (model.info().has_text_tokenizer)
      if (auto text = decode_text(model, h.ids)) j["text"] = text.value();
    out.push_back(j);
  }
  return out;
}

// A line on standard error that says how far a long run has got (terminals only).
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t tokens) {
    if (!enabled_) return;
    const double seconds = ms_since(start_) / 1000;
    if (done < total_ && seconds - last_ < 0.1) return;
    last_ = seconds;
    const double rate = seconds > 0 ? done / seconds : 0;
    std::fprintf(stderr, "\r\033[K%zu/%zu inputs, %.1f inputs/s, %.0f tokens/s, ETA %.0f s", done, total_, rate,
                 seconds > 0 ? tokens / seconds : 0.0, rate > 0 ? (total_ - done) / rate : 0.0);
    if (done == total_) std::fprintf(stderr, "\n");
  }

 private:
  size_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("petrel-run", "MODEL.petrel [--text \"...\"]... [--ids \"12 7 99 0\"]... [--input FILE] [options]",
                "Translates with a Petrel model. Inputs: --text (repeatable; tokenized by the model file's\n"
                "tokenizer, EOS appended) and --ids (repeatable; used verbatim) are translated as one batch.\n"
                "--input FILE (or standard input when no input is given): one input per line (text, or ids\n"
                "for models without a tokenizer), sorted by length and packed into batches, printed in\n"
                "input order as soon as ready; a paragraph is split into sentences and reassembled\n"
                "(--no-split to keep it whole), an empty line gives an empty line:\n"
                "    cat file | petrel-run model.petrel > translated\n"
                "Output hypotheses exclude the start token and the final EOS.");
  p.flag("text", "TEXT", "one input as text (repeatable)", true);
  p.flag("ids", "\"ID ...\"", "one input as space-separated token ids (repeatable)", true);
  p.flag("input", "FILE", "inputs, one per line ('-': standard input, the default)");
  p.toggle("no-split", "--input: translate each line whole, without splitting it into sentences");
  p.flag("max-batch-tokens", "N", "--input: source tokens per batch (default 1024)");
  p.flag("max-batch", "N", "--input: inputs per batch (default 8; more is faster and takes more memory)");
  p.flag("workers", "W", "--input: translator sessions on their own threads sharing the model (default 1)");
  p.toggle("stream", "print each translation as it is produced (text inputs, one at a time)");
  p.toggle("tokenize", "show how the inputs tokenize (pieces and ids) instead of translating");
  p.toggle("detokenize", "show the inputs (ids) as text instead of translating");
  p.flag("beam", "K", "beam size, 1 = greedy (default: the model's num_beams, else 1)");
  p.flag("n-best", "N", "hypotheses to print per input (default 1, at most K)");
  p.flag("max-new-tokens", "L", "generated tokens at most (default: the model's max_length - 1, else 256)");
  p.flag("min-new-tokens", "L", "EOS is not allowed before L tokens (default 0)");
  p.flag("length-penalty", "A", "score = log-probability / length^A (default: the model's, else 1.0)");
  p.flag("beam-stop", "RULE", "heuristic (Hugging Face's default: go on while a live hypothesis could\n"
                              "                              still win) or first-k (stop once K have finished)\n"
                              "                              (default: the model's, else heuristic)");
  p.flag("source-lang", "CODE", "multilingual models: the input text's language (eng_Latn, __en__, en_XX;\n"
                                "                              default: the model's; petrel-inspect lists the codes)");
  p.flag("target-lang", "CODE", "multilingual models: the output's language, its token forced first\n"
                                "                              (default: the model's forced target language, if any)");
  p.flag("target-prefix", "\"ID ...\"", "token ids every output starts with (after --target-lang's), forced;\n"
                                        "                              part of the output ids; without --target-lang it\n"
                                        "                              replaces the model's forced target language");
  p.flag("threads", "T", "intra-op threads per session (default 1)");
  p.toggle("shortlist", "decode over the model file's lexical shortlist (petrel-convert --shortlist)");
  p.flag("kv-cache", "TYPE", "f32 (default) or f16: attention keys/values in half precision, half the memory");
  p.flag("isa", "PATH", "kernel path: scalar, avx2, avx512, neon, dotprod (default: $PETREL_ISA or the best)");
  p.toggle("json", "print one JSON object (results + timing)");
  p.toggle("json-lines", "print one JSON object per input as it is ready, then one with the totals");
  p.toggle("quiet", "no timing or progress on standard error");
  TranslateOptions options;
  BatchOptions batching;
  size_t threads = 1, workers = 1;
  std::vector<std::vector<int32_t>> id_inputs;
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
    if (p.has("ids") + p.has("text") + p.has("input") > 1)
      throw cli::UsageError("give inputs with one of --ids, --text or --input");
    if (p.has("tokenize") && p.has("detokenize")) throw cli::UsageError("--tokenize or --detokenize, not both");
    if (p.has("tokenize") && p.has("ids")) throw cli::UsageError("--tokenize takes text inputs, not --ids");
    if (p.has("detokenize") && p.has("text")) throw cli::UsageError("--detokenize takes --ids, not --text");
    if (p.has("json") && p.has("json-lines")) throw cli::UsageError("--json or --json-lines, not both");
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
    workers = static_cast<size_t>(p.get_int("workers", 1, 1, 64));
    batching.max_batch_tokens = static_cast<size_t>(p.get_int("max-batch-tokens", 1024, 1, 1 << 24));
    batching.max_batch_size = static_cast<size_t>(p.get_int("max-batch", 8, 1, 65536));
    batching.split_sentences = !p.has("no-split");
    options.use_shortlist = p.has("shortlist");
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";
    for (const auto& ids : p.all("ids")) id_inputs.push_back(cli::parse_id_list(ids, "--ids"));
    options.source_language = p.get("source-lang", "");
    options.target_language = p.get("target-lang", "");
    if (p.has("target-prefix")) options.target_prefix = cli::parse_id_list(p.get("target-prefix", ""), "--target-prefix");
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
  const bool from_lines = !p.has("ids") && !p.has("text");  // --input FILE, or standard input
  const bool text_inputs = p.has("text") || (from_lines && has_text && !p.has("detokenize"));
  if (text_inputs && !has_text) {
    fail(p.positionals()[0] + " carries no text tokenizer: give inputs with --ids");
    return 1;
  }
  std::vector<std::string> texts = p.all("text");
  if (from_lines) {  // one input per line
    std::ifstream file;
    const std::string input = p.get("input", "-");
    if (input != "-") {
      file.open(input);
      if (!file) return fail(input + ": cannot open"), 1;
    }
    std::istream& in = input == "-" ? std::cin : file;
    std::string line;
    size_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (text_inputs) {
        texts.push_back(line);
        continue;
      }
      try {
        id_inputs.push_back(line.find_first_not_of(" \t") == std::string::npos
                                ? std::vector<int32_t>{}
                                : cli::parse_id_list(line, (input == "-" ? "standard input" : input) + " line " +
                                                               std::to_string(number)));
      } catch (const cli::UsageError& e) {
        fail(e.what());
        return 1;
      }
    }
  }
  const bool json = p.has("json"), json_lines = p.has("json-lines");
  const bool quiet = p.has("quiet");
  nlohmann::json results = nlohmann::json::array();
  auto emit = [&](nlohmann::json r, const std::string& plain) {
    if (json) results.push_back(std::move(r));
    else if (json_lines) std::cout << json_text(r) << "\n";
    else std::printf("%s\n", plain.c_str());
  };

  if (p.has("tokenize") || p.has("detokenize")) {  // no translation: the tokenizer alone
    const size_t count = p.has("tokenize") ? texts.size() : id_inputs.size();
    for (size_t i = 0; i < count; ++i) {
      if (p.has("tokenize")) {
        auto t = tokenize(model, texts[i], options.source_language);
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
  auto effective = resolve_options(model, options);  // the model's defaults filled in
  if (!effective) {
    fail(effective.error().message);
    return 1;
  }
  double encode_ms = 0, decode_ms = 0, run_seconds = 0;
  size_t steps = 0, tokens = 0;
  std::string isa;
  size_t sessions = 1, failed = 0;
  const size_t inputs = text_inputs ? texts.size() : id_inputs.size();

  if (from_lines && !p.has("stream")) {  // many inputs: sorted, packed, in order as ready
    auto batch = BatchTranslator::create(loaded.value(), translator_options, workers);
    if (!batch) return fail(batch.error().message), 1;
    isa = batch.value().isa();
    sessions = batch.value().workers();
    Progress progress(inputs, !quiet && isatty(STDERR_FILENO) && !json);
    size_t done = 0;
    auto deliver_error = [&](size_t i, const Error& e) {
      ++failed;
      std::fprintf(stderr, "%spetrel-run: %s\n", !quiet && isatty(STDERR_FILENO) ? "\r\033[K" : "",
                   e.message.c_str());
      emit({{"index", i}, {"error", e.message}}, "");
    };
    Status s;
    if (text_inputs) {
      s = batch.value().translate_text(texts, options, batching, [&](size_t i, Result<TextTranslation>&& r) {
        if (!r) {
          deliver_error(i, r.error());
        } else {
          const auto& hyps = r.value().hypotheses;
          std::string plain;
          for (size_t h = 0; h < hyps.size(); ++h) plain += (h ? "\n" : "") + hyps[h].text;
          if (!hyps.empty()) tokens += hyps[0].ids.size();
          emit({{"index", i}, {"input_text", texts[i]}, {"input", r.value().input.ids},
                {"hypotheses", hypotheses_json(hyps)}},
               plain);
        }
        std::fflush(stdout);
        progress.update(++done, tokens);
      });
    } else {
      s = batch.value().translate(id_inputs, options, batching, [&](size_t i, Result<Translation>&& r) {
        if (!r) {
          deliver_error(i, r.error());
        } else {
          const auto& hyps = r.value().hypotheses;
          std::string plain;
          for (size_t h = 0; h < hyps.size(); ++h) plain += (h ? "\n" : "") + ids_text(hyps[h].ids);
          if (!hyps.empty()) tokens += hyps[0].ids.size();
          emit({{"index", i}, {"input", id_inputs[i]}, {"hypotheses", hypotheses_json(hyps, model)}}, plain);
        }
        std::fflush(stdout);
        progress.update(++done, tokens);
      });
    }
    if (!s) return fail(s.error().message), 1;
    run_seconds = batch.value().last_totals().seconds;
  } else {  // --text / --ids: one batch; --stream: one input at a time, printed as produced
    auto created = Translator::create(loaded.value(), translator_options);
    if (!created) return fail(created.error().message), 1;
    Translator& translator = created.value();
    isa = translator.isa();
    auto add_timings = [&] {
      const TranslateTimings& t = translator.last_timings();
      encode_ms += t.encode_ms;
      decode_ms += t.decode_ms;
      steps += t.decode_steps;
      tokens += t.generated_tokens;
    };
    if (p.has("stream")) {
      if (!text_inputs) return fail("--stream prints text: give text inputs"), 1;
      TranslateOptions streaming = options;
      streaming.stream_text = true;
      streaming.on_token = [&](const TokenEvent& e) {
        if (e.final) return true;
        if (e.text_restarted) std::printf("\r\033[K%.*s", static_cast<int>(e.text.size()), e.text.data());
        else std::printf("%.*s", static_cast<int>(e.text_delta.size()), e.text_delta.data());
        std::fflush(stdout);
        return true;
      };
      for (size_t i = 0; i < texts.size(); ++i) {
        auto r = translator.translate_text({texts[i]}, streaming);
        if (!r) return fail("input " + std::to_string(i + 1) + ": " + r.error().message), 1;
        std::printf("\n");
        add_timings();
      }
    } else {
      Result<std::vector<TextTranslation>> text_results = std::vector<TextTranslation>{};
      Result<std::vector<Translation>> id_results = std::vector<Translation>{};
      if (text_inputs) text_results = translator.translate_text(texts, options);
      else id_results = translator.translate(id_inputs, options);
      if (!text_results) return fail(text_results.error().message), 1;
      if (!id_results) return fail(id_results.error().message), 1;
      add_timings();
      for (size_t i = 0; i < inputs; ++i) {
        std::string plain;
        if (text_inputs) {
          const TextTranslation& t = text_results.value()[i];
          for (size_t h = 0; h < t.hypotheses.size(); ++h)
            plain += std::string(h ? "\n" : "") + texts[i] + " -> " + t.hypotheses[h].text + "\t(score " +
                     score_text(t.hypotheses[h].score) + "; ids " + ids_text(t.hypotheses[h].ids) + ")";
          emit({{"input_text", texts[i]}, {"input", t.input.ids}, {"hypotheses", hypotheses_json(t.hypotheses)}},
               plain);
        } else {
          const auto& hyps = id_results.value()[i].hypotheses;
          for (size_t h = 0; h < hyps.size(); ++h) {
            std::string line = ids_text(hyps[h].ids) + "\t(score " + score_text(hyps[h].score) + ")";
            if (has_text)
              if (auto text = decode_text(model, hyps[h].ids))
                line = text.value() + "\t(score " + score_text(hyps[h].score) + "; ids " + ids_text(hyps[h].ids) + ")";
            plain += (h ? "\n" : "") + line;
          }
          emit({{"input", id_inputs[i]}, {"hypotheses", hypotheses_json(hyps, model)}}, plain);
        }
      }
    }
  }

  const double tokens_per_s = decode_ms > 0 ? tokens / (decode_ms / 1000.0) : run_seconds > 0 ? tokens / run_seconds : 0;
  const TranslateOptions& used = effective.value();
  nlohmann::json summary;
  summary["isa"] = isa;
  summary["threads"] = threads;
  summary["workers"] = sessions;
  summary["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
  summary["decoding"] = {{"beam", used.beam_size},
                         {"beam_stop", to_string(used.beam_stop)},
                         {"length_penalty", *used.length_penalty},
                         {"max_new_tokens", used.max_new_tokens},
                         {"min_new_tokens", used.min_new_tokens},
                         {"forced_eos_id", model.info().generation.forced_eos_id},
                         {"target_prefix", used.target_prefix}};
  summary["timing"] = {{"load_ms", load_ms},     {"encode_ms", encode_ms},       {"decode_ms", decode_ms},
                       {"decode_steps", steps},  {"tokens_per_s", tokens_per_s}, {"run_s", run_seconds}};
  summary["inputs"] = inputs;
  summary["failed"] = failed;
  if (json) {
    summary["results"] = results;
    std::cout << json_text(summary) << "\n";
  } else if (json_lines) {
    std::cout << json_text({{"summary", summary}}) << "\n";
  } else if (!quiet) {
    if (run_seconds > 0)
      std::fprintf(stderr, "load %.1f ms, %zu inputs in %.2f s (%.1f inputs/s, %.0f tokens/s, %s, %zu worker%s x %zu thread%s)\n",
                   load_ms, inputs, run_seconds, inputs / run_seconds, tokens_per_s, isa.c_str(), sessions,
                   sessions == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
    else
      std::fprintf(stderr, "load %.1f ms, encode %.1f ms, decode %.1f ms (%zu steps, %.0f tokens/s, %s, %zu thread%s)\n",
                   load_ms, encode_ms, decode_ms, steps, tokens_per_s, isa.c_str(), threads, threads == 1 ? "" : "s");
  }
  return failed == 0 ? 0 : 1;
}
