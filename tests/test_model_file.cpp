// The loader treats a model file as hostile input: every corruption below must be
// rejected with an error naming the problem, or load safely; never crash.
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <random>
#include <fstream>
#include <filesystem>

#include "convert/convert.h"
#include "format/format_version.h"
#include "format/model_file.h"
#include "petrel/translator.h"
#include "petrel_generated.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

namespace {

// One valid int8 model, converted once for all tests in this file.
const std::vector<uint8_t>& valid_model() {
  static std::vector<uint8_t> bytes = [] {
    TempDir tmp;
    convert::ConvertOptions o;
    o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
    o.output_path = tmp.file("m.petrel");
    o.shortlist_path = oracle_dir("post_swish_concat_tied") + "/lex.s2t";  // byte flips reach it too
    convert::convert_checkpoint(o);
    return read_bytes(o.output_path);
  }();
  return bytes;
}

fb::Model* metadata(std::vector<uint8_t>& bytes) { return fb::GetMutableModel(bytes.data() + 4); }

int tensor_index(fb::Model* m, const std::string& name) {
  for (uint32_t i = 0; i < m->tensors()->size(); ++i)
    if (m->tensors()->Get(i)->name()->str() == name) return static_cast<int>(i);
  FAIL("no tensor " << name);
  return -1;
}

void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& a, const std::string& b = "") {
  auto r = load_bytes(bytes);
  REQUIRE_FALSE(r.has_value());
  INFO(r.error().message);
  REQUIRE_THAT(r.error().message, Contains("test.petrel") && Contains(a) && Contains(b));
}

}  // namespace

TEST_CASE("a valid model loads from a path and from memory", "[format]") {
  TempDir tmp;
  write_bytes(tmp.file("m.petrel"), valid_model());
  auto from_file = Model::load(tmp.file("m.petrel"));
  REQUIRE(from_file.has_value());
  auto from_memory = load_bytes(valid_model());
  REQUIRE(from_memory.has_value());
  REQUIRE(from_file.value()->info().parameter_count == from_memory.value()->info().parameter_count);
  REQUIRE(from_file.value()->info().file_size == valid_model().size());
}

TEST_CASE("missing and non-model files give clear errors", "[format]") {
  auto r = Model::load("/nonexistent/model.petrel");
  REQUIRE_FALSE(r.has_value());
  REQUIRE(r.error().code == ErrorCode::kIo);
  REQUIRE_THAT(r.error().message, Contains("/nonexistent/model.petrel") && Contains("cannot open"));
  std::vector<uint8_t> text(1000, 'x');
  expect_rejected(text, "not a Petrel model");
  expect_rejected({1, 2, 3}, "too small");
}

TEST_CASE("truncation at every 1/16 of the file is rejected", "[format]") {
  const auto& good = valid_model();
  for (int k = 0; k < 16; ++k) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + good.size() * k / 16);
    auto r = load_bytes(cut);
    INFO("truncated to " << cut.size() << " of " << good.size());
    REQUIRE_FALSE(r.has_value());
  }
}

