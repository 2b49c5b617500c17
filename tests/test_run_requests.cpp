// petrel-run --requests (Firefox's requests to bergamot, one JSON object per line) and the
// flags that bring bergamot's options to the other modes (--html, --quality-scores,
// --quality-model, --ssplit-mode, --alignment-threshold), against bergamot 0.4.9's own
// responses (tests/fixtures/markup) with its settings.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "petrel/translator.h"
#include "support/bergamot_fixture.h"
#include "support/build_paths.h"
#include "support/coprocess.h"
#include "support/native_fixture.h"
#include "support/test_support.h"
#include "text/quality_estimator.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

// bergamot's settings in the fixtures (beam 1, max-length-factor 2, no shortlist).
const std::string kFirefoxFlags = " --beam 1 --max-length-factor 2 --no-shortlist --quiet";

json bergamot_fixture() { return markup_fixture("transformer_float32"); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& line : lines) out << line << "\n";
  REQUIRE(out);
}

// A request line as Firefox sends it, from a fixture request.
std::string request_line(const json& request) {
  return json({{"text", request["text"]},
               {"html", request["html"]},
               {"qualityScores", request["qualityScores"]},
               {"alignment", request["alignment"]}})
      .dump();
}

std::vector<std::vector<float>> matrix_of(const json& rows) {
  std::vector<std::vector<float>> m;
  for (const json& row : rows) m.push_back(row.get<std::vector<float>>());
  return m;
}

// A response's quality entry against bergamot's: scores to 1e-3; in plain text each word's
// bytes are its tokens' (bergamot's token bounds), its leading space left out.
void check_quality(const json& got, const json& want, const json& target_bounds, const std::string& text, bool plain) {
  REQUIRE(got.is_object());
  CHECK(std::fabs(got["sentence_score"].get<double>() - want["sentence_score"].get<double>()) < 1e-3);
  const auto word_scores = want["word_scores"].get<std::vector<double>>();
  REQUIRE(got["word_scores"].size() == word_scores.size());
  REQUIRE(got["word_ranges"].size() == word_scores.size());
  for (size_t w = 0; w < word_scores.size(); ++w) {
    CHECK(std::fabs(got["word_scores"][w].get<double>() - word_scores[w]) < 1e-3);
    const auto range = got["word_ranges"][w].get<std::vector<size_t>>();
    REQUIRE(range.size() == 2);
    CHECK(range[0] <= range[1]);
    CHECK(range[1] <= text.size());
    if (!plain) continue;
    const auto tokens = want["word_token_ranges"][w].get<std::vector<size_t>>();
    size_t begin = target_bounds[tokens[0]].get<size_t>();
    while (begin < text.size() && text[begin] == ' ') ++begin;
    CHECK(range == std::vector<size_t>{begin, target_bounds[tokens[1]].get<size_t>()});
  }
}

// bergamot's .quality.lr bytes (LogisticRegressorQualityEstimator::toAlignedMemory,
// little-endian): magic, dims, stds, means, coefficients, intercept.
std::string quality_lr_file() {
  std::string out;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  auto put_float = [&](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put(bits, 4);
  };
  put(text::LogisticRegressionQuality::kMagic, 8);
  put(4, 8);
  for (float v : {2.0f, 0.5f, 1.5f, 4.0f}) put_float(v);      // stds
  for (float v : {-1.25f, -2.5f, 1.75f, -1.0f}) put_float(v);  // means
  for (float v : {0.75f, -0.5f, 0.25f, 1.125f}) put_float(v);  // coefficients
  put_float(-0.375f);                                          // intercept
  return out;
}

}  // namespace

