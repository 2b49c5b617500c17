#include "run/run_io.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "common/cli.h"

namespace petrel::run {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

std::string json_text(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

nlohmann::json score_json(double score) { return std::isfinite(score) ? nlohmann::json(score) : nlohmann::json(nullptr); }

static nlohmann::json range_json(const TextRange& r) { return nlohmann::json::array({r.begin, r.end}); }

nlohmann::json sentences_json(const TextTranslation& t) {
  nlohmann::json out = nlohmann::json::array();
  for (const SentenceTranslation& s : t.sentences)
    out.push_back({{"source", range_json(s.source)}, {"target", range_json(s.target)}});
  return out;
}

nlohmann::json quality_json(const TextTranslation& t) {
  nlohmann::json out = nlohmann::json::array();
  for (const SentenceTranslation& s : t.sentences) {
    if (!s.quality) {
      out.push_back(nullptr);
      continue;
    }
    nlohmann::json scores = nlohmann::json::array(), ranges = nlohmann::json::array();
    for (float w : s.quality->word_scores) scores.push_back(score_json(w));
    for (const TextRange& r : s.quality->words) ranges.push_back(range_json(r));
    out.push_back({{"sentence_score", score_json(s.quality->score)}, {"word_scores", std::move(scores)},
                   {"word_ranges", std::move(ranges)}});
  }
  return out;
}

nlohmann::json speculation_json(size_t lookup_ngram, const std::string& draft_model, size_t max_draft_tokens,
                                size_t verifications, size_t drafted, size_t accepted,
                                std::optional<size_t> draft_model_tokens) {
  nlohmann::json j = {
      {"lookup_ngram", lookup_ngram},
      {"draft_model", draft_model},
      {"max_draft_tokens", max_draft_tokens},
      {"verifications", verifications},
      {"drafted_tokens", drafted},
      {"accepted_tokens", accepted},
      {"acceptance_rate", drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0},
      {"tokens_per_verification", verifications > 0 ? static_cast<double>(accepted + verifications) / verifications : 0.0}};
  if (draft_model_tokens) j["draft_model_tokens"] = *draft_model_tokens;
  return j;
}

nlohmann::json alignment_json(const std::vector<std::vector<float>>& soft, std::optional<float> hard_threshold) {
  if (!hard_threshold) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : soft) {
      nlohmann::json values = nlohmann::json::array();
      for (float p : row) values.push_back(score_json(p));
      rows.push_back(std::move(values));
    }
    return rows;
  }
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [target, source] : hard_alignment(soft, *hard_threshold)) pairs.push_back({source, target});
  return pairs;
}

void fail(const std::string& message) { std::fprintf(stderr, "petrel-run: error: %s\n", message.c_str()); }

int setup_failure(const Error& e) {
  fail(e.message);
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kUnsupported ? 2 : 1;
}

bool names_input(const std::string& message, const std::string& input) {
  return message.compare(0, input.size(), input) == 0 &&
         (message.size() == input.size() || !std::isdigit(static_cast<unsigned char>(message[input.size()])));
}

void Progress::update(size_t done, size_t tokens) {
  if (!enabled_) return;
  const double seconds = ms_since(start_) / 1000;
  if (seconds - last_ < 0.1) return;
  last_ = seconds;
  std::fprintf(stderr, "\r\033[K%zu inputs, %.1f inputs/s, %.0f tokens/s", done, seconds > 0 ? done / seconds : 0.0,
               seconds > 0 ? tokens / seconds : 0.0);
}

void Progress::clear_line() const {
  if (enabled_) std::fprintf(stderr, "\r\033[K");
}

RunIo::RunIo(std::vector<Input> given, bool from_lines, int fd, std::string source_name, OutputFormat format)
    : from_lines(from_lines),
      source_name(std::move(source_name)),
      format(format),
      progress(from_lines && !format.quiet && isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO) && !format.json),
      given_(std::move(given)),
      reader_(fd, this->source_name) {}

bool RunIo::next_window(size_t lines) {
  if (std::ferror(stdout)) return false;  // nobody reads the output: stop (main reports it)
  if (from_lines) return reader_.next_window(lines, window);
  if (given_taken_) return false;
  window = given_;
  given_taken_ = true;
  return !window.empty();
}

std::vector<int32_t> RunIo::parse_ids(Input& in, size_t index) const {
  if (in.error || in.text.find_first_not_of(" \t") == std::string::npos) return {};
  try {
    return cli::parse_id_list(in.text, from_lines ? source_name + " line " + std::to_string(index + 1) : "--ids");
  } catch (const cli::UsageError& e) {
    in.error = e.what();
    return {};
  }
}

bool RunIo::blank(const Input& in) {
  return !in.error && in.text.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

void RunIo::emit(nlohmann::json result, const std::string& plain) {
  if (format.json) {
    results_.push_back(std::move(result));
  } else {
    const std::string line = format.json_lines ? json_text(result) : plain;
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  progress.update(++done, tokens);
}

void RunIo::report(size_t index, const std::string& message) {
  ++failed;
  progress.clear_line();
  const std::string input = "input " + std::to_string(index + 1);
  const std::string where = from_lines || names_input(message, input) ? "" : input + ": ";
  std::fprintf(stderr, "petrel-run: %s%s\n", where.c_str(), message.c_str());
  emit({{"index", index}, {"error", where + message}}, "");
}

std::string RunIo::renumber(std::string message, size_t k, size_t index) const {
  const std::string prefix = "input " + std::to_string(k + 1);
  if (names_input(message, prefix))
    message = (from_lines ? source_name + " line " : std::string("input ")) + std::to_string(index + 1) +
              message.substr(prefix.size());
  return message;
}

void RunIo::finish() {
  progress.clear_line();
  if (!reader_.read_error().empty()) fail(reader_.read_error()), ++failed;
}

bool RunIo::print_summary(nlohmann::json& summary) {
  if (format.json) {
    summary["results"] = results_;
    std::cout << json_text(summary) << "\n";
  } else if (format.json_lines) {
    std::cout << json_text({{"summary", summary}}) << "\n";
  }
  return format.json || format.json_lines;
}

void RunIo::print_results() {
  if (format.json) std::cout << json_text({{"results", results_}}) << "\n";
}

}  // namespace petrel::run
