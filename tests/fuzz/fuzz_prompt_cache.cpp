// Fuzz target: a prompt cache file (Generator::load_prompt_cache) for a tiny language
// model (the gemma3_f32 fixture: 3 layers, two with sliding-window rings; converted once
// per process). The input's first byte is a control byte: bit 0 writes the model's
// binding (file size, metadata hash, data CRC-32) into the header, bit 1 makes the
// trailing CRC-32 right, so that mutations reach the checks behind them; the rest is the
// file. A file must be refused with a kFormat / kUnsupported Error naming it, or be
// loaded: then a prompt of its tokens and one more must reuse all of them and generate
// (or stop with kFormat: logits that are not finite, from large finite keys and values).
// Any exception, a crash or a sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "core/bytes.h"
#include "format/crc32.h"
#include "marian_checkpoint.h"
#include "model_access.h"
#include "petrel/generator.h"
#include "prompt_cache.h"
#include "support/build_paths.h"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_prompt_cache: broken promise: %s\n", what);
  std::abort();
}

struct Fixture {
  petrel::fuzz::ScratchDir scratch{"petrel-fuzz-prompt-cache"};
  std::shared_ptr<const petrel::Model> model;
  std::vector<uint8_t> binding;  // header bytes 16..39 of this model's files
};

const Fixture& fixture() {
  static const Fixture* f = [] {
    auto* made = new Fixture;
    petrel::convert::ConvertOptions o;
    o.checkpoint_dir = petrel::test::fixture_dir() + "/decoder_only/gemma3_f32";
    o.output_path = made->scratch.dir() + "/model.petrel";
    o.linear_dtype = o.embedding_dtype = petrel::DType::kF32;
    petrel::convert::convert_checkpoint(o);
    auto loaded = petrel::Model::load(o.output_path);
    require(loaded.has_value(), "the fixture converts and loads");
    made->model = loaded.value();
    const petrel::ModelInfo& info = made->model->info();
    const auto bytes = petrel::detail::ModelAccess::file_bytes(*made->model);
    const uint64_t hash = petrel::detail::prompt_cache_metadata_hash(bytes.data, bytes.size);
    auto put = [&](uint64_t v, int n) {
      for (int i = 0; i < n; ++i) made->binding.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    put(info.file_size, 8);
    put(hash, 8);
    put(info.data_crc32.value_or(0), 4);
    put(info.data_crc32 ? 1 : 0, 4);
    return made;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace petrel;
  if (size < 1) return 0;
  const Fixture& f = fixture();
  std::vector<uint8_t> file(data + 1, data + size);
  if ((data[0] & 1) && file.size() >= 40) std::copy(f.binding.begin(), f.binding.end(), file.begin() + 16);
  if ((data[0] & 2) && file.size() >= 4) {
    const uint32_t crc = detail::crc32(file.data(), file.size() - 4);
    for (int i = 0; i < 4; ++i) file[file.size() - 4 + static_cast<size_t>(i)] = static_cast<uint8_t>(crc >> (8 * i));
  }
  const std::string path = f.scratch.dir() + "/input.cache";
  fuzz::write_file(path, std::string(file.begin(), file.end()));

  auto created = Generator::create(f.model);
  require(created.has_value(), "a Generator is made");
  Generator& g = created.value();
  const Status loaded = g.load_prompt_cache(path);
  if (!loaded) {
    require(loaded.error().code == ErrorCode::kFormat || loaded.error().code == ErrorCode::kUnsupported,
            "a bad file is a kFormat or kUnsupported error");
    require(loaded.error().message.rfind(path + ": ", 0) == 0, "the error names the file");
    require(g.prompt_cache_stats().entries == 0, "a refused file is not kept");
    return 0;
  }
  require(g.prompt_cache_stats().entries == 1, "a loaded file is kept");
  // Its tokens (checked by the loader), then one more where the positions leave room for
  // it and a generated one (else the tokens alone: all but the last is reused).
  const size_t tokens = static_cast<size_t>(detail::load_le64(file.data() + 64));
  const bool room = tokens + 2 <= f.model->info().max_positions;
  std::vector<int32_t> prompt(room ? tokens + 1 : tokens, 4);
  for (size_t i = 0; i < tokens; ++i) prompt[i] = static_cast<int32_t>(detail::load_le32(file.data() + 80 + 24 * 3 + 4 * i));
  const uint32_t type = detail::load_le32(file.data() + 12);
  GenerateOptions o;
  o.max_new_tokens = 2;
  o.do_sample = false;
  o.ignore_eos = true;
  o.kv_cache_f16 = type == 1;
  o.kv_cache_int8 = type == 2;
  auto r = g.generate({prompt}, o);
  if (!r) {  // finite keys and values may still be large enough to make the logits overflow
    require(r.error().code == ErrorCode::kFormat && r.error().message.find("not finite") != std::string::npos,
            "a loaded state generates, or its logits are not finite");
    return 0;
  }
  require(r.value()[0].reused_tokens == (room ? tokens : tokens - 1), "a prompt beginning with the file's tokens reuses them");
  require(!r.value()[0].ids.empty(), "tokens are generated");
  return 0;
}