TEST_CASE("petrel-run --requests answers Firefox's requests as bergamot does, a bad line with its error",
          "[cli][requests][marian-native]") {
  if (!can_run_programs()) return;
  const json fixture = bergamot_fixture();
  const std::string model = native_model("transformer");
  TempDir tmp;
  // Every request bergamot translated (those it aborted on have no response to compare),
  // in the fixture's order, so runs of requests with the same options alternate with
  // single ones; a malformed line and an unknown field among them.
  std::vector<std::string> lines;
  std::vector<size_t> fixture_index;  // of each line; SIZE_MAX for the bad lines
  const size_t kBad = SIZE_MAX;
  for (size_t i = 0; i < fixture["requests"].size(); ++i) {
    const json& request = fixture["requests"][i];
    if (request["expect_error"].get<bool>()) continue;
    if (lines.size() == 5) {
      lines.push_back("{\"text\": \"Open the file\", \"html\": fals}");
      fixture_index.push_back(kBad);
    }
    if (lines.size() == 40) {
      lines.push_back("{\"text\": \"Open the file\", \"qualityscores\": true}");
      fixture_index.push_back(kBad);
    }
    lines.push_back(request_line(request));
    fixture_index.push_back(i);
  }
  write_lines(tmp.file("requests.jsonl"), lines);
  int status = 0;
  const std::string out = run_command(petrel_run_command() + " " + model + " --requests" + kFirefoxFlags +
                                          " --input " + tmp.file("requests.jsonl"),
                                      &status, true);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);  // the bad lines
  const std::vector<std::string> got = lines_of(out);
  REQUIRE(got.size() == lines.size());

  size_t plain = 0, html = 0, html_equal = 0, quality = 0, aligned = 0;
  double worst_alignment = 0;
  for (size_t n = 0; n < got.size(); ++n) {
    INFO("line " << n + 1 << ": " << lines[n]);
    const json response = json::parse(got[n]);
    if (fixture_index[n] == kBad) {
      REQUIRE(response.contains("error"));
      CHECK_THAT(response["error"].get<std::string>(), Contains("line " + std::to_string(n + 1) + ":"));
      CHECK_THAT(response["error"].get<std::string>(), Contains(n == 5 ? "not JSON" : "unknown field \"qualityscores\""));
      continue;
    }
    const json& request = fixture["requests"][fixture_index[n]];
    const json& want = fixture["responses"][fixture_index[n]];
    REQUIRE(!response.contains("error"));
    const std::string text = response["text"].get<std::string>();
    if (request["html"].get<bool>()) {
      ++html;
      html_equal += same_markup(text, want["text"].get<std::string>());
      if (!same_markup(text, want["text"].get<std::string>()) || response["source"] != want["source"]) continue;
    } else {
      ++plain;
      CHECK(text == want["text"].get<std::string>());
    }
    CHECK(response["source"] == want["source"]);
    REQUIRE(response["sentences"].size() == want["sentences"].size());
    // Scores written into HTML differ from bergamot's in their last digits (to 1e-3), and
    // with them the bytes after: target ranges are compared where the texts are equal.
    const bool same_bytes = text == want["text"].get<std::string>();
    for (size_t k = 0; k < want["sentences"].size(); ++k) {
      CHECK(response["sentences"][k]["source"] == want["sentences"][k]["source"]);
      if (same_bytes) CHECK(response["sentences"][k]["target"] == want["sentences"][k]["target"]);
      const auto target = response["sentences"][k]["target"].get<std::vector<size_t>>();
      CHECK(target.at(0) <= target.at(1));
      CHECK(target.at(1) <= text.size());
    }
    CHECK(response.contains("quality") == request["qualityScores"].get<bool>());
    CHECK(response.contains("alignments") == request["alignment"].get<bool>());
    if (request["qualityScores"].get<bool>()) {
      REQUIRE(response["quality"].size() == want["quality"].size());
      for (size_t k = 0; k < want["quality"].size(); ++k)
        check_quality(response["quality"][k], want["quality"][k], want["target_tokens"][k], text,
                      !request["html"].get<bool>());
      ++quality;
    }
    if (request["alignment"].get<bool>()) {
      REQUIRE(response["alignments"].size() == want["alignments"].size());
      for (size_t k = 0; k < want["alignments"].size(); ++k) {
        const json& rows = want["alignments"][k];
        REQUIRE(response["alignments"][k].size() == rows.size());
        for (size_t r = 0; r < rows.size(); ++r) {
          REQUIRE(response["alignments"][k][r].size() == rows[r].size());
          for (size_t c = 0; c < rows[r].size(); ++c)
            worst_alignment = std::max(worst_alignment, std::fabs(response["alignments"][k][r][c].get<double>() -
                                                                  rows[r][c].get<double>()));
        }
      }
      ++aligned;
    }
  }
  CHECK(plain >= 30);
  CHECK(html >= 300);
  // Every HTML translation equal to bergamot's (its quality scores to 1e-3).
  INFO(html_equal << " of " << html << " HTML translations equal bergamot's");
  CHECK(html_equal == html);
  CHECK(quality >= 100);
  CHECK(aligned >= 100);
  CHECK(worst_alignment < 1e-5);
}

