// JSON inputs of a checkpoint directory (config.json, tokenizer_config.json, ...):
// reading them and typed access to their keys, every error a ConvertError naming the
// file and the key. Shared by the converter and the family tokenizer reader.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convert/convert_error.h"

namespace petrel::convert {

inline bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The largest text input read whole (configs, tokenizer.json: Gemma 3's is 33 MB).
constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;

// `path` opened for reading, once it is known to be a regular file: a checkpoint may
// hold symlinks (git keeps them), and one to /dev/zero or a FIFO would be read forever
// or block. `missing` says what a missing file means; `max_bytes` bounds its size.
inline std::ifstream open_regular_file(const std::string& path, const std::string& missing,
                                       uint64_t max_bytes = UINT64_MAX) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ConvertError(path + ": cannot open" + missing);
  if (!S_ISREG(st.st_mode)) throw ConvertError(path + ": not a regular file (a directory, device or FIFO)");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw ConvertError(path + ": " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                       " such a file may have");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConvertError(path + ": cannot open" + missing);
  return in;
}

// A whole file as text; `missing` says what a missing file means.
inline std::string read_text(const std::string& path, const std::string& missing) {
  std::ifstream in = open_regular_file(path, missing, kMaxTextFileBytes);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConvertError(path + ": read error");
  return text;
}

// nlohmann::json parses and destroys iteratively, but copies, compares and dump()s
// recursively, and each level of nesting costs it ~40 bytes per byte of input: the
// nesting is bounded before parsing, by one linear scan of the brackets outside
// strings (real configs and safetensors headers nest 3 or 4 deep).
constexpr size_t kMaxJsonDepth = 64;

inline void check_json_depth(const std::string& where, std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw ConvertError(where + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels (byte " +
                           std::to_string(i) + ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
}

// A JSON value for an error message: at most 200 bytes of it. Written a value at a time
// (an explicit stack, no recursion) and stopped at the limit, so a value of 100 MB costs
// what its first 200 bytes do, not a dump of it all.
inline std::string json_excerpt(const nlohmann::json& v) {
  using json = nlohmann::json;
  constexpr size_t kLimit = 200;
  // A string cut just past the limit (the cut may split a UTF-8 sequence: the replace
  // handler shows it as U+FFFD).
  auto quoted_start = [](const std::string& text) {
    return json(text.substr(0, kLimit + 1)).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  struct Open {
    json::const_iterator next, end;
    bool object, first;
  };
  std::vector<Open> open;
  std::string s;
  const json* value = &v;
  while (s.size() <= kLimit) {
    if (value != nullptr) {
      if (value->is_structured() && !value->empty()) {
        s += value->is_object() ? '{' : '[';
        open.push_back({value->cbegin(), value->cend(), value->is_object(), true});
      } else if (value->is_string()) {
        s += quoted_start(value->get_ref<const std::string&>());
      } else {
        s += value->dump();  // a number, true/false, null, [] or {}
      }
      value = nullptr;
      continue;
    }
    if (open.empty()) return s;
    Open& o = open.back();
    if (o.next == o.end) {
      s += o.object ? '}' : ']';
      open.pop_back();
      continue;
    }
    if (!o.first) s += ',';
    o.first = false;
    if (o.object) s += quoted_start(o.next.key()) + ':';
    value = &*o.next;
    ++o.next;
  }
  size_t cut = kLimit;  // not inside a UTF-8 sequence: the message stays valid text
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

// nlohmann::json's parse error for a message: at most 300 bytes of it (it quotes the
// offending token whole, which may be the whole file).
inline std::string json_error(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  return what.size() > 300 ? what.substr(0, 300) + "..." : what;
}

inline nlohmann::json parse_json(const std::string& path, const std::string& text) {
  check_json_depth(path, text);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ConvertError(path + ": not valid JSON: " + json_error(e));
  }
}

// A number for a message as a person writes it (1e-06, 65536, 0.5), not std::to_string's
// six decimals (which write 1e-30 as 0.000000).
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// The largest integer a config key may give unless its reader says less (2^24: the
// model file's largest vocabulary, and above any count a model file can hold).
constexpr uint32_t kMaxConfigInteger = uint32_t{1} << 24;

// The model file's limits (the loader's, engine/src/format/model_file.cpp), checked where
// a config gives each value, so that a refusal names the key rather than the written
// file's field; kFileLimit says so in the message.
constexpr uint32_t kMaxFileWidth = uint32_t{1} << 16;  // d_model, FFN and head widths, heads, heads x head_dim
constexpr uint32_t kMaxFileVocab = uint32_t{1} << 24;
constexpr uint32_t kMaxFilePositions = uint32_t{1} << 20;  // positions, sliding windows
constexpr uint32_t kMaxFileLayers = 1024;
constexpr const char* kFileLimit = " (the model file's limit)";

// An interval of numbers, for a check and its message: [lo, hi], either end open.
struct NumberRange {
  double lo, hi;
  bool lo_open = false, hi_open = false;
  bool holds(double v) const { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); }
  std::string text() const {
    return (lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + (hi_open ? ")" : "]");
  }
};

// Typed access to a JSON object's keys. Every refusal names the file, the key (with its
// path inside the file: "rope_scaling.factor", "text_config.vocab_size"), what the key
// must be (its type and range) and the value given.
class ConfigReader {
 public:
  // `text` is the file's content; `path` names it in errors.
  ConfigReader(const std::string& path, const std::string& text) : path_(path), j_(parse_json(path, text)) {
    if (!j_.is_object()) throw ConvertError(path + ": not a JSON object");
  }
  // An object inside a file: `key_prefix` ("text_config.") is its path there.
  ConfigReader(const std::string& path, nlohmann::json object, std::string key_prefix)
      : path_(path), prefix_(std::move(key_prefix)), j_(std::move(object)) {
    if (!j_.is_object()) throw ConvertError(path + ": key '" + prefix_.substr(0, prefix_.size() - 1) + "' must be an object");
  }

  // "<file>: key '<path in the file>'": how a message names a key.
  std::string key_name(const std::string& key) const { return path_ + ": key '" + prefix_ + key + "'"; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConvertError(key_name(key) + " " + what);
  }
  // Present and not null (transformers reads a null as the default).
  bool given(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }

  // The object at `key`, read with the same file and the key's path.
  ConfigReader object(const std::string& key) const {
    if (!given(key)) throw ConvertError(path_ + ": missing key '" + prefix_ + key + "'");
    if (!j_[key].is_object()) fail(key, "must be an object, got " + json_excerpt(j_[key]));
    return ConfigReader(path_, j_[key], prefix_ + key + ".");
  }

  // An integer in lo..hi; `fallback` when the key is absent or null (none: missing is
  // an error). `why` says where the limit comes from, for the message.
  uint32_t integer(const std::string& key, uint32_t lo, uint32_t hi, std::optional<uint32_t> fallback = std::nullopt,
                   const std::string& why = "") const {
    if (!given(key)) {
      if (fallback) return *fallback;
      throw ConvertError(path_ + ": missing key '" + prefix_ + key + "'");
    }
    const nlohmann::json& v = j_[key];
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= lo && v.get<uint64_t>() <= hi
                                                 : v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    if (!in_range)
      fail(key, "must be " + (lo == 1 ? "a positive integer at most " + std::to_string(hi)
                                      : "an integer in " + std::to_string(lo) + ".." + std::to_string(hi)) +
                    why + ", got " + json_excerpt(v));
    return v.get<uint32_t>();
  }
  uint32_t positive(const std::string& key, std::optional<uint32_t> fallback = std::nullopt) const {
    return integer(key, 1, kMaxConfigInteger, fallback);
  }
  uint32_t positive(const std::string& key, uint32_t max, std::optional<uint32_t> fallback,
                    const std::string& why = "") const {
    return integer(key, 1, max, fallback, why);
  }
  int32_t token(const std::string& key, uint32_t vocab) const {
    if (!j_.contains(key)) throw ConvertError(path_ + ": missing key '" + prefix_ + key + "'");
    const nlohmann::json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      fail(key, "must be a token id below vocab_size " + std::to_string(vocab) + ", got " + json_excerpt(v));
    return v.get<int32_t>();
  }
  bool flag(const std::string& key, bool fallback) const {
    if (!given(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, "must be true or false, got " + json_excerpt(j_[key]));
    return j_[key].get<bool>();
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    if (!given(key)) return fallback;
    if (!j_[key].is_string()) fail(key, "must be a string, got " + json_excerpt(j_[key]));
    return j_[key].get<std::string>();
  }
  // A finite number; `fallback` when the key is absent or null.
  double number(const std::string& key, double fallback) const {
    if (!given(key)) return fallback;
    const nlohmann::json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "must be a number, got " + json_excerpt(v));
    return v.get<double>();
  }
  // A number in `range`; `fallback` (not checked) when the key is absent or null (none:
  // missing is an error). `why` says what the range means, for the message.
  double number(const std::string& key, std::optional<double> fallback, const NumberRange& range,
                const std::string& why = "") const {
    if (!given(key)) {
      if (fallback) return *fallback;
      throw ConvertError(path_ + ": missing key '" + prefix_ + key + "'");
    }
    const nlohmann::json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !range.holds(v.get<double>()))
      fail(key, "must be a number in " + range.text() + why + ", got " + json_excerpt(v));
    return v.get<double>();
  }
  // A token id or a list of them (eos_token_id); empty when absent or null.
  std::vector<int32_t> tokens(const std::string& key, uint32_t vocab) const {
    std::vector<int32_t> out;
    if (!given(key)) return out;
    const nlohmann::json& v = j_[key];
    const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
    if (list.size() > 64) fail(key, "lists more than 64 tokens");
    for (const nlohmann::json& id : list) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        fail(key, "must hold token ids below vocab_size " + std::to_string(vocab) + ", got " + json_excerpt(id));
      out.push_back(id.get<int32_t>());
    }
    return out;
  }
  // A list of tokens (additional_special_tokens): strings, or AddedToken objects
  // ({"content": ...}) as older transformers saved them; empty when absent or null.
  std::vector<std::string> token_list(const std::string& key) const {
    std::vector<std::string> out;
    if (!given(key)) return out;
    const nlohmann::json& v = j_[key];
    if (!v.is_array()) fail(key, "must be a list of tokens, got " + json_excerpt(v));
    for (size_t i = 0; i < v.size(); ++i) {
      const nlohmann::json& e = v[i];
      const nlohmann::json* content =
          e.is_string() ? &e : e.is_object() && e.contains("content") ? &e["content"] : nullptr;
      if (content == nullptr || !content->is_string())
        throw ConvertError(path_ + ": " + prefix_ + key + "[" + std::to_string(i) + "] is not a token, got " +
                           json_excerpt(e));
      out.push_back(content->get<std::string>());
    }
    return out;
  }
  const nlohmann::json& raw() const { return j_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, prefix_;
  nlohmann::json j_;
};

// A {"token": id} vocabulary (vocab.json, target_vocab.json) holding every id below
// `size` exactly once; `size_key` names the config field that gave `size`.
inline std::vector<std::string> parse_vocab(const std::string& path, const std::string& text, uint32_t size,
                                            const char* size_key) {
  const nlohmann::json j = parse_json(path, text);
  if (!j.is_object()) throw ConvertError(path + ": must map tokens to ids");
  auto checked_id = [&](nlohmann::json::const_iterator it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() >= size)
      throw ConvertError(path + ": token " + json_excerpt(nlohmann::json(it.key())) + " has id " + json_excerpt(it.value()) + ", outside " + size_key +
                         " " + std::to_string(size));
    return it.value().get<size_t>();
  };
  if (j.size() < size) {
    // Too few tokens: the first id without one is found from the ids given, not from
    // `size` slots (2 tokens and a size of 2^24 would allocate 512 MB first).
    std::vector<size_t> ids;
    for (auto it = j.cbegin(); it != j.cend(); ++it) ids.push_back(checked_id(it));
    std::sort(ids.begin(), ids.end());
    const auto twice = std::adjacent_find(ids.begin(), ids.end());
    if (twice != ids.end()) throw ConvertError(path + ": id " + std::to_string(*twice) + " is used by two tokens");
    size_t missing = 0;
    while (missing < ids.size() && ids[missing] == missing) ++missing;
    throw ConvertError(path + ": no token for id " + std::to_string(missing) + " (" + std::to_string(j.size()) +
                       " tokens for " + size_key + " " + std::to_string(size) + ")");
  }
  std::vector<std::string> vocab(size);
  std::vector<bool> seen(size, false);
  for (auto it = j.cbegin(); it != j.cend(); ++it) {
    auto id = checked_id(it);
    if (seen[id]) throw ConvertError(path + ": id " + std::to_string(id) + " is used by two tokens");
    seen[id] = true;
    vocab[id] = it.key();
  }
  for (size_t id = 0; id < seen.size(); ++id)
    if (!seen[id]) throw ConvertError(path + ": no token for id " + std::to_string(id));
  return vocab;
}

}  // namespace petrel::convert
