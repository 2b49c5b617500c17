// petrel-run: translate text (through the model file's tokenizer) or token ids, or continue
// prompts with a language model. This file reads and checks the command line, loads the
// model and hands the run to its mode (modes.h).
#include <unistd.h>

#include <cerrno>
#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "common/cli.h"
#include "run/modes.h"

using namespace petrel;
using petrel::run::fail;
using petrel::run::Input;
using petrel::run::ms_since;
using petrel::run::RunIo;
using petrel::run::RunRequest;

// Why `model` (the file `name`) cannot be one of --pivot's two models, if it cannot: the
// second model reads the first's translation sentence by sentence, which needs both
// tokenizers to tell their tokens' bytes.
static std::optional<std::string> pivot_problem(const Model& model, const std::string& name) {
  if (model.info().decoder_only) return "--pivot translates through two translation models: " + name + " is a language model";
  if (!model.info().has_text_tokenizer) return "--pivot translates text: " + name + " carries no text tokenizer";
  auto tokens = tokenize(model, "a");
  if (!tokens || tokens.value().ids.empty() || tokens.value().ranges.size() != tokens.value().ids.size())
    return "--pivot needs models whose tokenizers give their tokens' bytes (Marian C++ models: model.bin with "
           "vocab.spm): " + name + "'s does not";
  return std::nullopt;
}

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
                "--html translates HTML fragments (one per line), markup kept around the words it wraps;\n"
                "--quality-scores adds bergamot's quality scores. --requests answers what Firefox asks of\n"
                "bergamot: one JSON request per line, one JSON response per line (see --requests):\n"
                "    echo '{\"text\": \"<b>Hello</b> world\", \"html\": true}' | petrel-run model.petrel --requests\n"
                "--pivot SECOND.petrel translates through two models, source -> pivot -> target (Mozilla's\n"
                "models all go to or from English), each text (lines, --text, --requests) as without it:\n"
                "    petrel-run es-en.petrel --pivot en-de.petrel --requests\n"
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
  p.flag("grammar", "FILE", "language models: the output follows this GBNF grammar (llama.cpp's syntax, `root`\n"
                            "                              the start): other tokens are masked each step, EOS only when complete");
  p.flag("json-schema", "FILE", "language models: the output is JSON this JSON Schema accepts (llama.cpp's subset:\n"
                                "                              a keyword outside it is refused by name)");
  p.flag("input", "FILE", "inputs, one per line ('-': standard input, the default)");
  p.toggle("no-split", "--input: translate each line whole, without splitting it into sentences");
  p.flag("ssplit-mode", "MODE", "how a text splits into sentences, as bergamot's ssplit-mode: sentence (each line\n"
                                "                              is one sentence), paragraph (each line a paragraph of sentences;\n"
                                "                              Firefox's, --requests' default) or wrapped_text (paragraphs end at a\n"
                                "                              blank line); default: sentences anywhere, a line break is a space.\n"
                                "                              With it (or --html, --requests) each sentence may generate as many\n"
                                "                              tokens as --max-length-factor gives its input's longest sentence, as\n"
                                "                              bergamot; --text inputs are split too");
  p.toggle("requests", "standard input (or --input FILE) holds one request per line, a JSON object as\n"
                       "                              Firefox sends bergamot: {\"text\": \"...\", \"html\": true|false,\n"
                       "                              \"qualityScores\": true|false, \"alignment\": true|false} (all but text\n"
                       "                              optional, default false); each gives one JSON line, in order, as it\n"
                       "                              is done: text (the translation), source (html: the source markup\n"
                       "                              as written back), sentences (each {\"source\": [b, e], \"target\":\n"
                       "                              [b, e]}, byte ranges), and when asked alignments (per sentence a\n"
                       "                              [target token][source token] matrix) and quality (per sentence\n"
                       "                              sentence_score, word_scores, word_ranges: bytes of text; NaN as null);\n"
                       "                              a bad line gives {\"error\": \"...\"} naming its line and the run\n"
                       "                              goes on (exit status 1 at the end)");
  p.flag("pivot", "SECOND.petrel", "translate through a pivot language: MODEL translates each text into the pivot,\n"
                                  "                              SECOND.petrel translates that sentence by sentence into the target\n"
                                  "                              (bergamot's translateViaPivoting); html, quality scores (the second\n"
                                  "                              model's) and --requests' alignments (composed through the pivot) as\n"
                                  "                              without it. Both models must be Marian C++ ones (their tokenizers give\n"
                                  "                              their tokens' bytes). Per-model flags (--isa, --threads, --workers,\n"
                                  "                              --shortlist, --kv-cache, --activation-scales, --beam, the length limits)\n"
                                  "                              apply to both models. Not with --n-best, --ids, --stream,\n"
                                  "                              --tokenize/--detokenize, --source-lang/--target-lang/--target-prefix, or\n"
                                  "                              --alignment outside --requests");
  p.toggle("html", "each text input is an HTML fragment (one per line): the tags are taken out, the text\n"
                   "                              translated sentence by sentence and each tag put back around the words\n"
                   "                              it wrapped (bergamot's html mode); plain output is the translation\n"
                   "                              alone, --json adds source (the markup as written back) and sentences\n"
                   "                              (byte ranges of source and translation); not with --n-best");
  p.toggle("quality-scores", "text inputs: bergamot's quality scores per sentence and word: with --html written into\n"
                             "                              the markup (x-bergamot-...-score), with --json / --json-lines in\n"
                             "                              quality (per sentence sentence_score, word_scores, word_ranges)");
  p.flag("quality-model", "FILE", "quality scores from bergamot's logistic-regression model (a .quality.lr file)\n"
                                  "                              instead of the free estimator (--quality-scores or --requests)");
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
  p.flag("kv-cache", "TYPE", "f32 (default), f16: attention keys/values in half precision, half the memory, or\n"
                            "                              int8 (language models): int8 values with an f32 scale per position and\n"
                            "                              head, about a quarter of f32's memory");
  p.toggle("alignment", "with --json / --json-lines: each hypothesis' word alignment, a row per output token\n"
                        "                              (EOS included) of attention probabilities over the input's tokens");
  p.flag("alignment-layer", "L", "--alignment: the decoder layer, 0-based (default: the one the model was\n"
                                 "                              trained to align, a Marian model's guided-alignment layer; else the last)");
  p.flag("alignment-head", "H", "--alignment: the attention head, 0-based (default 0)");
  p.flag("alignment-threshold", "T", "--alignment / --requests: hard alignments instead of the matrix, pairs\n"
                                     "                              [[source token, target token], ...] of the entries above T in (0, 1]\n"
                                     "                              (1: each target token's most likely source token), as Marian's");
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
  p.flag("prompt-cache", "FILE", "language models: the KV state after a prompt, kept in FILE (llama.cpp's flag): when\n"
                                 "                              FILE exists it is loaded first (a file made with another model file\n"
                                 "                              or that is corrupt is an error naming it and its field), and a prompt\n"
                                 "                              beginning with its tokens runs only the tokens after them; after each\n"
                                 "                              prompt's prefill (--chat: each turn's) the state is written to FILE\n"
                                 "                              (atomically). The states of this run's prompts are also reused in\n"
                                 "                              process, within a budget of one KV cache of the model's positions");
  p.flag("lookup", "N", "speculative decoding (language models; greedy translation) with prompt lookup: drafts\n"
                        "                              are what followed the latest earlier occurrence of the last N..1 tokens\n"
                        "                              in the prompt (a translation's input) and the output (1.." + std::to_string(kMaxLookupNgram) + "; the\n"
                        "                              output is the same, faster where text repeats)");
  p.flag("draft", "MODEL", "speculative decoding with a draft model of the same vocabulary (a smaller model,\n"
                           "                              or this model's int4 file): its greedy tokens are checked by one pass\n"
                           "                              of the model over them; the output is the same"); 
  p.toggle("draft-shares-encoder", "translation: the --draft model was trained on this model's encoder (frozen, as\n"
                                  "                              tools/en-de-draft): it reads this model's encoder states instead of\n"
                                  "                              encoding each input itself");
  p.flag("max-draft", "K", "--lookup / --draft: the most tokens a draft proposes (1.." + std::to_string(kMaxDraftTokens) +
                               ", default " + std::to_string(kDefaultMaxDraftTokens) + "; adapted below it)");
  GenerateOptions lm_options;
  std::vector<std::pair<std::string, bool>> chat_flags;  // --template-flag
  TranslateOptions options;
  BatchOptions batching;
  size_t threads = 1, workers = 1;
  std::string activation_scales = "dynamic";
  std::vector<Input> given;  // --text / --ids
  std::optional<float> alignment_threshold;
  try {
    if (!p.parse(argc, argv)) {
      std::cout << p.help();
      return 0;
    }
    if (p.positionals().size() != 1) throw cli::UsageError("expected one model file (see --help)");
    if (p.has("ids") + p.has("text") + p.has("prompt") + p.has("input") + p.has("chat") > 1)
      throw cli::UsageError("give inputs with one of --ids, --text, --prompt, --input or --chat");
    if (p.has("requests")) {  // requests come as lines, each saying what it asks for
      for (const char* f : {"text", "ids", "prompt", "chat", "stream", "tokenize", "detokenize"})
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with --requests (it reads JSON requests, "
                                            "one per line of standard input or --input)");
      for (const char* f : {"html", "quality-scores", "alignment"})
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with --requests (each request asks "
                                            "for html, qualityScores and alignment itself)");
      for (const char* f : {"json", "json-lines"})
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with --requests (each response is a JSON line)");
      if (p.has("no-split")) throw cli::UsageError("--no-split does not apply with --requests (choose with --ssplit-mode)");
      if (p.get_int("n-best", 1, 1, 64) > 1) throw cli::UsageError("--n-best does not apply with --requests (one translation each)");
    }
    if (p.has("pivot")) {  // text through two translation models, the second reading the first's best
      for (const char* f : {"ids", "prompt", "chat", "stream", "tokenize", "detokenize"})
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with --pivot (it translates text "
                                            "through two translation models)");
      for (const char* f : {"source-lang", "target-lang", "target-prefix"})
        if (p.has(f)) throw cli::UsageError("--" + std::string(f) + " does not apply with --pivot (it would set the "
                                            "languages of both models' translations)");
      if (p.get_int("n-best", 1, 1, 64) > 1)
        throw cli::UsageError("--n-best does not apply with --pivot (the second model translates the first's best translation)");
      if (p.has("alignment"))
        throw cli::UsageError("--alignment does not apply with --pivot: alignments composed through the pivot are per "
                              "sentence, as --requests gives them (\"alignment\": true)");
    }
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
              "target-prefix", "threads", "shortlist", "no-shortlist", "kv-cache", "isa", "activation-scales", "max-length-factor",
              "alignment", "alignment-layer", "alignment-head"},
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
    if ((p.has("alignment-layer") || p.has("alignment-head")) && !p.has("alignment") && !p.has("requests"))
      throw cli::UsageError(std::string("--") + (p.has("alignment-layer") ? "alignment-layer" : "alignment-head") +
                            " chooses what --alignment returns: give --alignment too");
    if (p.has("alignment") && !p.has("json") && !p.has("json-lines"))
      throw cli::UsageError("--alignment needs --json or --json-lines (alignments are a matrix per hypothesis)");
    if (p.has("alignment") || p.has("requests")) {  // --requests: for the requests that ask
      options.alignment = p.has("alignment");
      if (p.has("alignment-layer")) options.alignment_layer = static_cast<size_t>(p.get_int("alignment-layer", 0, 0, 1023));
      options.alignment_head = static_cast<size_t>(p.get_int("alignment-head", 0, 0, 1 << 16));
    }
    if (p.has("alignment-threshold")) {
      if (!p.has("alignment") && !p.has("requests"))
        throw cli::UsageError("--alignment-threshold makes --alignment's (or --requests') alignments hard: give "
                              "--alignment or --requests too");
      const std::string text = p.get("alignment-threshold");
      char* end = nullptr;
      const double threshold = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(threshold > 0 && threshold <= 1))
        throw cli::UsageError("--alignment-threshold: '" + text + "' is not a number in (0, 1]");
      alignment_threshold = static_cast<float>(threshold);
    }
    // HTML, quality scores and sentence splitting read text; --stream translates with a
    // Translator alone, which does none of them.
    for (const char* f : {"html", "quality-scores", "ssplit-mode"}) {
      if (!p.has(f)) continue;
      if (p.has("ids")) throw cli::UsageError("--" + std::string(f) + " takes text inputs, not --ids");
      if (!other_mode.empty())
        throw cli::UsageError("--" + std::string(f) + " does not apply with " + other_mode +
                              (other_mode == "--stream" ? " (it prints the text as it is produced)" : " (nothing is translated)"));
    }
    if (p.has("html") && p.get_int("n-best", 1, 1, 64) > 1)
      throw cli::UsageError("--html gives one translation per input: --n-best does not apply with it");
    if (p.has("quality-scores") && !p.has("html") && !p.has("json") && !p.has("json-lines"))
      throw cli::UsageError("--quality-scores needs --html (scores in the markup) or --json / --json-lines");
    if (p.has("quality-model") && !p.has("quality-scores") && !p.has("requests"))
      throw cli::UsageError("--quality-model chooses how --quality-scores are computed: give --quality-scores or --requests");
    if (p.has("ssplit-mode") && p.has("no-split"))
      throw cli::UsageError("--ssplit-mode or --no-split, not both (--no-split translates each line whole)");
    const std::string ssplit = p.get_choice("ssplit-mode", p.has("requests") ? "paragraph" : "text",
                                            {"sentence", "paragraph", "wrapped_text"});
    batching.split_mode = ssplit == "sentence"    ? SentenceSplit::kSentencePerLine
                          : ssplit == "paragraph" ? SentenceSplit::kParagraphPerLine
                          : ssplit == "wrapped_text" ? SentenceSplit::kWrappedText
                                                     : SentenceSplit::kText;
    options.html = p.has("html");
    options.quality_scores = p.has("quality-scores");
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
    // Lines are split unless --no-split; the command line's texts only when --ssplit-mode asks.
    batching.split_sentences = p.has("text") ? p.has("ssplit-mode") : !p.has("no-split");
    if (p.has("requests")) batching.split_sentences = true;
    // bergamot translates a request's sentences as one batch, each limited by the longest
    // and all decoding over the union of their shortlists.
    batching.limit_by_longest_sentence = p.has("requests") || p.has("html") || p.has("ssplit-mode");
    batching.shortlist_of_input = batching.limit_by_longest_sentence;
    if (p.has("shortlist") && p.has("no-shortlist")) throw cli::UsageError("--shortlist or --no-shortlist, not both");
    if (p.has("shortlist")) options.use_shortlist = true;
    if (p.has("no-shortlist")) options.use_shortlist = false;
    const std::string kv_cache = p.get_choice("kv-cache", "f32", {"f32", "f16", "int8"});
    options.kv_cache_f16 = kv_cache == "f16";
    lm_options.kv_cache_int8 = kv_cache == "int8";
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
    // --grammar / --json-schema FILE: the engine checks size and syntax (errors name where).
    auto read_constraint = [&](const char* flag, std::string& out) {
      const std::string path = p.get(flag);
      std::ifstream in(path, std::ios::binary);
      if (!in) throw cli::UsageError(std::string("--") + flag + ": cannot read " + path);
      constexpr size_t kMaxFileBytes = size_t{16} << 20;
      out.resize(kMaxFileBytes + 1);
      in.read(out.data(), static_cast<std::streamsize>(out.size()));
      out.resize(static_cast<size_t>(in.gcount()));
      if (out.size() > kMaxFileBytes) throw cli::UsageError(std::string("--") + flag + ": " + path + " is larger than 16 MiB");
    };
    if (p.has("grammar") && p.has("json-schema")) throw cli::UsageError("--grammar or --json-schema, not both");
    if (p.has("grammar")) read_constraint("grammar", lm_options.grammar);
    if (p.has("json-schema")) read_constraint("json-schema", lm_options.json_schema);
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
    lm_options.lookup_ngram = static_cast<size_t>(p.get_int("lookup", 0, 1, static_cast<long long>(kMaxLookupNgram)));
    lm_options.max_draft_tokens = static_cast<size_t>(p.get_int("max-draft", 0, 1, static_cast<long long>(kMaxDraftTokens)));
    options.lookup_ngram = lm_options.lookup_ngram;
    options.max_draft_tokens = lm_options.max_draft_tokens;
    if (p.has("draft-shares-encoder") && !p.has("draft"))
      throw cli::UsageError("--draft-shares-encoder describes the --draft model: give one");
    if (p.has("max-draft") && !p.has("lookup") && !p.has("draft"))
      throw cli::UsageError("--max-draft bounds the drafts of --lookup or --draft: give one of them");
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
  double load_ms = ms_since(start);
  if (!loaded) {
    fail(loaded.error().message);
    return 1;
  }
  const Model& model = *loaded.value();
  const bool has_text = model.info().has_text_tokenizer;
  std::shared_ptr<const Model> pivot_model;  // --pivot: the second model
  if (p.has("pivot")) {
    if (auto problem = pivot_problem(model, p.positionals()[0])) return fail(*problem), 2;
    start = std::chrono::steady_clock::now();
    auto second = Model::load(p.get("pivot"));
    load_ms += ms_since(start);
    if (!second) return fail(second.error().message), 1;
    if (auto problem = pivot_problem(*second.value(), p.get("pivot"))) return fail(*problem), 2;
    pivot_model = std::move(second.value());
  }
  std::shared_ptr<const Model> draft_model;  // --draft
  if (p.has("draft")) {
    start = std::chrono::steady_clock::now();
    auto draft = Model::load(p.get("draft"));
    load_ms += ms_since(start);
    if (!draft) return fail(draft.error().message), 1;
    draft_model = std::move(draft.value());
  }
  const bool from_lines = !p.has("ids") && !p.has("text") && !p.has("prompt");  // --input FILE, or standard input
  const bool text_inputs = p.has("text") || p.has("prompt") || (from_lines && has_text && !p.has("detokenize"));
  if (p.has("prompt") && !model.info().decoder_only)
    return fail("--prompt is for language models; translate text with --text"), 2;
  if (p.has("text") && model.info().decoder_only)
    return fail("--text is for translation models; give a language model its text with --prompt"), 2;
  if (!model.info().decoder_only && (lm_options.kv_cache_int8 || p.has("prompt-cache")))
    return fail(std::string(p.has("prompt-cache") ? "--prompt-cache" : "--kv-cache int8") + " is for language models; " +
                p.positionals()[0] + " is a translation model"), 2;
  if ((p.has("chat") || p.has("stop") || p.has("grammar") || p.has("json-schema")) &&
      !(model.info().decoder_only && has_text))
    return fail(std::string("--") +
                    (p.has("chat") ? "chat" : p.has("stop") ? "stop" : p.has("grammar") ? "grammar" : "json-schema") +
                " needs a language model converted with its tokenizer.json"), 2;
  if (text_inputs && !has_text) {
    fail(p.positionals()[0] + " carries no text tokenizer: give inputs with --ids");
    return 1;
  }
  if (p.has("stream") && !text_inputs && !model.info().decoder_only)  // a language model may stream ids
    return fail("--stream prints text: it takes text inputs, not --ids"), 2;
  for (const char* f : {"requests", "html", "quality-scores", "quality-model", "ssplit-mode", "alignment-threshold"}) {
    if (!p.has(f)) continue;
    if (model.info().decoder_only)
      return fail("--" + std::string(f) + " applies to translation models; " + p.positionals()[0] + " is a language model"), 2;
    if (!has_text) return fail("--" + std::string(f) + " translates text: " + p.positionals()[0] + " carries no text tokenizer"), 2;
  }
  if (p.has("quality-model")) {
    auto quality = load_quality_model(p.get("quality-model"));
    if (!quality) return fail(quality.error().message), 1;
    options.quality_model = std::move(quality.value());
  }

  // Where inputs come from: the command line (one window), or lines.
  const std::string input_name = p.get("input", "-");
  const std::string source_name = input_name == "-" ? "standard input" : input_name;
  int fd = STDIN_FILENO;
  if (from_lines && input_name != "-") {
    fd = open(input_name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(input_name + ": cannot open: " + std::strerror(errno)), 1;
  }

  RunRequest request{p, loaded.value()};
  request.pivot = std::move(pivot_model);
  request.draft = std::move(draft_model);
  request.load_ms = load_ms;
  request.text_inputs = text_inputs;
  request.fd = fd;
  request.session.isa = p.get("isa");
  request.session.threads = threads;
  parse_activation_scales(activation_scales, &request.session.activation_scales);
  request.workers = workers;
  request.translate = options;
  request.batching = batching;
  request.sentence_view = p.has("html") || p.has("quality-scores") || p.has("ssplit-mode");
  request.alignment_threshold = alignment_threshold;
  request.generate = lm_options;
  request.chat_flags = chat_flags;
  // --requests answers each line with a JSON line (and no summary line).
  RunIo io(std::move(given), from_lines, fd, source_name,
           {p.has("json"), p.has("json-lines") || p.has("requests"), p.has("quiet")});

  if (p.has("tokenize") || p.has("detokenize")) return run::run_tokenizer(request, io);  // no translation
  static const char* const kLanguageModelFlags[] = {"sample", "greedy", "temperature", "top-k", "top-p", "min-p",
                                                    "repetition-penalty", "seed", "ignore-eos"};
  if (model.info().decoder_only) return run::run_language_model(request, io);
  for (const char* f : kLanguageModelFlags)
    if (p.has(f)) return fail("--" + std::string(f) + " applies to language models; " + p.positionals()[0] +
                              " is a translation model"), 2;
  if (p.has("requests")) return run::run_requests(request, io);
  return run::run_translation(request, io);
}

int main(int argc, char** argv) { return petrel::cli::run_tool("petrel-run", tool_main, argc, argv); }
