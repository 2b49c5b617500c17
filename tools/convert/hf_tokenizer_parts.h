// The parts of write_hf_tokenizer (hf_tokenizer.h), by what they read and write:
// hf_model.cpp the model (BPE, Unigram or WordPiece: its vocabulary and the added tokens
// over it, the merges and the lookup tables), hf_pipeline.cpp the normalizers,
// pre-tokenizers, post-processor and decoders; hf_tokenizer.cpp puts them together into
// the model file's Tokenizer. Every error is a ConvertError naming tokenizer.json and the
// JSON path (JsonAt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <flatbuffers/flatbuffers.h>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "convert/config_reader.h"
#include "convert/hf_tokenizer.h"
#include "core/string_hash.h"
#include "core/utf8.h"
#include "format/tokenizer_tables.h"
#include "petrel_generated.h"

namespace petrel::convert::hf_tokenizer_detail {

using json = nlohmann::json;

// The model file's limits, checked here so a converted file always loads.
constexpr uint32_t kMaxTokens = 1u << 24;
constexpr size_t kMaxPipelineSteps = 64;

// A value of tokenizer.json and its JSON path: what is read is checked, and a failure
// names the file and the path.
class JsonAt {
 public:
  JsonAt(const std::string& file, const json& j, std::string path) : file_(file), j_(j), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw ConvertError(file_ + ": " + (path_.empty() ? "" : path_ + ": ") + what);
  }
  const json& raw() const { return j_; }
  const std::string& path() const { return path_; }
  bool has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_[key].is_null(); }
  JsonAt at(const char* key) const {
    if (!has(key)) fail(std::string("missing key '") + key + "'");
    return JsonAt(file_, j_[key], path_.empty() ? std::string(key) : path_ + "." + key);
  }
  JsonAt at(size_t i) const { return JsonAt(file_, j_[i], path_ + "[" + std::to_string(i) + "]"); }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) at(key).fail("must be a string, got " + json_excerpt(j_[key]));
    return j_[key].get<std::string>();
  }
  std::string text(const char* key) const {
    if (!has(key)) fail(std::string("missing key '") + key + "'");
    return text(key, "");
  }
  // A string a pipeline step carries into the model file (a pattern, a replacement, a
  // prefix): UTF-8 and within the loader's limit on each.
  std::string step_text(const char* key) const {
    std::string s = text(key);
    if (s.size() > detail::kMaxPieceBytes)
      at(key).fail("is " + std::to_string(s.size()) + " bytes, more than " + std::to_string(detail::kMaxPieceBytes) +
                   " (the loader's limit on a step's text)");
    if (!detail::is_valid_utf8(s)) at(key).fail("is not UTF-8");
    return s;
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) at(key).fail("must be true or false, got " + json_excerpt(j_[key]));
    return j_[key].get<bool>();
  }
  uint32_t count(const char* key, uint32_t fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number_unsigned() || j_[key].get<uint64_t>() > 1024)
      at(key).fail("must be an integer 0..1024, got " + json_excerpt(j_[key]));
    return j_[key].get<uint32_t>();
  }
  std::string type() const {
    if (!j_.is_object()) fail("must be an object, got " + json_excerpt(j_));
    return text("type");
  }
  // The steps of a component, "Sequence"s flattened (tokenizer.json nests them at most
  // a few levels; the file's nesting is bounded by parse_json).
  std::vector<JsonAt> steps(const char* sequence_key) const {
    std::vector<JsonAt> out, stack{*this};
    while (!stack.empty()) {
      JsonAt step = stack.back();
      stack.pop_back();
      if (step.type() != "Sequence") {
        out.push_back(step);
        if (out.size() > kMaxPipelineSteps) fail("more than " + std::to_string(kMaxPipelineSteps) + " steps");
        continue;
      }
      JsonAt list = step.at(sequence_key);
      if (!list.raw().is_array()) list.fail("must be a list");
      for (size_t i = list.raw().size(); i-- > 0;) stack.push_back(list.at(i));  // in order
    }
    return out;
  }
  // A Split/Replace pattern: {"String": s} or {"Regex": r}.
  std::pair<std::string, bool> pattern() const {
    JsonAt p = at("pattern");
    if (p.has("String")) return {p.step_text("String"), false};
    if (p.has("Regex")) return {p.step_text("Regex"), true};
    p.fail("must be {\"String\": ...} or {\"Regex\": ...}, got " + json_excerpt(p.raw()));
  }

 private:
  const std::string& file_;
  const json& j_;
  std::string path_;
};

