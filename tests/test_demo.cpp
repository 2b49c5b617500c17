// The bundled demo model (tools/demo-model, trained by tools/reference/train_demo.py)
// spells numbers in English words. Exact-match accuracy on held-out numbers, checked
// by the rule below, for the f32 and the int8 conversion.
#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <string>

#include "convert/convert.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;

namespace {

const char* const kOnes[] = {"zero",    "one",     "two",       "three",    "four",     "five",    "six",
                             "seven",   "eight",   "nine",      "ten",      "eleven",   "twelve",  "thirteen",
                             "fourteen", "fifteen", "sixteen",  "seventeen", "eighteen", "nineteen"};
const char* const kTens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};

// The checker: "4096" -> "four thousand ninety six" (no "and", no hyphens).
std::string words(uint32_t n) {
  if (n < 20) return kOnes[n];
  if (n < 100) return std::string(kTens[n / 10]) + (n % 10 ? std::string(" ") + kOnes[n % 10] : "");
  if (n < 1000) return std::string(kOnes[n / 100]) + " hundred" + (n % 100 ? " " + words(n % 100) : "");
  return words(n / 1000) + " thousand" + (n % 1000 ? " " + words(n % 1000) : "");
}

// The numbers the training script never saw (same rule as train_demo.py).
bool held_out(uint64_t n) { return n >= 1000 && (n * 2654435761ull % (1ull << 32)) % 50 == 0; }

// Distinct held-out numbers, as many with 4, 5 and 6 digits.
std::vector<uint32_t> held_out_numbers(size_t count) {
  std::mt19937 rng(99);
  std::set<uint32_t> seen;
  std::vector<uint32_t> out;
  while (out.size() < count) {
    const uint32_t digits = 4 + rng() % 3, low = digits == 4 ? 1000 : digits == 5 ? 10000 : 100000;
    const uint32_t n = low + rng() % (9 * low);
    if (held_out(n) && seen.insert(n).second) out.push_back(n);
  }
  return out;
}

double accuracy(DType dtype, const std::vector<uint32_t>& numbers) {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = source_dir() + "/tools/demo-model";
  o.output_path = tmp.file("demo.petrel");
  o.linear_dtype = o.embedding_dtype = dtype;
  convert::convert_checkpoint(o);
  auto model = Model::load(o.output_path);
  REQUIRE(model.has_value());
  auto created = Translator::create(model.value());
  REQUIRE(created.has_value());
  Translator& translator = created.value();
  size_t correct = 0;
  const size_t batch_size = 50;  // padded batches of mixed lengths
  for (size_t first = 0; first < numbers.size(); first += batch_size) {
    std::vector<std::vector<int32_t>> batch;
    for (size_t i = first; i < std::min(numbers.size(), first + batch_size); ++i) {
      auto ids = encode_text(*model.value(), std::to_string(numbers[i]));
      REQUIRE(ids.has_value());
      batch.push_back(ids.value());
    }
    TranslateOptions options;
    options.max_new_tokens = 16;
    auto result = translator.translate(batch, options);
    REQUIRE(result.has_value());
    for (size_t i = 0; i < batch.size(); ++i) {
      auto text = decode_text(*model.value(), result.value()[i].hypotheses[0].ids);
      const bool ok = text.has_value() && text.value() == words(numbers[first + i]);
      correct += ok;
    }
  }
  return double(correct) / numbers.size();
}

}  // namespace

TEST_CASE("the checker spells numbers as the training script does", "[demo]") {
  CHECK(words(4096) == "four thousand ninety six");
  CHECK(words(0) == "zero");
  CHECK(words(999999) == "nine hundred ninety nine thousand nine hundred ninety nine");
  CHECK(words(100010) == "one hundred thousand ten");
}

TEST_CASE("demo model: exact match on 1200 held-out numbers, f32 and int8", "[demo]") {
  // Under a subset (sanitizers, emulators) fewer of them: 1200 / stride (measured 100%).
  const auto numbers = held_out_numbers(1200 / subset_stride());
  const double f32 = accuracy(DType::kF32, numbers);
  const double int8 = accuracy(DType::kInt8, numbers);
  WARN("demo exact match on " << numbers.size() << " held-out numbers: f32 " << f32 * 100 << "%, int8 "
                              << int8 * 100 << "%");
  CHECK(f32 >= 0.97);
  CHECK(int8 >= f32 - 0.01);
}
