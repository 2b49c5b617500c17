// pytorch_model.bin without running pickle: torch.save's zip and legacy files
// (tools/reference/make_pickle_fixtures.py) convert exactly as the safetensors
// checkpoint does; every layout reads as torch reads it; hostile files — made by
// the fixture script or crafted here byte by byte — are refused by name; random
// damage never crashes.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "convert/convert.h"
#include "convert/pickle.h"
#include "convert/pytorch_checkpoint.h"
#include "convert/safetensors.h"
#include "convert/zip_reader.h"
#include "format/crc32.h"
#include "format/model_file.h"
#include "petrel/translator.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;
using convert::ConvertError;
using convert::PytorchCheckpoint;

namespace {

const std::string kOracle = "post_swish_concat_tied";

std::string pickle_fixture(const std::string& name) { return fixture_dir() + "/pickle/" + name; }

// A checkpoint directory named like the oracle's (the model file records the
// directory's name) whose weights are `weights` as pytorch_model.bin.
std::string checkpoint_with(const TempDir& tmp, const std::string& weights) {
  const std::string dir = tmp.file(kOracle);
  std::filesystem::create_directory(dir);
  for (const char* f : {"config.json", "vocab.json"})
    write_bytes(dir + "/" + f, read_bytes(oracle_dir(kOracle) + "/" + f));
  write_bytes(dir + "/pytorch_model.bin", read_bytes(weights));
  return dir;
}

convert::ConvertReport convert_f32(const std::string& dir, const std::string& out) {
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = out;
  o.linear_dtype = o.embedding_dtype = DType::kF32;
  return convert::convert_checkpoint(o);
}

// Each tensor of an f32 model file, by name.
std::map<std::string, std::vector<float>> model_tensors(const std::string& path) {
  auto model = load_model(path);
  const auto bytes = read_bytes(path);
  uint32_t flatbuffer_size;
  std::memcpy(&flatbuffer_size, bytes.data(), 4);
  const uint64_t data = detail::data_section_start(flatbuffer_size);
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : model->info().tensors) {
    REQUIRE(t.dtype == DType::kF32);
    std::vector<float> v(t.bytes / 4);
    std::memcpy(v.data(), bytes.data() + data + t.offset, t.bytes);
    out[t.name] = std::move(v);
  }
  return out;
}

// The oracle's greedy and beam outputs, translated by the engine from `path`.
void check_translations(const std::string& path) {
  nlohmann::json e = expected_for(kOracle);
  auto translator = Translator::create(load_model(path), {});
  REQUIRE(translator.has_value());
  const auto inputs = inputs_of(e);
  TranslateOptions greedy;
  greedy.max_new_tokens = e["max_new_tokens"];
  auto g = translator.value().translate(inputs, greedy);
  REQUIRE(g.has_value());
  TranslateOptions beam = greedy;
  beam.beam_size = beam.n_best = e["beam"]["width"];
  beam.length_penalty = e["beam"]["alpha"].get<double>();
  beam.beam_stop = BeamStop::kFirstK;  // the oracle's "results" rule
  auto b = translator.value().translate(inputs, beam);
  REQUIRE(b.has_value());
  for (size_t s = 0; s < inputs.size(); ++s) {
    INFO("sentence " << s);
    CHECK(g.value()[s].hypotheses[0].ids == e["greedy"][s]["ids"].get<std::vector<int32_t>>());
    const auto& want = e["beam"]["results"][s];
    REQUIRE(b.value()[s].hypotheses.size() == want.size());
    for (size_t k = 0; k < want.size(); ++k)
      CHECK(b.value()[s].hypotheses[k].ids == want[k]["ids"].get<std::vector<int32_t>>());
  }
}

// --- crafting hostile files ---------------------------------------------------------

// Pickle opcodes, written by hand the way Python's pickler writes them.
struct PickleWriter {
  std::vector<uint8_t> bytes;

