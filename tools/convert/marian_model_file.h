// Marian's own model files, as Firefox Translations (bergamot-translator) ships them:
//  * the binary format (marian-dev src/common/binary.cpp): u64 version 1, u64 item
//    count N, N headers {u64 name length incl. NUL, u64 type, u64 shape length, u64
//    data length}, the NUL-terminated names, the int32 shapes, a u64 padding length and
//    that padding, then each item's data in header order;
//  * .npz (src/common/io.cpp, cnpy): a stored zip of <item>.npy arrays.
// Both carry Marian's options as the item `special:model.yml` (YAML text + NUL).
// Every size is untrusted: a malformed or hostile file throws ConvertError naming
// the file and the item or field, after reading at most a few bytes per byte of file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convert/checkpoint_file.h"

namespace petrel::convert {

// A Marian model file's options (special:model.yml): a flat map of top-level keys.
struct MarianOptions {
  std::map<std::string, std::string> scalars;             // key -> value, quotes removed ("" -> empty)
  std::map<std::string, std::vector<std::string>> lists;  // key -> items (block `- x` or flow `[a, b]`)
  std::string name;                                       // for errors: "<file>: special:model.yml"
  bool has(const std::string& key) const;
  std::string text(const std::string& key, const std::string& fallback) const;  // throws if key is a list
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;  // throws naming key
  double number(const std::string& key, double fallback) const;
  // yaml-cpp's booleans (convert.cpp): y/n, yes/no, true/false, on/off, each in
  // lower case, UPPER CASE or Capitalized.
  bool flag(const std::string& key, bool fallback) const;
  std::vector<std::string> list(const std::string& key) const;  // empty if absent
};
// The YAML subset Marian writes (yaml-cpp's emitter, keys sorted): `key: value` with
// plain, "double" or 'single' quoted scalars, `key:` followed by a block list (`- x`)
// or a flow list (`[a, b]`, `[]`), comments, `---`/`...` markers. Nested maps, block
// scalars, anchors, aliases and tags are refused by key; errors give the line number.
MarianOptions parse_marian_yaml(std::string_view text, const std::string& name);

// A Marian vocabulary in YAML (DefaultVocab's vocab.yml: `token: id` per line, keys quoted
// when they need it) as id -> token; ids the map leaves out are empty tokens (as Marian's
// id2str_). Throws ConvertError naming the line, token or id.
std::vector<std::string> parse_marian_yaml_vocabulary(std::string_view text, const std::string& name);

struct Intgemm8Matrix {
  uint64_t rows = 0, cols = 0;  // as stored: rows = out, cols = in for W matrices (x·W's W transposed);
                                // rows = V, cols = d for embedding tables (*Wemb), which intgemm keeps untransposed
  std::vector<int8_t> values;   // rows*cols, row-major as stored
  float multiplier = 0;         // quantMult: w ≈ q / multiplier
};

class MarianModelFile : public CheckpointFile {  // dtype strings: "F32", "F16", "INTGEMM8"
 public:
  // TensorInfo.shape is Marian's logical shape as in the header ([in,out] for W; [1,n] vectors).
  // read_f32: float32/float16 items as stored; intgemm8 items dequantized (q · (1/multiplier), as
  // marian's unquantizeWemb computes it) and laid out in the logical shape (so callers treat float
  // and int8 files alike); throws on NaN/Inf.
  // names() and find() list the tensors only: special:model.yml is options().
  virtual Intgemm8Matrix read_intgemm8(const std::string& name) const = 0;  // throws if not intgemm8
  virtual const MarianOptions& options() const = 0;                          // parsed special:model.yml (required)
};

// .bin (marian::io::binary) or .npz, told apart by content (zip magic "PK\3\4"), not by extension.
std::unique_ptr<MarianModelFile> open_marian_model(const std::string& path);
// The same from bytes (fuzz target, tests); `name` names it in errors.
std::unique_ptr<MarianModelFile> open_marian_model_bytes(std::vector<uint8_t> bytes, const std::string& name);

}  // namespace petrel::convert
