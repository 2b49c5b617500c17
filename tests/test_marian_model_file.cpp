// Marian's own model files (.bin as marian::io::binary writes them, .npz as cnpy and
// numpy write them) and their special:model.yml: a small writer here makes valid files
// whose items read back exactly; every corruption is refused naming the file and the
// item or field; random damage never crashes.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "convert/marian_model_file.h"
#include "core/bytes.h"
#include "format/crc32.h"
#include "kernels/half.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using convert::ConvertError;
using convert::MarianOptions;
using convert::open_marian_model_bytes;
using convert::parse_marian_yaml;

namespace {

constexpr uint64_t kInt8 = 0x0101, kFloat16 = 0x0402, kFloat32 = 0x0404, kIntgemm8 = 0x4101;

// Options as yaml-cpp's emitter writes them for Marian (keys sorted, block lists
// indented by two, an empty list on the line after its key).
const std::string kYaml =
    "bert-class-symbol: \"[CLS]\"\n"
    "cost-scaling:\n"
    "  []\n"
    "dec-cell: ssru\n"
    "dec-depth: 2\n"
    "dim-emb: 4\n"
    "dim-vocabs:\n"
    "  - 6\n"
    "  - 6\n"
    "label-smoothing: 0.1\n"
    "tied-embeddings-all: true\n"
    "transformer-preprocess: \"\"\n"
    "type: transformer\n"
    "version: v1.10.25; 6e6bb8a0 2021-10-14 13:43:38 +0100\n";

struct Item {
  std::string name;
  uint64_t type;
  std::vector<int32_t> shape;
  std::vector<uint8_t> data;
};

void set64(std::vector<uint8_t>& bytes, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}
std::vector<uint8_t> f16_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out;
  for (float v : values) put16(out, kernels::float_to_half(v));
  return out;
}
// As Marian's packAndSave does for intgemm8: quantMult = 127 / max|w|, each value
// round(w * quantMult) clamped to ±127, stored [out][in] (transposed) unless the name
// holds "Wemb", then the multiplier as float32.
std::vector<uint8_t> intgemm8_bytes(const std::string& name, const std::vector<float>& w, size_t rows, size_t cols) {
  float max = 0;
  for (float v : w) max = std::max(max, std::fabs(v));
  const float multiplier = 127.0f / max;
  std::vector<uint8_t> out(rows * cols);
  const bool embedding = name.find("Wemb") != std::string::npos;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const float q = std::max(-127.0f, std::min(127.0f, std::nearbyint(w[r * cols + c] * multiplier)));
      const size_t at = embedding ? r * cols + c : c * rows + r;
      out[at] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  uint32_t bits;
  std::memcpy(&bits, &multiplier, 4);
  put32(out, bits);
  return out;
}
Item yaml_item(const std::string& text) {
  std::vector<uint8_t> data(text.begin(), text.end());
  data.push_back(0);
  return {"special:model.yml", kInt8, {static_cast<int32_t>(data.size())}, data};
}

// marian::io::binary::saveItems: version, count, headers, names, shapes, a padding
// length and padding to a 256-byte boundary, then each item's data (padded to a
// multiple of 256 bytes when `pad`, as Marian's allocator leaves it).
std::vector<uint8_t> marian_bin(const std::vector<Item>& items, bool pad = true) {
  std::vector<uint8_t> out;
  put64(out, 1);
  put64(out, items.size());
  std::vector<std::vector<uint8_t>> data;
  for (const Item& item : items) {
    std::vector<uint8_t> d = item.data;
    if (pad && item.type != kInt8) d.resize((d.size() + 255) / 256 * 256);
    put64(out, item.name.size() + 1);
    put64(out, item.type);
    put64(out, item.shape.size());
    put64(out, d.size());
    data.push_back(std::move(d));
  }
  for (const Item& item : items) out.insert(out.end(), item.name.c_str(), item.name.c_str() + item.name.size() + 1);
  for (const Item& item : items)
    for (int32_t dim : item.shape) put32(out, static_cast<uint32_t>(dim));
  const uint64_t next = ((out.size() + 8) / 256 + 1) * 256;
  put64(out, next - out.size() - 8);
  out.resize(next);
  for (const auto& d : data) out.insert(out.end(), d.begin(), d.end());
  return out;
}

// A .npy record: numpy's header (version 1 or 2) padded to 16 bytes, then the data.
std::vector<uint8_t> npy(const std::string& descr, const std::vector<uint64_t>& shape, const std::vector<uint8_t>& data,
                         int version = 1, const std::string& order = "False") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  const size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 16) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
  if (version == 1) put16(out, static_cast<uint16_t>(dict.size()));
  else put32(out, static_cast<uint32_t>(dict.size()));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A zip of stored records, as cnpy's npz_save writes it (method as given).