// A program that writes a request and waits for its answer before the next (Firefox's
// way with a translation engine) gets each answer as soon as its request is done.
TEST_CASE("petrel-run --requests answers each request of a live pipe before the next arrives",
          "[cli][requests][pipe][marian-native]") {
  if (!can_run_programs()) return;
  const std::string model = native_model("transformer");
  Coprocess run(petrel_run_command() + " " + model + " --requests" + kFirefoxFlags + " 2>/dev/null");
  run.write_line(R"({"text": "Open the file."})");
  const auto first = run.read_line();
  REQUIRE(first.has_value());
  CHECK(json::parse(*first)["source"] == "Open the file.");
  run.write_line(R"(["Open the file."])");
  const auto second = run.read_line();
  REQUIRE(second.has_value());
  CHECK_THAT(json::parse(*second)["error"].get<std::string>(),
             Contains("standard input line 2: expected a JSON object, not array"));
  run.write_line(R"({"text": "<b>Save</b> all changes?", "html": true, "qualityScores": true})");
  const auto third = run.read_line();
  REQUIRE(third.has_value());
  const json answer = json::parse(*third);
  CHECK(answer["source"] == "<b>Save</b> all changes?");
  CHECK(answer["quality"].size() == 1);
  const auto [rest, status] = run.finish();
  CHECK(rest.empty());
  CHECK(status == 1);  // the bad line
}

TEST_CASE("petrel-run --requests --alignment-threshold gives Marian's hard pairs of the soft alignments",
          "[cli][requests][marian-native]") {
  if (!can_run_programs()) return;
  const std::string model = native_model("transformer");
  TempDir tmp;
  write_lines(tmp.file("requests.jsonl"),
              {R"({"text": "Open the file. Save all changes?", "alignment": true})",
               R"({"text": "<p>Open the <b>file</b> in a new window.</p>", "html": true, "alignment": true})"});
  int status = 0;
  const std::vector<std::string> soft =
      lines_of(run_command(petrel_run_command() + " " + model + " --requests" + kFirefoxFlags + " < " +
                               tmp.file("requests.jsonl"),
                           &status, true));
  REQUIRE(status == 0);
  for (const char* threshold : {"1", "0.2"}) {
    INFO("threshold " << threshold);
    const std::vector<std::string> hard =
        lines_of(run_command(petrel_run_command() + " " + model + " --requests --alignment-threshold " + threshold +
                                 kFirefoxFlags + " --input " + tmp.file("requests.jsonl"),
                             &status, true));
    REQUIRE(status == 0);
    REQUIRE(hard.size() == 2);
    REQUIRE(soft.size() == 2);
    for (size_t n = 0; n < 2; ++n) {
      const json s = json::parse(soft[n]), h = json::parse(hard[n]);
      CHECK(s["text"] == h["text"]);
      REQUIRE(s["alignments"].size() == s["sentences"].size());
      REQUIRE(h["alignments"].size() == s["alignments"].size());
      CHECK(s["sentences"].size() == (n == 0 ? 2u : 1u));
      for (size_t k = 0; k < s["alignments"].size(); ++k) {
        std::vector<std::vector<size_t>> want;
        for (const auto& [target, source] : hard_alignment(matrix_of(s["alignments"][k]), std::stof(threshold)))
          want.push_back({source, target});
        CHECK(!want.empty());
        CHECK(h["alignments"][k].get<std::vector<std::vector<size_t>>>() == want);
      }
    }
  }
}

