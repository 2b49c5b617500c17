// petrel-convert: a Hugging Face translation checkpoint (Marian, M2M100/NLLB, mBART) or a Marian C++
// model directory (Firefox Translations') -> one .petrel model file.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <new>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "convert/convert.h"
#include "convert/model_writer.h"
#include "convert/convert_error.h"

using namespace petrel;

static std::string format_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

static std::string shape_text(const std::vector<uint64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "x" : "") + std::to_string(s[i]);
  return t;
}

static int tool_main(int argc, char** argv) try {
  cli::Parser p("petrel-convert", "CHECKPOINT_DIR -o MODEL.petrel [options]",
                "Converts a Hugging Face translation checkpoint -- MarianMT (opus-mt), M2M100, NLLB-200 or\n"
                "mBART-50; config.json's model_type (marian, m2m_100, mbart) decides the structure -- or a\n"
                "decoder-only language model (gemma3_text, the text tower of gemma3, llama, qwen2, qwen3) into one\n"
                "Petrel model file. CHECKPOINT_DIR holds config.json [+ generation_config.json] and\n"
                "model.safetensors or pytorch_model.bin (or shards with their *.index.json), and for text its\n"
                "tokenizer files: Marian's source.spm, target.spm, vocab.json [+ target_vocab.json]; M2M100's\n"
                "sentencepiece.bpe.model and vocab.json; NLLB's and mBART-50's sentencepiece.bpe.model; each\n"
                "[+ tokenizer_config.json]. Tensors are read, quantized and written one block at a time. Constant scales\n"
                "(sqrt(d_model) embedding scale, 1/sqrt(head_dim) attention scale, the tied output's\n"
                "1/sqrt(d_model)) are folded into the stored tables.\n"
                "A directory without config.json holding a Marian C++ model as Firefox Translations ships them\n"
                "(model*.bin or model*.npz with its model.yml; vocab*.spm, or srcvocab*.spm + trgvocab*.spm;\n"
                "optionally lex*.bin or lex*.s2t) converts too: transformer or SSRU decoders, float32 or\n"
                "intgemm8 weights (int8 values taken as stored, their alphas as static activation scales),\n"
                "the shortlist stored and used as Firefox does.");
  p.flag("output", "FILE", "output model file (also -o)");
  p.flag("quantize", "DTYPE", "linear weights of the layers: f32, f16, int8 or int4 (default int8)");
  p.flag("embeddings", "DTYPE", "embedding tables: f32, f16, int8 or int4 (default int8)");
  p.flag("output-proj", "DTYPE", "the output projection: f32, f16, int8 or int4 (default: when tied to the\n"
                                 "                              embedding table, --embeddings; else --quantize). A tied\n"
                                 "                              table is one matrix: its embedding gathers read this dtype");
  p.flag("embed-scale", "X", "embedding scale to fold (default: sqrt(d_model) if scale_embedding)");
  p.flag("positions", "KIND", "auto, sinusoidal-concatenated, sinusoidal-interleaved, learned, none (default auto)");
  p.flag("norm", "PLACEMENT", "pre or post: layer-norm placement, when it differs from what the model type implies");
  p.flag("shortlist", "LEX", "store a lexical shortlist: Marian's lex.s2t text format, \"TARGET SOURCE PROB\"\n"
                             "                              per line (needs vocab.json), or its binary lex.*.s2t.bin;\n"
                             "                              petrel-run --shortlist uses it");
  p.flag("shortlist-first", "N", "shortlist: the first N target ids (the most frequent) always (default 100)");
  p.flag("shortlist-best", "N", "shortlist: the N most likely targets per source token (default 100)");
  p.toggle("json", "print the summary as JSON on stdout");
  p.toggle("quiet", "no progress or summary");
  // -o is the one short option; rewrite it to --output.
  std::vector<char*> args(argv, argv + argc);
  std::string output_flag = "--output";
  for (auto& a : args)
    if (std::string(a) == "-o") a = output_flag.data();
  if (!p.parse(static_cast<int>(args.size()), args.data())) {
    std::cout << p.help();
    return 0;
  }
  if (p.positionals().size() != 1) throw cli::UsageError("expected one checkpoint directory (see --help)");
  if (!p.has("output")) throw cli::UsageError("missing -o MODEL.petrel");

  convert::ConvertOptions o;
  o.checkpoint_dir = p.positionals()[0];
  o.output_path = p.get("output");
  try {  // a flag value the converter's parsers refuse is a usage error too (exit 2)
    o.linear_dtype = convert::parse_dtype(p.get("quantize", "int8"), "--quantize");
    o.embedding_dtype = convert::parse_dtype(p.get("embeddings", "int8"), "--embeddings");
    if (p.has("output-proj")) o.output_dtype = convert::parse_dtype(p.get("output-proj"), "--output-proj");
    o.positions = convert::parse_position_choice(p.get("positions", "auto"));
    if (p.has("norm")) o.norm = convert::parse_norm(p.get("norm"));
  } catch (const convert::ConvertError& e) {
    throw cli::UsageError(e.what());
  }
  if (p.has("embed-scale") && p.get("embed-scale") != "auto") {
    o.embed_scale = p.get_double("embed-scale", 1.0);
    if (!convert::valid_embed_scale(*o.embed_scale))
      throw cli::UsageError("--embed-scale must be in [1e-6, 1e6], got " + p.get("embed-scale"));
  }
  o.shortlist_path = p.get("shortlist", "");
  o.shortlist_first = static_cast<uint32_t>(p.get_int("shortlist-first", 100, 0, 1 << 24));
  o.shortlist_best = static_cast<uint32_t>(p.get_int("shortlist-best", 100, 1, 1 << 16));
  if (!p.has("shortlist") && (p.has("shortlist-first") || p.has("shortlist-best")))
    throw cli::UsageError("--shortlist-first/--shortlist-best need --shortlist LEX");
  const bool quiet = p.has("quiet"), json = p.has("json");
  const bool terminal = isatty(STDERR_FILENO);
  if (!quiet && terminal) {
    o.progress = [](const std::string& name, size_t i, size_t n) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", i, n, name.c_str());
      std::fflush(stderr);
    };
  }
  convert::remove_partial_outputs_on_signals();  // Ctrl-C leaves no MODEL.<pid>-<n>.partial
  convert::ConvertReport r = convert::convert_checkpoint(o);
  if (!quiet && terminal) std::fprintf(stderr, "\r\033[K");

  if (json) {
    nlohmann::json j;
    j["output"] = o.output_path;
    j["parameters"] = r.parameters;
    j["file_bytes"] = r.file_size;
    for (const auto& t : r.tensors)
      j["tensors"].push_back({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape},
                              {"bytes", t.bytes}, {"max_abs_error", t.max_abs_error},
                              {"snr_db", std::isinf(t.snr_db) ? nlohmann::json(nullptr) : nlohmann::json(t.snr_db)}});
    for (const auto& f : r.folds)
      j["folds"].push_back({{"what", f.what}, {"value", f.value}, {"targets", f.targets}, {"note", f.note}});
    j["notes"] = r.notes;
    // Paths and text given on the command line may hold any bytes: invalid UTF-8 is
    // written as U+FFFD instead of aborting on nlohmann::json's type_error 316.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (!quiet) {
    std::printf("%-48s %-5s %-12s %10s %12s %9s\n", "tensor", "dtype", "shape", "bytes", "max|err|", "SNR dB");
    for (const auto& t : r.tensors) {
      if (t.shape.size() < 2) continue;  // biases and norms are stored exactly (f32)
      char snr[16];
      if (std::isinf(t.snr_db)) std::snprintf(snr, sizeof snr, "exact");
      else std::snprintf(snr, sizeof snr, "%.1f", t.snr_db);
      std::printf("%-48s %-5s %-12s %10s %12.3g %9s\n", t.name.c_str(), to_string(t.dtype),
                  shape_text(t.shape).c_str(), format_bytes(t.bytes).c_str(), t.max_abs_error, snr);
    }
    std::printf("\nfolded at conversion:\n");
    for (const auto& f : r.folds)
      std::printf("  %-16s %-12.6g %s (%zu tensors)\n", f.what.c_str(), f.value, f.note.c_str(), f.targets.size());
    for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
    std::printf("\nwrote %s: %llu parameters, %s\n", o.output_path.c_str(),
                static_cast<unsigned long long>(r.parameters), format_bytes(r.file_size).c_str());
  }
  return 0;
} catch (const cli::UsageError& e) {
  std::fprintf(stderr, "petrel-convert: %s\n", e.what());
  return 2;
} catch (const std::bad_alloc&) {
  // A checkpoint's sizes are checked against the model file's limits, but a model within
  // them may still need more memory than the machine gives (or the process may have).
  std::fprintf(stderr, "\npetrel-convert: error: out of memory: the conversion needs more memory than is available "
                       "(the checkpoint's sizes, or a memory limit on this process)\n");
  return 1;
} catch (const std::length_error& e) {
  std::fprintf(stderr, "\npetrel-convert: error: a size is larger than a container can hold (%s)\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "\npetrel-convert: error: %s\n", e.what());
  return 1;
} catch (...) {
  std::fprintf(stderr, "\npetrel-convert: error: an unknown exception\n");
  return 1;
}

int main(int argc, char** argv) { return petrel::cli::exit_status("petrel-convert", tool_main(argc, argv)); }
