#include "support/test_support.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/isa.h"

#include "petrel/translator.h"
#include "threads/thread_pool.h"

#include <clocale>
#include <cstdlib>
#include <map>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <stdexcept>

#include "convert/safetensors.h"

namespace fs = std::filesystem;

namespace petrel::test {

bool skip_allowed(const std::string& what) {
  const char* list = std::getenv("PETREL_TEST_SKIP");
  if (list == nullptr) return false;
  const std::string names = std::string(",") + list + ",";
  return names.find("," + what + ",") != std::string::npos;
}

std::optional<std::string> xz_decompress(const std::string& path) {
  if (!can_run_programs() || std::system("xz --version >/dev/null 2>&1") != 0) {
    if (skip_allowed("xz")) return std::nullopt;
    throw std::runtime_error(std::string(can_run_programs() ? "xz is not installed (Debian package xz-utils)"
                                                            : "this build cannot start xz") +
                             ", needed for " + path + "; PETREL_TEST_SKIP=xz skips what needs it");
  }
  FILE* pipe = popen(("xz -dc '" + path + "'").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot start xz -dc " + path);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (status != 0) throw std::runtime_error("xz -dc " + path + " failed (wait status " + std::to_string(status) + ")");
  return out;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

std::string oracle_dir(const std::string& name) { return fixture_dir() + "/oracle/" + name; }

nlohmann::json expected_for(const std::string& name) {
  std::ifstream in(oracle_dir(name) + "/expected.json");
  if (!in) throw std::runtime_error("cannot read " + oracle_dir(name) + "/expected.json");
  return nlohmann::json::parse(in);
}

namespace {

// tools/reference/make_fixtures.py's generator: element i of a tensor with seed s is
// center + scale * (2u - 1), u = top 24 bits of splitmix64(s * 0x9E3779B97F4A7C15 + i) / 2^24.
std::vector<float> generated_tensor(uint64_t seed, size_t count, double center, double scale) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 40) / double(1 << 24);
    out[i] = static_cast<float>(center + scale * (2.0 * u - 1.0));
  }
  return out;
}

}  // namespace

std::string shared_file(const std::string& name, const std::function<void(const std::string&)>& make) {
  const char* shared = std::getenv("PETREL_TEST_MODEL_CACHE");
  static TempDir per_process;  // without a shared directory
  const std::string cache = shared != nullptr && *shared != '\0' ? std::string(shared) : per_process.path();
  const std::string path = cache + "/" + name;
  if (fs::exists(path)) return path;
  fs::create_directories(cache);
  // Made beside, then renamed into place whole: a make() that fails halfway leaves
  // nothing a later call would take for the finished file.
  TempDir staging;
  const std::string made = staging.file(name);
  make(made);
  std::error_code error;
  fs::rename(made, path, error);  // a process that made it first wins; ours is the same
  if (error && !fs::exists(path)) {
    // Another file system (rename cannot cross it): copy under a temporary name, then rename.
    const std::string copy = path + ".partial-" + fs::path(staging.path()).filename().string();
    fs::copy(made, copy, fs::copy_options::recursive);
    fs::rename(copy, path, error);
    if (error && !fs::exists(path)) throw std::runtime_error("cannot place " + path + ": " + error.message());
  }
  return path;
}

std::string fixture_checkpoint(const std::string& name) {
  const std::string dir = oracle_dir(name);
  std::ifstream manifest(dir + "/generated_weights.json");
  if (!manifest) return dir;
  // Regenerating 50 MB per test would be slow: once per run (or process).
  return shared_file("generated-" + name, [&](const std::string& out) {
    copy_dir(dir, out);
    std::map<std::string, RawTensor> tensors;
    for (const auto& t : nlohmann::json::parse(manifest)) {
      RawTensor raw;
      raw.shape = t["shape"].get<std::vector<uint64_t>>();
      size_t count = 1;
      for (uint64_t d : raw.shape) count *= d;
      raw.values = generated_tensor(t["seed"], count, t["center"], t["scale"]);
      tensors[t["name"]] = std::move(raw);
    }
    write_checkpoint(out + "/model.safetensors", tensors);
  });
}

void use_fixture_options(convert::ConvertOptions& o) {
  std::ifstream in(o.checkpoint_dir + "/expected.json");
  if (!in) return;
  const nlohmann::json e = nlohmann::json::parse(in);
  o.positions = convert::parse_position_choice(e.value("convert_positions", "auto"));
  const std::string norm = e.value("convert_norm", "auto");
  if (norm != "auto") o.norm = convert::parse_norm(norm);
}

std::string shared_conversion(const std::string& name, const std::string& checkpoint_dir, DType dtype) {
  return shared_file(name + "-" + to_string(dtype) + ".petrel", [&](const std::string& out) {
    convert::ConvertOptions o;
    o.checkpoint_dir = checkpoint_dir;
    o.output_path = out;
    o.linear_dtype = o.embedding_dtype = dtype;
    convert::convert_checkpoint(o);
  });
}

std::string en_de_model_path(DType dtype) {
  return shared_conversion("en-de", source_dir() + "/tools/en-de-model", dtype);
}

std::vector<std::vector<int32_t>> en_de_test_inputs(const Model& model, size_t count) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream lines(source_dir() + "/tests/fixtures/en-de/test.en");
  std::string line;
  while (out.size() < count && std::getline(lines, line)) {
    auto ids = encode_text(model, line);
    REQUIRE(ids);
    out.push_back(ids.value());
  }
  REQUIRE(out.size() == count);
  return out;
}

