// The converter streams: tensors pass through a block of rows at a time
// (CheckpointFile::read_f32_rows, MatrixEncoder), and a sharded checkpoint reads as
// its one-file form does. (Its bounded memory: test_allocations.cpp.) Its output is
// written so that the page cache can keep it in 2 MiB folios.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "convert/checkpoint_file.h"
#include "convert/convert.h"
#include "convert/model_writer.h"
#include "convert/pytorch_checkpoint.h"
#include "convert/quantize.h"
#include "convert/safetensors.h"
#include "support/test_support.h"

using namespace petrel;
using namespace petrel::test;

// The quantizers' rounding is inline (round_clamped): it must be std::lround's half away
// from zero, clamped, at every halfway point, beside them and far outside the range.
TEST_CASE("the quantizers round as std::lround does, clamped", "[convert]") {
  auto want = [](float x, int32_t limit) {
    if (std::fabs(x) > 1e9f) return x > 0 ? limit : -limit;  // past long's range lround is unspecified
    return static_cast<int32_t>(std::min<long>(limit, std::max<long>(-limit, std::lround(x))));
  };
  std::vector<float> xs = {0.0f, -0.0f, 1e30f, -1e30f, 3e9f, -3e9f, 1e-30f, -1e-30f};
  for (int k = -300; k <= 300; ++k) {
    const float half = k + 0.5f;
    for (float x : {half, std::nextafter(half, -INFINITY), std::nextafter(half, INFINITY), float(k),
                    std::nextafter(float(k), INFINITY), std::nextafter(float(k), -INFINITY)})
      xs.push_back(x);
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) xs.push_back(test::uniform_float(rng, -200.0f, 200.0f));
  size_t wrong = 0;
  for (int32_t limit : {7, 127}) {
    for (float x : xs) {
      if (convert::round_clamped(x, limit) != want(x, limit)) {
        if (++wrong < 5) WARN("round_clamped(" << x << ", " << limit << ") = " << convert::round_clamped(x, limit));
      }
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("MatrixEncoder by blocks stores what encode_matrix stores, bit for bit", "[convert]") {
  std::mt19937 rng(11);
  struct Shape {
    size_t rows, cols;
  };
  for (DType dtype : {DType::kF32, DType::kF16, DType::kInt8, DType::kInt4}) {
    for (detail::Layout layout : {detail::Layout::kRowMajor, detail::Layout::kPanel16}) {
      for (Shape s : {Shape{1, 1}, Shape{17, 5}, Shape{40, 33}, Shape{100, 64}, Shape{33, 70}}) {
        std::vector<float> values(s.rows * s.cols);
        for (float& v : values) v = test::normal_float(rng, 0.3f);
        values[values.size() / 2] = 0;
        const convert::EncodedMatrix whole = convert::encode_matrix(values, s.rows, s.cols, dtype, 1.5f, layout);
        for (size_t block_values : {size_t{1}, size_t{50}, size_t{700}, s.rows * s.cols}) {
          INFO(to_string(dtype) << (layout == detail::Layout::kPanel16 ? " panel16 " : " row-major ") << s.rows << "x"
                                << s.cols << ", blocks of ~" << block_values << " values");
          convert::MatrixEncoder encoder(s.rows, s.cols, dtype, 1.5f, layout, block_values);
          CHECK(encoder.block_rows() % (layout == detail::Layout::kPanel16 ? detail::kPanelRows : 1) == 0);
          std::vector<uint8_t> data;
          size_t blocks = 0;
          for (size_t first = 0, n = 0; first < s.rows; first += n, ++blocks) {
            n = std::min(encoder.block_rows(), s.rows - first);
            const std::vector<uint8_t>& bytes = encoder.encode_rows(values.data() + first * s.cols, n);
            data.insert(data.end(), bytes.begin(), bytes.end());
          }
          if (block_values < s.rows * s.cols && s.rows > detail::kPanelRows) CHECK(blocks > 1);
          const convert::EncodedMatrix streamed = encoder.finish();
          CHECK(streamed.data.empty());
          CHECK(data == whole.data);
          CHECK(streamed.scales == whole.scales);
          CHECK(streamed.row_sums == whole.row_sums);
          CHECK(streamed.block_scales == whole.block_scales);
          CHECK(streamed.max_abs_error == whole.max_abs_error);
          CHECK((streamed.snr_db == whole.snr_db || (std::isinf(streamed.snr_db) && std::isinf(whole.snr_db))));
          CHECK(streamed.bytes() == whole.bytes());
        }
      }
    }
  }
  SECTION("blocks out of order are refused") {
    std::vector<float> values(64 * 8, 0.5f);
    convert::MatrixEncoder encoder(64, 8, DType::kInt8, 1.0f, detail::Layout::kPanel16, 16 * 8);
    REQUIRE(encoder.block_rows() == 16);
    CHECK_THROWS_AS(encoder.encode_rows(values.data(), 5), std::logic_error);  // not a whole block, not the last
    encoder.encode_rows(values.data(), 16);
    CHECK_THROWS_AS(encoder.finish(), std::logic_error);                     // rows left
    CHECK_THROWS_AS(encoder.encode_rows(values.data(), 64), std::logic_error);  // past the end
  }
}

namespace {
// Every tensor of `file` read whole and by rows (1, 2 and 3 at a time): the same values.
void check_rows_match(const convert::CheckpointFile& file) {
  size_t tensors = 0;
  for (const std::string& name : file.names()) {
    const auto& shape = file.info(name).shape;
    if (shape.empty()) continue;
    INFO(file.path() << ": " << name);
    const std::vector<float> whole = file.read_f32(name);
    const uint64_t cols = convert::row_elements(file, name, 0, shape[0]);
    for (uint64_t step : {1, 2, 3}) {
      std::vector<float> rows(whole.size());
      for (uint64_t first = 0; first < shape[0]; first += step) {
        const uint64_t n = std::min(step, shape[0] - first);
        file.read_f32_rows(name, first, n, rows.data() + first * cols);
      }
      CHECK(rows == whole);
    }
    CHECK_THROWS_AS(file.read_f32_rows(name, shape[0], 1, nullptr), convert::ConvertError);
    ++tensors;
  }
  CHECK(tensors > 0);
}
}  // namespace

TEST_CASE("read_f32_rows reads what read_f32 reads, strided pickles included", "[convert][pickle][safetensors]") {
  check_rows_match(convert::SafetensorsFile(oracle_dir("post_swish_concat_tied") + "/model.safetensors"));
  for (const char* f : {"model_zip.bin", "model_legacy.bin", "model_f16.bin", "layouts_zip.bin", "layouts_legacy.bin"})
    check_rows_match(convert::PytorchCheckpoint(fixture_dir() + "/pickle/" + f));
  SECTION("a NaN's index is the whole tensor's") {
    TempDir tmp;
    std::vector<float> values(12, 1.0f);
    values[7] = NAN;
    write_checkpoint(tmp.file("t.safetensors"), {{"t", {{4, 3}, values}}});
    convert::SafetensorsFile file(tmp.file("t.safetensors"));
    std::vector<float> out(6);
    file.read_f32_rows("t", 0, 2, out.data());  // rows 0 and 1: elements 0..5
    try {
      file.read_f32_rows("t", 2, 2, out.data());
      FAIL("no error");
    } catch (const convert::ConvertError& e) {
      CHECK_THAT(e.what(), Catch::Contains("non-finite value (NaN or Inf) at element 7"));
    }
  }
}

namespace {
const std::string kOracle = "post_swish_concat_tied";

// The oracle checkpoint's directory, but its weights split over shards as `shard_of`
// says (tensor -> shard file), with an index naming `index_map` (default: shard_of).
std::string sharded_checkpoint(const TempDir& tmp, const std::map<std::string, std::string>& shard_of,
                               std::optional<std::map<std::string, std::string>> index_map = std::nullopt) {
  const std::string dir = tmp.file(kOracle);  // the name the file records
  std::filesystem::create_directory(dir);
  for (const auto& e : std::filesystem::directory_iterator(oracle_dir(kOracle)))
    if (e.path().filename() != "model.safetensors")
      std::filesystem::copy_file(e.path(), dir + "/" + e.path().filename().string());
  const auto tensors = read_checkpoint(oracle_dir(kOracle) + "/model.safetensors");
  std::map<std::string, std::map<std::string, RawTensor>> shards;
  for (const auto& [name, t] : tensors)
    if (shard_of.count(name)) shards[shard_of.at(name)][name] = t;
  for (const auto& [shard, contents] : shards) write_checkpoint(dir + "/" + shard, contents);
  const nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", index_map.value_or(shard_of)}};
  const std::string text = index.dump();
  write_bytes(dir + "/model.safetensors.index.json", std::vector<uint8_t>(text.begin(), text.end()));
  return dir;
}

// Each tensor of the oracle checkpoint -> "a.safetensors" or "b.safetensors", alternately.
std::map<std::string, std::string> two_shards() {
  std::map<std::string, std::string> shard_of;
  size_t i = 0;
  for (const auto& [name, t] : read_checkpoint(oracle_dir(kOracle) + "/model.safetensors"))
    shard_of[name] = i++ % 2 ? "b.safetensors" : "a.safetensors";
  return shard_of;
}

std::string convert_error(const std::string& dir, const std::string& out) {
  convert::ConvertOptions o;
  o.checkpoint_dir = dir;
  o.output_path = out;
  try {
    convert::convert_checkpoint(o);
  } catch (const convert::ConvertError& e) {
    CHECK_FALSE(exists(out));
    return e.what();
  }
  FAIL("converted without an error");
  return "";
}
}  // namespace

TEST_CASE("a sharded checkpoint converts as its one-file form, and a bad index is refused by name", "[convert]") {
  TempDir tmp, reference_tmp;
  convert::ConvertOptions o;
  o.checkpoint_dir = oracle_dir(kOracle);
  o.output_path = reference_tmp.file("one-file.petrel");
  convert::convert_checkpoint(o);
  const std::string out = tmp.file("out.petrel");

  SECTION("two shards: the same file, byte for byte") {
    o.checkpoint_dir = sharded_checkpoint(tmp, two_shards());
    o.output_path = out;
    const auto report = convert::convert_checkpoint(o);
    CHECK(report.notes.front() == "weights: read model.safetensors.index.json (2 shards, safetensors)");
    CHECK(read_bytes(out) == read_bytes(reference_tmp.file("one-file.petrel")));
  }
  SECTION("a missing shard") {
    auto shard_of = two_shards();
    auto index = shard_of;
    index.begin()->second = "c.safetensors";  // never written
    shard_of.erase(shard_of.begin());
    const std::string message = convert_error(sharded_checkpoint(tmp, shard_of, index), out);
    CHECK_THAT(message, Catch::Contains("model.safetensors.index.json: shard 'c.safetensors'") &&
                            Catch::Contains("is missing"));
  }
  SECTION("a tensor in two shards") {
    auto shard_of = two_shards();
    const std::string dir = sharded_checkpoint(tmp, shard_of);
    // b.safetensors gains a copy of a tensor of a.safetensors
    auto a = read_checkpoint(dir + "/a.safetensors"), b = read_checkpoint(dir + "/b.safetensors");
    b[a.begin()->first] = a.begin()->second;
    write_checkpoint(dir + "/b.safetensors", b);
    CHECK_THAT(convert_error(dir, out), Catch::Contains("tensor '" + a.begin()->first + "' is in two shards"));
  }
  SECTION("a shard holding a tensor the index places elsewhere, or does not list") {
    auto index = two_shards();
    const std::string moved = index.begin()->first;  // written to a.safetensors
    index[moved] = "b.safetensors";
    CHECK_THAT(convert_error(sharded_checkpoint(tmp, two_shards(), index), out),
               Catch::Contains("a.safetensors: holds tensor '" + moved + "', which") &&
                   Catch::Contains("places in 'b.safetensors'"));
    TempDir other;
    index = two_shards();
    index.erase(moved);
    CHECK_THAT(convert_error(sharded_checkpoint(other, two_shards(), index), other.file("out.petrel")),
               Catch::Contains("holds tensor '" + moved + "', which") && Catch::Contains("does not list"));
  }
  SECTION("an index entry whose shard lacks it") {
    auto shard_of = two_shards();
    auto index = shard_of;
    shard_of.erase(shard_of.begin());  // not written
    CHECK_THAT(convert_error(sharded_checkpoint(tmp, shard_of, index), out),
               Catch::Contains("a.safetensors: no tensor '" + index.begin()->first + "'"));
  }
}

TEST_CASE("a sharded checkpoint's index is checked before any shard is opened", "[convert][json]") {
  const std::string path = "dir/model.safetensors.index.json";
  auto error_of = [&](const std::string& text) {
    try {
      convert::parse_shard_index(path, text);
    } catch (const convert::ConvertError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(convert::parse_shard_index(path, R"({"weight_map": {"a": "x.safetensors", "b": "y.safetensors"}})") ==
        std::map<std::string, std::string>{{"a", "x.safetensors"}, {"b", "y.safetensors"}});
  CHECK_THAT(error_of("[]"), Catch::Contains(path + ": not a sharded checkpoint index"));
  CHECK_THAT(error_of(R"({"weight_map": {}})"), Catch::Contains("weight_map is empty"));
  CHECK_THAT(error_of(R"({"weight_map": {"a": 3}})"), Catch::Contains("tensor 'a' names no shard file"));
  for (const char* shard : {"../x.safetensors", "/etc/passwd", "sub/x.bin", "..", ".", "", "a\\\\b"})
    CHECK_THAT(error_of(std::string(R"({"weight_map": {"a": ")") + shard + "\"}}"),
               Catch::Contains("is not a file name in the checkpoint's directory"));
  std::string many = R"({"weight_map": {)";
  for (size_t i = 0; i <= convert::kMaxShards; ++i) many += (i ? "," : "") + ("\"t" + std::to_string(i) + "\": \"s" + std::to_string(i) + "\"");
  CHECK_THAT(error_of(many + "}}"), Catch::Contains("more than 4096 shard files"));
  CHECK_THAT(error_of(std::string(100, '[')), Catch::Contains("nested deeper"));
}

TEST_CASE("a sharded pytorch_model.bin converts as the one file", "[convert][pickle]") {
  TempDir tmp, reference_tmp;
  const std::string dir = tmp.file(kOracle), reference_dir = reference_tmp.file(kOracle);
  for (const std::string& d : {dir, reference_dir}) {
    std::filesystem::create_directory(d);
    for (const char* f : {"config.json", "vocab.json"})
      std::filesystem::copy_file(oracle_dir(kOracle) + "/" + f, d + "/" + f);
  }
  const std::string weights = fixture_dir() + "/pickle/model_zip.bin";
  std::filesystem::copy_file(weights, reference_dir + "/pytorch_model.bin");
  std::filesystem::copy_file(weights, dir + "/pytorch_model-00001-of-00001.bin");
  nlohmann::json index = {{"weight_map", nlohmann::json::object()}};
  for (const std::string& name : convert::PytorchCheckpoint(weights).names())
    index["weight_map"][name] = "pytorch_model-00001-of-00001.bin";
  const std::string text = index.dump();
  write_bytes(dir + "/pytorch_model.bin.index.json", std::vector<uint8_t>(text.begin(), text.end()));
  convert::ConvertOptions o;
  o.checkpoint_dir = reference_dir;
  o.output_path = reference_tmp.file("one.petrel");
  convert::convert_checkpoint(o);
  o.checkpoint_dir = dir;
  o.output_path = tmp.file("sharded.petrel");
  const auto report = convert::convert_checkpoint(o);
  CHECK(report.notes.front() == "weights: read pytorch_model.bin.index.json (1 shard, zip format, torch 1.6+)");
  CHECK(read_bytes(o.output_path) == read_bytes(reference_tmp.file("one.petrel")));
}

#ifdef __linux__
namespace {

// How many bytes of a fresh read-only mapping of `path` the kernel maps with 2 MiB pages
// once every page has been read (smaps' FilePmdMapped for that mapping). The mapping
// starts on a 2 MiB boundary, as file offset 0 does, wherever the kernel (or an emulator)
// would have put it.
size_t bytes_mapped_with_2mib_pages(const std::string& path) {
  constexpr size_t kHuge = size_t{2} << 20;
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  const size_t size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
  void* reserved = ::mmap(nullptr, size + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(reserved != MAP_FAILED);
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(reserved) + kHuge - 1) / kHuge * kHuge;
  void* map = ::mmap(reinterpret_cast<void*>(aligned), size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  ::close(fd);
  REQUIRE(map != MAP_FAILED);
  ::madvise(map, size, MADV_HUGEPAGE);  // as Model::load does
  const volatile uint8_t* bytes = static_cast<const uint8_t*>(map);
  uint8_t sink = 0;
  for (size_t i = 0; i < size; i += 4096) sink ^= bytes[i];
  (void)sink;
  const size_t huge = smaps_bytes(map, "FilePmdMapped");
  ::munmap(reserved, size + kHuge);
  return huge;
}

}  // namespace

TEST_CASE("the converter writes its output so that a mapping of it can use 2 MiB pages", "[convert]") {
  TempDir tmp;
  constexpr size_t kMiB = size_t{1} << 20, kHeader = 1000;  // metadata before the tensors
  std::vector<uint8_t> data(9 * kMiB);
  std::mt19937 rng(3);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  write_bytes(tmp.file("data"), data);
  const int from = ::open(tmp.file("data").c_str(), O_RDONLY);
  const int to = ::open(tmp.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE((from >= 0 && to >= 0));
  std::vector<uint8_t> want(kHeader, 'm');
  REQUIRE(::write(to, want.data(), kHeader) == ssize_t(kHeader));
  CHECK(convert::append_in_huge_page_chunks(from, to, kHeader, data.size()));
  ::close(from);
  ::close(to);
  want.insert(want.end(), data.begin(), data.end());
  CHECK(read_bytes(tmp.file("out")) == want);

  // Whether this kernel and file system keep 2 MiB folios at all: 8 MiB written 2 MiB at
  // a time from offset 0 (recent kernels do: ext4 on Linux 6.18 here; Debian 12's 6.1 on
  // ext4 does not).
  {
    const int fd = ::open(tmp.file("reference").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    for (size_t at = 0; at < 8 * kMiB; at += 2 * kMiB) REQUIRE(::write(fd, data.data() + at, 2 * kMiB) == ssize_t(2 * kMiB));
    ::close(fd);
  }
  if (bytes_mapped_with_2mib_pages(tmp.file("reference")) == 0) {
    WARN("this kernel or file system keeps no 2 MiB page-cache folios: nothing more to check");
    return;
  }
  // [0, 2 MiB) holds the header and [8 MiB, end) is partial; the three between are whole.
  CHECK(bytes_mapped_with_2mib_pages(tmp.file("out")) >= 6 * kMiB);
}
#endif