std::vector<uint8_t> zip(const std::vector<std::pair<std::string, std::vector<uint8_t>>>& records,
                         uint16_t method = 0) {
  std::vector<uint8_t> out, directory;
  for (const auto& record : records) {
    const std::string& name = record.first;  // not structured bindings: clang 14's lambdas cannot capture them
    const std::vector<uint8_t>& data = record.second;
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t crc = detail::crc32(data.data(), data.size());
    auto header = [&](std::vector<uint8_t>& h, bool central) {
      put32(h, central ? 0x02014b50 : 0x04034b50);
      if (central) put16(h, 20);
      put16(h, 20);
      put16(h, 0);
      put16(h, method);
      put32(h, 0);
      put32(h, crc);
      put32(h, static_cast<uint32_t>(data.size()));
      put32(h, static_cast<uint32_t>(data.size()));
      put16(h, static_cast<uint16_t>(name.size()));
      put16(h, 0);
      if (central) {
        put16(h, 0);
        put16(h, 0);
        put16(h, 0);
        put32(h, 0);
        put32(h, offset);
      }
      h.insert(h.end(), name.begin(), name.end());
    };
    header(out, false);
    out.insert(out.end(), data.begin(), data.end());
    header(directory, true);
  }
  const uint32_t directory_offset = static_cast<uint32_t>(out.size());
  out.insert(out.end(), directory.begin(), directory.end());
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint16_t>(records.size()));
  put16(out, static_cast<uint16_t>(records.size()));
  put32(out, static_cast<uint32_t>(directory.size()));
  put32(out, directory_offset);
  put16(out, 0);
  return out;
}

std::vector<uint8_t> yaml_npy(const std::string& text, const std::string& descr = "<i1") {
  std::vector<uint8_t> data(text.begin(), text.end());
  data.push_back(0);
  return npy(descr, {data.size()}, data);
}

// Logical [in=3, out=2] weight; a [V=6, d=4] embedding; biases; alphas.
const std::vector<float> kW = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f};
std::vector<float> embedding_values() {
  std::vector<float> e(24);
  for (size_t i = 0; i < e.size(); ++i) e[i] = 0.125f * static_cast<float>(i) - 1.5f;
  return e;
}

std::vector<Item> float_items() {
  return {{"Wemb", kFloat32, {6, 4}, f32_bytes(embedding_values())},
          {"decoder_ff_logit_out_b", kFloat16, {1, 6}, f16_bytes({1, -2, 0.5f, 3, 0, -0.25f})},
          {"encoder_l1_ffn_W1", kFloat32, {3, 2}, f32_bytes(kW)},
          yaml_item(kYaml)};
}

std::vector<Item> intgemm_items() {
  return {{"Wemb", kIntgemm8, {6, 4}, intgemm8_bytes("Wemb", embedding_values(), 6, 4)},
          {"decoder_ff_logit_out_Wt", kIntgemm8, {3, 2}, intgemm8_bytes("decoder_ff_logit_out_Wt", kW, 3, 2)},
          {"encoder_l1_ffn_W1", kIntgemm8, {3, 2}, intgemm8_bytes("encoder_l1_ffn_W1", kW, 3, 2)},
          {"encoder_l1_ffn_W1_QuantMultA", kFloat32, {1, 1}, f32_bytes({12.5f})},
          {"encoder_l1_ffn_b1", kFloat32, {1, 2}, f32_bytes({0.5f, -0.5f})},
          yaml_item(kYaml)};
}

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& name = "model.bin") {
  try {
    auto file = open_marian_model_bytes(bytes, name);
    for (const std::string& n : file->names()) file->read_f32(n);
  } catch (const ConvertError& e) {
    return e.what();
  }
  return "";
}

