// One answer on every device: an int8 or int4 model translates to the same ids and the same
// scores, bit for bit, on every kernel path of this CPU and on every platform of a run
// (kernels.h: integer products, canonical.h's sums, e^x and erf). The run's first platform
// (x86-64, every path) writes what it got; the sanitized, WebAssembly and ARM stages, which
// run [portable], compare theirs with it.
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "petrel/petrel.h"
#include "support/test_support.h"

namespace one_answer_test {

using namespace petrel;
using namespace petrel::test;

std::vector<std::vector<int32_t>> held_out_inputs(const Model& model, size_t count) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream lines(source_dir() + "/tests/fixtures/en-de/test.en");
  std::string line;
  while (out.size() < count && std::getline(lines, line)) {
    auto ids = encode_text(model, line);
    REQUIRE(ids);
    out.push_back(ids.value());
  }
  REQUIRE(out.size() == count);
  return out;
}

// Ids, scores and each token's log-probability, floats as hexadecimal (every bit shown).
std::string written(const std::vector<Translation>& translations) {
  std::ostringstream text;
  text << std::hexfloat;
  for (const Translation& t : translations) {
    for (const Hypothesis& h : t.hypotheses) {
      for (int32_t id : h.ids) text << id << ' ';
      text << "| " << h.score << " |";
      for (const TokenScore& s : h.token_scores) text << ' ' << s.log_probability;
      text << '\n';
    }
    text << '\n';
  }
  return text.str();
}

TEST_CASE("int8 and int4 translations are the same on every kernel path and platform", "[portable][translate]") {
  std::ostringstream all;
  for (const DType dtype : {DType::kInt8, DType::kInt4}) {
    const std::string path = shared_conversion("en-de", source_dir() + "/tools/en-de-model", dtype);
    auto model = load_model(path);
    const auto inputs = held_out_inputs(*model, 8);
    TranslateOptions greedy;
    greedy.beam_size = 1;
    greedy.token_scores = true;
    TranslateOptions beam = greedy;
    beam.beam_size = 4;
    beam.n_best = 2;
    std::string first_path, first;
    for (const std::string& isa : model_test_isas()) {
      auto translator = Translator::create(model, {isa, 1});
      REQUIRE(translator);
      std::string here;
      for (const TranslateOptions& o : {greedy, beam}) {
        auto got = translator.value().translate(inputs, o);
        REQUIRE(got);
        here += written(got.value());
      }
      INFO(to_string(dtype) << ": " << isa << " against " << first_path);
      if (first_path.empty()) {
        first_path = isa;
        first = here;
      }
      CHECK(here == first);
    }
    all << to_string(dtype) << '\n' << first;
  }
  const std::string here = all.str();
  const std::string shared = shared_file("one_answer_v1.txt", [&](const std::string& file) { std::ofstream(file) << here; });
  std::ifstream in(shared);
  const std::string first_platform((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(here == first_platform);
}

}  // namespace one_answer_test