float uniform_float(std::mt19937& rng, float low, float high) {
  const double u = static_cast<double>(rng()) * 0x1p-32;  // [0, 1)
  const float x = static_cast<float>(low + (static_cast<double>(high) - low) * u);
  return x < high ? x : low;  // rounding to float may reach high
}

float normal_float(std::mt19937& rng, float sd) {
  const double u1 = (static_cast<double>(rng()) + 1.0) * 0x1p-32;  // (0, 1]: a finite log
  const double u2 = static_cast<double>(rng()) * 0x1p-32;
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<float>(sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2));
}

size_t subset_stride() {
  const char* subset = std::getenv("PETREL_TEST_SUBSET");
  if (subset == nullptr || *subset == '\0' || std::string(subset) == "0") return 1;
  char* end = nullptr;
  const unsigned long stride = std::strtoul(subset, &end, 10);
  return *end == '\0' && stride >= 2 && stride <= 1000 ? stride : 5;
}

std::vector<std::string> model_test_isas() {
  std::vector<std::string> isas = runnable_isas();
  if (subset_stride() > 1) isas.erase(isas.begin(), isas.end() - 1);
  return isas;
}

std::vector<size_t> thread_counts(std::initializer_list<size_t> wanted) {
  std::vector<size_t> out;
  for (size_t n : wanted)
    if (n <= threads::kMaxThreads) out.push_back(n);
  return out;
}

double relative_error(const float* got, const std::vector<float>& want) {
  double worst = 0, scale = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return worst / scale;
}

const kernels::KernelTable& table_named(const std::string& isa) {
  kernels::Isa id;
  REQUIRE(kernels::parse_isa(isa, &id));
  REQUIRE(kernels::table_for(id) != nullptr);
  return *kernels::table_for(id);
}

std::shared_ptr<const Model> load_model(const std::string& path) {
  auto m = Model::load(path);
  if (!m) throw std::runtime_error(m.error().message);
  return m.value();
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "petrel-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

bool can_run_programs() {
#if defined(__EMSCRIPTEN__)
  return false;
#else
  return true;
#endif
}

CommaRadixLocale::CommaRadixLocale() {
  const char* const name = "de_DE.UTF-8";
  if (std::setlocale(LC_NUMERIC, name) == nullptr && can_run_programs()) {
    int status = 0;
    run_command("localedef --help", &status);
    if (status == 0) {
      const std::string dir = shared_file("locales", [&](const std::string& out) {
        fs::create_directories(out);
        int made = 0;
        run_command("localedef -i de_DE -f UTF-8 '" + out + "/" + name + "'", &made);
      });
      ::setenv("LOCPATH", dir.c_str(), 1);
      std::setlocale(LC_NUMERIC, name);
    }
  }
  ok_ = std::string(std::localeconv()->decimal_point) == ",";
  if (!ok_) std::setlocale(LC_NUMERIC, "C");
}

CommaRadixLocale::~CommaRadixLocale() { std::setlocale(LC_NUMERIC, "C"); }

std::string run_command(const std::string& command, int* status, bool stdout_only) {
  std::string out;
  FILE* pipe = popen((command + (stdout_only ? " 2>/dev/null" : " 2>&1")).c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  // One read of the file's size: a byte-by-byte stream iterator took 13 s for the
  // 30 MB tokenizers under ASan.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw std::runtime_error("cannot read " + path);
  return bytes;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void copy_dir(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

bool exists(const std::string& path) { return fs::exists(path); }

std::map<std::string, RawTensor> read_checkpoint(const std::string& path) {
  convert::SafetensorsFile file(path);
  std::map<std::string, RawTensor> out;
  for (const auto& [name, entry] : file.entries()) out[name] = {entry.shape, file.read_f32(name)};
  return out;
}

void write_checkpoint(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const auto& [name, t] : tensors) {
    size_t begin = data.size();
    const auto* p = reinterpret_cast<const uint8_t*>(t.values.data());
    data.insert(data.end(), p, p + t.values.size() * 4);
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  write_bytes(path, safetensors_bytes(header.dump(), data.data(), data.size()));
}

std::vector<uint8_t> safetensors_bytes(const std::string& header, const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes;
  bytes.reserve(8 + header.size() + size);
  put64(bytes, header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data, data + size);
  return bytes;
}

void put16(std::vector<uint8_t>& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

Result<std::shared_ptr<const Model>> load_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  return Model::load_from_memory(bytes.data(), bytes.size(), name);
}

std::vector<std::vector<int32_t>> inputs_of(const nlohmann::json& expected) {
  return expected.at("inputs").get<std::vector<std::vector<int32_t>>>();
}
std::vector<std::string> strings(const nlohmann::json& array) { return array.get<std::vector<std::string>>(); }

size_t smaps_bytes(const void* address, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const uint64_t at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool ours = false;
  while (std::getline(smaps, line)) {
    const size_t dash = line.find('-'), space = line.find(' ');
    if (dash != std::string::npos && dash < space && space != std::string::npos && line[space - 1] != ':') {
      const uint64_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
      const uint64_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      ours = begin <= at && at < end;  // a mapping's first line: "begin-end perms ..."
    } else if (ours && line.rfind(field + ":", 0) == 0) {
      return static_cast<size_t>(std::stoull(line.substr(line.find_first_of("0123456789")))) << 10;
    }
  }
  return 0;
}

}  // namespace petrel::test