std::string yaml_error(const std::string& text) {
  try {
    parse_marian_yaml(text, "m.bin: special:model.yml");
  } catch (const ConvertError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a Marian .bin reads back: float32, float16 widened, options", "[marian-file]") {
  auto file = open_marian_model_bytes(marian_bin(float_items()), "model.bin");
  CHECK(file->format() == "binary (.bin)");
  CHECK(file->names() == std::vector<std::string>{"Wemb", "decoder_ff_logit_out_b", "encoder_l1_ffn_W1"});
  CHECK_FALSE(file->has("special:model.yml"));
  CHECK(file->info("Wemb").dtype == "F32");
  CHECK(file->info("Wemb").shape == std::vector<uint64_t>{6, 4});
  CHECK(file->info("decoder_ff_logit_out_b").dtype == "F16");
  CHECK(file->info("encoder_l1_ffn_W1").shape == std::vector<uint64_t>{3, 2});
  CHECK(file->read_f32("Wemb") == embedding_values());
  CHECK(file->read_f32("decoder_ff_logit_out_b") == std::vector<float>{1, -2, 0.5f, 3, 0, -0.25f});
  CHECK(file->read_f32("encoder_l1_ffn_W1") == kW);
  CHECK_THROWS_WITH(file->read_intgemm8("Wemb"), Contains("model.bin") && Contains("'Wemb' is float32, not intgemm8"));
  CHECK_THROWS_WITH(file->read_f32("nope"), Contains("model.bin") && Contains("'nope'"));

  const MarianOptions& o = file->options();
  CHECK(o.name == "model.bin: special:model.yml");
  CHECK(o.text("type", "") == "transformer");
  CHECK(o.text("dec-cell", "") == "ssru");
  CHECK(o.text("bert-class-symbol", "") == "[CLS]");
  CHECK(o.text("transformer-preprocess", "x") == "");
  CHECK(o.text("absent", "fallback") == "fallback");
  CHECK(o.text("version", "") == "v1.10.25; 6e6bb8a0 2021-10-14 13:43:38 +0100");
  CHECK(o.integer("dec-depth", 0, 1, 100) == 2);
  CHECK(o.integer("enc-depth", 6, 1, 100) == 6);
  CHECK(o.number("label-smoothing", 0) == 0.1);
  CHECK(o.flag("tied-embeddings-all", false));
  CHECK(o.list("dim-vocabs") == std::vector<std::string>{"6", "6"});
  CHECK(o.has("cost-scaling"));
  CHECK(o.list("cost-scaling").empty());
  CHECK(o.list("absent").empty());

  // Data blocks exactly as long as needed (no padding) read the same.
  auto unpadded = open_marian_model_bytes(marian_bin(float_items(), false), "model.bin");
  CHECK(unpadded->read_f32("Wemb") == embedding_values());
}

TEST_CASE("intgemm8 items: int8 values and multiplier as stored, dequantized in the logical layout", "[marian-file]") {
  auto file = open_marian_model_bytes(marian_bin(intgemm_items()), "model.intgemm.alphas.bin");
  CHECK(file->info("encoder_l1_ffn_W1").dtype == "INTGEMM8");
  CHECK(file->info("encoder_l1_ffn_W1").shape == std::vector<uint64_t>{3, 2});
  CHECK(file->info("encoder_l1_ffn_W1_QuantMultA").dtype == "F32");
  CHECK(file->read_f32("encoder_l1_ffn_W1_QuantMultA") == std::vector<float>{12.5f});

  // W [in=3, out=2]: stored [out][in]; multiplier 127 / 2.
  const convert::Intgemm8Matrix w = file->read_intgemm8("encoder_l1_ffn_W1");
  CHECK(w.rows == 2);
  CHECK(w.cols == 3);
  CHECK(w.multiplier == 63.5f);
  // round(w * 63.5): logical rows (0.5,-1), (0.25,2), (-0.75,1.5) -> transposed.
  CHECK(w.values == std::vector<int8_t>{32, 16, -48, -64, 127, 95});
  const std::vector<float> dequantized = file->read_f32("encoder_l1_ffn_W1");
  const float inverse = 1.0f / 63.5f;
  CHECK(dequantized == std::vector<float>{32 * inverse, -64 * inverse, 16 * inverse, 127 * inverse,
                                          -48 * inverse, 95 * inverse});
  // The untied output matrix has no "Wemb" in its name: Marian transposes it too.
  const convert::Intgemm8Matrix out = file->read_intgemm8("decoder_ff_logit_out_Wt");
  CHECK(out.rows == 2);
  CHECK(out.values == w.values);

  // Wemb [V=6, d=4]: untransposed.
  const convert::Intgemm8Matrix e = file->read_intgemm8("Wemb");
  CHECK(e.rows == 6);
  CHECK(e.cols == 4);
  CHECK(e.multiplier == 127.0f / 1.5f);
  const std::vector<float> table = file->read_f32("Wemb");
  const std::vector<float> original = embedding_values();
  for (size_t i = 0; i < table.size(); ++i) {
    CHECK(table[i] == static_cast<float>(e.values[i]) * (1.0f / e.multiplier));
    CHECK(std::fabs(table[i] - original[i]) <= 0.5f / e.multiplier + 1e-6f);
  }
}

TEST_CASE("a Marian .npz reads back: cnpy's and numpy's headers, 1-D arrays as [1, n], float16", "[marian-file]") {
  const std::vector<uint8_t> bytes = zip({
      {"Wemb.npy", npy("<f4", {6, 4}, f32_bytes(embedding_values()))},
      {"decoder_ff_logit_out_b.npy", npy("<f2", {6}, f16_bytes({1, -2, 0.5f, 3, 0, -0.25f}), 2)},
      {"encoder_l1_ffn_W1.npy", npy("<f4", {3, 2}, f32_bytes(kW))},
      {"special:model.yml.npy", yaml_npy(kYaml)},
  });
  auto file = open_marian_model_bytes(bytes, "model.npz");
  CHECK(file->format() == ".npz");
  CHECK(file->names() == std::vector<std::string>{"Wemb", "decoder_ff_logit_out_b", "encoder_l1_ffn_W1"});
  CHECK(file->info("decoder_ff_logit_out_b").shape == std::vector<uint64_t>{1, 6});
  CHECK(file->info("decoder_ff_logit_out_b").dtype == "F16");
  CHECK(file->read_f32("Wemb") == embedding_values());
  CHECK(file->read_f32("decoder_ff_logit_out_b") == std::vector<float>{1, -2, 0.5f, 3, 0, -0.25f});
  CHECK(file->read_f32("encoder_l1_ffn_W1") == kW);
  CHECK(file->options().integer("dim-emb", 0, 1, 4096) == 4);

  // numpy writes bytes as '|i1'.
  auto numpy = open_marian_model_bytes(
      zip({{"Wemb.npy", npy("<f4", {6, 4}, f32_bytes(embedding_values()))},
           {"special:model.yml.npy", yaml_npy(kYaml, "|i1")}}),
      "model.npz");
  CHECK(numpy->options().text("type", "") == "transformer");
}

TEST_CASE("open_marian_model tells .npz from .bin by content, not by extension", "[marian-file]") {
  TempDir tmp;
  const std::string npz_named_bin = tmp.file("model.bin");
  write_bytes(npz_named_bin, zip({{"Wemb.npy", npy("<f4", {6, 4}, f32_bytes(embedding_values()))},
                                  {"special:model.yml.npy", yaml_npy(kYaml)}}));
  auto a = convert::open_marian_model(npz_named_bin);
  CHECK(a->format() == ".npz");
  CHECK(a->path() == npz_named_bin);
  const std::string bin_named_npz = tmp.file("model.npz");
  write_bytes(bin_named_npz, marian_bin(intgemm_items()));
  auto b = convert::open_marian_model(bin_named_npz);
  CHECK(b->format() == "binary (.bin)");
  CHECK(b->read_intgemm8("Wemb").rows == 6);
  CHECK_THROWS_WITH(convert::open_marian_model(tmp.file("absent.bin")), Contains("absent.bin"));
}

TEST_CASE("model.yml: the YAML Marian writes, and yaml-cpp's booleans", "[marian-file]") {
  const MarianOptions o = parse_marian_yaml(
      "# a comment\n"
      "---\n"
      "a: 1  # trailing comment\n"
      "b: 'it''s'\n"
      "c: \"tab\\there \\u00e9 \\\"q\\\" # not a comment\"\n"
      "d:\n"
      "- x\n"
      "- 'y z'\n"
      "e: [1, \"two\", three ,]\n"
      "f: []\n"
      "g:\n"
      "h: -3\n"
      "url: http://example.com/a#b\r\n"
      "...\n",
      "m.npz: special:model.yml");
  CHECK(o.integer("a", 0, 0, 10) == 1);
  CHECK(o.text("b", "") == "it's");
  CHECK(o.text("c", "") == "tab\there \xc3\xa9 \"q\" # not a comment");
  CHECK(o.list("d") == std::vector<std::string>{"x", "y z"});
  CHECK(o.list("e") == std::vector<std::string>{"1", "two", "three"});
  CHECK(o.list("f").empty());
  CHECK(o.has("g"));
  CHECK(o.text("g", "fallback") == "");  // null
  CHECK(o.integer("h", 0, -10, 10) == -3);
  CHECK(o.text("url", "") == "http://example.com/a#b");

  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "y", "Y", "on", "ON"})
    CHECK(parse_marian_yaml(std::string("k: ") + yes, "x").flag("k", false));
  for (const char* no : {"false", "False", "FALSE", "no", "NO", "n", "off", "Off"})
    CHECK_FALSE(parse_marian_yaml(std::string("k: ") + no, "x").flag("k", true));
  CHECK_THROWS_WITH(parse_marian_yaml("k: tRue", "x").flag("k", false), Contains("'k' must be true or false"));
  CHECK_THROWS_WITH(parse_marian_yaml("k: 1", "x").flag("k", false), Contains("'k' must be true or false"));

  CHECK_THROWS_WITH(o.integer("a", 0, 2, 10), Contains("m.npz: special:model.yml") && Contains("'a' must be an integer in [2, 10], got '1'"));
  CHECK_THROWS_WITH(o.integer("b", 0, 0, 10), Contains("'b' must be an integer"));
  CHECK_THROWS_WITH(o.integer("g", 0, 0, 10), Contains("'g' must be an integer"));
  CHECK_THROWS_WITH(parse_marian_yaml("k: 99999999999999999999", "x").integer("k", 0, 0, INT64_MAX),
                    Contains("'k' must be an integer"));
  CHECK_THROWS_WITH(parse_marian_yaml("k: 1.5x", "x").number("k", 0), Contains("'k' must be a finite number"));
  CHECK_THROWS_WITH(parse_marian_yaml("k: nan", "x").number("k", 0), Contains("'k' must be a finite number"));
  CHECK(parse_marian_yaml("k: 1e-3", "x").number("k", 0) == 1e-3);
  CHECK_THROWS_WITH(o.text("d", ""), Contains("'d' is a list"));
  CHECK_THROWS_WITH(o.integer("d", 0, 0, 1), Contains("'d' is a list"));
  CHECK_THROWS_WITH(o.list("a"), Contains("'a' is a single value"));
}

