// petrel-bench: the end-to-end benchmark protocol (bench/README.md): model load,
// encoder, mean decoder step, total and tokens/s for one translation with a fixed
// amount of work (EOS held back), peak RSS, file size; medians after a warm-up.
// --cold-cache times the decoder steps with the model's weights evicted from every cache
// level before each one (cache_eviction.h), as they run on a device with small caches.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench/cache_eviction.h"
#include "common/cli.h"
#include "convert/convert.h"
#include "model_access.h"
#include "petrel/translator.h"

using namespace petrel;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Wall-clock and this thread's CPU time, in ms from arbitrary origins.
struct Clocks {
  double wall_ms, cpu_ms;
  static Clocks now() {
    timespec cpu{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    const auto wall = std::chrono::steady_clock::now().time_since_epoch();
    return {std::chrono::duration<double, std::milli>(wall).count(), cpu.tv_sec * 1e3 + cpu.tv_nsec / 1e6};
  }
};

double peak_rss_mb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // Linux reports KiB
}

// Converts in a child process so the conversion's memory does not count in our RSS.
std::string convert_in_child(const std::string& checkpoint, const std::string& dtype, const std::string& output_dtype) {
  std::string out = "/tmp/petrel-bench-" + std::to_string(getpid()) + "-" + dtype + ".petrel";
  pid_t pid = fork();
  if (pid == 0) {
    try {
      convert::ConvertOptions o;
      o.checkpoint_dir = checkpoint;
      o.output_path = out;
      o.linear_dtype = o.embedding_dtype = convert::parse_dtype(dtype, "--quantize");
      if (!output_dtype.empty()) o.output_dtype = convert::parse_dtype(output_dtype, "--output-proj");
      convert::convert_checkpoint(o);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "petrel-bench: conversion failed: %s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("conversion of " + checkpoint + " failed");
  return out;
}

// Bytes of weights a decoder step reads: the decoder layers' tensors except the
// cross-attention keys and values (computed once per sentence), the output projection
// (the tied table when tied) and the logits bias. One embedding row per step is left out.
uint64_t step_weight_bytes(const ModelInfo& info) {
  uint64_t bytes = 0;
  for (const TensorInfo& t : info.tensors) {
    const std::string& n = t.name;
    const bool layer = n.rfind("decoder.layers.", 0) == 0 && n.find(".cross_attn.k.") == std::string::npos &&
                       n.find(".cross_attn.v.") == std::string::npos;
    const bool output = info.tied_output ? (n == "embed_tokens" || n == "decoder.embed_tokens") : n == "output_proj";
    if (layer || output || n == "final_logits_bias") bytes += t.bytes;
  }
  return bytes;
}

// One model under test: its file, translator and measurements.
struct Subject {
  explicit Subject(std::string file) : path(std::move(file)) {}
  std::string path;
  uint64_t file_bytes = 0;
  std::shared_ptr<const Model> model;
  std::optional<Translator> translator;
  std::vector<double> load_ms, encode_ms, step_ms, total_ms;
  std::vector<double> lone_step_ms, lone_step_cpu_ms;  // steps 2..N-1 of every run, each alone
  size_t verifications = 0, drafted = 0, accepted = 0;  // speculative decoding, over the measured runs
};

}  // namespace

static int tool_main(int argc, char** argv) {
  cli::Parser p("petrel-bench", "(--model FILE [--model FILE ...] | --checkpoint DIR) [options]",
                "Measures one translation the way peers are measured (bench/README.md): batch 1, 32 source\n"
                "tokens, exactly 32 greedy target tokens (EOS held back), medians of --runs after a warm-up.\n"
                "Several --model files are measured side by side in one process, their runs interleaved\n"
                "(run 1 of each, then run 2 of each, ...), so a noisy machine affects them alike.");
  p.flag("model", "FILE", "a .petrel model (repeatable)", /*repeatable=*/true);
  p.flag("checkpoint", "DIR", "a Hugging Face checkpoint petrel-convert reads (Marian, M2M100/NLLB, mBART), converted first (in a child process)");
  p.flag("quantize", "DTYPE", "with --checkpoint: f32, f16, int8 or int4 (default int8)");
  p.flag("output-proj", "DTYPE", "with --checkpoint: the output projection's dtype (default: --quantize)");
  p.flag("source-ids", "\"ID ...\"", "source token ids (default: 31 ids + EOS)");
  p.flag("target-tokens", "N", "generated tokens per sentence (default 32)");
  p.flag("threads", "N", "intra-op threads (default 1)");
  p.flag("beam", "K", "beam size (default 1)");
  p.flag("batch", "B", "sentences per translation (default 1)");
  p.flag("runs", "N", "measured runs after one warm-up (default 5)");
  p.flag("isa", "PATH", "kernel path (default: $PETREL_ISA or the best)");
  p.toggle("shortlist", "decode over the model file's lexical shortlist");
  p.flag("kv-cache", "TYPE", "f32 (default) or f16: attention keys/values in half precision");
  p.toggle("alignment", "compute and carry word alignments (the model's alignment layer, head 0)");
  p.flag("dram-gbs", "GB/S", "main-memory read bandwidth (petrel_probe): report each decoder step's floor,\n"
                             "                              the weight bytes it reads / this bandwidth");
  p.toggle("cold-cache", "evict the model file from every cache level before each decoder step (x86:\n"
                         "                              CLFLUSHOPT/CLFLUSH over its bytes) and leave the eviction out of the\n"
                         "                              step's time, so steps read their weights from main memory");
  p.flag("lookup", "N", "speculative decoding (greedy): prompt lookup over the source and output, n-grams N..1;\n"
                        "                              a step's time is then the decode time per generated token");
  p.flag("draft", "FILE", "speculative decoding (greedy): a draft model with the models' vocabulary");
  p.flag("max-draft", "K", "--lookup / --draft: the most tokens a draft proposes (default 16)");
  p.toggle("json", "print one JSON object (an array under \"models\" for several models)");
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.has("model") == p.has("checkpoint")) throw cli::UsageError("give --model FILE or --checkpoint DIR");
    const size_t target = static_cast<size_t>(p.get_int("target-tokens", 32, 1, 4096));
    const size_t threads = static_cast<size_t>(p.get_int("threads", 1, 1, 256));
    const size_t beam = static_cast<size_t>(p.get_int("beam", 1, 1, 64));
    const size_t batch_size = static_cast<size_t>(p.get_int("batch", 1, 1, 1024));
    const size_t runs = static_cast<size_t>(p.get_int("runs", 5, 1, 1000));
    const double dram_gbs = p.get_double("dram-gbs", 0.0);
    if (p.has("dram-gbs") && !(dram_gbs > 0)) throw cli::UsageError("--dram-gbs must be a positive number");
    const bool cold_cache = p.has("cold-cache");
    if (cold_cache) {
      const std::string why_not = bench::cache_eviction_unavailable();
      if (!why_not.empty()) throw cli::UsageError("--cold-cache is not available: " + why_not);
    }

    std::vector<Subject> subjects;
    // The conversion of --checkpoint, removed however the run ends (an error included).
    struct Converted {
      std::string path;
      ~Converted() {
        if (!path.empty()) std::remove(path.c_str());
      }
    } converted;
    if (p.has("checkpoint")) {
      converted.path = convert_in_child(p.get("checkpoint"), p.get("quantize", "int8"), p.get("output-proj", ""));
      subjects.emplace_back(converted.path);
    } else {
      for (const char* flag : {"quantize", "output-proj"})
        if (p.has(flag)) throw cli::UsageError(std::string("--") + flag + " applies to --checkpoint (a --model is already converted)");
      for (const std::string& path : p.all("model")) subjects.emplace_back(path);
    }
    for (Subject& s : subjects) {
      struct stat st {};
      if (::stat(s.path.c_str(), &st) != 0) throw std::runtime_error(s.path + ": cannot stat");
      s.file_bytes = static_cast<uint64_t>(st.st_size);
    }

    // Loads, interleaved; the first of each warms the page cache.
    for (size_t r = 0; r <= runs; ++r) {
      for (Subject& s : subjects) {
        s.model.reset();
        auto start = std::chrono::steady_clock::now();
        auto loaded = Model::load(s.path);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (!loaded) throw std::runtime_error(loaded.error().message);
        s.model = loaded.value();
        if (r > 0) s.load_ms.push_back(ms);
      }
    }
    const ModelInfo& first = subjects[0].model->info();
    for (const Subject& s : subjects)
      if (s.model->info().vocab_size != first.vocab_size || s.model->info().eos_id != first.eos_id)
        throw std::runtime_error(s.path + ": a different vocabulary from " + subjects[0].path +
                                 " (side-by-side runs translate the same input)");

    std::vector<int32_t> source;
    if (p.has("source-ids")) {
      source = cli::parse_id_list(p.get("source-ids"), "--source-ids");
    } else {
      for (int32_t i = 0; i < 31; ++i) source.push_back(static_cast<int32_t>((17 + 7919 * i) % (first.vocab_size - 1)));
      std::replace(source.begin(), source.end(), first.eos_id, first.eos_id + 1);
      source.push_back(first.eos_id);
    }
    std::vector<std::vector<int32_t>> batch(batch_size, source);

    TranslatorOptions topts;
    topts.isa = p.get("isa");
    topts.threads = threads;
    for (Subject& s : subjects) {
      auto created = Translator::create(s.model, topts);
      if (!created) throw std::runtime_error(created.error().message);
      s.translator.emplace(std::move(created.value()));
    }
    TranslateOptions options;
    options.beam_size = beam;
    options.max_new_tokens = options.min_new_tokens = target;
    options.use_shortlist = p.has("shortlist");  // an explicit choice: benchmarks say what they measure
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";
    options.alignment = p.has("alignment");
    options.lookup_ngram = static_cast<size_t>(p.get_int("lookup", 0, 1, static_cast<long long>(kMaxLookupNgram)));
    options.max_draft_tokens = static_cast<size_t>(p.get_int("max-draft", 0, 1, static_cast<long long>(kMaxDraftTokens)));
    if (p.has("draft")) {
      auto draft = Model::load(p.get("draft"));
      if (!draft) throw std::runtime_error(draft.error().message);
      for (Subject& s : subjects)
        if (Status set = s.translator->set_draft_model(draft.value()); !set) throw std::runtime_error(set.error().message);
    }

    for (size_t r = 0; r <= runs; ++r) {
      for (Subject& s : subjects) {
        // Each step after the first is also timed alone, wall and thread CPU time (robust
        // to preemption on a shared host), between the step callbacks: from the end of the
        // callback after step k to the start of the one after step k + 1 (its first event:
        // with a batch, one event per input follows). Cold caches: the file is evicted
        // before the translation (the encoder and the first step start cold) and in that
        // first event; the eviction is timed and taken out of the decode time too.
        TranslateOptions run_options = options;
        double evict_ms = 0;
        size_t last_length = 0;
        std::optional<Clocks> step_start;
        const detail::ModelAccess::Bytes file = detail::ModelAccess::file_bytes(*s.model);
        run_options.on_token = [&](const TokenEvent& e) {
          if (e.final || e.length == last_length) return true;
          last_length = e.length;
          const Clocks now = Clocks::now();
          if (step_start && r > 0) {
            s.lone_step_ms.push_back(now.wall_ms - step_start->wall_ms);
            s.lone_step_cpu_ms.push_back(now.cpu_ms - step_start->cpu_ms);
          }
          if (cold_cache) bench::evict_from_caches(file.data, file.size);
          step_start = Clocks::now();
          evict_ms += step_start->wall_ms - now.wall_ms;
          return true;
        };
        if (cold_cache) bench::evict_from_caches(file.data, file.size);
        auto result = s.translator->translate(batch, run_options);
        if (!result) throw std::runtime_error(result.error().message);
        const TranslateTimings& t = s.translator->last_timings();
        if (r == 0) continue;  // warm-up
        const double decode_ms = t.decode_ms - evict_ms;
        s.encode_ms.push_back(t.encode_ms);
        s.step_ms.push_back(decode_ms / std::max<size_t>(t.decode_steps, 1));
        s.total_ms.push_back(t.encode_ms + decode_ms);
        s.verifications += t.verifications;
        s.drafted += t.drafted_tokens;
        s.accepted += t.accepted_tokens;
      }
    }

    std::vector<nlohmann::json> reports;
    for (const Subject& s : subjects) {
      const double total = median(s.total_ms), step = median(s.step_ms);
      const uint64_t step_bytes = step_weight_bytes(s.model->info());
      nlohmann::json j = {
          {"model", s.path},
          {"isa", s.translator->isa()},
          {"threads", threads},
          {"beam", beam},
          {"shortlist", *options.use_shortlist},
          {"kv_cache", options.kv_cache_f16 ? "f16" : "f32"},
          {"alignment", options.alignment},
          {"cold_cache", cold_cache},
          {"batch", batch_size},
          {"source_tokens", source.size()},
          {"target_tokens", target},
          {"runs", runs},
          {"load_ms", median(s.load_ms)},
          {"encoder_ms", median(s.encode_ms)},
          {"step_ms", step},
          {"step_ms_min", *std::min_element(s.step_ms.begin(), s.step_ms.end())},
          {"step_ms_max", *std::max_element(s.step_ms.begin(), s.step_ms.end())},
          {"lone_step_ms", median(s.lone_step_ms)},
          {"lone_step_cpu_ms", median(s.lone_step_cpu_ms)},
          {"total_ms", total},
          {"tokens_per_s", target * batch_size / (total / 1000.0)},
          {"sentences_per_s", batch_size / (total / 1000.0)},
          {"peak_rss_mb", peak_rss_mb()},
          {"file_mb", s.file_bytes / 1048576.0},
          {"step_weight_mb", step_bytes / 1e6},
      };
      if (options.lookup_ngram > 0 || p.has("draft")) {
        j["speculation"] = {{"lookup_ngram", options.lookup_ngram},
                            {"draft_model", p.get("draft", "")},
                            {"verifications", s.verifications},
                            {"acceptance_rate", s.drafted > 0 ? static_cast<double>(s.accepted) / s.drafted : 0.0},
                            {"tokens_per_verification",
                             s.verifications > 0 ? static_cast<double>(s.accepted + s.verifications) / s.verifications : 0.0}};
      }
      if (dram_gbs > 0) {
        j["step_floor_ms"] = step_bytes / (dram_gbs * 1e6);
        j["step_over_floor"] = step / (step_bytes / (dram_gbs * 1e6));
        j["lone_step_over_floor"] = median(s.lone_step_ms) / (step_bytes / (dram_gbs * 1e6));
      }
      reports.push_back(j);
    }
    if (p.has("json")) {
      // Paths and text given on the command line may hold any bytes: invalid UTF-8 is
      // written as U+FFFD instead of aborting on nlohmann::json's type_error 316.
      const nlohmann::json out = reports.size() == 1 ? reports[0] : nlohmann::json{{"models", reports}};
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }
    std::printf("protocol       batch %zu, %zu source tokens, %zu target tokens, beam %zu, %zu thread(s), median of %zu%s%s%s%s%s\n",
                batch_size, source.size(), target, beam, threads, runs, *options.use_shortlist ? ", shortlist" : "",
                options.kv_cache_f16 ? ", f16 KV cache" : "", options.alignment ? ", alignments" : "",
                subjects.size() > 1 ? ", runs interleaved" : "",
                cold_cache ? ", cold caches (the model evicted before each step)" : "");
    if (subjects.size() > 1) std::printf("peak RSS       %8.1f MB (the process, all models)\n", peak_rss_mb());
    for (size_t i = 0; i < reports.size(); ++i) {
      const nlohmann::json& j = reports[i];
      std::printf("%smodel          %s (%.1f MiB, %s)\n", i ? "\n" : "", subjects[i].path.c_str(), j["file_mb"].get<double>(),
                  j["isa"].get<std::string>().c_str());
      std::printf("load           %8.2f ms\n", j["load_ms"].get<double>());
      std::printf("encoder        %8.2f ms\n", j["encoder_ms"].get<double>());
      std::printf("decoder step   %8.3f ms (%.3f-%.3f)", j["step_ms"].get<double>(), j["step_ms_min"].get<double>(),
                  j["step_ms_max"].get<double>());
      if (i > 0) std::printf(", %.2fx the first model's", j["step_ms"].get<double>() / reports[0]["step_ms"].get<double>());
      std::printf("\n");
      if (!subjects[i].lone_step_ms.empty())
        std::printf("steps alone    %8.3f ms, %.3f ms CPU (medians over steps 2..N-1 of every run)\n",
                    j["lone_step_ms"].get<double>(), j["lone_step_cpu_ms"].get<double>());
      std::printf("step weights   %8.1f MB", j["step_weight_mb"].get<double>());
      if (dram_gbs > 0)
        std::printf(" (floor %.3f ms at %.1f GB/s; step = %.2fx the floor, alone %.2fx)", j["step_floor_ms"].get<double>(),
                    dram_gbs, j["step_over_floor"].get<double>(), j["lone_step_over_floor"].get<double>());
      std::printf("\n");
      if (j.contains("speculation"))
        std::printf("speculation    %.2f acceptance, %.2f tokens per verification (a step above: per token)\n",
                    j["speculation"]["acceptance_rate"].get<double>(),
                    j["speculation"]["tokens_per_verification"].get<double>());
      std::printf("total          %8.2f ms\n", j["total_ms"].get<double>());
      std::printf("tokens/s       %8.1f\n", j["tokens_per_s"].get<double>());
      if (batch_size > 1) std::printf("sentences/s    %8.2f\n", j["sentences_per_s"].get<double>());
      if (subjects.size() == 1) std::printf("peak RSS       %8.1f MB\n", j["peak_rss_mb"].get<double>());
    }
    return 0;
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petrel-bench: error: %s\n", e.what());
    return 1;
  }
}

int main(int argc, char** argv) { return petrel::cli::run_tool("petrel-bench", tool_main, argc, argv); }
