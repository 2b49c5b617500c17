// petrel-run --pivot SECOND.petrel: text through two models (source -> pivot -> target), in
// --requests mode and on lines, against bergamot 0.4.9's translateViaPivoting
// (tests/fixtures/markup/pivot-transformer-ssru_float32.json), and the flags and models
// pivoting refuses.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/bergamot_fixture.h"
#include "support/build_paths.h"
#include "support/native_fixture.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

// bergamot's settings in the fixture (beam 1, max-length-factor 2, no shortlist).
const std::string kPivotFirefoxFlags = " --beam 1 --max-length-factor 2 --no-shortlist --quiet";

// The fixture's two models: transformer translates into the pivot, ssru out of it.
std::string pivot_command() {
  return petrel_run_command() + " " + native_model("transformer") + " --pivot " + native_model("ssru") +
         kPivotFirefoxFlags;
}

std::vector<std::string> output_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_file_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& line : lines) out << line << "\n";
  REQUIRE(out);
}

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> keys;
  for (const auto& item : j.items()) keys.insert(item.key());
  return keys;
}

}  // namespace

TEST_CASE("petrel-run --requests --pivot answers as bergamot's translateViaPivoting: texts, ranges, scores, alignments",
          "[cli][requests][pivot][marian-native]") {
  if (!can_run_programs()) return;
  const json fixture = markup_fixture("pivot-transformer-ssru_float32");
  TempDir tmp;
  std::vector<std::string> lines;
  std::vector<size_t> fixture_index;
  for (size_t i = 0; i < fixture["requests"].size(); ++i) {
    const json& request = fixture["requests"][i];
    if (request["expect_error"].get<bool>()) continue;
    lines.push_back(json({{"text", request["text"]},
                          {"html", request["html"]},
                          {"qualityScores", request["qualityScores"]},
                          {"alignment", request["alignment"]}})
                        .dump());
    fixture_index.push_back(i);
  }
  write_file_lines(tmp.file("requests.jsonl"), lines);
  int status = 0;
  const std::string out =
      run_command(pivot_command() + " --requests --input " + tmp.file("requests.jsonl"), &status, true);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::vector<std::string> got = output_lines(out);
  REQUIRE(got.size() == lines.size());

  size_t equal = 0, aligned = 0, alignments_equal = 0, scored = 0;
  for (size_t n = 0; n < got.size(); ++n) {
    const json& request = fixture["requests"][fixture_index[n]];
    const json& want = fixture["responses"][fixture_index[n]];
    INFO("request " << fixture_index[n] << ": " << lines[n]);
    const json response = json::parse(got[n]);
    REQUIRE(!response.contains("error"));
    // The shape of a response without --pivot.
    std::set<std::string> keys = {"text", "source", "sentences"};
    if (request["alignment"].get<bool>()) keys.insert("alignments");
    if (request["qualityScores"].get<bool>()) keys.insert("quality");
    CHECK(keys_of(response) == keys);
    const std::string text = response["text"].get<std::string>();
    const std::string want_text = want["text"].get<std::string>();
    const bool same = request["html"].get<bool>() ? same_markup(text, want_text) : text == want_text;
    equal += same;
    if (!same) continue;
    CHECK(response["source"] == want["source"]);
    REQUIRE(response["sentences"].size() == want["sentences"].size());
    for (size_t k = 0; k < want["sentences"].size(); ++k) {
      CHECK(response["sentences"][k]["source"] == want["sentences"][k]["source"]);
      if (text == want_text) CHECK(response["sentences"][k]["target"] == want["sentences"][k]["target"]);
    }
    if (request["qualityScores"].get<bool>()) {  // the second model's scores
      REQUIRE(response["quality"].size() == want["quality"].size());
      for (size_t k = 0; k < want["quality"].size(); ++k) {
        const json& q = response["quality"][k];
        const json& w = want["quality"][k];
        if (w["sentence_score"].is_number() && q["sentence_score"].is_number())
          CHECK(std::fabs(q["sentence_score"].get<double>() - w["sentence_score"].get<double>()) < 1e-3);
        CHECK(q["word_scores"].size() == w["word_scores"].size());
      }
      ++scored;
    }
    if (request["alignment"].get<bool>() && !request["html"].get<bool>()) {
      // Composed through the pivot text; bergamot's NaN (a pivot token no source token
      // maps to) is null in JSON.
      ++aligned;
      bool all = response["alignments"].size() == want["alignments"].size();
      for (size_t k = 0; all && k < want["alignments"].size(); ++k) {
        const json& rows = want["alignments"][k];
        all = response["alignments"][k].size() == rows.size();
        for (size_t r = 0; all && r < rows.size(); ++r) {
          all = response["alignments"][k][r].size() == rows[r].size();
          for (size_t c = 0; all && c < rows[r].size(); ++c) {
            const json& value = response["alignments"][k][r][c];
            all = rows[r][c].is_string() ? value.is_null()
                                         : value.is_number() && std::fabs(value.get<double>() - rows[r][c].get<double>()) < 1e-5;
          }
        }
      }
      alignments_equal += all;
    }
  }
  INFO(equal << " of " << got.size() << " equal; alignments " << alignments_equal << " of " << aligned << "; scored "
             << scored);
  CHECK(got.size() >= 350);
  CHECK(equal * 100 >= got.size() * 98);
  CHECK(aligned > 0);
  CHECK(alignments_equal == aligned);
  CHECK(scored > 0);
}

