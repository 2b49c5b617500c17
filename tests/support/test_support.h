// Helpers shared by the test files: fixture paths, temporary directories,
// byte-level file access, and a safetensors writer for crafting bad checkpoints.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "kernels/kernels.h"
#include "petrel/model.h"
#include "support/build_paths.h"

namespace petrel::test {

// Random floats for test data, drawn from the generator's bits with f32/f64 arithmetic.
// Not std::normal_distribution or std::uniform_real_distribution: libstdc++ draws them
// through generate_canonical, whose long-double logarithm clang does not fold on aarch64,
// where long double is software binary128; the kernel tests ran 5-10x slower there.
float uniform_float(std::mt19937& rng, float low, float high);  // in [low, high)
float normal_float(std::mt19937& rng, float sd = 1.0f);        // mean 0 (Box-Muller)

std::string oracle_dir(const std::string& name);  // tests/fixtures/oracle/<name>
nlohmann::json expected_for(const std::string& name);  // the oracle's expected.json for <name>
// The checkpoint directory of oracle fixture <name>: the committed directory, or for a
// fixture whose weights are too big to commit (generated_weights.json), a copy in a
// process-wide temporary directory with model.safetensors regenerated.
std::string fixture_checkpoint(const std::string& name);
// A file (or directory) made once and shared: in the directory PETREL_TEST_MODEL_CACHE
// names (tools/test.sh sets it and empties it at its start) by whichever test process
// needs it first, for every later process and stage of the run -- the sanitized and
// emulated runs then load models the native build converted, as a device loads files
// converted elsewhere, instead of converting in emulated floating point for minutes;
// unset: once per process, in a temporary directory. make(path) creates it under a
// temporary name, then it is renamed into place, so neither a process running beside nor
// a later call after a failed make() reads half of it (two may make it at once: the same
// bytes).
std::string shared_file(const std::string& name, const std::function<void(const std::string&)>& make);
// The converter options an oracle fixture was made for (its expected.json's
// convert_positions and convert_norm), applied to o (o.checkpoint_dir is the fixture).
void use_fixture_options(convert::ConvertOptions& o);
// Heavy tests check every `stride`-th case of their data: all of it, or every Nth when
// the environment sets PETREL_TEST_SUBSET=N (N >= 2; any other value but 0: every 5th).
// tools/test.sh sets 5 for sanitizer builds and 20 for emulated CPUs, where the whole
// set takes minutes per test.
size_t subset_stride();
// The kernel paths whole-model tests run on: every path this CPU runs (runnable_isas()),
// or only the one a translator chooses when PETREL_TEST_SUBSET is set: there the
// [kernels] tests still compare every path with the scalar reference, and a whole model
// per path under a sanitizer or an emulator costs minutes each.
std::vector<std::string> model_test_isas();
// The thread counts of `wanted` this build can start (a WebAssembly build runs one).
std::vector<size_t> thread_counts(std::initializer_list<size_t> wanted);
// `checkpoint_dir` converted with every weight in `dtype`, once per run (shared_file,
// as NAME-DTYPE.petrel).
std::string shared_conversion(const std::string& name, const std::string& checkpoint_dir, DType dtype);
// The bundled en-de model (tools/en-de-model) converted with dtype weights and
// embeddings: once per dtype and process, into a process-wide temporary directory.
std::string en_de_model_path(DType dtype = DType::kInt8);
// The first `count` lines of the en-de held-out test split (tests/fixtures/en-de/test.en),
// encoded by `model`'s tokenizer.
std::vector<std::vector<int32_t>> en_de_test_inputs(const Model& model, size_t count);
// max |got - want| / max(1, max |want|): an error relative to the values' scale (logits,
// encoder states) over want.size() values.
double relative_error(const float* got, const std::vector<float>& want);
// The kernel table of a path this CPU runs ("avx2", ...); fails the test otherwise.
const kernels::KernelTable& table_named(const std::string& isa);
// Model::load, throwing the loader's message on failure (Catch reports it).
std::shared_ptr<const Model> load_model(const std::string& path);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs a shell command; returns its standard output (and standard error, merged, unless
// stdout_only) and sets *status to the wait status.
std::string run_command(const std::string& command, int* status, bool stdout_only = false);
// Whether this build can start programs (petrel-run, xz): not a WebAssembly build.
bool can_run_programs();
// Whether this build runs under a sanitizer, whose runtime reserves terabytes of shadow
// memory at start: an address-space limit (RLIMIT_AS) then stops it before main.
constexpr bool built_with_sanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// While it lives, LC_NUMERIC is a locale whose radix is ',' (de_DE.UTF-8; made once per
// run by localedef where it is not installed), as an application embedding Petrel may
// set; then the C locale again. ok() is false where no such locale can be had (no
// localedef, a build that cannot start programs, an emulated CPU's libc not reading the
// host's locale files).
class CommaRadixLocale {
 public:
  CommaRadixLocale();
  ~CommaRadixLocale();
  CommaRadixLocale(const CommaRadixLocale&) = delete;
  CommaRadixLocale& operator=(const CommaRadixLocale&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// Whether the environment variable PETREL_TEST_SKIP (comma-separated names, e.g.
// "xz") allows skipping what needs `what`. Unset (as in CI): nothing may be skipped, so
// a missing tool or corpus fails the test instead of turning it into a no-op.
bool skip_allowed(const std::string& what);

// The decompressed bytes of an .xz file (xz -dc). Throws when xz is missing or fails;
// returns nullopt instead when xz is missing and PETREL_TEST_SKIP names "xz".
std::optional<std::string> xz_decompress(const std::string& path);

std::vector<uint8_t> read_bytes(const std::string& path);
// A field of /proc/self/smaps ("FilePmdMapped", "AnonHugePages", ...) of the mapping that
// holds `address`, in bytes; 0 where there is no such mapping or field (not Linux).
size_t smaps_bytes(const void* address, const std::string& field);
// Little-endian integers appended to a byte buffer (crafted files).
void put16(std::vector<uint8_t>& out, uint16_t v);
void put32(std::vector<uint8_t>& out, uint32_t v);
void put64(std::vector<uint8_t>& out, uint64_t v);
// Model::load_from_memory of bytes, as the file `name` (the name errors quote).
Result<std::shared_ptr<const Model>> load_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "test.petrel");
// An oracle fixture's "inputs" (token ids per sentence), and a JSON array of strings.
std::vector<std::vector<int32_t>> inputs_of(const nlohmann::json& expected);
std::vector<std::string> strings(const nlohmann::json& array);
std::string ids_text(const std::vector<int32_t>& ids);  // "12 7 3"
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
void copy_dir(const std::string& from, const std::string& to);
bool exists(const std::string& path);

struct RawTensor {
  std::vector<uint64_t> shape;
  std::vector<float> values;
};
// All tensors of a safetensors file, widened to f32.
std::map<std::string, RawTensor> read_checkpoint(const std::string& path);
// A safetensors file's bytes: 8-byte little-endian header length, header, data.
std::vector<uint8_t> safetensors_bytes(const std::string& header, const uint8_t* data, size_t size);
void write_checkpoint(const std::string& path, const std::map<std::string, RawTensor>& tensors);

}  // namespace petrel::test