TEST_CASE("random single-byte flips are rejected, or load and translate safely", "[format]") {
  const auto& good = valid_model();
  const size_t meta = 4 + flatbuffers::ReadScalar<uint32_t>(good.data());
  std::mt19937 rng(2024);
  int rejected = 0, loaded = 0, failed_to_run = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<uint8_t> bytes = good;
    // Mostly in the metadata, where a flip can mislead the loader.
    size_t at = trial % 4 == 0 ? rng() % bytes.size() : rng() % meta;
    bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto r = load_bytes(bytes);
    if (r.has_value()) {
      ++loaded;
      // Whatever loaded must be internally consistent, and must run: a flip in the
      // data section reaches the kernels (weights, scales, row sums), which must not
      // trust those numbers for anything but arithmetic. Under ASan/UBSan this is
      // where kernels that index by, or overflow on, file data would be caught.
      const auto& info = r.value()->info();
      REQUIRE(info.d_model % info.num_heads == 0);
      REQUIRE(info.eos_id < static_cast<int32_t>(info.target_vocab_size));
      auto translator = Translator::create(r.value());
      REQUIRE(translator.has_value());
      TranslateOptions options;
      options.max_new_tokens = 4;
      options.beam_size = 1 + trial % 3;
      options.use_shortlist = info.shortlist.present && trial % 2 == 0;
      auto translated = translator.value().translate({{5, 9, 13, 0}, {7, 0}}, options);
      if (!translated.has_value()) {  // only a corrupt weight's NaN may stop it
        INFO(translated.error().message);
        CHECK(translated.error().code == ErrorCode::kFormat);
        ++failed_to_run;
      }
    } else {
      ++rejected;
      REQUIRE_FALSE(r.error().message.empty());
    }
  }
  REQUIRE(rejected > 100);
  WARN("byte flips: " << rejected << " rejected, " << loaded << " loaded and translated (" << failed_to_run
                      << " stopped by non-finite scores)");
}

TEST_CASE("crafted hostile fields are rejected by name", "[format]") {
  std::vector<uint8_t> bytes = valid_model();
  fb::Model* m = metadata(bytes);
  SECTION("wrong identifier") {
    bytes[8] = 'X';
    expect_rejected(bytes, "file identifier");
  }
  SECTION("newer major version") {
    REQUIRE(m->mutate_format_major(detail::kFormatMajor + 1));
    auto r = load_bytes(bytes);
    REQUIRE_FALSE(r.has_value());
    REQUIRE(r.error().code == ErrorCode::kUnsupported);
    REQUIRE_THAT(r.error().message,
                 Contains("format version " + std::to_string(detail::kFormatMajor + 1) + ".") && Contains("upgrade Petrel"));
  }
  SECTION("tensor offset past the end") {
    int i = tensor_index(m, "decoder.layers.1.fc2.weight");
    auto* t = m->mutable_tensors()->GetMutableObject(i);
    t->mutable_data()->mutate_offset(bytes.size() * 2 / 64 * 64);
    expect_rejected(bytes, "decoder.layers.1.fc2.weight", "past the end of the data section");
  }
  SECTION("offset + size overflows") {
    int i = tensor_index(m, "encoder.layers.0.fc1.weight");
    m->mutable_tensors()->GetMutableObject(i)->mutable_data()->mutate_offset(~uint64_t{0} - 63);
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "past the end");
  }
  SECTION("shape whose product overflows") {
    int i = tensor_index(m, "embed_tokens");
    auto* shape = m->mutable_tensors()->GetMutableObject(i)->mutable_shape();
    shape->Mutate(0, uint64_t{1} << 40);
    shape->Mutate(1, uint64_t{1} << 40);
    expect_rejected(bytes, "embed_tokens", "overflows");
  }
  SECTION("unaligned offset") {
    int i = tensor_index(m, "encoder.layers.0.self_attn.k.bias");
    auto* data = m->mutable_tensors()->GetMutableObject(i)->mutable_data();
    data->mutate_offset(data->offset() + 4);
    expect_rejected(bytes, "encoder.layers.0.self_attn.k.bias", "not 64-byte aligned");
  }
  SECTION("shape that disagrees with the hyper-parameters") {
    REQUIRE(m->mutate_ffn_dim(65));
    expect_rejected(bytes, "fc1.weight", "expected [65, 32]");
  }
  SECTION("size that disagrees with shape and dtype") {
    int i = tensor_index(m, "final_logits_bias");
    m->mutable_tensors()->GetMutableObject(i)->mutable_shape()->Mutate(0, 47);
    expect_rejected(bytes, "final_logits_bias", "does not match shape, dtype and layout");
  }
  SECTION("tensor index out of range") {
    auto* layer = m->mutable_encoder()->mutable_layers()->GetMutableObject(0);
    REQUIRE(layer->mutable_fc1()->mutate_weight(100000));
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "out of range");
  }
  SECTION("token id outside the vocabulary") {
    REQUIRE(m->mutate_eos_id(4000));
    expect_rejected(bytes, "eos_id", "not a token id");
  }
  SECTION("unknown dtype") {
    int i = tensor_index(m, "encoder.layers.1.fc2.weight");  // int8: dtype is stored
    REQUIRE(m->mutable_tensors()->GetMutableObject(i)->mutate_dtype(static_cast<fb::DType>(9)));
    expect_rejected(bytes, "encoder.layers.1.fc2.weight", "unknown dtype");
  }
  SECTION("d_model not divisible by heads") {
    REQUIRE(m->mutate_num_heads(5));
    expect_rejected(bytes, "not divisible");
  }
  SECTION("absurd hyper-parameter") {
    REQUIRE(m->mutate_max_positions(0xffffffffu));
    expect_rejected(bytes, "max_positions", "out of range");
  }
  SECTION("Marian's frequencies at a d_model of 2 (0/0: NaN at every position)") {
    REQUIRE(m->mutate_d_model(2));
    REQUIRE(m->mutate_num_heads(1));
    REQUIRE(m->mutable_encoder()->mutable_positions()->mutate_frequency(fb::FrequencyConvention::MarianCpp));
    expect_rejected(bytes, "encoder.positions.frequency", "4 or more, not 2");
  }
  SECTION("a position table too large to generate at load") {
    REQUIRE(m->mutate_max_positions(1u << 20));  // within the field's range, not x d_model
    expect_rejected(bytes, "max_positions x d_model", "too large for a generated position table");
  }
}