TEST_CASE("model.yml: what Marian never writes is refused by key and line", "[marian-file]") {
  CHECK_THROWS_WITH(parse_marian_yaml("a: 1\nb:\n  c: 2\n", "m.bin: special:model.yml"),
                    Contains("m.bin: special:model.yml: line 3: key 'b' holds a nested map"));
  CHECK_THAT(yaml_error("a: {b: 1}"), Contains("line 1: key 'a' holds a nested map"));
  CHECK_THAT(yaml_error("a: b: c"), Contains("line 1: key 'a' holds a nested map"));
  CHECK_THAT(yaml_error("a:\n  - b: 1"), Contains("line 2: key 'a' holds a nested map"));
  CHECK_THAT(yaml_error("a:\n  - - 1"), Contains("line 2: key 'a' holds a list of lists"));
  CHECK_THAT(yaml_error("a: [1, [2]]"), Contains("key 'a' holds nested lists or maps"));
  CHECK_THAT(yaml_error("a: [1, 2"), Contains("key 'a' has a flow list '[' that does not close"));
  CHECK_THAT(yaml_error("a: 1\na: 2"), Contains("line 2: key 'a' appears twice"));
  CHECK_THAT(yaml_error("a: |\n  text"), Contains("line 1: key 'a' holds a block scalar"));
  CHECK_THAT(yaml_error("a: &x 1"), Contains("key 'a' uses an anchor, alias or tag"));
  CHECK_THAT(yaml_error("a: !!str 1"), Contains("key 'a' uses an anchor, alias or tag"));
  CHECK_THAT(yaml_error("a: \"open"), Contains("line 1: key 'a' has a quoted value that does not close"));
  CHECK_THAT(yaml_error("a: \"\\q\""), Contains("key 'a' has an unknown escape sequence"));
  CHECK_THAT(yaml_error("a: 'x' y"), Contains("key 'a' has text after its value"));
  CHECK_THAT(yaml_error("a: 1\n  continued"), Contains("line 2: unexpected indentation"));
  CHECK_THAT(yaml_error("\ta: 1"), Contains("line 1: a tab in the indentation"));
  CHECK_THAT(yaml_error("- 1"), Contains("line 1: a list item ('- ...') that belongs to no key"));
  CHECK_THAT(yaml_error("just text"), Contains("line 1: expected 'key: value'"));
  CHECK_THAT(yaml_error("\"a\": 1"), Contains("line 1: expected 'key: value'"));
  CHECK_THAT(yaml_error("a: 1\n---\nb: 2"), Contains("line 2: a second YAML document"));
  CHECK_THAT(yaml_error("a: 1\n...\nb: 2"), Contains("line 3: text after the document end marker"));
  CHECK_THAT(yaml_error("a:\n  - 1\n    - 2"), Contains("line 3: key 'a' has list items at different indentations"));
  CHECK_THAT(yaml_error("a: " + std::string(70000, 'x')), Contains("line 1: line is 70003 bytes long"));
  std::string many;
  for (int i = 0; i < 10001; ++i) many += "k" + std::to_string(i) + ": 1\n";
  CHECK_THAT(yaml_error(many), Contains("more than 10000 keys"));
  CHECK_THAT(yaml_error(std::string(2u << 20, '#')), Contains("more than the limit"));
  // A 60 KB key with 100,001 items: refused after linear work.
  std::string items = std::string(60000, 'k') + ":\n";
  for (int i = 0; i < 100001; ++i) items += "- 1\n";
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(yaml_error(items), Contains("line 100002: more than 100000 list items"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("a damaged .bin is refused naming the file and the item or field", "[marian-file]") {
  const std::vector<uint8_t> good = marian_bin(float_items());
  REQUIRE(error_of(good).empty());
  const size_t names_at = 16 + 4 * 32;  // after version, count and four headers

  auto with = [&](auto change) {
    std::vector<uint8_t> bytes = good;
    change(bytes);
    return error_of(bytes);
  };
  CHECK_THAT(with([](auto& b) { set64(b, 0, 2); }), Contains("model.bin: Marian binary format version 2"));
  CHECK_THAT(with([](auto& b) { set64(b, 8, uint64_t{1} << 60); }),
             Contains("model.bin: declares 1152921504606846976 items"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 32 * 0, 0); }), Contains("model.bin: item 0: name length 0"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 32 * 0, 5000); }), Contains("item 0: name length 5000 outside 1..4096"));
  CHECK_THAT(with([&](auto& b) { b[names_at + 4] = 'x'; }), Contains("item 0: name 'Wembx") && Contains("lacks its NUL"));
  CHECK_THAT(with([&](auto& b) { b[names_at + 1] = 0; }), Contains("item 0: name 'W\\x00mb' is empty or holds a NUL"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 8, 0x1801); }), Contains("item 'Wemb' has type packed8avx2"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 8, 0x4102); }), Contains("item 'Wemb' has type intgemm16"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 8, 0x1234); }), Contains("item 'Wemb' has type unknown type 0x1234"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 8, kInt8); }), Contains("item 'Wemb' has type int8, not float32"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 32 * 3 + 8, kFloat32); }),
             Contains("item 'special:model.yml' has type float32, expected int8"));
  CHECK_THAT(with([](auto& b) { set64(b, 16 + 16, 17); }),
             Contains("item 'Wemb': shape has 17 dimensions, more than the limit of 16"));
  // Wemb's shape [6, 4] -> [6, -4] and [6, 5] (needs more bytes than its block), [6, 2^30]
  const size_t shapes_at = names_at + 5 + 23 + 18 + 18;
  CHECK_THAT(with([&](auto& b) { b[shapes_at + 7] = 0xff; }), Contains("item 'Wemb': shape has a negative dimension"));
  CHECK_THAT(with([&](auto& b) { set64(b, 16 + 24, 95); }),
             Contains("item 'Wemb': holds 95 bytes but its shape and type need 96"));
  CHECK_THAT(with([&](auto& b) { b[shapes_at + 7] = 0x40; }), Contains("item 'Wemb': holds 256 bytes but its shape and type need"));
  CHECK_THAT(with([&](auto& b) { set64(b, 16 + 24, uint64_t{1} << 62); }),
             Contains("item 'Wemb': its 4611686018427387904 bytes at offset") && Contains("run past the end of the file"));
  CHECK_THAT(with([](auto& b) { b.push_back(0); }), Contains("model.bin: 1 bytes after the last item's data"));
  std::vector<Item> twice = float_items();
  twice.insert(twice.begin(), twice[0]);
  CHECK_THAT(error_of(marian_bin(twice)), Contains("model.bin: item 'Wemb' appears twice"));
  twice = float_items();
  twice.push_back(twice.back());
  CHECK_THAT(error_of(marian_bin(twice)), Contains("model.bin: item 'special:model.yml' appears twice"));
  std::vector<Item> no_options = float_items();
  no_options.pop_back();
  CHECK_THAT(error_of(marian_bin(no_options)), Contains("model.bin: no special:model.yml item (Marian's options)"));
  CHECK_THAT(with([&](auto& b) { b[b.size() - 1] = '\n'; }), Contains("special:model.yml is not NUL-terminated"));
  CHECK_THAT(with([&](auto& b) { b[b.size() - 2] = ':'; b[b.size() - 3] = ':'; }),
             Contains("model.bin: special:model.yml: line 14:"));
  CHECK_THAT(with([&](auto& b) { set64(b, shapes_at + 4 * 7, uint64_t{1} << 40); }),
             Contains("padding of 1099511627776 bytes before the data runs past the end"));

  // A NaN weight is refused when read, naming the item; the others still read.
  std::vector<Item> items = float_items();
  std::vector<float> with_nan = kW;
  with_nan[4] = std::nanf("");
  items[2].data = f32_bytes(with_nan);
  auto file = open_marian_model_bytes(marian_bin(items), "nan.bin");
  CHECK_THROWS_WITH(file->read_f32("encoder_l1_ffn_W1"),
                    Contains("nan.bin: item 'encoder_l1_ffn_W1' holds a non-finite value (NaN or Inf) at element 4"));
  CHECK(file->read_f32("Wemb") == embedding_values());

  // A bad multiplier: zero, NaN, or so small its inverse is infinite.
  for (float bad : {0.0f, -1.0f, std::nanf(""), INFINITY, 1e-45f}) {
    std::vector<Item> q = intgemm_items();
    std::memcpy(q[2].data.data() + 6, &bad, 4);
    auto f = open_marian_model_bytes(marian_bin(q), "q.bin");
    CHECK_THROWS_WITH(f->read_intgemm8("encoder_l1_ffn_W1"),
                      Contains("q.bin: item 'encoder_l1_ffn_W1': quantization multiplier"));
    CHECK_THROWS_WITH(f->read_f32("encoder_l1_ffn_W1"), Contains("quantization multiplier"));
  }
  // An intgemm8 item without room for its multiplier; one without elements.
  std::vector<Item> q = intgemm_items();
  q[2].data.resize(6);
  CHECK_THAT(error_of(marian_bin(q, false)), Contains("item 'encoder_l1_ffn_W1': holds 6 bytes but its shape and type need 10"));
  q = intgemm_items();
  q[2].shape = {3, 0};
  CHECK_THAT(error_of(marian_bin(q)), Contains("item 'encoder_l1_ffn_W1': an intgemm8 matrix needs a shape with at least one element"));

  // Every truncation is refused by name, never read past the end.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    const std::string e = error_of(std::vector<uint8_t>(good.begin(), good.begin() + cut));
    INFO("cut at " << cut << ": " << e);
    CHECK_THAT(e, Contains("model.bin: "));
  }
}