// The model's tables: the vocabulary, the merges and the hash tables over both.
struct Tokenizer {
  std::vector<std::string> vocab;  // id -> token
  detail::StringMap<std::string, int32_t> id_of;
  std::vector<fb::BpeMerge> merges;
  std::vector<uint32_t> merge_slots, token_slots;
  uint32_t merge_max_probe = 0, token_max_probe = 0;
};

// An added token kept (tokenizer.json's added_tokens).
struct Added {
  int32_t id;
  std::string content;
  bool special, lstrip, rstrip, single_word, normalized;
};

// tokenizer.json's model (hf_model.cpp).
struct HfModel {
  bool unigram = false, wordpiece = false;  // else BPE
  std::string continuing_prefix;            // WordPiece
  uint32_t max_input_chars = 100;           // WordPiece
  std::vector<double> scores;               // Unigram: by id
  uint32_t max_piece_bytes = 0;             // Unigram
  Tokenizer t;
  std::vector<Added> added_tokens;
};

// The model of tokenizer.json (`model`, under `top`) with the added tokens over its
// vocabulary, for a model of `vocab_size` ids (0: the largest id given + 1). `file` names
// tokenizer.json; `sum` gets the counts.
HfModel read_model(const std::string& file, const JsonAt& top, const JsonAt& model, uint32_t vocab_size,
                   HfTokenizerSummary& sum);

// The id of `token` in the vocabulary; a failure at `at` when it has none.
int32_t token_id(const Tokenizer& t, const JsonAt& at, const std::string& token);

// The model's unknown token: a Unigram model's unk_id, else the id of its unk_token; -1: none.
int32_t read_unk_id(const JsonAt& model, bool unigram, const std::vector<double>& scores, const Tokenizer& t);

// The pipeline (hf_pipeline.cpp): each step of `top`'s normalizer, pre_tokenizer,
// post_processor and decoder, "Sequence"s flattened. Each step's name goes into
// `pipeline` (HfTokenizerSummary::pipeline); each regex pattern into `sum`.
std::vector<flatbuffers::Offset<fb::HfNormalizer>> write_normalizers(flatbuffers::FlatBufferBuilder& fbb,
                                                                     const JsonAt& top,
                                                                     std::vector<std::string>& pipeline,
                                                                     HfTokenizerSummary& sum);
// `unigram`: a Unigram model's Metaspace, read with Rust tokenizers' semantics.
std::vector<flatbuffers::Offset<fb::HfPreTokenizer>> write_pre_tokenizers(flatbuffers::FlatBufferBuilder& fbb,
                                                                          const JsonAt& top, bool unigram,
                                                                          std::vector<std::string>& pipeline,
                                                                          HfTokenizerSummary& sum);
// The special tokens the post-processor puts before and after a single sequence.
void read_post_processor(const JsonAt& top, const Tokenizer& t, std::vector<int32_t>& prefix_ids,
                         std::vector<int32_t>& suffix_ids, std::vector<std::string>& pipeline);
std::vector<flatbuffers::Offset<fb::HfDecoder>> write_decoders(flatbuffers::FlatBufferBuilder& fbb, const JsonAt& top,
                                                               bool unigram, std::vector<std::string>& pipeline);

}  // namespace petrel::convert::hf_tokenizer_detail