TEST_CASE("petrel-run --html, --quality-scores and --ssplit-mode translate lines and texts as --requests does",
          "[cli][requests][marian-native]") {
  if (!can_run_programs()) return;
  const json fixture = bergamot_fixture();
  const std::string model = native_model("transformer");
  TempDir tmp;
  // HTML fragments without line breaks (an input is a line), with and without quality scores.
  std::vector<std::string> inputs;
  std::vector<size_t> picked;
  for (bool with_quality : {false, true}) {
    size_t taken = 0;
    for (size_t i = 0; i < fixture["requests"].size() && taken < 6; ++i) {
      const json& request = fixture["requests"][i];
      const std::string text = request["text"].get<std::string>();
      if (!request["html"].get<bool>() || request["expect_error"].get<bool>() ||
          request["qualityScores"].get<bool>() != with_quality || text.find('\n') != std::string::npos)
        continue;
      inputs.push_back(text);
      picked.push_back(i);
      ++taken;
    }
  }
  REQUIRE(picked.size() == 12);
  auto requests_for = [&](const std::vector<size_t>& indices) {
    std::vector<std::string> lines;
    for (size_t i : indices) lines.push_back(request_line(fixture["requests"][i]));
    return lines;
  };
  int status = 0;
  for (size_t half = 0; half < 2; ++half) {
    const bool with_quality = half == 1;
    const std::vector<size_t> these(picked.begin() + 6 * half, picked.begin() + 6 * half + 6);
    write_lines(tmp.file("in.html"), std::vector<std::string>(inputs.begin() + 6 * half, inputs.begin() + 6 * half + 6));
    write_lines(tmp.file("requests.jsonl"), requests_for(these));
    const std::string flags = std::string(" --html") + (with_quality ? " --quality-scores" : "") + kFirefoxFlags +
                              " --ssplit-mode paragraph --input " + tmp.file("in.html");
    const std::vector<std::string> plain = lines_of(run_command(petrel_run_command() + " " + model + flags, &status, true));
    REQUIRE(status == 0);
    const std::vector<std::string> json_lines =
        lines_of(run_command(petrel_run_command() + " " + model + flags + " --json-lines", &status, true));
    REQUIRE(status == 0);
    const std::vector<std::string> responses = lines_of(run_command(
        petrel_run_command() + " " + model + " --requests" + kFirefoxFlags + " < " + tmp.file("requests.jsonl"), &status,
        true));
    REQUIRE(status == 0);
    REQUIRE(plain.size() == 6);
    REQUIRE(json_lines.size() == 7);  // and the summary
    REQUIRE(responses.size() == 6);
    for (size_t n = 0; n < 6; ++n) {
      INFO("input " << inputs[6 * half + n]);
      const json r = json::parse(responses[n]), j = json::parse(json_lines[n]);
      CHECK(plain[n] == r["text"].get<std::string>());  // plain output: the translation alone
      CHECK(j["hypotheses"][0]["text"] == r["text"]);
      CHECK(j["source"] == r["source"]);
      CHECK(j["sentences"] == r["sentences"]);
      CHECK(j.contains("quality") == with_quality);
      if (with_quality) CHECK(j["quality"] == r["quality"]);
      CHECK(same_markup(plain[n], fixture["responses"][these[n]]["text"].get<std::string>()));
    }
  }

  // --text: the same, through the same path; a text is split only when --ssplit-mode asks.
  const std::string text = "Open the file. Save all changes?";
  auto sentences_of = [&](const std::string& flags) {
    const std::string out = run_command(petrel_run_command() + " " + model + " --text '" + text + "' --json" +
                                            kFirefoxFlags + flags,
                                        &status, true);
    REQUIRE(status == 0);
    const json run = json::parse(out);
    CHECK(run["inputs"] == 1);
    const json j = run["results"][0];
    return j.contains("sentences") ? j["sentences"].size() : size_t{0};
  };
  CHECK(sentences_of("") == 0);  // as before: no sentence view asked for
  CHECK(sentences_of(" --ssplit-mode paragraph") == 2);
  CHECK(sentences_of(" --ssplit-mode sentence") == 1);  // the line is one sentence
  CHECK(sentences_of(" --quality-scores") == 1);        // whole, as --text is translated
  const std::string html = run_command(petrel_run_command() + " " + model + " --text '<p>Open the <b>file</b>.</p>' --html" +
                                           kFirefoxFlags,
                                       &status, true);
  REQUIRE(status == 0);
  CHECK_THAT(html, Contains("<p>") && Contains("</b>") && Contains("</p>"));
}