TEST_CASE("a huge declared count in a tiny .bin fails at once, allocating nothing for it", "[marian-file]") {
  std::vector<uint8_t> bytes;
  put64(bytes, 1);
  put64(bytes, uint64_t{1} << 40);
  bytes.resize(4096);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(error_of(bytes, "tiny.bin"),
             Contains("tiny.bin: declares 1099511627776 items, whose headers alone need more than the file's 4096 bytes"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  // Within the file's size but beyond the item limit.
  bytes.assign(16, 0);
  bytes[0] = 1;
  set64(bytes, 8, (1u << 20) + 1);
  bytes.resize(16 + 32 * ((1u << 20) + 1));
  CHECK_THAT(error_of(bytes, "many.bin"), Contains("many.bin: declares 1048577 items") && Contains("limit of 1048576 items"));
  CHECK_THAT(error_of({1, 0, 0}, "short.bin"), Contains("short.bin: too small for a Marian model file (3 bytes"));
  CHECK_THAT(error_of({}, "empty.bin"), Contains("empty.bin: too small"));
}

TEST_CASE("a damaged .npz is refused naming the file and the record or item", "[marian-file]") {
  const auto yml = std::make_pair(std::string("special:model.yml.npy"), yaml_npy(kYaml));
  auto npz_error = [&](const std::string& record, const std::vector<uint8_t>& data) {
    return error_of(zip({{record, data}, yml}), "model.npz");
  };
  const std::vector<uint8_t> w = f32_bytes(kW);
  CHECK(npz_error("W.npy", npy("<f4", {3, 2}, w)).empty());
  CHECK_THAT(error_of(zip({{"W.npy", npy("<f4", {3, 2}, w)}, yml}, 8), "model.npz"),
             Contains("model.npz: record 'W.npy' is compressed (method 8)") &&
                 Contains("Marian (cnpy) reads only stored .npz records"));
  CHECK_THAT(npz_error("W.txt", npy("<f4", {3, 2}, w)), Contains("model.npz: record 'W.txt' is not a .npy array"));
  CHECK_THAT(npz_error("W.npy", w), Contains("model.npz: record 'W.npy': not a .npy array"));
  CHECK_THAT(npz_error("W.npy", npy("<f4", {3, 2}, w, 1, "True")), Contains("item 'W' is stored in Fortran order"));
  CHECK_THAT(npz_error("W.npy", npy("<f8", {3, 1}, w)), Contains("item 'W' has dtype '<f8'"));
  CHECK_THAT(npz_error("W.npy", npy(">f4", {3, 2}, w)), Contains("item 'W' has dtype '>f4'"));
  CHECK_THAT(npz_error("W.npy", npy("|i1", {24}, w)), Contains("item 'W' has dtype '|i1'"));
  CHECK_THAT(npz_error("W.npy", npy("<f4", {3, 3}, w)),
             Contains("item 'W': holds 24 bytes of data but its shape and dtype need 36"));
  CHECK_THAT(npz_error("W.npy", npy("<f4", {uint64_t{1} << 62, 8}, w)),
             Contains("item 'W': holds 24 bytes of data but its shape and dtype need more than 2^64"));
  CHECK_THAT(npz_error("W.npy", npy("<f4", {}, w)), Contains("item 'W' is a 0-dimensional array"));
  CHECK_THAT(npz_error("W.npy", npy("<f4", std::vector<uint64_t>(17, 1), w)),
             Contains("record 'W.npy': shape has more than the limit of 16 dimensions"));
  std::vector<uint8_t> v4 = npy("<f4", {3, 2}, w);
  v4[6] = 4;
  CHECK_THAT(npz_error("W.npy", v4), Contains("record 'W.npy': .npy format version 4"));
  std::vector<uint8_t> long_header = npy("<f4", {3, 2}, w);
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  CHECK_THAT(npz_error("W.npy", long_header), Contains("record 'W.npy': .npy header length 65535 runs past"));
  std::vector<uint8_t> bad_key = npy("<f4", {3, 2}, w);
  std::memcpy(&bad_key[12], "dascr", 5);
  CHECK_THAT(npz_error("W.npy", bad_key), Contains("unexpected or repeated key 'dascr'"));
  CHECK_THAT(error_of(zip({{"W.npy", npy("<f4", {3, 2}, w)}}), "model.npz"),
             Contains("model.npz: no special:model.yml item"));
  CHECK_THAT(error_of(zip({{"W.npy", npy("<f4", {3, 2}, w)}, {"special:model.yml.npy", yaml_npy(kYaml, "<f4")}}),
                      "model.npz"),
             Contains("item 'special:model.yml' has dtype '<f4', expected bytes"));
  CHECK_THAT(error_of(zip({{"W.npy", npy("<f4", {3, 2}, w)}, {"W.npy", npy("<f4", {3, 2}, w)}, yml}), "model.npz"),
             Contains("model.npz: record 'W.npy' appears twice"));
  // A flipped weight byte fails the record's CRC when read.
  const std::vector<uint8_t> record = npy("<f4", {3, 2}, w);
  std::vector<uint8_t> bytes = zip({{"W.npy", record}, yml});
  bytes[30 + 5 + record.size() - w.size() + 1] ^= 1;  // after the local header, its name and the .npy header
  auto file = open_marian_model_bytes(bytes, "model.npz");
  CHECK_THROWS_WITH(file->read_f32("W"), Contains("model.npz: record 'W.npy': CRC-32"));
  // NaN in a float16 table.
  CHECK_THAT(npz_error("b.npy", npy("<f2", {2}, f16_bytes({1, NAN}))),
             Contains("model.npz: item 'b' holds a non-finite value (NaN or Inf) at element 1"));
}

TEST_CASE("random damage to .bin and .npz files is refused with ConvertError, never a crash", "[marian-file]") {
  const std::vector<std::vector<uint8_t>> originals = {
      marian_bin(float_items()), marian_bin(intgemm_items()),
      zip({{"W.npy", npy("<f4", {3, 2}, f32_bytes(kW))}, {"special:model.yml.npy", yaml_npy(kYaml)}})};
  std::mt19937 rng(25);
  size_t refused = 0, read = 0;
  for (const auto& original : originals) {
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<uint8_t> bytes = original;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
      try {
        auto file = open_marian_model_bytes(bytes, "damaged");
        for (const std::string& name : file->names()) {
          try {
            const std::vector<float> v = file->read_f32(name);
            uint64_t elements = 1;
            for (uint64_t d : file->info(name).shape) elements *= d;
            CHECK(v.size() == elements);
            ++read;
          } catch (const ConvertError& e) {
            CHECK_THAT(std::string(e.what()), Contains("damaged: "));
          }
        }
      } catch (const ConvertError& e) {
        CHECK_THAT(std::string(e.what()), Contains("damaged"));
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
  CHECK(read > 0);
}

// Not a test: writes the fuzz target's seeds (tests/fuzz/corpus/fuzz_marian_model/) into
// $PETREL_MARIAN_SEEDS_DIR, from this file's writer.
TEST_CASE("write fuzz_marian_model seeds", "[.][marian-file-seeds]") {
  const char* dir = std::getenv("PETREL_MARIAN_SEEDS_DIR");
  REQUIRE(dir != nullptr);
  std::vector<Item> float16 = float_items();
  float16[2] = {"encoder_l1_ffn_W1", kFloat16, {3, 2}, f16_bytes(kW)};
  write_bytes(std::string(dir) + "/hand-float32.bin", marian_bin(float_items()));
  write_bytes(std::string(dir) + "/hand-float16_unpadded.bin", marian_bin(float16, false));
  write_bytes(std::string(dir) + "/hand-intgemm8_alphas.bin", marian_bin(intgemm_items()));
  write_bytes(std::string(dir) + "/hand-cnpy.npz",
              zip({{"Wemb.npy", npy("<f4", {6, 4}, f32_bytes(embedding_values()))},
                   {"decoder_ff_logit_out_b.npy", npy("<f2", {6}, f16_bytes({1, -2, 0.5f, 3, 0, -0.25f}), 2)},
                   {"encoder_l1_ffn_W1.npy", npy("<f4", {3, 2}, f32_bytes(kW))},
                   {"special:model.yml.npy", yaml_npy(kYaml)}}));
}