  PickleWriter& op(uint8_t o) {
    bytes.push_back(o);
    return *this;
  }
  PickleWriter& raw(const std::string& s) {
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  PickleWriter& proto() { return op(0x80).op(2); }
  PickleWriter& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  PickleWriter& str(const std::string& s) {
    op('X');
    for (int i = 0; i < 4; ++i) op(static_cast<uint8_t>(s.size() >> (8 * i)));
    return raw(s);
  }
  PickleWriter& short_binstring(const std::string& s) {  // Python 2's str
    return op('U').op(static_cast<uint8_t>(s.size())).raw(s);
  }
  PickleWriter& integer(int64_t v) {  // LONG1 with 8 bytes: any int64, negative ones too
    op(0x8a).op(8);
    for (int i = 0; i < 8; ++i) op(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
    return *this;
  }
  PickleWriter& small_int(uint8_t v) { return op('K').op(v); }  // BININT1
  PickleWriter& put(uint32_t index) {                           // LONG_BINPUT
    op('r');
    for (int i = 0; i < 4; ++i) op(static_cast<uint8_t>(index >> (8 * i)));
    return *this;
  }
  PickleWriter& get(uint32_t index) {  // LONG_BINGET
    op('j');
    for (int i = 0; i < 4; ++i) op(static_cast<uint8_t>(index >> (8 * i)));
    return *this;
  }
  PickleWriter& ints(const std::vector<int64_t>& v) {
    op('(');
    for (int64_t x : v) integer(x);
    return op('t');
  }
  PickleWriter& ordered_dict() { return global("collections", "OrderedDict").op(')').op('R'); }
};

struct Entry {
  std::string name = "w";
  std::string storage_class = "FloatStorage";
  std::string key = "0";
  int64_t storage_elements = 6;
  int64_t offset = 0;
  std::vector<int64_t> sizes{2, 3}, strides{3, 1};
  bool parameter = false;  // wrapped by _rebuild_parameter, as nn.Parameter pickles
  std::string view;        // legacy only: a storage view key (elements offset.., size 4 from 2)
};

// An OrderedDict of tensors as torch.save pickles it; `legacy` adds the sixth
// persistent-id field (a view, or None).
std::vector<uint8_t> state_dict_pickle(const std::vector<Entry>& entries, bool legacy) {
  PickleWriter w;
  w.proto().ordered_dict().op('(');
  for (const Entry& e : entries) {
    w.str(e.name);
    if (e.parameter) w.global("torch._utils", "_rebuild_parameter").op('(');
    w.global("torch._utils", "_rebuild_tensor_v2").op('(');
    w.op('(').str("storage").global("torch", e.storage_class).str(e.key).str("cpu").integer(e.storage_elements);
    if (legacy) {
      if (e.view.empty()) w.op('N');
      else w.op('(').str(e.view).integer(2).integer(4).op('t');
    }
    w.op('t').op('Q');
    w.integer(e.offset).ints(e.sizes).ints(e.strides).op(0x89).ordered_dict().op('t').op('R');
    if (e.parameter) w.op(0x89).ordered_dict().op('t').op('R');
  }
  w.op('u').op('.');
  return w.bytes;
}

std::vector<uint8_t> float_bytes(size_t n, float first = 1.0f) {
  std::vector<uint8_t> out(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = first + static_cast<float>(i);
    std::memcpy(&out[4 * i], &v, 4);
  }
  return out;
}


// A zip archive written record by record, whose central directory a test may
// edit before finish(). Records are stored; `zip64` puts sizes and offsets in
// zip64 extra fields (as files over 4 GB need), `descriptor` puts the CRC and
// sizes after the data (as PyTorch's writer does).
struct ZipBuilder {
  struct Central {
    std::string name;
    uint32_t crc;
    uint32_t size;
    uint32_t offset;
    uint16_t method = 0;
    bool zip64 = false, descriptor = false;
  };
  std::vector<uint8_t> out;
  std::vector<Central> central;

  static std::vector<uint8_t> local_record(const std::string& name, const std::vector<uint8_t>& data,
                                           uint16_t method = 0, bool zip64 = false, bool descriptor = false) {
    const uint32_t crc = detail::crc32(data.data(), data.size()), size = static_cast<uint32_t>(data.size());
    std::vector<uint8_t> b;
    put32(b, 0x04034b50);
    put16(b, 45);
    put16(b, descriptor ? 8 : 0);
    put16(b, method);
    put32(b, 0);  // time, date
    put32(b, descriptor ? 0 : crc);
    put32(b, descriptor ? 0 : zip64 ? 0xffffffffu : size);
    put32(b, descriptor ? 0 : zip64 ? 0xffffffffu : size);
    put16(b, static_cast<uint16_t>(name.size()));
    put16(b, zip64 ? 20 : 0);
    b.insert(b.end(), name.begin(), name.end());
    if (zip64) {
      put16(b, 1);
      put16(b, 16);
      put64(b, size);
      put64(b, size);
    }
    b.insert(b.end(), data.begin(), data.end());
    if (descriptor) {
      put32(b, 0x08074b50);
      put32(b, crc);
      if (zip64) {
        put64(b, size);
        put64(b, size);
      } else {
        put32(b, size);
        put32(b, size);
      }
    }
    return b;
  }
  void add(const std::string& name, const std::vector<uint8_t>& data, uint16_t method = 0, bool zip64 = false,
           bool descriptor = false) {
    central.push_back({name, detail::crc32(data.data(), data.size()), static_cast<uint32_t>(data.size()),
                       static_cast<uint32_t>(out.size()), method, zip64, descriptor});
    const auto r = local_record(name, data, method, zip64, descriptor);
    out.insert(out.end(), r.begin(), r.end());
  }
  std::vector<uint8_t> finish() const {
    std::vector<uint8_t> b = out;
    const uint32_t start = static_cast<uint32_t>(b.size());
    for (const Central& c : central) {
      put32(b, 0x02014b50);
      put16(b, 45);
      put16(b, 45);
      put16(b, c.descriptor ? 8 : 0);
      put16(b, c.method);
      put32(b, 0);
      put32(b, c.crc);
      put32(b, c.zip64 ? 0xffffffffu : c.size);
      put32(b, c.zip64 ? 0xffffffffu : c.size);
      put16(b, static_cast<uint16_t>(c.name.size()));
      put16(b, c.zip64 ? 28 : 0);
      put16(b, 0);
      put16(b, 0);
      put16(b, 0);
      put32(b, 0);
      put32(b, c.zip64 ? 0xffffffffu : c.offset);
      b.insert(b.end(), c.name.begin(), c.name.end());
      if (c.zip64) {
        put16(b, 1);
        put16(b, 24);
        put64(b, c.size);
        put64(b, c.size);
        put64(b, c.offset);
      }
    }
    const uint32_t size = static_cast<uint32_t>(b.size()) - start;
    put32(b, 0x06054b50);
    put16(b, 0);
    put16(b, 0);
    put16(b, static_cast<uint16_t>(central.size()));
    put16(b, static_cast<uint16_t>(central.size()));
    put32(b, size);
    put32(b, start);
    put16(b, 0);
    return b;
  }
};

// A zip-format checkpoint: ckpt/data.pkl and one ckpt/data/<key> per storage.
std::vector<uint8_t> zip_checkpoint(const std::vector<uint8_t>& pickle,
                                    const std::map<std::string, std::vector<uint8_t>>& storages) {
  ZipBuilder z;
  z.add("ckpt/data.pkl", pickle);
  for (const auto& [key, bytes] : storages) z.add("ckpt/data/" + key, bytes);
  z.add("ckpt/version", {'3', '\n'});
  return z.finish();
}

// A legacy-format checkpoint: magic, protocol, system info, the state dict, the
// key list, then each storage's element count and bytes.
std::vector<uint8_t> legacy_checkpoint(const std::vector<uint8_t>& state, const std::vector<std::string>& keys,
                                       const std::vector<std::vector<uint8_t>>& storages, bool little_endian = true) {
  std::vector<uint8_t> b = {0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, '.',
                            0x80, 2,    'M',  0xe9, 0x03, '.'};
  PickleWriter info;
  info.proto().op('}').str("little_endian").op(little_endian ? 0x88 : 0x89).op('s').op('.');
  b.insert(b.end(), info.bytes.begin(), info.bytes.end());
  b.insert(b.end(), state.begin(), state.end());
  PickleWriter list;
  list.proto().op(']').op('(');
  for (const auto& k : keys) list.str(k);
  list.op('e').op('.');
  b.insert(b.end(), list.bytes.begin(), list.bytes.end());
  for (const auto& s : storages) {
    put64(b, s.size() / 4);
    b.insert(b.end(), s.begin(), s.end());
  }
  return b;
}

void parse(const std::vector<uint8_t>& bytes) { convert::parse_pytorch_checkpoint(bytes.data(), bytes.size(), "crafted.bin"); }

std::vector<uint8_t> zip_with(const std::vector<Entry>& entries, size_t storage_elements = 6) {
  return zip_checkpoint(state_dict_pickle(entries, false), {{"0", float_bytes(storage_elements)}});
}

std::vector<uint8_t> zip_with_pickle(const PickleWriter& w) { return zip_checkpoint(w.bytes, {}); }

}  // namespace

TEST_CASE("zip and legacy pytorch_model.bin convert to the same model file as model.safetensors", "[pickle]") {
  TempDir tmp;
  const std::string reference = tmp.file("safetensors.petrel");
  const auto st_report = convert_f32(oracle_dir(kOracle), reference);
  REQUIRE(st_report.notes.front() == "weights: read model.safetensors (safetensors)");
  const auto reference_bytes = read_bytes(reference);

  struct Case {
    const char* fixture;
    const char* note;
  };
  for (const Case& c : {Case{"model_zip.bin", "weights: read pytorch_model.bin (zip format, torch 1.6+)"},
                        Case{"model_legacy.bin", "weights: read pytorch_model.bin (legacy format, torch < 1.6)"}}) {
    INFO(c.fixture);
    TempDir case_tmp;
    const std::string out = case_tmp.file("out.petrel");
    const auto report = convert_f32(checkpoint_with(case_tmp, pickle_fixture(c.fixture)), out);
    CHECK(report.notes.front() == c.note);
    // Same weights, same decisions: the files are equal byte for byte.
    CHECK(read_bytes(out) == reference_bytes);
    check_translations(out);
  }
}

TEST_CASE("an M2M100 pytorch_model.bin (tied tables sharing one storage) converts like its safetensors", "[pickle]") {
  TempDir tmp;
  const std::string reference = tmp.file("safetensors.petrel"), out = tmp.file("pickle.petrel");
  convert_f32(oracle_dir("m2m100_tiny"), reference);
  const std::string dir = tmp.file("m2m100_tiny");  // the name the file records
  std::filesystem::create_directory(dir);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer_config.json", "vocab.json",
                        "sentencepiece.bpe.model"})
    write_bytes(dir + "/" + f, read_bytes(oracle_dir("m2m100_tiny") + "/" + f));
  write_bytes(dir + "/pytorch_model.bin", read_bytes(pickle_fixture("m2m100_tiny.bin")));
  const auto report = convert_f32(dir, out);
  CHECK(report.notes.front() == "weights: read pytorch_model.bin (zip format, torch 1.6+)");
  CHECK(read_bytes(out) == read_bytes(reference));
}