TEST_CASE("bad words are listed once: the converter drops repeats, the loader too", "[format][convert]") {
  // Every listed id is masked for every hypothesis at every step: a file repeating one id
  // 4 M times made each step cost several times more, for nothing.
  TempDir tmp;
  const std::string dir = tmp.file("checkpoint");
  copy_dir(oracle_dir("post_swish_concat_tied"), dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  const int32_t first = config["bad_words_ids"][0][0].get<int32_t>();
  config["bad_words_ids"] = {{first}, {5}, {5}, {first}, {6}};
  std::ofstream(dir + "/config.json") << config.dump();
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("m.petrel");
  convert::convert_checkpoint(o);
  std::vector<uint8_t> bytes = read_bytes(o.output_path);
  auto loaded = load_bytes(bytes);
  REQUIRE(loaded);
  CHECK(loaded.value()->info().bad_word_ids == std::vector<int32_t>{first, 5, 6});
  fb::Model* m = metadata(bytes);
  m->mutable_bad_word_ids()->Mutate(2, 5);  // as an older converter's file may have them
  auto repeated = load_bytes(bytes);
  REQUIRE(repeated);
  CHECK(repeated.value()->info().bad_word_ids == std::vector<int32_t>{first, 5});
}

TEST_CASE("packed tensors: layout and row sums are checked", "[format]") {
  std::vector<uint8_t> bytes = valid_model();
  fb::Model* m = metadata(bytes);
  int i = tensor_index(m, "encoder.layers.0.fc1.weight");  // int8, Panel16
  auto* t = m->mutable_tensors()->GetMutableObject(i);
  REQUIRE(t->layout() == fb::Layout::Panel16);
  SECTION("unknown layout") {
    REQUIRE(t->mutate_layout(static_cast<fb::Layout>(7)));
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "unknown layout");
  }
  SECTION("row sums of the wrong size") {
    t->mutable_row_sums()->mutate_size(12);
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "row sums hold 12 bytes");
  }
  SECTION("a row count hidden by panel padding is caught by the per-row arrays") {
    t->mutable_shape()->Mutate(0, 60);  // 60 rows pad to the same 64 stored rows
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "scales hold 256 bytes");
  }
  SECTION("packed as row-major: the size no longer matches") {
    REQUIRE(t->mutate_layout(fb::Layout::RowMajor));
    t->mutable_shape()->Mutate(1, 30);  // 64 x 30 row-major != 64 x 32 packed bytes
    expect_rejected(bytes, "encoder.layers.0.fc1.weight", "does not match shape, dtype and layout");
  }
}

