// petrel-run's inputs and outputs, shared by its modes (translation, language models, the
// tokenizer alone): inputs from the command line or lines read a window at a time, one
// output per input in order (plain text, --json or --json-lines), errors that name their
// input or line, progress on a terminal, the run's summary.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "petrel/status.h"
#include "petrel/translator.h"
#include "run/line_reader.h"

namespace petrel::run {

double ms_since(std::chrono::steady_clock::time_point start);
std::string ids_text(const std::vector<int32_t>& ids);
// Any bytes (a model file's strings, a user's text) as valid JSON: invalid UTF-8 is replaced.
std::string json_text(const nlohmann::json& j);
void fail(const std::string& message);
// A score as JSON: NaN (bergamot's 0/0 for a word without tokens) and infinities, which
// JSON cannot hold, as null.
nlohmann::json score_json(double score);
// A translation's sentences as bergamot's Response holds them, byte ranges [begin, end]:
// [{"source": [b, e], "target": [b, e]}, ...] (source: the input text, or in HTML mode
// TextTranslation::source_html; target: the best hypothesis' text).
nlohmann::json sentences_json(const TextTranslation& t);
// Per sentence {"sentence_score", "word_scores", "word_ranges" (byte ranges [b, e] of the
// translation)}; null for a sentence without scores.
nlohmann::json quality_json(const TextTranslation& t);
// A soft alignment ([target token][source token]) as nested arrays, or with a threshold its
// hard pairs [[source, target], ...] (hard_alignment's, sorted as Marian prints "s-t").
nlohmann::json alignment_json(const std::vector<std::vector<float>>& soft, std::optional<float> hard_threshold);
// --json's "speculation": the settings (lookup n-gram, the --draft file, the draft bound)
// and what the drafts did, with the acceptance rate and the tokens per verification (those
// accepted, and the model's own after them); draft_model_tokens where the engine counts them.
nlohmann::json speculation_json(size_t lookup_ngram, const std::string& draft_model, size_t max_draft_tokens,
                                size_t verifications, size_t drafted, size_t accepted,
                                std::optional<size_t> draft_model_tokens = std::nullopt);
// Reports an error from setting up the run (resolving the options against the model,
// creating the session) and returns the exit status: the options come from the flags, so
// a value the model or this CPU refuses (an unknown --isa, a --target-lang the model does
// not have, --max-new-tokens past its positions) is a usage error, 2, as a malformed flag
// is; out of memory or threads, 1.
int setup_failure(const Error& e);
// Whether an error message begins by naming `input` ("input 3 has ...", not "input 31").
bool names_input(const std::string& message, const std::string& input);

// A line on standard error that says how far a long run has got (terminals only). The
// total is unknown while lines are still arriving.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t tokens);
  void clear_line() const;

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  double last_ = -1;
};

struct OutputFormat {
  bool json = false;        // one object at the end, every result in it
  bool json_lines = false;  // one object per input, then one with the totals
  bool quiet = false;       // no timing or progress on standard error
};

class RunIo {
 public:
  // Inputs: `given` (the command line's) unless `from_lines`, else the lines of `fd`,
  // which errors call `source_name`.
  RunIo(std::vector<Input> given, bool from_lines, int fd, std::string source_name, OutputFormat format);

  // The next window of at most `lines` inputs into `window` (the command line's inputs all
  // at once); false at the end, or when nobody reads the output any more.
  bool next_window(size_t lines);
  // An input's ids (--ids, or a line of a model without a tokenizer); empty after an
  // error, which it records in the input.
  std::vector<int32_t> parse_ids(Input& in, size_t index) const;
  static bool blank(const Input& in);
  // One output per input, flushed at once (a coprocess waits for it).
  void emit(nlohmann::json result, const std::string& plain);
  // Input `index` failed: its error on standard error and as its output.
  void report(size_t index, const std::string& message);
  // The engine numbers a call's inputs from 1 ("input 3 has ..."): its input k + 1 is
  // the run's input `index` (a line's error names its line).
  std::string renumber(std::string message, size_t k, size_t index) const;
  std::string as_line(const std::string& message, size_t k) const { return renumber(message, k, base + k); }
  // The end of the inputs: the progress line cleared, a read error reported.
  void finish();
  // The run's summary as JSON (--json: with every result; --json-lines: its last line);
  // false when the output is plain text (the caller prints timing to standard error).
  bool print_summary(nlohmann::json& summary);
  // --json without a summary: the results alone.
  void print_results();
  int status() const { return failed == 0 ? 0 : 1; }

  const bool from_lines;
  const std::string source_name;
  const OutputFormat format;
  std::vector<Input> window;
  size_t base = 0;    // the index of the window's first input
  size_t tokens = 0;  // generated so far (progress)
  size_t done = 0, failed = 0;
  Progress progress;

 private:
  std::vector<Input> given_;
  bool given_taken_ = false;
  LineReader reader_;
  nlohmann::json results_ = nlohmann::json::array();
};

}  // namespace petrel::run
