// The data section's checksum: the converter records the CRC-32 of the tensor bytes,
// and Model::verify_data (petrel-inspect --verify, petrel_model_verify) finds a flipped
// weight that the loader's structural checks cannot see.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <random>

#include "convert/convert.h"
#include "format/crc32.h"
#include "format/model_file.h"
#include "petrel/petrel.h"
#include "petrel_generated.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;
using Catch::Matchers::Contains;

namespace {

const std::vector<uint8_t>& converted() {
  static std::vector<uint8_t> bytes = [] {
    TempDir tmp;
    convert::ConvertOptions o;
    o.checkpoint_dir = oracle_dir("post_swish_concat_tied");
    o.output_path = tmp.file("m.petrel");
    convert::convert_checkpoint(o);
    return read_bytes(o.output_path);
  }();
  return bytes;
}

size_t data_start(const std::vector<uint8_t>& file) {
  return detail::data_section_start(flatbuffers::ReadScalar<uint32_t>(file.data()));
}

// CRC-32 one bit at a time, straight from the polynomial: the reference the table-driven
// version is checked against.
uint32_t bitwise_crc32(const uint8_t* data, size_t size, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
  }
  return ~crc;
}

}  // namespace

TEST_CASE("CRC-32 matches the standard's check value and a bitwise implementation", "[checksum]") {
  const char* check = "123456789";  // CRC-32/ISO-HDLC's published check value
  REQUIRE(detail::crc32(reinterpret_cast<const uint8_t*>(check), 9) == 0xCBF43926u);
  std::mt19937 rng(32);
  std::vector<uint8_t> bytes(4099);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (int trial = 0; trial < 200; ++trial) {
    const size_t begin = rng() % 64, size = rng() % (bytes.size() - begin), split = size ? rng() % size : 0;
    const uint8_t* p = bytes.data() + begin;
    INFO("begin " << begin << ", size " << size << ", split " << split);
    const uint32_t whole = detail::crc32(p, size);
    REQUIRE(whole == bitwise_crc32(p, size));
    REQUIRE(detail::crc32(p + split, size - split, detail::crc32(p, split)) == whole);
  }
}

TEST_CASE("the converter records the data section's CRC-32 and a flipped weight fails verification", "[checksum]") {
  std::vector<uint8_t> bytes = converted();
  const size_t start = data_start(bytes);
  auto good = load_bytes(bytes);
  REQUIRE(good.has_value());
  const ModelInfo& info = good.value()->info();
  REQUIRE(info.data_crc32.has_value());
  CHECK(*info.data_crc32 == bitwise_crc32(bytes.data() + start, bytes.size() - start));
  REQUIRE(good.value()->verify_data().has_value());

  std::mt19937 rng(7);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<uint8_t> flipped = bytes;
    flipped[start + rng() % (bytes.size() - start)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto loaded = load_bytes(flipped);
    REQUIRE(loaded.has_value());  // structure intact: only the checksum can tell
    Status verified = loaded.value()->verify_data();
    REQUIRE_FALSE(verified.has_value());
    CHECK(verified.error().code == ErrorCode::kFormat);
    CHECK_THAT(verified.error().message, Contains("test.petrel") && Contains("checksum does not match"));
  }

  SECTION("a file without a checksum says so") {
    // Absent as in older files: the field's vtable slot emptied in place.
    const uint8_t* table = bytes.data() + 4 + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(bytes.data() + 4);
    uint8_t* vtable = const_cast<uint8_t*>(table) - flatbuffers::ReadScalar<flatbuffers::soffset_t>(table);
    REQUIRE(flatbuffers::ReadScalar<uint16_t>(vtable) > fb::Model::VT_DATA_CRC32);
    flatbuffers::WriteScalar<uint16_t>(vtable + fb::Model::VT_DATA_CRC32, 0);
    auto old = load_bytes(bytes);
    REQUIRE(old.has_value());
    CHECK_FALSE(old.value()->info().data_crc32.has_value());
    Status verified = old.value()->verify_data();
    REQUIRE_FALSE(verified.has_value());
    CHECK(verified.error().code == ErrorCode::kUnsupported);
    CHECK_THAT(verified.error().message, Contains("records no data checksum"));
  }
}

TEST_CASE("petrel-inspect --verify and petrel_model_verify report a corrupt weight", "[checksum][cli][capi]") {
  TempDir tmp;
  std::vector<uint8_t> bytes = converted();
  const std::string good = tmp.file("good.petrel"), bad = tmp.file("bad.petrel");
  write_bytes(good, bytes);
  bytes[bytes.size() - 100] ^= 0x10;  // a weight near the end of the data section
  write_bytes(bad, bytes);

  auto inspect = [&](const std::string& args, std::string* out) {
    FILE* pipe = popen((petrel_inspect_command() + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buf[4096];
    size_t n;
    out->clear();
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out->append(buf, n);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  REQUIRE(inspect(good + " --verify --no-tensors", &out) == 0);
  CHECK_THAT(out, Contains("data checksum     CRC-32 0x") && Contains("(verified)"));
  REQUIRE(inspect(good + " --verify --json", &out) == 0);
  CHECK(nlohmann::json::parse(out)["data_verified"] == true);
  CHECK(inspect(bad + " --no-tensors", &out) == 0);  // not asked to verify: structure is fine
  CHECK(inspect(bad + " --verify", &out) == 1);
  CHECK_THAT(out, Contains("bad.petrel") && Contains("checksum does not match"));

  petrel_model* model = nullptr;
  REQUIRE(petrel_model_load(good.c_str(), &model) == PETREL_OK);
  CHECK(petrel_model_verify(model) == PETREL_OK);
  petrel_model_free(model);
  REQUIRE(petrel_model_load(bad.c_str(), &model) == PETREL_OK);
  CHECK(petrel_model_verify(model) == PETREL_FORMAT);
  CHECK_THAT(std::string(petrel_last_error()), Contains("checksum does not match"));
  petrel_model_free(model);
  CHECK(petrel_model_verify(nullptr) == PETREL_INVALID_ARGUMENT);
}