TEST_CASE("an f16 pytorch_model.bin converts within f16 rounding of the f32 checkpoint", "[pickle]") {
  TempDir tmp;
  const std::string reference = tmp.file("safetensors.petrel"), out = tmp.file("f16.petrel");
  convert_f32(oracle_dir(kOracle), reference);
  convert_f32(checkpoint_with(tmp, pickle_fixture("model_f16.bin")), out);
  const auto want = model_tensors(reference), got = model_tensors(out);
  REQUIRE(got.size() == want.size());
  size_t differing = 0;
  for (const auto& [name, w] : want) {
    INFO(name);
    REQUIRE(got.count(name));
    const auto& g = got.at(name);
    REQUIRE(g.size() == w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      // f16 keeps 11 significant bits; folded scales (sqrt(d_model), 1/sqrt(head_dim))
      // scale the value and its rounding alike, plus one f32 rounding.
      // (f16 subnormals, below 6.1e-5, round to 2^-25 absolute.)
      REQUIRE(std::fabs(g[i] - w[i]) <= std::fabs(w[i]) * 0x1p-11f * 1.01f + 0x1p-25f * 8);
      differing += g[i] != w[i];
    }
  }
  CHECK(differing > 0);  // the file really held f16 values
  check_translations(out);
}

TEST_CASE("every tensor layout reads as torch reads it (dtypes, shared storage, offsets, strides)", "[pickle]") {
  convert::SafetensorsFile expected(pickle_fixture("layouts_expected.safetensors"));
  const auto file = GENERATE(as<std::string>{}, "layouts_zip.bin", "layouts_legacy.bin", "layouts_protocol4_zip.bin");
  INFO(file);
  PytorchCheckpoint c(pickle_fixture(file));
  CHECK(c.format() == (file == "layouts_legacy.bin" ? "legacy format, torch < 1.6" : "zip format, torch 1.6+"));
  REQUIRE(c.names() == expected.names());
  for (const std::string& name : expected.names()) {
    INFO(name);
    const std::string dtype = name.rfind("bf16.", 0) == 0 ? "BF16" : name.rfind("f16.", 0) == 0 ? "F16" : "F32";
    CHECK(c.info(name).dtype == dtype);
    CHECK(c.info(name).shape == expected.info(name).shape);
    CHECK(c.read_f32(name) == expected.read_f32(name));
  }
  // The cases the fixture promises are really there.
  CHECK(c.info("scalar").shape.empty());
  CHECK(c.read_f32("empty").empty());
  CHECK_THROWS_WITH(c.read_f32("absent"), Contains("missing tensor 'absent'"));
}