// Format 1.10 put Panel16 int4's block scales inside the panels; a 1.9 file's int4 panels
// are refused with what to do, not misread.
TEST_CASE("int4 panels of a file older than 1.10 are refused with a re-convert message", "[format][int4]") {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
  o.output_path = tmp.file("m.petrel");
  o.linear_dtype = DType::kInt4;
  convert::convert_checkpoint(o);
  std::vector<uint8_t> bytes = read_bytes(o.output_path);
  REQUIRE(load_bytes(bytes).has_value());
  fb::Model* m = metadata(bytes);
  REQUIRE(m->mutate_format_minor(detail::kInt4ScalesInPanelsMinor - 1));
  expect_rejected(bytes, "int4 panels of format 1." + std::to_string(detail::kInt4ScalesInPanelsMinor - 1),
                  "re-convert the model");
}

// The documented layout (schema/petrel.fbs, Tensor.block_scales): per panel, groups of 4
// blocks' nibbles (256 bytes each) then their 16-byte scale rows; a short last group.
TEST_CASE("int4 panels hold each group of blocks' scales after its nibbles", "[format][int4]") {
  detail::Matrix m;
  m.dtype = DType::kInt4;
  m.layout = detail::Layout::kPanel16;
  m.rows = 20;   // two panels
  m.cols = 150;  // padded to 160: 5 blocks, a group of 4 and a group of 1
  REQUIRE(m.blocks() == 5);
  CHECK(m.int4_panel_bytes() == 16 * 160 / 2 + 16 * 5);
  CHECK(m.int4_block_offset(3) == 3 * 256);
  CHECK(m.int4_scales_offset(0) == 4 * 256);
  CHECK(m.int4_scales_offset(3) == 4 * 256 + 3 * 16);
  CHECK(m.int4_block_offset(4) == 4 * 256 + 4 * 16);
  CHECK(m.int4_scales_offset(4) == m.int4_block_offset(4) + 256);
  // Element (17, 37): panel 1, lane 1, block 1, its group of 8 columns the first, column 5 of it (a high nibble).
  CHECK(m.index(17, 37) == 2 * (m.int4_panel_bytes() + 256) + 1 * 8 + (2 * 1 + 1));
  detail::StoredSize size;
  REQUIRE(detail::stored_size(DType::kInt4, detail::Layout::kPanel16, 20, 150, &size));
  CHECK(size.data == 2 * m.int4_panel_bytes());
  CHECK(size.block_scales == 0);
  m.data = reinterpret_cast<const void*>(uintptr_t{1} << 12);  // never read: only offsets are compared
  const detail::Matrix second = m.row_slice(16, 4);
  CHECK(reinterpret_cast<uintptr_t>(second.data) - reinterpret_cast<uintptr_t>(m.data) == m.int4_panel_bytes());
}

