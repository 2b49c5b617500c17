// petrel-run: translate text (through the model file's tokenizer) or token ids.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli.h"
#include "petrel/batch_translator.h"
#include "petrel/generator.h"
#include "petrel/translator.h"
#include "run/chat.h"
#include "run/line_reader.h"

using namespace petrel;
using petrel::run::Input;
using petrel::run::LineReader;

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

// Reports an error from setting up the run (resolving the options against the model,
// creating the session) and returns the exit status: the options come from the flags, so
// a value the model or this CPU refuses (an unknown --isa, a --target-lang the model does
// not have, --max-new-tokens past its positions) is a usage error, 2, as a malformed flag
// is; out of memory or threads, 1.
int setup_failure(const Error& e) {
  fail(e.message);
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kUnsupported ? 2 : 1;
}

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

// A line on standard error that says how far a long run has got (terminals only). The
// total is unknown while lines are still arriving.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t tokens) {
    if (!enabled_) return;
    const double seconds = ms_since(start_) / 1000;
    if (seconds - last_ < 0.1) return;
    last_ = seconds;
    std::fprintf(stderr, "\r\033[K%zu inputs, %.1f inputs/s, %.0f tokens/s", done, seconds > 0 ? done / seconds : 0.0,
                 seconds > 0 ? tokens / seconds : 0.0);
  }
  void clear_line() const {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1;
};

// Whether an error message begins by naming `input` ("input 3 has ...", not "input 31").
bool names_input(const std::string& message, const std::string& input) {
  return message.compare(0, input.size(), input) == 0 &&
         (message.size() == input.size() || !std::isdigit(static_cast<unsigned char>(message[input.size()])));
}

}  // namespace

