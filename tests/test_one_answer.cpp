// One answer on every device: an int8 or int4 model translates to the same ids and the same
// scores, bit for bit, on every kernel path of this CPU and on every platform of a run
// (kernels.h: integer products, canonical.h's sums, e^x and erf). The run's first platform
// (x86-64, every path) writes what it got; the sanitized, WebAssembly and ARM stages, which
// run [portable], compare theirs with it.
#include <algorithm>
#include <fstream>
#include <map>
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

// Ids, scores and each token's log-probability, floats as hexadecimal (every bit shown).
std::string written(const Translation& t) {
  std::ostringstream text;
  text << std::hexfloat;
  for (const Hypothesis& h : t.hypotheses) {
    for (int32_t id : h.ids) text << id << ' ';
    text << "| " << h.score << " |";
    for (const TokenScore& s : h.token_scores) text << ' ' << s.log_probability;
    text << ';';
  }
  return text.str();
}

// One line per model, search and input: "int8 beam 3: <written>". The first platform
// translates every input; sanitized and emulated runs (PETREL_TEST_SUBSET) the first few,
// each compared with its line.
TEST_CASE("int8 and int4 translations are the same on every kernel path and platform", "[portable][translate]") {
  constexpr size_t kInputs = 8;
  const size_t count = std::max<size_t>(1, kInputs / subset_stride());
  std::ostringstream all;
  for (const DType dtype : {DType::kInt8, DType::kInt4}) {
    auto model = load_model(en_de_model_path(dtype));
    const auto inputs = en_de_test_inputs(*model, count);
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
      std::ostringstream here;
      for (const auto& [name, o] : {std::pair<const char*, TranslateOptions>{"greedy", greedy}, {"beam", beam}}) {
        auto got = translator.value().translate(inputs, o);
        REQUIRE(got);
        for (size_t i = 0; i < inputs.size(); ++i)
          here << to_string(dtype) << ' ' << name << ' ' << i << ": " << written(got.value()[i]) << '\n';
      }
      INFO(to_string(dtype) << ": " << isa << " against " << first_path);
      if (first_path.empty()) {
        first_path = isa;
        first = here.str();
      }
      CHECK(here.str() == first);
    }
    all << first;
  }
  const std::string here = all.str();
  const std::string shared = shared_file("one_answer_v1.txt", [&](const std::string& file) { std::ofstream(file) << here; });
  std::map<std::string, std::string> first_platform;  // key -> line
  std::ifstream in(shared);
  for (std::string line; std::getline(in, line);) first_platform[line.substr(0, line.find(':'))] = line;
  REQUIRE(first_platform.size() == 2 * 2 * kInputs);
  std::istringstream lines(here);
  for (std::string line; std::getline(lines, line);) {
    INFO(line.substr(0, line.find(':')));
    CHECK(first_platform[line.substr(0, line.find(':'))] == line);
  }
}

}  // namespace one_answer_test