TEST_CASE("petrel-run --quality-model scores with bergamot's logistic regression, and a bad file is named",
          "[cli][requests][marian-native]") {
  if (!can_run_programs()) return;
  const std::string model = native_model("transformer");
  TempDir tmp;
  {
    std::ofstream out(tmp.file("model.quality.lr"), std::ios::binary);
    out << quality_lr_file();
  }
  {
    std::ofstream out(tmp.file("bad.quality.lr"), std::ios::binary);
    out << quality_lr_file().substr(0, 20);
  }
  write_lines(tmp.file("requests.jsonl"), {R"({"text": "Open the file. Save all changes?", "qualityScores": true})"});
  int status = 0;
  auto run = [&](const std::string& flags) {
    return run_command(petrel_run_command() + " " + model + " --requests" + kFirefoxFlags + flags + " < " +
                           tmp.file("requests.jsonl"),
                       &status, true);
  };
  const json free_scores = json::parse(run(""));
  REQUIRE(status == 0);
  const json lr_scores = json::parse(run(" --quality-model " + tmp.file("model.quality.lr")));
  REQUIRE(status == 0);
  CHECK(lr_scores["text"] == free_scores["text"]);
  REQUIRE(lr_scores["quality"].size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    // The free estimator's scores are the logits here (positive), the regression's
    // log(1 - sigmoid(...)) (negative); the same words.
    CHECK(free_scores["quality"][k]["sentence_score"].get<double>() > 0);
    CHECK(lr_scores["quality"][k]["sentence_score"].get<double>() < 0);
    CHECK(lr_scores["quality"][k]["word_ranges"] == free_scores["quality"][k]["word_ranges"]);
  }
  const std::string bad = run_command(petrel_run_command() + " " + model + " --requests --quality-model " +
                                          tmp.file("bad.quality.lr") + " < " + tmp.file("requests.jsonl"),
                                      &status);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(bad, Contains("bad.quality.lr"));
}

TEST_CASE("petrel-run refuses --requests, --html and the quality and split flags where they do not apply",
          "[cli][requests][marian-native]") {
  if (!can_run_programs()) return;
  const std::string model = native_model("transformer");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --requests --text 'Open'", "--text does not apply with --requests"},
      {" --requests --ids '5 0'", "--ids does not apply with --requests"},
      {" --requests --stream", "--stream does not apply with --requests"},
      {" --requests --chat", "--chat does not apply with --requests"},
      {" --requests --html", "--html does not apply with --requests"},
      {" --requests --json-lines", "--json-lines does not apply with --requests"},
      {" --requests --n-best 2 --beam 2", "--n-best does not apply with --requests"},
      {" --requests --no-split", "--no-split does not apply with --requests"},
      {" --html --n-best 2 --beam 2 --json", "--n-best does not apply with it"},
      {" --html --ids '5 0'", "--html takes text inputs"},
      {" --html --stream", "--html does not apply with --stream"},
      {" --ssplit-mode lines", "--ssplit-mode: 'lines' is not one of sentence, paragraph, wrapped_text"},
      {" --ssplit-mode sentence --no-split", "--ssplit-mode or --no-split"},
      {" --requests --alignment-threshold 0", "--alignment-threshold: '0' is not a number in (0, 1]"},
      {" --requests --alignment-threshold 1.5", "--alignment-threshold: '1.5' is not a number in (0, 1]"},
      {" --alignment-threshold 0.5 --json", "--alignment-threshold makes"},
      {" --quality-model x.quality.lr", "--quality-model chooses how --quality-scores are computed"},
      {" --quality-scores", "--quality-scores needs --html"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    int status = 0;
    const std::string out = run_command(petrel_run_command() + " " + model + args + " </dev/null", &status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK_THAT(out, Contains(message));
  }
  // The help names every new flag.
  int status = 0;
  const std::string help = run_command(petrel_run_command() + " --help", &status, true);
  CHECK(status == 0);
  for (const char* flag : {"--requests", "--html", "--quality-scores", "--quality-model", "--ssplit-mode",
                           "--alignment-threshold"})
    CHECK_THAT(help, Contains(flag));
}
