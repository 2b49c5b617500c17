// The C++ API: translates stdin line by line, several lines per batch.
//   translate_cpp MODEL.petrel [THREADS] < lines.txt
#include <petrel/translator.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

int fail(const std::string& what, const petrel::Error& error) {
  std::cerr << "translate_cpp: " << what << ": " << error.message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: " << argv[0] << " MODEL.petrel [THREADS] < input.txt\n";
    return 2;
  }
  auto model = petrel::Model::load(argv[1]);
  if (!model) return fail("load", model.error());

  petrel::TranslatorOptions options;
  options.threads = argc == 3 ? std::strtoul(argv[2], nullptr, 10) : 1;
  auto translator = petrel::Translator::create(model.value(), options);
  if (!translator) return fail("translator", translator.error());

  std::vector<std::string> lines;
  std::vector<std::vector<int32_t>> batch;
  for (std::string line; std::getline(std::cin, line);) {
    auto ids = petrel::encode_text(*model.value(), line);
    if (!ids) return fail("line " + std::to_string(lines.size() + 1), ids.error());
    lines.push_back(line);
    batch.push_back(std::move(ids.value()));
  }
  if (batch.empty()) return 0;

  auto translations = translator.value().translate(batch);  // greedy; TranslateOptions for beams
  if (!translations) return fail("translate", translations.error());
  for (const petrel::Translation& t : translations.value()) {
    auto text = petrel::decode_text(*model.value(), t.hypotheses.front().ids);
    if (!text) return fail("decode", text.error());
    std::cout << text.value() << "\n";
  }
  return 0;
}