static int tool_main(int argc, char** argv) {
  cli::Parser p("petrel-run", "MODEL.petrel [--text \"...\"]... [--ids \"12 7 99 0\"]... [--input FILE] [options]",
                "Translates with a Petrel model. Inputs: --text (repeatable; tokenized by the model file's\n"
                "tokenizer, EOS appended) and --ids (repeatable; used verbatim) are translated as one batch.\n"
                "--input FILE (or standard input when no input is given): one input per line (text, or ids\n"
                "for models without a tokenizer), read a window at a time (memory stays bounded whatever\n"
                "the input's size), sorted by length and packed into batches, each result printed and\n"
                "flushed as soon as it and every line before it are done: a program can write a line and\n"
                "read its translation (petrel-run as a coprocess). A paragraph is split into sentences and\n"
                "reassembled (--no-split to keep it whole). Every input gives one output line (one JSON\n"
                "object with --json-lines); a blank line gives a blank line; an input that fails gives its\n"
                "error on standard error (and a blank line, or an object with \"error\") and the run goes\n"
                "on, exiting with status 1 at the end:\n"
                "    cat file | petrel-run model.petrel > translated\n"
                "Output hypotheses exclude the start token and the final EOS.\n"
                "A language model (decoder-only: Gemma 3, Llama, Qwen) continues each input instead: text\n"
                "(--prompt, or lines) when it was converted with its tokenizer.json, else ids (--ids, or\n"
                "lines of ids); greedy, or sampled (--sample, --temperature, --top-k, --top-p, --min-p,\n"
                "--repetition-penalty, --seed; defaults from its generation_config.json). The output is the\n"
                "generated text (special tokens left out; --json adds the ids, a final EOS included) or ids;\n"
                "--stream prints it as it comes. --chat holds a conversation on standard input, one message\n"
                "per line, through the model's chat template, each reply streamed; the KV cache is kept\n"
                "between turns, so a turn reads only its own tokens:\n"
                "    petrel-run gemma-3-270m.petrel --prompt \"The capital of France is\" --max-new-tokens 20\n"
                "    petrel-run gemma-3-270m.petrel --chat --system \"Answer briefly.\"");
  p.flag("text", "TEXT", "one input as text (repeatable)", true);
  p.flag("ids", "\"ID ...\"", "one input as space-separated token ids (repeatable)", true);
  p.flag("prompt", "TEXT", "language models: a text to continue (repeatable)", true);
  p.toggle("chat", "language models: a conversation, one user message per line of standard input");
  p.flag("system", "TEXT", "--chat: the system message");
  p.flag("template-flag", "NAME=true|false", "--chat: a boolean the chat template reads, e.g. enable_thinking=false\n"
                                              "                              for Qwen3 (repeatable)", true);
  p.flag("stop", "TEXT", "language models: stop when the output text contains TEXT, which it then ends\n"
                         "                              before (repeatable, at most 16)", true);
  p.flag("input", "FILE", "inputs, one per line ('-': standard input, the default)");
  p.toggle("no-split", "--input: translate each line whole, without splitting it into sentences");
  p.flag("max-batch-tokens", "N", "--input: source tokens per batch (default 1024)");
  p.flag("max-batch", "N", "--input: inputs per batch (default 8; more is faster and takes more memory)");
  p.flag("window", "N", "--input: lines read and sorted at a time (default 8 x --max-batch)");
  p.flag("workers", "W", "--input: translator sessions on their own threads sharing the model (default 1)");
  p.toggle("stream", "print each translation as it is produced (text inputs, one at a time; into a pipe, each when done)");
  p.toggle("tokenize", "show how the inputs tokenize (pieces and ids) instead of translating");
  p.toggle("detokenize", "show the inputs (ids) as text instead of translating");
  p.flag("beam", "K", "beam size, 1 = greedy (default: the model's num_beams, else 1)");
  p.flag("n-best", "N", "hypotheses per input (default 1, at most K); with --input only with --json or\n"
                        "                              --json-lines (an input's hypotheses are one object)");
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
  p.toggle("shortlist", "decode over the model file's lexical shortlist (petrel-convert --shortlist; a Marian\n"
                        "                              model's is used by default, as Firefox does)");
  p.toggle("no-shortlist", "decode over the whole vocabulary even when the model uses its shortlist by default");
  p.flag("kv-cache", "TYPE", "f32 (default) or f16: attention keys/values in half precision, half the memory");
  p.flag("isa", "PATH", "kernel path: scalar, avx2, avxvnni, avx512, neon, dotprod, i8mm, simd128 (default: $PETREL_ISA or the best)");
  p.flag("activation-scales", "HOW", "int8 layers' input scales: dynamic (default: per row, at run time) or file\n"
                                     "                              (the model's static scales: a Marian model's alphas)");
  p.flag("max-length-factor", "X", "each sentence generates at most X times its source tokens (default: the\n"
                                   "                              model's; Marian models 2); --max-new-tokens wins");
  p.toggle("json", "print one JSON object (results + timing) at the end (it holds every result: for long\n"
                   "                              inputs use --json-lines)");
  p.toggle("json-lines", "print one JSON object per input as it is ready, then one with the totals");
  p.toggle("quiet", "no timing or progress on standard error");
  // Language models (decoder-only: Gemma 3, Llama, Qwen): each input is a prompt to continue.
  p.toggle("sample", "language models: sample (default: the model's generation_config.json, else greedy)");
  p.toggle("greedy", "language models: the most likely token at each step, even if the model samples by default");
  p.flag("temperature", "T", "language models: sampling temperature > 0 (default: the model's, else 1)");
  p.flag("top-k", "K", "language models: sample among the K most likely tokens, 0 = all (default: the model's)");
  p.flag("top-p", "P", "language models: sample among the most likely tokens holding mass P, in (0, 1]");
  p.flag("min-p", "P", "language models: drop tokens below P x the most likely one's probability, in [0, 1]");
  p.flag("repetition-penalty", "R", "language models: divide (multiply if negative) the logits of every token\n"
                                    "                              seen so far by R > 0 (default: the model's, else 1)");
  p.flag("seed", "S", "language models: the sampler's seed (default 0; the same seed gives the same tokens on every CPU)");
  p.toggle("ignore-eos", "language models: generate --max-new-tokens tokens, past any EOS (benchmarks)");
  GenerateOptions lm_options;
  std::vector<std::pair<std::string, bool>> chat_flags;  // --template-flag
  TranslateOptions options;
  BatchOptions batching;
  size_t threads = 1, workers = 1;
  std::string activation_scales = "dynamic";
  std::vector<Input> given;  // --text / --ids
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
    if (p.has("ids") + p.has("text") + p.has("prompt") + p.has("input") + p.has("chat") > 1)
      throw cli::UsageError("give inputs with one of --ids, --text, --prompt, --input or --chat");
    for (const char* f : {"system", "template-flag"})
      if (p.has(f) && !p.has("chat")) throw cli::UsageError("--" + std::string(f) + " applies with --chat");
    for (const std::string& flag : p.all("template-flag")) {
      const size_t eq = flag.find('=');
      const std::string value = eq == std::string::npos ? "" : flag.substr(eq + 1);
      if (eq == 0 || (value != "true" && value != "false"))
        throw cli::UsageError("--template-flag '" + flag + "': expected NAME=true or NAME=false");
      chat_flags.emplace_back(flag.substr(0, eq), value == "true");
    }
    if (p.has("chat"))
      for (const char* f : {"stream", "json", "tokenize", "detokenize"})
        if (p.has(f))
          throw cli::UsageError("--" + std::string(f) + " does not apply with --chat (replies are streamed; "
                                "--json-lines gives one object per reply)");
    // Options that do not apply to the mode asked for are refused, naming both.
    const std::string given_mode = p.has("text") ? "--text" : p.has("ids") ? "--ids" : p.has("prompt") ? "--prompt" : "";
    const std::string other_mode = p.has("tokenize") ? "--tokenize" : p.has("detokenize") ? "--detokenize"
                                   : p.has("stream") ? "--stream" : "";
    auto refuse = [&](std::initializer_list<const char*> flags, const std::string& mode, const std::string& why) {
      for (const char* f : flags)
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with " + mode + why);
    };
    if (p.has("tokenize") && p.has("detokenize")) throw cli::UsageError("--tokenize or --detokenize, not both");
    if (p.has("tokenize") || p.has("detokenize"))
      refuse({"stream"}, p.has("tokenize") ? "--tokenize" : "--detokenize", " (it shows tokens, it does not translate)");
    if (p.has("tokenize") && p.has("ids")) throw cli::UsageError("--tokenize takes text inputs, not --ids");
    if (p.has("detokenize") && p.has("text")) throw cli::UsageError("--detokenize takes --ids, not --text");
    if (p.has("json") && p.has("json-lines")) throw cli::UsageError("--json or --json-lines, not both");
    if (p.has("tokenize") || p.has("detokenize"))
      refuse({"beam", "n-best", "max-new-tokens", "min-new-tokens", "length-penalty", "beam-stop", "target-lang",
              "target-prefix", "threads", "shortlist", "no-shortlist", "kv-cache", "isa", "activation-scales", "max-length-factor"},
             other_mode, " (it shows tokens, it does not translate)");
    if (p.has("detokenize") || p.has("ids")) refuse({"source-lang"}, p.has("ids") ? "--ids" : "--detokenize", " (no text is read)");
    const char* batch_flags[] = {"no-split", "max-batch-tokens", "max-batch", "window", "workers"};
    for (const char* f : batch_flags) {
      if (!p.has(f)) continue;
      if (!given_mode.empty()) throw cli::UsageError("--" + std::string(f) + " does not apply with " + given_mode +
                                                     " (it batches lines of --input / standard input)");
      if (!other_mode.empty())
        throw cli::UsageError("--" + std::string(f) + " does not apply with " + other_mode +
                              (other_mode == "--stream" ? " (one input at a time)" : " (nothing is translated)"));
    }
    if (p.has("stream") && (p.has("json") || p.has("json-lines")))
      throw cli::UsageError("--stream prints text as it is produced; --" +
                            std::string(p.has("json") ? "json" : "json-lines") + " does not apply with it");
    if (p.has("beam")) options.beam_size = static_cast<size_t>(p.get_int("beam", 1, 1, 64));
    options.n_best = static_cast<size_t>(p.get_int("n-best", 1, 1, 64));
    if (p.has("beam") && options.n_best > options.beam_size)
      throw cli::UsageError("--n-best " + std::to_string(options.n_best) + " exceeds --beam " +
                            std::to_string(options.beam_size));
    if (options.n_best > 1 && p.has("stream"))
      throw cli::UsageError("--n-best does not apply with --stream (it prints the best hypothesis as it grows)");
    if (options.n_best > 1 && given_mode.empty() && !p.has("json") && !p.has("json-lines"))
      throw cli::UsageError("--n-best with --input / standard input needs --json or --json-lines "
                            "(plain output is one line per input)");
    options.max_new_tokens = static_cast<size_t>(p.get_int("max-new-tokens", 0, 1, 1 << 20));
    options.min_new_tokens = static_cast<size_t>(p.get_int("min-new-tokens", 0, 0, 1 << 20));
    if (p.has("max-new-tokens") && options.min_new_tokens > options.max_new_tokens)
      throw cli::UsageError("--min-new-tokens " + std::to_string(options.min_new_tokens) + " is more than --max-new-tokens " +
                            std::to_string(options.max_new_tokens));
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
    batching.window = static_cast<size_t>(p.get_int("window", 8 * static_cast<long long>(batching.max_batch_size), 1, 1 << 20));
    batching.split_sentences = !p.has("no-split");
    if (p.has("shortlist") && p.has("no-shortlist")) throw cli::UsageError("--shortlist or --no-shortlist, not both");
    if (p.has("shortlist")) options.use_shortlist = true;
    if (p.has("no-shortlist")) options.use_shortlist = false;
    options.kv_cache_f16 = p.get_choice("kv-cache", "f32", {"f32", "f16"}) == "f16";
    activation_scales = p.get_choice("activation-scales", "dynamic", {"dynamic", "file"});
    if (p.has("max-length-factor")) {
      const std::string text = p.get("max-length-factor");
      char* end = nullptr;
      options.max_length_factor = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(options.max_length_factor > 0 && options.max_length_factor <= 1000))
        throw cli::UsageError("--max-length-factor: '" + text + "' is not a number in (0, 1000]");
    }
    for (const auto& ids : p.all("ids")) {
      cli::parse_id_list(ids, "--ids");  // a typo is a usage error, before the model loads
      given.push_back({ids, std::nullopt});
    }
    for (const auto& text : p.all("text")) given.push_back({text, std::nullopt});
    for (const auto& text : p.all("prompt")) given.push_back({text, std::nullopt});
    lm_options.stop = p.all("stop");
    if (lm_options.stop.size() > kMaxStopStrings)
      throw cli::UsageError("--stop: at most " + std::to_string(kMaxStopStrings) + " strings");
    for (const std::string& stop : lm_options.stop)
      if (stop.empty() || stop.size() > kMaxStopBytes)
        throw cli::UsageError("--stop: each string must be 1.." + std::to_string(kMaxStopBytes) + " bytes");
    // Sampling flags are checked here; which model type they apply to, after loading.
    if (p.has("sample") && p.has("greedy")) throw cli::UsageError("--sample or --greedy, not both");
    if (p.has("sample")) lm_options.do_sample = true;
    if (p.has("greedy")) lm_options.do_sample = false;
    if (p.has("greedy"))  // the repetition penalty applies to greedy decoding too; these do not
      for (const char* flag : {"temperature", "top-k", "top-p", "min-p", "seed"})
        if (p.has(flag)) throw cli::UsageError(std::string("--") + flag + " shapes sampling: not with --greedy");
    auto ranged = [&](const char* flag, double lo, double hi, bool lo_open) {
      const double v = p.get_double(flag, 0);
      if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
        throw cli::UsageError("--" + std::string(flag) + " must be in " + (lo_open ? "(" : "[") + std::to_string(lo) +
                              ", " + std::to_string(hi) + "]");
      return static_cast<float>(v);
    };
    if (p.has("temperature")) lm_options.temperature = ranged("temperature", kMinSamplingScale, kMaxSamplingScale, false);
    if (p.has("top-p")) lm_options.top_p = ranged("top-p", 0, 1, true);
    if (p.has("min-p")) lm_options.min_p = ranged("min-p", 0, 1, false);
    if (p.has("repetition-penalty"))
      lm_options.repetition_penalty = ranged("repetition-penalty", kMinSamplingScale, kMaxSamplingScale, false);
    if (p.has("top-k")) lm_options.top_k = static_cast<uint32_t>(p.get_int("top-k", 0, 0, 1 << 24));
    if (p.has("seed")) lm_options.seed = static_cast<uint64_t>(p.get_int("seed", 0, 0, std::numeric_limits<long long>::max()));
    lm_options.ignore_eos = p.has("ignore-eos");
    lm_options.kv_cache_f16 = options.kv_cache_f16;
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
  const bool from_lines = !p.has("ids") && !p.has("text") && !p.has("prompt");  // --input FILE, or standard input
  const bool text_inputs = p.has("text") || p.has("prompt") || (from_lines && has_text && !p.has("detokenize"));
  if (p.has("prompt") && !model.info().decoder_only)
    return fail("--prompt is for language models; translate text with --text"), 2;
  if (p.has("text") && model.info().decoder_only)
    return fail("--text is for translation models; give a language model its text with --prompt"), 2;
  if ((p.has("chat") || p.has("stop")) && !(model.info().decoder_only && has_text))
    return fail(std::string("--") + (p.has("chat") ? "chat" : "stop") +
                " needs a language model converted with its tokenizer.json"), 2;
  if (text_inputs && !has_text) {
    fail(p.positionals()[0] + " carries no text tokenizer: give inputs with --ids");
    return 1;
  }
  if (p.has("stream") && !text_inputs && !model.info().decoder_only)  // a language model may stream ids
    return fail("--stream prints text: it takes text inputs, not --ids"), 2;

  // Where inputs come from: the command line (one window), or lines.
  const std::string input_name = p.get("input", "-");
  const std::string source_name = input_name == "-" ? "standard input" : input_name;
  int fd = STDIN_FILENO;
  if (from_lines && input_name != "-") {
    fd = open(input_name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(input_name + ": cannot open: " + std::strerror(errno)), 1;
  }
  LineReader reader(fd, source_name);
  bool given_taken = false;
  auto next_window = [&](size_t lines, std::vector<Input>& out) {
    if (std::ferror(stdout)) return false;  // nobody reads the output: stop (main reports it)
    if (from_lines) return reader.next_window(lines, out);
    if (given_taken) return false;
    out = given;
    given_taken = true;
    return !out.empty();
  };
  // An input's ids (--ids, or a line of a model without a tokenizer); nullopt after an error.
  auto parse_ids = [&](Input& in, size_t index) -> std::vector<int32_t> {
    if (in.error || in.text.find_first_not_of(" \t") == std::string::npos) return {};
    try {
      return cli::parse_id_list(in.text, from_lines ? source_name + " line " + std::to_string(index + 1) : "--ids");
    } catch (const cli::UsageError& e) {
      in.error = e.what();
      return {};
    }
  };
  auto blank = [](const Input& in) { return !in.error && in.text.find_first_not_of(" \t\r\n\f\v") == std::string::npos; };

  const bool json = p.has("json"), json_lines = p.has("json-lines");
  const bool quiet = p.has("quiet");
  Progress progress(from_lines && !quiet && isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO) && !json);
  nlohmann::json results = nlohmann::json::array();
  size_t failed = 0, done = 0, tokens = 0;
  // One output per input, flushed at once (a coprocess waits for it).
  auto emit = [&](nlohmann::json r, const std::string& plain) {
    if (json) {
      results.push_back(std::move(r));
    } else {
      const std::string line = json_lines ? json_text(r) : plain;
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
    progress.update(++done, tokens);
  };
  auto report = [&](size_t index, const std::string& message) {
    ++failed;
    progress.clear_line();
    const std::string input = "input " + std::to_string(index + 1);
    const std::string where = from_lines || names_input(message, input) ? "" : input + ": ";
    std::fprintf(stderr, "petrel-run: %s%s\n", where.c_str(), message.c_str());
    emit({{"index", index}, {"error", where + message}}, "");
  };
  // The run's summary as JSON (--json: with every result; --json-lines: its last line);
  // false when the output is plain text (the caller prints timing to standard error).
  auto print_summary = [&](nlohmann::json& summary) {
    if (json) {
      summary["results"] = results;
      std::cout << json_text(summary) << "\n";
    } else if (json_lines) {
      std::cout << json_text({{"summary", summary}}) << "\n";
    }
    return json || json_lines;
  };
  std::vector<Input> window;
  size_t base = 0;  // the index of the window's first input
  // The engine numbers a call's inputs from 1 ("input 3 has ..."): its input k + 1 is
  // the run's input `index` (a line's error names its line).
  auto renumber = [&](std::string message, size_t k, size_t index) {
    const std::string prefix = "input " + std::to_string(k + 1);
    if (names_input(message, prefix))
      message = (from_lines ? source_name + " line " : std::string("input ")) + std::to_string(index + 1) +
                message.substr(prefix.size());
    return message;
  };
  auto as_line = [&](const std::string& message, size_t k) { return renumber(message, k, base + k); };

  if (p.has("tokenize") || p.has("detokenize")) {  // no translation: the tokenizer alone
    for (; next_window(256, window); base += window.size()) {
      for (size_t k = 0; k < window.size(); ++k) {
        Input& in = window[k];
        const size_t i = base + k;
        if (p.has("tokenize")) {
          if (blank(in)) {
            emit({{"index", i}, {"text", in.text}, {"pieces", nlohmann::json::array()}, {"ids", nlohmann::json::array()}}, "");
            continue;
          }
          if (in.error) { report(i, *in.error); continue; }
          auto t = tokenize(model, in.text, options.source_language);
          if (!t) { report(i, t.error().message); continue; }
          std::string pieces;
          for (const auto& piece : t.value().pieces) pieces += (pieces.empty() ? "" : " ") + piece;
          emit({{"index", i}, {"text", in.text}, {"pieces", t.value().pieces}, {"ids", t.value().ids}},
               pieces + "\t" + ids_text(t.value().ids));
        } else {
          const std::vector<int32_t> ids = parse_ids(in, i);
          if (in.error) { report(i, *in.error); continue; }
          auto t = decode_text(model, ids);
          if (!t) { report(i, t.error().message); continue; }
          emit({{"index", i}, {"ids", ids}, {"text", t.value()}}, t.value());
        }
      }
    }
    progress.clear_line();
    if (!reader.read_error().empty()) fail(reader.read_error()), ++failed;
    if (json) std::cout << json_text({{"results", results}}) << "\n";
    return failed == 0 ? 0 : 1;
  }

  TranslatorOptions translator_options;
  translator_options.isa = p.get("isa");
  translator_options.threads = threads;
  parse_activation_scales(activation_scales, &translator_options.activation_scales);
  static const char* const kLanguageModelFlags[] = {"sample", "greedy", "temperature", "top-k", "top-p", "min-p",
                                                    "repetition-penalty", "seed", "ignore-eos"};
  if (!model.info().decoder_only) {
    for (const char* f : kLanguageModelFlags)
      if (p.has(f)) return fail("--" + std::string(f) + " applies to language models; " + p.positionals()[0] +
                                " is a translation model"), 2;
  } else {  // a language model: each input is a prompt, continued one at a time
    for (const char* f : {"beam", "n-best", "min-new-tokens", "length-penalty", "beam-stop", "source-lang", "target-lang",
                          "target-prefix", "shortlist", "no-shortlist", "max-length-factor", "no-split",
                          "max-batch-tokens", "max-batch", "window", "workers"})
      if (p.has(f) && !(std::string(f) == "beam" && p.get("beam") == "1"))
        return fail("--" + std::string(f) + " applies to translation models; " + p.positionals()[0] +
                    " is a language model (decoder-only)"), 2;
    lm_options.max_new_tokens = options.max_new_tokens;
    auto resolved = resolve_generate_options(model, lm_options);
    if (!resolved) return setup_failure(resolved.error());
    if (!*resolved.value().do_sample)  // as transformers warns: these only shape sampling
      for (const char* flag : {"temperature", "top-k", "top-p", "min-p", "seed"})
        if (p.has(flag))
          std::fprintf(stderr, "petrel-run: warning: --%s has no effect: %s decodes greedily unless given --sample\n",
                       flag, p.positionals()[0].c_str());
    auto created = Generator::create(loaded.value(), translator_options);
    if (!created) return setup_failure(created.error());
    Generator& generator = created.value();
    GenerateOptions run = lm_options;
    if (p.has("chat")) {
      run::ChatSettings settings;
      settings.system = p.get("system", "");
      settings.template_flags = chat_flags;
      settings.json_lines = json_lines;
      settings.quiet = quiet;
      settings.reply_tokens = resolved.value().max_new_tokens;
      return run::run_chat(generator, run, settings, fd);
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
    size_t prompt_tokens = 0;
    const auto run_start = std::chrono::steady_clock::now();
    auto add_timings = [&] {
      const GenerateTimings& t = generator.last_timings();
      prefill_ms += t.prefill_ms;
      generate_ms += t.generate_ms;
      prompt_tokens += t.prompt_tokens;
      tokens += t.generated_tokens;
    };
    for (; next_window(from_lines ? 1 : given.size(), window); base += window.size()) {
      for (size_t k = 0; k < window.size(); ++k) {
        const size_t i = base + k;
        Input& in = window[k];
        if (blank(in)) {
          emit({{"index", i}, {"input", nlohmann::json::array()}, {"hypotheses", nlohmann::json::array()}}, "");
          continue;
        }
        if (text_inputs) {
          if (in.error) {
            report(i, *in.error);
            continue;
          }
          auto r = generator.generate_text(in.text, run);
          if (!r) {
            report(i, (from_lines ? source_name + " line " + std::to_string(i + 1) + ": " : "") + r.error().message);
            continue;
          }
          add_timings();
          const TextGeneration& g = r.value();
          emit({{"index", i},
                {"prompt", in.text},
                {"prompt_tokens", g.prompt_tokens},
                {"hypotheses",
                 {{{"text", g.text}, {"ids", g.ids}, {"ended_on_eos", g.ended_on_eos}, {"ended_on_stop", g.ended_on_stop}}}}},
               p.has("stream") ? std::string() : g.text);
          continue;
        }
        const std::vector<int32_t> prompt = parse_ids(in, i);
        if (in.error) {
          report(i, *in.error);
          continue;
        }
        auto r = generator.generate({prompt}, run);
        if (!r) {  // prompts run one per call: "prompt 0" is this input (report names --ids inputs itself)
          std::string message = r.error().message;
          if (message.compare(0, 10, "prompt 0, ") == 0 || message.compare(0, 10, "prompt 0: ") == 0)
            message = from_lines ? source_name + " line " + std::to_string(i + 1) + message.substr(8)
                                 : message.substr(10);
          report(i, message);
          continue;
        }
        add_timings();
        const Generation& g = r.value()[0];
        if (p.has("stream")) std::printf("\n");
        emit({{"index", i}, {"input", prompt}, {"hypotheses", {{{"ids", g.ids}, {"ended_on_eos", g.ended_on_eos}}}}},
             p.has("stream") ? std::string() : ids_text(g.ids));
      }
    }
    progress.clear_line();
    if (!reader.read_error().empty()) fail(reader.read_error()), ++failed;
    const GenerateOptions& used = resolved.value();
    nlohmann::json summary;
    summary["isa"] = generator.isa();
    summary["threads"] = threads;
    summary["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
    summary["generation"] = {{"max_new_tokens", used.max_new_tokens}, {"sample", *used.do_sample},
                             {"temperature", *used.temperature}, {"top_k", *used.top_k}, {"top_p", *used.top_p},
                             {"min_p", *used.min_p}, {"repetition_penalty", *used.repetition_penalty},
                             {"seed", used.seed}, {"ignore_eos", used.ignore_eos},
                             {"eos_ids", model.info().lm.eos_ids}};
    summary["timing"] = {{"load_ms", load_ms},
                         {"prefill_ms", prefill_ms},
                         {"generate_ms", generate_ms},
                         {"prompt_tokens", prompt_tokens},
                         {"generated_tokens", tokens},
                         {"prompt_tokens_per_s", prefill_ms > 0 ? prompt_tokens / (prefill_ms / 1000) : 0},
                         {"tokens_per_s", generate_ms > 0 ? tokens / (generate_ms / 1000) : 0},
                         {"run_s", ms_since(run_start) / 1000}};
    summary["inputs"] = base;
    summary["failed"] = failed;
    if (!print_summary(summary) && !quiet) {
      std::fprintf(stderr, "load %.1f ms, prompt %zu tokens in %.1f ms, %zu tokens generated in %.1f ms (%.1f tokens/s, %s, %zu thread%s)\n",
                   load_ms, prompt_tokens, prefill_ms, tokens, generate_ms, generate_ms > 0 ? tokens / (generate_ms / 1000) : 0.0,
                   generator.isa(), threads, threads == 1 ? "" : "s");
    }
    return failed == 0 ? 0 : 1;
  }
  auto effective = resolve_options(model, options);  // the model's defaults filled in
  if (!effective) return setup_failure(effective.error());
  double encode_ms = 0, decode_ms = 0, run_seconds = 0;
  size_t steps = 0;
  std::string isa;
  size_t sessions = 1;

  if (from_lines && !p.has("stream")) {  // lines: windows sorted, packed, printed in order as ready
    auto batch = BatchTranslator::create(loaded.value(), translator_options, workers);
    if (!batch) return setup_failure(batch.error());
    isa = batch.value().isa();
    sessions = batch.value().workers();
    const auto run_start = std::chrono::steady_clock::now();
    for (; next_window(batching.window, window); base += window.size()) {
      auto deliver = [&](size_t k, auto&& r, auto&& describe) {
        const size_t i = base + k;
        Input& in = window[k];
        if (in.error) return report(i, *in.error);
        if (!r) return report(i, as_line(r.error().message, k));
        describe(i, in, r.value());
      };
      Status s;
      if (text_inputs) {
        std::vector<std::string> texts;
        for (const Input& in : window) texts.push_back(in.error ? std::string() : in.text);
        s = batch.value().translate_text(texts, options, batching, [&](size_t k, Result<TextTranslation>&& r) {
          deliver(k, r, [&](size_t i, const Input& in, const TextTranslation& t) {
            const auto& hyps = t.hypotheses;
            if (!hyps.empty()) tokens += hyps[0].ids.size();
            emit({{"index", i}, {"input_text", in.text}, {"input", t.input.ids}, {"hypotheses", hypotheses_json(hyps)}},
                 hyps.empty() ? std::string() : hyps[0].text);
          });
        });
      } else {
        std::vector<std::vector<int32_t>> ids;
        for (size_t k = 0; k < window.size(); ++k) ids.push_back(parse_ids(window[k], base + k));
        s = batch.value().translate(ids, options, batching, [&](size_t k, Result<Translation>&& r) {
          deliver(k, r, [&](size_t i, const Input&, const Translation& t) {
            const auto& hyps = t.hypotheses;
            if (!hyps.empty()) tokens += hyps[0].ids.size();
            emit({{"index", i}, {"input", ids[k]}, {"hypotheses", hypotheses_json(hyps, model)}},
                 hyps.empty() ? std::string() : ids_text(hyps[0].ids));
          });
        });
      }
      if (!s) return fail(s.error().message), 1;
    }
    run_seconds = ms_since(run_start) / 1000;
  } else {  // --text / --ids: one batch; --stream: one input at a time, printed as produced
    auto created = Translator::create(loaded.value(), translator_options);
    if (!created) return setup_failure(created.error());
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
      for (; next_window(1, window); base += window.size()) {
        Input& in = window[0];
        if (in.error) {
          report(base, *in.error);
          continue;
        }
        shown.clear();
        if (!blank(in)) {
          auto r = translator.translate_text({in.text}, streaming);
          if (!r) {
            report(base, as_line(r.error().message, 0));  // its newline ends what was printed of it
            continue;
          }
          add_timings();
        }
        std::printf("\n");
        std::fflush(stdout);
        progress.update(++done, tokens);
      }
    } else {
      next_window(0, window);  // the command line's inputs
      auto describe_text = [&](size_t i, const TextTranslation& t) {
        std::string plain;
        for (size_t h = 0; h < t.hypotheses.size(); ++h)
          plain += std::string(h ? "\n" : "") + window[i].text + " -> " + t.hypotheses[h].text + "\t(score " +
                   score_text(t.hypotheses[h].score) + "; ids " + ids_text(t.hypotheses[h].ids) + ")";
        emit({{"input_text", window[i].text}, {"input", t.input.ids}, {"hypotheses", hypotheses_json(t.hypotheses)}},
             plain);
      };
      std::vector<std::vector<int32_t>> ids;
      for (size_t i = 0; i < window.size(); ++i) ids.push_back(parse_ids(window[i], i));
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
        emit({{"input", ids[i]}, {"hypotheses", hypotheses_json(t.hypotheses, model)}}, plain);
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
            report(i, renumber(one.error().message, 0, i));
            continue;
          }
          add_timings();
          describe(i, one.value()[0]);
        }
      };
      if (text_inputs) {
        std::vector<std::string> texts;
        for (const Input& in : window) texts.push_back(in.text);
        batch_then_alone(texts, [&](const std::vector<std::string>& t) { return translator.translate_text(t, options); },
                         describe_text);
      } else {
        batch_then_alone(ids, [&](const std::vector<std::vector<int32_t>>& t) { return translator.translate(t, options); },
                         describe_ids);
      }
    }
  }
  progress.clear_line();
  if (!reader.read_error().empty()) fail(reader.read_error()), ++failed;

  const size_t inputs = base + (from_lines ? 0 : window.size());
  const double tokens_per_s = decode_ms > 0 ? tokens / (decode_ms / 1000.0) : run_seconds > 0 ? tokens / run_seconds : 0;
  const TranslateOptions& used = effective.value();
  nlohmann::json summary;
  summary["isa"] = isa;
  summary["threads"] = threads;
  summary["workers"] = sessions;
  summary["kv_cache"] = options.kv_cache_f16 ? "f16" : "f32";
  summary["activation_scales"] = activation_scales;
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
  summary["inputs"] = inputs;
  summary["failed"] = failed;
  if (!print_summary(summary) && !quiet) {
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

int main(int argc, char** argv) { return petrel::cli::exit_status("petrel-run", tool_main(argc, argv)); }