// mBART reads learned positions at index position + 2: the file records the first
// index, and the table holds first_index + max_positions rows.
TEST_CASE("learned position tables are read from their recorded first index", "[format]") {
  TempDir tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir("post_relu_learned_unshared");
  o.output_path = tmp.file("m.petrel");
  o.linear_dtype = o.embedding_dtype = DType::kF32;
  o.positions = convert::PositionChoice::kLearned;
  convert::convert_checkpoint(o);
  const std::vector<uint8_t> original = read_bytes(o.output_path);
  const uint32_t max_positions = metadata(const_cast<std::vector<uint8_t>&>(original))->max_positions();
  const uint64_t section = detail::data_section_start(flatbuffers::ReadScalar<uint32_t>(original.data()));

  auto stacks = [](fb::Model* m) { return std::vector<fb::Stack*>{m->mutable_encoder(), m->mutable_decoder()}; };
  // Reads position i at row i + 2 of the stored tables.
  std::vector<uint8_t> offset_by_two = original;
  REQUIRE(metadata(offset_by_two)->mutate_max_positions(max_positions - 2));
  for (fb::Stack* s : stacks(metadata(offset_by_two))) REQUIRE(s->mutable_positions()->mutate_first_index(2));
  // The same rows moved to the front of each table, read from row 0.
  std::vector<uint8_t> moved = original;
  fb::Model* m = metadata(moved);
  REQUIRE(m->mutate_max_positions(max_positions - 2));
  for (fb::Stack* s : stacks(m)) {
    auto* table = m->mutable_tensors()->GetMutableObject(static_cast<uint32_t>(s->positions()->table()));
    const uint64_t row_bytes = table->shape()->Get(1) * 4;
    uint8_t* rows = moved.data() + section + table->data()->offset();
    std::memmove(rows, rows + 2 * row_bytes, (max_positions - 2) * row_bytes);
    table->mutable_shape()->Mutate(0, max_positions - 2);
    table->mutable_data()->mutate_size((max_positions - 2) * row_bytes);
  }

  auto translate = [](const std::vector<uint8_t>& bytes) {
    auto model = load_bytes(bytes);
    REQUIRE(model.has_value());
    auto translator = Translator::create(model.value());
    REQUIRE(translator.has_value());
    TranslateOptions options;
    options.beam_size = options.n_best = 2;
    options.max_new_tokens = 10;
    auto r = translator.value().translate({{5, 9, 13, 2, 0}, {7, 0}}, options);
    REQUIRE(r.has_value());
    std::vector<std::pair<std::vector<int32_t>, double>> out;
    for (const auto& t : r.value())
      for (const auto& h : t.hypotheses) out.emplace_back(h.ids, h.score);
    return out;
  };
  const auto expected = translate(moved);
  CHECK(translate(offset_by_two) == expected);
  CHECK(translate(original) != expected);  // the first index matters

  std::vector<uint8_t> short_table = original;  // first_index 2 without the two extra rows
  REQUIRE(metadata(short_table)->mutable_decoder()->mutable_positions()->mutate_first_index(2));
  expect_rejected(short_table, "decoder.positions.table (first_index + max_positions rows)",
                  "expected [" + std::to_string(max_positions + 2) + ",");
  std::vector<uint8_t> absurd = original;
  REQUIRE(metadata(absurd)->mutable_encoder()->mutable_positions()->mutate_first_index(0xfffffff0u));
  expect_rejected(absurd, "encoder.positions.first_index", "out of range");
}

// One core streams weights 1.2-1.4x faster through 2 MiB pages (bench/EXPERIMENTS.md, "Huge pages").
TEST_CASE("a model buffer is in 2 MiB pages where the kernel gives them", "[format]") {
  constexpr size_t kSize = size_t{9} << 20, kHuge = size_t{2} << 20;
  // Whether this process can get and see them at all (an emulator may ignore madvise, and
  // a kernel may have transparent huge pages off): 8 MiB mapped and asked for directly.
  // (No heap state matters: the buffer is mapped, not taken from malloc, whose memory
  // freed by earlier tests may be in 4 KiB pages -- so it was, 2 runs in 5, after the
  // whole suite.)
  size_t reference = 0;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  void* mapped = ::mmap(nullptr, 5 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  auto* direct = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mapped) + kHuge - 1) / kHuge * kHuge);
  ::madvise(direct, 4 * kHuge, MADV_HUGEPAGE);
  std::memset(direct, 1, 4 * kHuge);
  reference = smaps_bytes(direct, "AnonHugePages");
  ::munmap(mapped, 5 * kHuge);
