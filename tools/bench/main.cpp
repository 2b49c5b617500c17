// petrel-bench: the end-to-end benchmark protocol (bench/README.md): model load,
// encoder, mean decoder step, total and tokens/s for one translation with a fixed
// amount of work (EOS held back), peak RSS, file size; medians after a warm-up.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "convert/convert.h"
#include "petrel/translator.h"

using namespace petrel;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double peak_rss_mb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // Linux reports KiB
}

// Converts in a child process so the conversion's memory does not count in our RSS.
std::string convert_in_child(const std::string& checkpoint, const std::string& dtype) {
  std::string out = "/tmp/petrel-bench-" + std::to_string(getpid()) + "-" + dtype + ".petrel";
  pid_t pid = fork();
  if (pid == 0) {
    try {
      convert::ConvertOptions o;
      o.checkpoint_dir = checkpoint;
      o.output_path = out;
      o.linear_dtype = o.embedding_dtype = convert::parse_dtype(dtype, "--quantize");
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

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("petrel-bench", "(--model FILE | --checkpoint DIR) [options]",
                "Measures one translation the way peers are measured (bench/README.md): batch 1, 32 source\n"
                "tokens, exactly 32 greedy target tokens (EOS held back), medians of --runs after a warm-up.");
  p.flag("model", "FILE", "a .petrel model");
  p.flag("checkpoint", "DIR", "a MarianMT checkpoint, converted first (in a child process)");
  p.flag("quantize", "DTYPE", "with --checkpoint: f32, f16 or int8 (default int8)");
  p.flag("source-ids", "\"ID ...\"", "source token ids (default: 31 ids + EOS)");
  p.flag("target-tokens", "N", "generated tokens per sentence (default 32)");
  p.flag("threads", "N", "intra-op threads (default 1)");
  p.flag("beam", "K", "beam size (default 1)");
  p.flag("batch", "B", "sentences per translation (default 1)");
  p.flag("runs", "N", "measured runs after one warm-up (default 5)");
  p.flag("isa", "PATH", "kernel path (default: $PETREL_ISA or the best)");
  p.toggle("shortlist", "decode over the model file's lexical shortlist");
  p.flag("kv-cache", "TYPE", "f32 (default) or f16: attention keys/values in half precision");
  p.toggle("json", "print one JSON object");
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

    std::string path = p.get("model");
    if (p.has("checkpoint")) path = convert_in_child(p.get("checkpoint"), p.get("quantize", "int8"));
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": cannot stat");

    std::vector<double> load_ms;
    std::shared_ptr<const Model> model;
    for (size_t r = 0; r <= runs; ++r) {  // the first load warms the page cache
      model.reset();
      auto start = std::chrono::steady_clock::now();
      auto loaded = Model::load(path);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (!loaded) throw std::runtime_error(loaded.error().message);
      model = loaded.value();
      if (r > 0) load_ms.push_back(ms);
    }
    const ModelInfo& info = model->info();

    std::vector<int32_t> source;
    if (p.has("source-ids")) {
      source = cli::parse_id_list(p.get("source-ids"), "--source-ids");
    } else {
      for (int32_t i = 0; i < 31; ++i) source.push_back(static_cast<int32_t>((17 + 7919 * i) % (info.vocab_size - 1)));
      std::replace(source.begin(), source.end(), info.eos_id, info.eos_id + 1);
      source.push_back(info.eos_id);
    }
    std::vector<std::vector<int32_t>> batch(batch_size, source);

    TranslatorOptions topts;
    topts.isa = p.get("isa");
    topts.threads = threads;
    auto created = Translator::create(model, topts);
    if (!created) throw std::runtime_error(created.error().message);
    Translator& translator = created.value();
    TranslateOptions options;
    options.beam_size = beam;
    options.max_new_tokens = options.min_new_tokens = target;
    options.use_shortlist = p.has("shortlist");
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";

    std::vector<double> encode_ms, step_ms, total_ms;
    for (size_t r = 0; r <= runs; ++r) {
      auto result = translator.translate(batch, options);
      if (!result) throw std::runtime_error(result.error().message);
      const TranslateTimings& t = translator.last_timings();
      if (r == 0) continue;  // warm-up
      encode_ms.push_back(t.encode_ms);
      step_ms.push_back(t.decode_ms / std::max<size_t>(t.decode_steps, 1));
      total_ms.push_back(t.encode_ms + t.decode_ms);
    }
    const double total = median(total_ms);
    const double tokens_per_s = target * batch_size / (total / 1000.0);
    nlohmann::json j = {
        {"model", path},
        {"isa", translator.isa()},
        {"threads", threads},
        {"beam", beam},
        {"shortlist", options.use_shortlist},
        {"kv_cache", options.kv_cache_f16 ? "f16" : "f32"},
        {"batch", batch_size},
        {"source_tokens", source.size()},
        {"target_tokens", target},
        {"runs", runs},
        {"load_ms", median(load_ms)},
        {"encoder_ms", median(encode_ms)},
        {"step_ms", median(step_ms)},
        {"total_ms", total},
        {"tokens_per_s", tokens_per_s},
        {"sentences_per_s", batch_size / (total / 1000.0)},
        {"peak_rss_mb", peak_rss_mb()},
        {"file_mb", st.st_size / 1048576.0},
    };
    if (p.has("checkpoint")) std::remove(path.c_str());
    if (p.has("json")) {
      // Paths and text given on the command line may hold any bytes: invalid UTF-8 is
      // written as U+FFFD instead of aborting on nlohmann::json's type_error 316.
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }
    std::printf("model          %s (%.1f MiB, %s)\n", path.c_str(), st.st_size / 1048576.0, translator.isa());
    std::printf("protocol       batch %zu, %zu source tokens, %zu target tokens, beam %zu, %zu thread(s), median of %zu%s%s\n",
                batch_size, source.size(), target, beam, threads, runs, options.use_shortlist ? ", shortlist" : "",
                options.kv_cache_f16 ? ", f16 KV cache" : "");
    std::printf("load           %8.2f ms\n", j["load_ms"].get<double>());
    std::printf("encoder        %8.2f ms\n", j["encoder_ms"].get<double>());
    std::printf("decoder step   %8.3f ms\n", j["step_ms"].get<double>());
    std::printf("total          %8.2f ms\n", total);
    std::printf("tokens/s       %8.1f\n", tokens_per_s);
    if (batch_size > 1) std::printf("sentences/s    %8.2f\n", j["sentences_per_s"].get<double>());
    std::printf("peak RSS       %8.1f MB\n", j["peak_rss_mb"].get<double>());
    return 0;
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "petrel-bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "petrel-bench: error: %s\n", e.what());
    return 1;
  }
}