TEST_CASE("petrel-run --pivot translates lines as --requests does, plain and --json-lines shaped as without it",
          "[cli][pivot][marian-native]") {
  if (!can_run_programs()) return;
  const json fixture = markup_fixture("pivot-transformer-ssru_float32");
  TempDir tmp;
  // The fixture's plain-text requests on one line each, translated as bergamot splits them.
  std::vector<std::string> texts, want;
  for (size_t i = 0; i < fixture["requests"].size(); ++i) {
    const json& request = fixture["requests"][i];
    const std::string text = request["text"].get<std::string>();
    if (request["expect_error"].get<bool>() || request["html"].get<bool>() || text.find('\n') != std::string::npos)
      continue;
    texts.push_back(text);
    want.push_back(fixture["responses"][i]["text"].get<std::string>());
  }
  REQUIRE(texts.size() >= 20);
  write_file_lines(tmp.file("lines.txt"), texts);
  int status = 0;
  const std::vector<std::string> plain = output_lines(
      run_command(pivot_command() + " --ssplit-mode paragraph --input " + tmp.file("lines.txt"), &status, true));
  CHECK(status == 0);
  REQUIRE(plain.size() == texts.size());
  size_t equal = 0;
  for (size_t i = 0; i < texts.size(); ++i) equal += plain[i] == want[i];
  INFO(equal << " of " << texts.size() << " equal to bergamot's");
  CHECK(equal * 100 >= texts.size() * 98);

  // --json-lines: the keys one model gives, the text the plain output's.
  const std::vector<std::string> objects = output_lines(run_command(
      pivot_command() + " --ssplit-mode paragraph --quality-scores --json-lines --input " + tmp.file("lines.txt"),
      &status, true));
  CHECK(status == 0);
  const std::vector<std::string> one_model = output_lines(
      run_command(petrel_run_command() + " " + native_model("transformer") + kPivotFirefoxFlags +
                      " --ssplit-mode paragraph --quality-scores --json-lines --input " + tmp.file("lines.txt"),
                  &status, true));
  CHECK(status == 0);
  REQUIRE(objects.size() == texts.size() + 1);  // and the totals
  REQUIRE(one_model.size() == objects.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("line " << i + 1 << ": " << texts[i]);
    const json j = json::parse(objects[i]);
    CHECK(keys_of(j) == keys_of(json::parse(one_model[i])));
    CHECK(j["index"] == i);
    CHECK(j["input_text"] == texts[i]);
    REQUIRE(j["hypotheses"].size() == 1);
    CHECK(j["hypotheses"][0]["text"] == plain[i]);
    CHECK(j["sentences"].size() == j["quality"].size());
  }
  const json totals = json::parse(objects.back())["summary"];
  CHECK(totals["pivot"] == native_model("ssru"));
  CHECK(totals["inputs"] == texts.size());

  // --html on lines, as a request asks for it.
  const std::string html = run_command(pivot_command() + " --text '<p>Open the <b>file</b>.</p>' --html", &status, true);
  CHECK(status == 0);
  CHECK_THAT(html, Contains("<p>") && Contains("</b>") && Contains("</p>"));
}

TEST_CASE("petrel-run --pivot refuses what pivoting cannot honour, naming the flag or the model",
          "[cli][pivot][marian-native]") {
  if (!can_run_programs()) return;
  const std::string first = native_model("transformer"), second = native_model("ssru");
  const std::vector<std::pair<std::string, std::string>> usage = {
      {" --requests --n-best 2 --beam 2", "--n-best does not apply with --requests"},
      {" --n-best 2 --beam 2 --json-lines", "--n-best does not apply with --pivot"},
      {" --ids '5 0'", "--ids does not apply with --pivot"},
      {" --stream", "--stream does not apply with --pivot"},
      {" --tokenize", "--tokenize does not apply with --pivot"},
      {" --target-lang de", "--target-lang does not apply with --pivot"},
      {" --source-lang en", "--source-lang does not apply with --pivot"},
      {" --target-prefix '5'", "--target-prefix does not apply with --pivot"},
      {" --alignment --json-lines", "--alignment does not apply with --pivot"},
  };
  for (const auto& [args, message] : usage) {
    INFO(args);
    int status = 0;
    const std::string out = run_command(petrel_run_command() + " " + first + " --pivot " + second + args + " </dev/null", &status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK_THAT(out, Contains(message));
  }
  // Models pivoting cannot use: a language model (first or second), a tokenizer without
  // token byte ranges (opus-mt's), a file that is not there.
  const std::string language_model =
      shared_conversion("lm-gemma3_f32", fixture_dir() + "/decoder_only/gemma3_f32", DType::kF32);
  const std::string no_ranges = en_de_model_path();
  TempDir tmp;
  const std::string missing = tmp.file("missing.petrel");
  const std::vector<std::tuple<std::string, std::string, int, std::string>> models = {
      {language_model, second, 2, language_model + " is a language model"},
      {first, language_model, 2, language_model + " is a language model"},
      {first, no_ranges, 2, no_ranges + "'s does not"},
      {no_ranges, second, 2, no_ranges + "'s does not"},
      {first, missing, 1, missing},
  };
  for (const auto& [one, two, code, message] : models) {
    INFO(one << " --pivot " << two);
    int status = 0;
    const std::string out =
        run_command(petrel_run_command() + " " + one + " --pivot " + two + " --requests --quiet </dev/null", &status);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == code);
    CHECK_THAT(out, Contains(message));
  }
  int status = 0;
  const std::string help = run_command(petrel_run_command() + " --help", &status, true);
  CHECK(status == 0);
  CHECK_THAT(help, Contains("--pivot SECOND.petrel") && Contains("apply to both models"));
}
