// Fuzz target: a language model's tokenizer.json through the converter's reader and
// the engine's tokenizer. Input: text NUL tokenizer.json [NUL tokenizer_config.json].
// The reader must accept it or refuse it with a ConvertError; what it writes must bind
// (or be refused with an error) and build a tokenizer that encodes the text and decodes
// ids within the vocabulary to UTF-8 (or refuses a step past the call's budget, naming
// it), without a crash, a leak or a sanitizer report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_error.h"
#include "convert/hf_tokenizer.h"
#include "core/utf8.h"
#include "format/model_file.h"
#include "petrel_generated.h"
#include "text/hf_tokenizer.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_hf_tokenizer: broken promise: %s\n", what);
  std::abort();
}

// A step of `list` ("normalizers", ..., "model") that would pass what one call may spend
// (text growth: HfTokenizer::kGrowthPerByte; regex steps: kRegexStepsPerByte; a regex
// that rescans; a Unigram lattice past kUnigramEdgesPerByte) names itself.
bool over_budget(const petrel::Error& e, const char* list) {
  return e.code == petrel::ErrorCode::kInvalidArgument && e.message.rfind(std::string("tokenizer.hf.") + list, 0) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  if (first == std::string_view::npos) return 0;
  const std::string_view text = input.substr(0, first);
  petrel::convert::HfTokenizerFiles files;
  files.dir = "fuzz";
  const std::string_view rest = input.substr(first + 1);
  const size_t second = rest.find('\0');
  files.tokenizer_json = std::string(rest.substr(0, second));
  if (second != std::string_view::npos) files.tokenizer_config = std::string(rest.substr(second + 1));
  std::vector<uint8_t> buffer;
  try {
    buffer = petrel::convert::hf_tokenizer_buffer(files);
  } catch (const petrel::convert::ConvertError&) {
    return 0;
  }
  flatbuffers::Verifier verifier(buffer.data(), buffer.size());
  require(verifier.VerifyBuffer<petrel::fb::Tokenizer>(nullptr), "the converter's buffer verifies");
  const auto* root = flatbuffers::GetRoot<petrel::fb::Tokenizer>(buffer.data());
  const uint32_t vocab = root->vocab_spans() ? root->vocab_spans()->size() : 0;
  auto tables = petrel::detail::bind_hf_tokenizer(*root, vocab, "fuzz");
  if (!tables) std::fprintf(stderr, "fuzz_hf_tokenizer: %s\n", tables.error().message.c_str());
  require(static_cast<bool>(tables), "the converter's tokenizer binds");
  auto tokenizer = petrel::text::HfTokenizer::create(std::move(tables.value()), "fuzz");
  if (!tokenizer) return 0;  // e.g. a regex the engine does not support
  const petrel::text::HfTokenizer& t = *tokenizer.value();
  for (bool specials : {true, false}) {
    auto ids = t.encode_text(text, specials);
    if (!ids) {
      require(!petrel::detail::is_valid_utf8(text) || text.size() > petrel::text::HfTokenizer::kMaxTextBytes ||
                  ids.error().message.find("no token") != std::string::npos || over_budget(ids.error(), "normalizers") ||
                  over_budget(ids.error(), "pre_tokenizers") || over_budget(ids.error(), "model"),
              "only bad text, an unencodable character or a step past the call's budget is refused");
      continue;
    }
    for (int32_t id : ids.value()) require(id >= 0 && static_cast<uint32_t>(id) < vocab, "ids in the vocabulary");
    for (bool skip : {true, false}) {
      auto decoded = t.decode_ids(ids.value().data(), ids.value().size(), skip);
      require(decoded ? petrel::detail::is_valid_utf8(decoded.value()) : over_budget(decoded.error(), "decoders"),
              "decoded text is UTF-8");
    }
  }
  if (vocab > 0) {  // the text's bytes as ids
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c % vocab));
    auto decoded = t.decode_ids(ids.data(), ids.size(), false);
    require(decoded ? petrel::detail::is_valid_utf8(decoded.value()) : over_budget(decoded.error(), "decoders"),
            "decoded ids are UTF-8");
  }
  return 0;
}