#endif
  auto* buffer = static_cast<uint8_t*>(Model::allocate_buffer(kSize));
  REQUIRE(buffer != nullptr);
  std::memset(buffer, 1, kSize);  // as an app fills it
  const size_t huge = smaps_bytes(buffer, "AnonHugePages");
  const bool aligned = reinterpret_cast<uintptr_t>(buffer) % kHuge == 0;
  Model::free_buffer(buffer);
  if (reference == 0) {
    WARN("no 2 MiB pages to be had or seen here: nothing more to check");
    return;
  }
  CHECK(aligned);
  CHECK(huge >= kHuge);
}

TEST_CASE("model buffers of every size are 64-byte aligned, writable to their end, and freed", "[format]") {
  // Below 2 MiB from the heap, from 2 MiB up mapped: free_buffer tells them apart (the
  // sanitizer builds see a wrong free; a leaked mapping, a crash).
  constexpr size_t kHuge = size_t{2} << 20;
  for (const size_t size : {size_t{1}, size_t{63}, size_t{64}, size_t{4097}, kHuge - 1, kHuge, kHuge + 1, 3 * kHuge + 17}) {
    INFO("size " << size);
    auto* buffer = static_cast<uint8_t*>(Model::allocate_buffer(size));
    REQUIRE(buffer != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(buffer) % 64 == 0);
    buffer[0] = 1;
    buffer[size - 1] = 2;
    Model::free_buffer(buffer);
  }
  Model::free_buffer(nullptr);  // as free(nullptr)
  CHECK(Model::allocate_buffer(0) == nullptr);
  CHECK(Model::allocate_buffer(SIZE_MAX) == nullptr);
  // A model adopted from a mapped buffer is released with the model.
  const std::string path = petrel::test::en_de_model_path();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  auto* buffer = static_cast<char*>(Model::allocate_buffer(size));
  REQUIRE(buffer != nullptr);
  REQUIRE(in.read(buffer, static_cast<std::streamsize>(size)));
  auto model = Model::load_from_buffer(buffer, size, "en-de");
  REQUIRE(model.has_value());
  CHECK(model.value()->info().vocab_size > 0);
}

TEST_CASE("a matrix's byte offsets do not overflow a 32-bit size_t below 4 GiB", "[format]") {
  // elements x bits overflowed 32 bits from 2^27 f32 elements: a slice of an embedding
  // table past its first 512 MB pointed elsewhere on armv7 and wasm32.
  detail::Matrix m;
  m.rows = size_t{1} << 20;
  m.cols = 1024;
  for (const auto& [dtype, bytes_per_1024] : std::vector<std::pair<DType, size_t>>{
           {DType::kF32, 4096}, {DType::kF16, 2048}, {DType::kInt8, 1024}, {DType::kInt4, 512}}) {
    m.dtype = dtype;
    INFO(static_cast<int>(dtype));
    CHECK(m.bytes(size_t{1} << 28) == (size_t{1} << 18) * bytes_per_1024);
    m.data = reinterpret_cast<const void*>(uintptr_t{1} << 12);  // never read: only offsets are compared
    const detail::Matrix slice = m.row_slice(size_t{1} << 18, 1);
    CHECK(reinterpret_cast<uintptr_t>(slice.data) - reinterpret_cast<uintptr_t>(m.data) ==
          (size_t{1} << 18) * bytes_per_1024);
  }
}

#ifndef __EMSCRIPTEN__  // (Node's file system: no sparse 4 GiB files assumed)
TEST_CASE("a file larger than the address space is refused by size, not read truncated", "[format]") {
  if (SIZE_MAX > UINT32_MAX) return;  // only 32-bit builds (armv7 in CI) cannot map 4 GiB
  TempDir tmp;
  const std::string path = tmp.file("huge.petrel");
  std::ofstream(path) << "PTRL";
  std::filesystem::resize_file(path, (uint64_t{1} << 32) + 64);  // sparse: no disk used
  auto loaded = Model::load(path);
  REQUIRE_FALSE(loaded);
  CHECK_THAT(loaded.error().message, Contains("4294967360 bytes, more than a 32-bit build can map"));
}
#endif
