// petrel-run --requests: what Firefox asks of bergamot, one request per line, a JSON object
// {"text", "html", "qualityScores", "alignment"} (bergamot's ResponseOptions names), each
// answered by one JSON line as bergamot's Response holds it: the translation, the source
// (in HTML mode as its markup is written back), each sentence's byte ranges, and its
// alignments and quality scores when asked. Consecutive requests asking the same options
// are one BatchTranslator call, so their sentences share batches. With --pivot each goes
// through the two models (translate_via_pivot) and is answered in the same shape.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run/modes.h"

namespace petrel::run {
namespace {

struct TextRequest {
  std::string text;
  bool html = false, quality_scores = false, alignment = false;

  bool same_options(const TextRequest& o) const {
    return html == o.html && quality_scores == o.quality_scores && alignment == o.alignment;
  }
};

// A request is a flat object; deeper nesting is refused before parsing, so no JSON value
// this reads nests deeper than this (whatever the parser's own limits).
constexpr size_t kMaxRequestNesting = 16;

// The deepest nesting of arrays and objects in `line`, strings skipped (stops counting
// past kMaxRequestNesting).
size_t nesting_depth(const std::string& line) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : line) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxRequestNesting) break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// The request on `line`, or why it is not one.
std::optional<std::string> parse_request(const std::string& line, TextRequest& out) {
  if (line.find_first_not_of(" \t\r\n\f\v") == std::string::npos) return "an empty line: expected a JSON object";
  if (nesting_depth(line) > kMaxRequestNesting)
    return "nested deeper than " + std::to_string(kMaxRequestNesting) + " levels: expected a flat JSON object";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at ...": the prefix is noise
    const size_t bracket = what.find("] ");
    if (what.compare(0, 1, "[") == 0 && bracket != std::string::npos) what.erase(0, bracket + 2);
    return "not JSON: " + what;
  }
  if (!j.is_object()) return std::string("expected a JSON object, not ") + j.type_name();
  bool has_text = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "text") {
      if (!value.is_string()) return std::string("\"text\" must be a string, not ") + value.type_name();
      out.text = value.get<std::string>();
      has_text = true;
      continue;
    }
    bool* flag = key == "html" ? &out.html : key == "qualityScores" ? &out.quality_scores
                                         : key == "alignment"     ? &out.alignment
                                                                  : nullptr;
    if (flag == nullptr)
      return "unknown field \"" + key + "\" (a request has \"text\", \"html\", \"qualityScores\", \"alignment\")";
    if (!value.is_boolean()) return "\"" + key + "\" must be true or false, not " + value.type_name();
    *flag = value.get<bool>();
  }
  if (!has_text) return std::string("no \"text\"");
  return std::nullopt;
}

// The answer to one request, as bergamot's Response holds it.
nlohmann::json response_json(const TextRequest& request, const TextTranslation& t, std::optional<float> hard_threshold) {
  nlohmann::json j = {{"text", t.hypotheses.empty() ? std::string() : t.hypotheses[0].text},
                      {"source", request.html ? t.source_html : request.text},
                      {"sentences", sentences_json(t)}};
  if (request.alignment) {
    nlohmann::json alignments = nlohmann::json::array();
    for (const SentenceTranslation& s : t.sentences) alignments.push_back(alignment_json(s.alignment, hard_threshold));
    j["alignments"] = std::move(alignments);
  }
  if (request.quality_scores) j["quality"] = quality_json(t);
  return j;
}

}  // namespace

int run_requests(const RunRequest& r, RunIo& io) {
  auto created = create_text_translators(r);  // with --pivot, through two models
  if (!created) return setup_failure(created.error());
  TextTranslators& translators = created.value();
  const BatchTranslator& batch = translators.model;
  const std::optional<float> hard_threshold = r.alignment_threshold;
  const auto run_start = std::chrono::steady_clock::now();
  std::vector<std::optional<TextRequest>> requests;
  std::vector<std::string> problems;
  for (; io.next_window(r.batching.window); io.base += io.window.size()) {
    requests.assign(io.window.size(), std::nullopt);
    problems.assign(io.window.size(), std::string());
    for (size_t k = 0; k < io.window.size(); ++k) {
      const Input& in = io.window[k];
      if (in.error) {
        problems[k] = *in.error;
        continue;
      }
      TextRequest request;
      if (auto problem = parse_request(in.text, request)) {
        problems[k] = io.source_name + " line " + std::to_string(io.base + k + 1) + ": " + *problem;
        continue;
      }
      requests[k] = std::move(request);
    }
    // Runs of requests asking the same options, each one call, in order; a bad line is
    // answered in its place between them.
    for (size_t k = 0; k < io.window.size();) {
      if (!requests[k]) {
        io.report(io.base + k, problems[k]);
        ++k;
        continue;
      }
      size_t end = k + 1;
      while (end < io.window.size() && requests[end] && requests[end]->same_options(*requests[k])) ++end;
      TranslateOptions options = r.translate;
      options.html = requests[k]->html;
      options.quality_scores = requests[k]->quality_scores;
      options.alignment = requests[k]->alignment;
      std::vector<std::string> texts;
      for (size_t i = k; i < end; ++i) texts.push_back(requests[i]->text);
      const size_t first = k;
      Status s = translators.translate_text(texts, options, r.batching, [&](size_t j, Result<TextTranslation>&& t) {
        const size_t index = io.base + first + j;
        if (!t) return io.report(index, io.renumber(t.error().message, j, index));
        if (!t.value().hypotheses.empty()) io.tokens += t.value().hypotheses[0].ids.size();
        io.emit(response_json(*requests[first + j], t.value(), hard_threshold), "");
      });
      if (!s) return fail(s.error().message), 1;
      k = end;
    }
  }
  io.finish();
  const double seconds = ms_since(run_start) / 1000;
  if (!io.format.quiet)
    std::fprintf(stderr, "load %.1f ms, %zu requests in %.2f s (%zu failed, %zu tokens generated, %s, %zu worker%s x %zu thread%s)\n",
                 r.load_ms, io.base, seconds, io.failed, io.tokens, batch.isa(), batch.workers(),
                 batch.workers() == 1 ? "" : "s", r.session.threads, r.session.threads == 1 ? "" : "s");
  return io.status();
}

}  // namespace petrel::run