TEST_CASE("crafted state dicts: parameters, Python 2 pickles and legacy storage views read correctly", "[pickle]") {
  SECTION("a tensor pickled as nn.Parameter reads as its data") {
    Entry e;
    e.parameter = true;
    const auto bytes = zip_with({e});
    PytorchCheckpoint c(bytes.data(), bytes.size(), "crafted.bin");
    CHECK(c.read_f32("w") == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
  SECTION("Python 2: OrderedDict([[key, tensor]]) and byte strings") {
    PickleWriter w;
    w.proto().global("collections", "OrderedDict").op(']').op('(').op(']').op('(').short_binstring("w");
    w.global("torch._utils", "_rebuild_tensor").op('(');
    w.op('(').short_binstring("storage").global("torch", "FloatStorage").short_binstring("k1").short_binstring("cpu");
    w.integer(6).op('N').op('t').op('Q').integer(1).ints({2, 2}).ints({1, 2}).op('t').op('R');
    w.op('e').op('e').op(0x85).op('R').op('.');
    const auto bytes = legacy_checkpoint(w.bytes, {"k1"}, {float_bytes(6)});
    PytorchCheckpoint c(bytes.data(), bytes.size(), "py2.bin");
    // offset 1, shape (2, 2), strides (1, 2): [[2, 4], [3, 5]]
    CHECK(c.read_f32("w") == std::vector<float>{2, 4, 3, 5});
  }
  SECTION("zip64 extra fields and data descriptors, as big files and PyTorch's writer use them") {
    const auto pickle = state_dict_pickle({Entry{}}, false);
    for (bool zip64 : {false, true}) {
      for (bool descriptor : {false, true}) {
        INFO("zip64 " << zip64 << ", descriptor " << descriptor);
        ZipBuilder z;
        z.add("archive/data.pkl", pickle, 0, zip64, descriptor);
        z.add("archive/data/0", float_bytes(6), 0, zip64, descriptor);
        const auto bytes = z.finish();
        PytorchCheckpoint c(bytes.data(), bytes.size(), "zip64.bin");
        CHECK(c.read_f32("w") == std::vector<float>{1, 2, 3, 4, 5, 6});
      }
    }
    ZipBuilder z;
    z.add("archive/data.pkl", pickle, 0, true, true);
    auto bytes = z.finish();
    bytes[30 + 16 + 20 + pickle.size() + 4] ^= 1;  // the descriptor's CRC
    CHECK_THROWS_WITH(parse(bytes), Contains("data descriptor differs from the central directory"));
  }
  SECTION("a legacy storage view") {
    Entry e;
    e.key = "root";
    e.storage_elements = 8;
    e.view = "view";
    e.sizes = {2, 2};
    e.strides = {2, 1};
    const auto bytes = legacy_checkpoint(state_dict_pickle({e}, true), {"root"}, {float_bytes(8)});
    PytorchCheckpoint c(bytes.data(), bytes.size(), "view.bin");
    CHECK(c.read_f32("w") == std::vector<float>{3, 4, 5, 6});  // elements 2..5 of the root
    Entry outside = e;
    outside.storage_elements = 5;
    const auto bad = legacy_checkpoint(state_dict_pickle({outside}, true), {"root"}, {float_bytes(5)});
    CHECK_THROWS_WITH(parse(bad), Contains("storage view 'view'") && Contains("lies outside"));
  }
}

TEST_CASE("hostile checkpoints are refused with the file, offset and reason named", "[pickle]") {
  auto refused = [](const std::string& fixture) {
    try {
      PytorchCheckpoint c(pickle_fixture(fixture));
    } catch (const ConvertError& e) {
      return std::string(e.what());
    }
    FAIL(fixture << " was accepted");
    return std::string();
  };
  auto crafted = [](const std::vector<uint8_t>& bytes) {
    try {
      parse(bytes);
    } catch (const ConvertError& e) {
      std::string what = e.what();
      CHECK_THAT(what, Contains("crafted.bin"));
      return what;
    }
    FAIL("a crafted file was accepted");
    return std::string();
  };

  SECTION("a pickled module (torch.save(nn.Linear)), zip and legacy") {
    CHECK_THAT(refused("hostile_module_zip.bin"),
               Contains("hostile_module_zip.bin: byte ") && Contains("global 'torch.nn.modules.linear.Linear' is not allowed"));
    CHECK_THAT(refused("hostile_module_legacy.bin"), Contains("global 'torch.nn.modules.linear.Linear' is not allowed"));
  }
  SECTION("an object whose unpickling calls os.system") {
    CHECK_THAT(refused("hostile_os_system_zip.bin"), Contains("global 'posix.system' is not allowed"));
    PickleWriter w;
    w.proto().global("os", "system").str("echo pwned").op(0x85).op('R').op('.');
    CHECK_THAT(crafted(zip_with_pickle(w)), Contains("global 'os.system' is not allowed"));
  }
  SECTION("a zip with compressed records") {
    CHECK_THAT(refused("hostile_compressed_zip.bin"),
               Contains("record 'layouts_zip/data.pkl' is compressed (method 8)"));
  }
  SECTION("opcodes outside the list") {
    PickleWriter unknown;
    unknown.proto().op(0xff);
    CHECK_THAT(crafted(zip_with_pickle(unknown)), Contains("crafted.bin: byte 45 (ckpt/data.pkl): unknown opcode 0xff"));
    PickleWriter inst;
    inst.proto().op('i').raw("os\nsystem\n");
    CHECK_THAT(crafted(zip_with_pickle(inst)), Contains("opcode 0x69 (INST) is not allowed"));
  }
  SECTION("a memo index out of range") {
    PickleWriter w;
    w.proto().op(']').op('q').op(0).op('h').op(7);
    CHECK_THAT(crafted(zip_with_pickle(w)), Contains("memo index 7 was never stored"));
    PickleWriter big;
    big.proto().op(']').op('r').raw(std::string("\xff\xff\xff\x7f", 4));
    CHECK_THAT(crafted(zip_with_pickle(big)), Contains("memo index 2147483647 is beyond the limit"));
  }
  SECTION("a truncated pickle and a truncated file") {
    auto pickle = state_dict_pickle({Entry{}}, false);
    pickle.resize(pickle.size() / 2);
    CHECK_THAT(crafted(zip_checkpoint(pickle, {{"0", float_bytes(6)}})), Contains("truncated"));
    auto file = read_bytes(pickle_fixture("model_zip.bin"));
    file.resize(file.size() - 100);
    CHECK_THROWS_WITH(parse(file), Contains("no zip end-of-directory record"));
    auto legacy = read_bytes(pickle_fixture("model_legacy.bin"));
    legacy.resize(legacy.size() - 100);
    CHECK_THROWS_WITH(parse(legacy), Contains("run past the end of the file"));
  }
  SECTION("a storage key that does not exist") {
    Entry e;
    e.key = "missing";
    CHECK_THAT(crafted(zip_with({e})), Contains("storage 'missing' has no record 'ckpt/data/missing'"));
    CHECK_THAT(crafted(legacy_checkpoint(state_dict_pickle({e}, true), {}, {})),
               Contains("storage 'missing' is used by a tensor but missing from the storage key list"));
    CHECK_THAT(crafted(legacy_checkpoint(state_dict_pickle({Entry{}}, true), {"0", "extra"}, {float_bytes(6)})),
               Contains("storage 'extra' is listed but no tensor uses it"));
  }
  SECTION("a storage shorter than its tensor, or than its declaration") {
    Entry e;
    e.sizes = {2, 4};
    e.strides = {4, 1};
    CHECK_THAT(crafted(zip_with({e})), Contains("tensor 'w': reads element 7 of storage '0', which holds 6 elements"));
    CHECK_THAT(crafted(zip_with({Entry{}}, 5)),
               Contains("record 'ckpt/data/0' holds 20 bytes, but storage '0' is declared with 6 F32 elements"));
    CHECK_THAT(crafted(legacy_checkpoint(state_dict_pickle({Entry{}}, true), {"0"}, {float_bytes(5)})),
               Contains("holds 5 elements, the state dict declares 6"));
  }
  SECTION("negative or overflowing size, stride and offset") {
    Entry e;
    e.sizes = {-2, 3};
    CHECK_THAT(crafted(zip_with({e})), Contains("negative size or stride in dimension 0"));
    e = Entry{};
    e.strides = {3, -1};
    CHECK_THAT(crafted(zip_with({e})), Contains("negative size or stride in dimension 1"));
    e = Entry{};
    e.offset = -1;
    CHECK_THAT(crafted(zip_with({e})), Contains("negative storage offset -1"));
    e = Entry{};
    e.sizes = {INT64_MAX, 4};
    CHECK_THAT(crafted(zip_with({e})), Contains("product of its sizes overflows"));
    e = Entry{};
    e.sizes = {2, 3};
    e.strides = {INT64_MAX, 1};
    CHECK_THAT(crafted(zip_with({e})), Contains("reads element"));
    e.offset = INT64_MAX;
    CHECK_THAT(crafted(zip_with({e})), Contains("last element's position overflows"));
    Entry storage;
    storage.storage_elements = -6;
    CHECK_THAT(crafted(zip_with({storage})), Contains("storage '0' has a negative size -6"));
    e = Entry{};
    e.sizes = {1 << 20, 1 << 20};
    e.strides = {0, 0};
    CHECK_THAT(crafted(zip_with({e})), Contains("more than the file has bytes"));
  }
  SECTION("many names of a tensor that repeats its elements: reading them all would not be linear") {
    std::vector<Entry> entries(100);
    for (size_t i = 0; i < entries.size(); ++i) {
      entries[i].name = "w" + std::to_string(i);
      entries[i].sizes = {4096};
      entries[i].strides = {0};
    }
    CHECK_THAT(crafted(zip_with(entries)), Contains("elements, more than 4 per byte of the file"));
    entries.resize(8);  // a few such names, of fewer elements, stay within the limit
    for (Entry& e : entries) e.sizes = {256};
    CHECK_NOTHROW(parse(zip_with(entries)));
  }
  SECTION("a zip whose records overlap, disagree or are damaged") {
    const auto pickle = state_dict_pickle({Entry{}}, false);
    // Record ckpt/data/0 hides inside data.pkl's bytes: a valid local header, but shared bytes.
    ZipBuilder overlap;
    const auto inner = ZipBuilder::local_record("ckpt/data/0", float_bytes(6));
    auto outer_data = pickle;
    outer_data.insert(outer_data.end(), inner.begin(), inner.end());
    overlap.add("ckpt/data.pkl", outer_data);
    const uint32_t inner_offset = 30 + 13 + static_cast<uint32_t>(pickle.size());
    overlap.central.push_back({"ckpt/data/0", detail::crc32(float_bytes(6).data(), 24), 24, inner_offset, 0});
    CHECK_THAT(crafted(overlap.finish()), Contains("records 'ckpt/data.pkl' and 'ckpt/data/0' overlap"));

    ZipBuilder renamed;
    renamed.add("ckpt/data.pkl", pickle);
    renamed.add("ckpt/data/0", float_bytes(6));
    renamed.central[1].name = "ckpt/data/1";
    CHECK_THAT(crafted(renamed.finish()), Contains("record 'ckpt/data/1': local header names it 'ckpt/data/0'"));

    ZipBuilder compressed;
    compressed.add("ckpt/data.pkl", pickle, 8);
    CHECK_THAT(crafted(compressed.finish()), Contains("is compressed (method 8)"));

    ZipBuilder past_end;
    past_end.add("ckpt/data.pkl", pickle);
    past_end.central[0].size += 1000;
    CHECK_THAT(crafted(past_end.finish()), Contains("run past the records' area"));

    auto flipped = zip_with({Entry{}});
    flipped[200] ^= 0x40;  // inside data.pkl: the CRC no longer matches
    CHECK_THAT(crafted(flipped), Contains("CRC-32"));
  }
  SECTION("deep nesting and an unbounded stack") {
    PickleWriter marks;
    marks.proto();
    for (int i = 0; i < 100; ++i) marks.op('(');
    CHECK_THAT(crafted(zip_with_pickle(marks)), Contains("nesting deeper than 64 MARKs"));
    PickleWriter lists;  // 100000 lists, each inside the next: no recursion anywhere
    lists.proto();
    for (int i = 0; i < 100000; ++i) lists.op(']');
    for (int i = 1; i < 100000; ++i) lists.op('a');
    lists.op('.');
    CHECK_THAT(crafted(zip_with_pickle(lists)), Contains("the pickled object is a list, not a state dict"));
    PickleWriter nones;
    nones.proto();
    for (size_t i = 0; i <= convert::pickle::Machine::kMaxStack; ++i) nones.op('N');
    CHECK_THAT(crafted(zip_with_pickle(nones)), Contains("stack deeper than"));
  }
  SECTION("types a state dict does not hold") {
    Entry e;
    e.storage_class = "LongStorage";
    CHECK_THAT(crafted(zip_with({e})), Contains("storage type torch.LongStorage holds int64 values"));
    PickleWriter w;
    w.proto().op('}').str("w").str("not a tensor").op('s').op('.');
    CHECK_THAT(crafted(zip_with_pickle(w)), Contains("state dict entry 'w' is a string, not a tensor"));
    CHECK_THAT(crafted(legacy_checkpoint(state_dict_pickle({Entry{}}, true), {"0"}, {float_bytes(6)}, false)),
               Contains("big-endian"));
    CHECK_THAT(crafted({'n', 'o', 't', ' ', 'a', ' ', 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'}),
               Contains("not a PyTorch checkpoint"));
  }
  SECTION("through the converter: the file is named and no output is left") {
    TempDir tmp;
    const std::string dir = checkpoint_with(tmp, pickle_fixture("hostile_os_system_zip.bin"));
    const std::string out = tmp.file("out.petrel");
    CHECK_THROWS_WITH(convert_f32(dir, out), Contains(dir + "/pytorch_model.bin: byte") && Contains("posix.system"));
    CHECK_FALSE(exists(out));
  }
}

// --- memory bounded by the input (#24) ---------------------------------------------

namespace {

std::string corpus_file(const std::string& name) {
  return fixture_dir() + "/../fuzz/corpus/fuzz_pytorch_checkpoint/" + name;
}

// A state dict of `tensors` tensors whose size and stride are one memoized tuple of
// `dims` ones (tools/reference/make_hostile_pickles.py writes the issue's: 200,000, 300).
PickleWriter shared_size_tuple(size_t dims, size_t tensors) {
  PickleWriter w;
  w.proto().ordered_dict().op('(');
  for (size_t i = 0; i < tensors; ++i) {
    w.str("t" + std::to_string(i));
    if (i == 0) w.global("torch._utils", "_rebuild_tensor_v2").put(0);
    else w.get(0);
    w.op('(');
    if (i == 0) w.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").small_int(1).op('t').put(1);
    else w.get(1);
    w.op('Q').small_int(0);
    if (i == 0) {
      w.op('(');
      for (size_t d = 0; d < dims; ++d) w.small_int(1);
      w.op('t').put(2);
    } else {
      w.get(2);
    }
    w.get(2).op(0x89).ordered_dict().op('t').op('R');
  }
  w.op('u').op('.');
  return w;
}

// One memoized list of `pairs` (key, value) pairs rebuilt into `copies` OrderedDicts.
PickleWriter ordered_dict_copies(size_t pairs, size_t copies) {
  PickleWriter w;
  w.proto().op(']').op('(').str("w").op('N').op(0x86).put(0).op(']').op('(');
  for (size_t i = 0; i < pairs; ++i) w.get(0);
  w.op('e').put(1).get(1).op(0x85).put(2).global("collections", "OrderedDict").put(3).op('e');
  for (size_t i = 0; i < copies; ++i) w.get(3).get(2).op('R').op('a');
  w.op('.');
  return w;
}

// A list holding `gets` references to one memoized tuple of `items` ints: sharing,
// not copying, so it stays within the budget however often the tuple is named.
PickleWriter shared_references(size_t items, size_t gets) {
  PickleWriter w;
  w.proto().op(']').op('(').op('(');
  for (size_t i = 0; i < items; ++i) w.small_int(7);
  w.op('t').put(0).op('e').op('(');
  for (size_t i = 0; i < gets; ++i) w.get(0);
  w.op('e').op('.');
  return w;
}

struct Charge {
  uint64_t charged = 0, bytes_read = 0;
  std::string error;  // empty: the pickle ran to its STOP
};

Charge run_machine(const uint8_t* data, size_t size) {
  convert::pickle::Machine machine("test.bin", "data.pkl", 0);
  Charge c;
  try {
    size_t used = 0;
    machine.run(data, size, &used);
  } catch (const ConvertError& e) {
    c.error = e.what();
  }
  c.charged = machine.charged();
  c.bytes_read = machine.bytes_read();
  return c;
}

uint64_t budget(uint64_t bytes_read) {
  using M = convert::pickle::Machine;
  return M::kBudgetPerByte * bytes_read + M::kBudgetBase;
}

}  // namespace

TEST_CASE("pickles that copy one value over and over are refused before their memory grows", "[pickle]") {
  auto refused = [](const std::string& name) {
    try {
      parse(read_bytes(corpus_file(name)));
    } catch (const ConvertError& e) {
      return std::string(e.what());
    }
    FAIL(name << " was accepted");
    return std::string();
  };
  // The file: 300 tensors whose size and stride are one 200,000-int tuple
  // (970 MB before the number of dimensions was checked before each copy).
  CHECK_THAT(refused("regress-memoized_size_tuple.bin"),
             Contains("(archive/data.pkl): the size has 200000 dimensions, more than the limit of 16"));
  // 2,000 OrderedDicts rebuilt from one list of 50,000 pairs (800 MB before the budget).
  CHECK_THAT(refused("regress-ordered_dict_copies.bin"),
             Contains("(archive/data.pkl): the pickle needs more than its memory budget of"));
  // 2,000 legacy storage views naming one 200,000-byte root key (400 MB before).
  CHECK_THAT(refused("regress-legacy_storage_key_copies.bin"),
             Contains("(state dict): storage key of 200000 bytes is longer than the limit of 256"));
  // The same shapes, smaller, crafted here.
  CHECK_THROWS_WITH(parse(zip_with_pickle(shared_size_tuple(17, 2))),
                    Contains("the size has 17 dimensions, more than the limit of 16"));
  CHECK_THROWS_WITH(parse(zip_with_pickle(ordered_dict_copies(20000, 300))), Contains("memory budget"));
}

TEST_CASE("the pickle machine's charge stays within its budget on ordinary and hostile pickles", "[pickle]") {
  using M = convert::pickle::Machine;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> pickles;
  for (const char* name : {"model_zip.bin", "layouts_zip.bin", "layouts_protocol4_zip.bin", "m2m100_tiny.bin"}) {
    const auto file = read_bytes(pickle_fixture(name));
    convert::ZipArchive zip(file.data(), file.size(), name);
    const convert::ZipRecord* pkl = nullptr;
    for (const auto& r : zip.records())
      if (r.name.size() >= 8 && r.name.compare(r.name.size() - 8, 8, "data.pkl") == 0) pkl = &r;
    REQUIRE(pkl != nullptr);
    const uint8_t* p = zip.verified_data(*pkl);
    pickles.emplace_back(name, std::vector<uint8_t>(p, p + pkl->size));
  }
  const size_t ordinary = pickles.size();
  pickles.emplace_back("shared size tuple of 16", shared_size_tuple(16, 1000).bytes);
  pickles.emplace_back("shared references", shared_references(20000, 200000).bytes);
  pickles.emplace_back("ordered dict copies", ordered_dict_copies(20000, 300).bytes);
  pickles.emplace_back("size tuple of 200000", shared_size_tuple(200000, 3).bytes);
  for (size_t i = 0; i < pickles.size(); ++i) {
    const auto& [name, bytes] = pickles[i];
    const Charge c = run_machine(bytes.data(), bytes.size());
    INFO(name << ": " << c.charged << " bytes charged after " << c.bytes_read << " read; " << c.error);
    CHECK(c.charged > 0);
    CHECK(c.bytes_read <= bytes.size());
    CHECK(c.charged <= budget(c.bytes_read));
    if (i < ordinary) {  // real state dicts run to STOP, far from the budget
      CHECK(c.error.empty());
      CHECK(c.bytes_read == bytes.size());
      CHECK(c.charged <= M::kBudgetPerByte / 4 * c.bytes_read + M::kBudgetBase / 4);
    }
  }
  // Sharing is not copying: a tuple named 200,000 times costs 4 bytes per name.
  const Charge shared = run_machine(pickles[ordinary + 1].second.data(), pickles[ordinary + 1].second.size());
  CHECK(shared.error.empty());
  // The hostile ones stop at their limit, having read only part of the pickle.
  const Charge copies = run_machine(pickles[ordinary + 2].second.data(), pickles[ordinary + 2].second.size());
  CHECK_THAT(copies.error, Contains("memory budget"));
  CHECK(copies.bytes_read < pickles[ordinary + 2].second.size());
}

TEST_CASE("a pickle string holding an encoded surrogate is not UTF-8", "[pickle]") {
  PickleWriter w;
  w.proto().op('}').str("w\xed\xa0\x80").op('N').op('s').op('.');  // U+D800 as UTF-8 bytes (CESU-8, not UTF-8)
  CHECK_THROWS_WITH(parse(zip_with_pickle(w)), Contains("string is not valid UTF-8"));
  PickleWriter global;
  global.proto().op('c').raw("collections\nOrdered\xed\xbf\xbf" "Dict\n").op('.');
  CHECK_THROWS_WITH(parse(zip_with_pickle(global)), Contains("GLOBAL name is not valid UTF-8"));
}

TEST_CASE("random byte flips and truncations never crash the reader, only throw ConvertError", "[pickle]") {
  std::mt19937 rng(20261123);
  size_t refused = 0, accepted = 0;
  for (const char* name : {"layouts_zip.bin", "layouts_legacy.bin", "layouts_protocol4_zip.bin", "model_zip.bin",
                           "model_legacy.bin"}) {
    const auto original = read_bytes(pickle_fixture(name));
    const bool big = original.size() > 100000;
    const int rounds = big ? 300 : 1000;
    for (int round = 0; round < rounds; ++round) {
      auto bytes = original;
      // Big files: aim most damage at their structure (the pickle at the front, the
      // directory at the end) rather than at tensor bytes.
      auto position = [&]() -> size_t {
        const size_t n = bytes.size();
        switch (big ? rng() % 3 : 0) {
          case 1: return rng() % std::min<size_t>(n, 16384);
          case 2: return n - 1 - rng() % std::min<size_t>(n, 4096);
          default: return rng() % n;
        }
      };
      if (rng() % 5 == 0) {
        bytes.resize(position());
      } else {
        for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) bytes[position()] = static_cast<uint8_t>(rng());
      }
      try {
        convert::parse_pytorch_checkpoint(bytes.data(), bytes.size(), name);
        ++accepted;
      } catch (const ConvertError&) {
        ++refused;
      }
    }
  }
  INFO(refused << " refused, " << accepted << " accepted");
  CHECK(refused > accepted);
}
