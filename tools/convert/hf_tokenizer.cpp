// tokenizer.json -> the model file's Tokenizer (kind HuggingFace). The semantics are
// transformers.js 3.7's (the oracle, tools/reference/make_hf_tokenizer_fixtures.mjs):
// what it reads is stored, what it would read differently from Hugging Face's Rust
// tokenizers, or not at all, is refused by name rather than guessed. A Unigram model
// (T5, ALBERT, XLM-R, mT5) is read with Rust tokenizers' semantics instead (0.19 ..
// 0.21; the oracle is SentencePiece itself, tools/reference/make_hf_unigram_fixtures.py):
// transformers.js 3.7 approximates its Precompiled normalizer by NFKC and drops
// Metaspace's prefix when add_prefix_space is absent, as modern files write it.
#include "convert/hf_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "convert/config_reader.h"
#include "convert/family_tokenizer.h"
#include "core/bytes.h"
#include "core/string_hash.h"
#include "core/utf8.h"
#include "format/tokenizer_tables.h"
#include "text/split_regex.h"
#include "text/spm_trie.h"
#include "text/spm_normalizer.h"

namespace petrel::convert {
namespace {

using json = nlohmann::json;

// The model file's limits, checked here so a converted file always loads.
constexpr uint32_t kMaxTokens = 1u << 24;
constexpr size_t kMaxPipelineSteps = 64;
const json kNoAddedTokens = json::array();

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

struct Tokenizer {
  std::vector<std::string> vocab;  // id -> token
  detail::StringMap<std::string, int32_t> id_of;
  std::vector<fb::BpeMerge> merges;
  std::vector<uint32_t> merge_slots, token_slots;
  uint32_t merge_max_probe = 0, token_max_probe = 0;
};

size_t capacity_for(size_t entries) {
  size_t capacity = 16;
  while (capacity < 2 * entries) capacity *= 2;
  return capacity;
}

// An open-addressing table of `count` entries with linear probing: entry e has hash
// hash_of(e) and is stored as value_of(e) + 1; same(v, e) says that the stored value v has
// e's key (then e replaces it: the later entry wins, as in a JavaScript Map). Its
// capacity is the smallest power of two of at least twice the entries in which every
// entry lies within detail::kMaxHashProbe slots of its hash (the loader's bound on a
// lookup's work); keys built to collide (the hashes are public) fail conversion, named
// by `what`, rather than make every lookup long. Returns the table's largest probe.
template <class HashOf, class ValueOf, class Same>
uint32_t build_table(size_t count, HashOf hash_of, ValueOf value_of, Same same, std::vector<uint32_t>& slots,
                     const std::string& what) {
  const size_t least = capacity_for(count);
  for (size_t capacity = least;; capacity *= 2) {
    slots.assign(capacity, 0);
    const size_t mask = capacity - 1;
    uint32_t max_probe = 0;
    bool fits = true;
    for (size_t e = 0; e < count && fits; ++e) {
      const uint32_t hash = hash_of(e);
      for (uint32_t probe = 0;; ++probe) {
        if (probe > detail::kMaxHashProbe) {
          fits = false;
          break;
        }
        uint32_t& slot = slots[(hash + probe) & mask];
        if (slot == 0 || same(slot - 1, e)) {
          slot = value_of(e) + 1;
          max_probe = std::max(max_probe, probe);
          break;
        }
      }
    }
    if (fits) return max_probe;
    if (capacity >= 16 * least)
      throw ConvertError(what + ": more than " + std::to_string(detail::kMaxHashProbe) +
                         " entries collide in the lookup table even at 1/32 load (keys built to collide?)");
  }
}

// Base64 (RFC 4648's standard alphabet) decoded strictly, as Rust's base64 STANDARD
// engine does for precompiled_charsmap: padding to a multiple of 4 characters, no
// whitespace, the last character's unused bits zero. nullopt: not such base64.
std::optional<std::string> decode_base64(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      if (k >= 4 - pad) {
        bits <<= 6;
        continue;
      }
      const int v = value(text[i + k]);
      if (v < 0) return std::nullopt;
      bits = bits << 6 | static_cast<uint32_t>(v);
    }
    if ((pad == 1 && (bits & 0xFF) != 0) || (pad == 2 && (bits & 0xFFFF) != 0)) return std::nullopt;  // non-canonical
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>(bits >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

fb::HfPrependScheme prepend_scheme(const JsonAt& at) {
  const std::string s = at.text("prepend_scheme", "always");
  if (s == "always") return fb::HfPrependScheme::Always;
  if (s == "never") return fb::HfPrependScheme::Never;
  if (s == "first") return fb::HfPrependScheme::First;
  at.at("prepend_scheme").fail("unknown value '" + s + "'");
}

// Rust tokenizers' Metaspace (0.19 ..): a legacy add_prefix_space: false means the
// scheme never (and contradicts any other scheme given); absent, the scheme decides.
bool rust_metaspace_prefix(const JsonAt& at, fb::HfPrependScheme scheme) {
  if (at.has("add_prefix_space") && !at.flag("add_prefix_space", true)) {
    if (at.has("prepend_scheme") && scheme != fb::HfPrependScheme::Never)
      at.at("add_prefix_space").fail("false contradicts prepend_scheme");
    return false;
  }
  return scheme != fb::HfPrependScheme::Never;
}

}  // namespace

flatbuffers::Offset<fb::Tokenizer> write_hf_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const HfTokenizerFiles& files,
                                                      uint32_t vocab_size, HfTokenizerSummary* summary) {
  const std::string file = files.dir + "/tokenizer.json";
  const json root = parse_json(file, files.tokenizer_json);
  const JsonAt top(file, root, "");
  if (!root.is_object()) top.fail("not a JSON object");
  HfTokenizerSummary sum;
  Tokenizer t;

  // The model: BPE, Unigram or WordPiece.
  const JsonAt model = top.at("model");
  const std::string model_type = model.has("type") ? model.text("type") : "";
  const bool unigram = model_type == "Unigram", wordpiece = model_type == "WordPiece";
  if (model_type != "BPE" && !unigram && !wordpiece)
    model.at("type").fail("'" + model_type + "' is not supported (only BPE, Unigram and WordPiece)");
  // WordPiece: transformers.js reads continuing_subword_prefix as it is (absent: the
  // text "undefined"; refused) and max_input_chars_per_word (absent: 100).
  std::string continuing_prefix;
  uint32_t max_input_chars = 100;
  if (wordpiece) {
    continuing_prefix = model.step_text("continuing_subword_prefix");
    if (model.has("max_input_chars_per_word")) {
      const json& m = model.raw()["max_input_chars_per_word"];
      if (!m.is_number_unsigned() || m.get<uint64_t>() > 0xffffffffu)
        model.at("max_input_chars_per_word").fail("must be an integer 0..4294967295, got " + json_excerpt(m));
      max_input_chars = m.get<uint32_t>();
    }
  } else if (!unigram) {
    if (!model.text("continuing_subword_prefix", "").empty() || !model.text("end_of_word_suffix", "").empty())
      model.fail("continuing_subword_prefix / end_of_word_suffix are not supported");
    if (model.has("dropout") && !(model.raw()["dropout"].is_number() && model.raw()["dropout"].get<double>() == 0))
      model.at("dropout").fail("BPE dropout is not supported (it samples a different split per call)");
  }

  const JsonAt vocab = model.at("vocab");
  if (!unigram && !vocab.raw().is_object()) vocab.fail("must map tokens to ids");
  // Unigram: [[piece, score], ...], the id the index (Rust's Unigram::from).
  if (unigram) {
    if (!vocab.raw().is_array() || vocab.raw().empty()) vocab.fail("must be a non-empty list of [piece, score] pairs");
    if (vocab.raw().size() > kMaxTokens) vocab.fail("more than " + std::to_string(kMaxTokens) + " pieces");
  }
  const JsonAt added = top.has("added_tokens") ? top.at("added_tokens") : JsonAt(file, kNoAddedTokens, "added_tokens");
  if (!added.raw().is_array()) added.fail("must be a list");

  // Ids: the model's vocabulary, then the added tokens over it (as transformers.js).
  uint32_t largest = 0;
  auto id_value = [&](const JsonAt& at, const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxTokens)
      at.fail("ids must be integers 0.." + std::to_string(kMaxTokens - 1) + ", got " + json_excerpt(v));
    return v.get<uint32_t>();
  };
  if (unigram)
    largest = static_cast<uint32_t>(vocab.raw().size() - 1);
  else
    for (auto it = vocab.raw().begin(); it != vocab.raw().end(); ++it) largest = std::max(largest, id_value(vocab, *it));
  const uint32_t model_tokens = largest + 1;
  if (vocab_size == 0) {
    for (size_t i = 0; i < added.raw().size(); ++i) largest = std::max(largest, id_value(added.at(i), added.at(i).at("id").raw()));
    vocab_size = largest + 1;
  }
  if (model_tokens > vocab_size)
    vocab.fail("holds ids up to " + std::to_string(model_tokens - 1) + ", beyond the model's vocab_size " +
               std::to_string(vocab_size));
  t.vocab.assign(vocab_size, std::string());
  std::vector<bool> seen(vocab_size, false);
  std::vector<double> scores;
  uint32_t max_piece_bytes = 0;
  for (size_t i = 0; unigram && i < vocab.raw().size(); ++i) {
    const JsonAt entry = vocab.at(i);
    const json& e = entry.raw();
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      entry.fail("must be a [piece, score] pair, got " + json_excerpt(e));
    const std::string piece = e[0].get<std::string>();
    const double score = e[1].get<double>();
    if (piece.empty() || !detail::is_valid_utf8(piece)) entry.fail("the piece must be non-empty UTF-8");
    if (piece.size() > detail::kMaxPieceBytes)
      entry.fail("the piece is " + std::to_string(piece.size()) + " bytes, more than " +
                 std::to_string(detail::kMaxPieceBytes));
    if (!std::isfinite(score)) entry.fail("the score must be a finite number");
    t.vocab[i] = piece;
    t.id_of[piece] = static_cast<int32_t>(i);  // Rust's token_to_ids: the later of equal pieces
    scores.push_back(score);
    max_piece_bytes = std::max(max_piece_bytes, static_cast<uint32_t>(piece.size()));
  }
  for (auto it = vocab.raw().begin(); !unigram && it != vocab.raw().end(); ++it) {
    const uint32_t id = it->get<uint32_t>();
    if (seen[id]) vocab.fail("id " + std::to_string(id) + " is given twice");
    if (!detail::is_valid_utf8(it.key())) vocab.fail("token of id " + std::to_string(id) + " is not UTF-8");
    seen[id] = true;
    t.vocab[id] = it.key();
    t.id_of[it.key()] = static_cast<int32_t>(id);
  }

  struct Added {
    int32_t id;
    std::string content;
    bool special, lstrip, rstrip, single_word, normalized;
  };
  std::vector<Added> added_tokens;
  detail::StringMap<std::string, size_t> added_index;  // content -> its entry
  for (size_t i = 0; i < added.raw().size(); ++i) {
    const JsonAt a = added.at(i);
    const uint32_t id = id_value(a.at("id"), a.at("id").raw());
    const std::string content = a.text("content");
    if (content.empty() || !detail::is_valid_utf8(content)) a.at("content").fail("must be non-empty UTF-8");
    if (content.size() > detail::kMaxPieceBytes)  // the loader's limit on a token's text
      a.at("content").fail("is " + std::to_string(content.size()) + " bytes, more than " +
                           std::to_string(detail::kMaxPieceBytes));
    if (id >= vocab_size) {
      ++sum.dropped_added;
      continue;
    }
    t.vocab[id] = content;
    t.id_of[content] = static_cast<int32_t>(id);
    // Equal contents: the last entry is the one matched (transformers.js maps content -> token).
    // tokenizers' AddedToken defaults: normalized unless special.
    const bool special = a.flag("special", false);
    const Added entry{static_cast<int32_t>(id), content, special, a.flag("lstrip", false),
                      a.flag("rstrip", false), a.flag("single_word", false), a.flag("normalized", !special)};
    auto [at, fresh] = added_index.emplace(content, added_tokens.size());
    if (fresh)
      added_tokens.push_back(entry);
    else
      added_tokens[at->second] = entry;
  }
  sum.added_tokens = static_cast<uint32_t>(added_tokens.size());
  for (const std::string& token : t.vocab) sum.tokens += token.empty() ? 0 : 1;

  // Merges: "left right" strings (tokenizers < 0.20) or [left, right] pairs.
  const json no_merges = json::array();
  const JsonAt merges = unigram || wordpiece ? JsonAt(file, no_merges, "model.merges") : model.at("merges");
  if (!merges.raw().is_array()) merges.fail("must be a list");
  auto token_id = [&](const JsonAt& at, const std::string& token) {
    auto it = t.id_of.find(token);
    if (it == t.id_of.end()) at.fail("token '" + detail::to_valid_utf8(token) + "' is not in the vocabulary");
    return it->second;
  };
  t.merges.reserve(merges.raw().size());
  for (size_t i = 0; i < merges.raw().size(); ++i) {
    const JsonAt m = merges.at(i);
    std::string left, right;
    if (m.raw().is_string()) {
      const std::string s = m.raw().get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        m.fail("must be two tokens separated by one space, got " + json_excerpt(m.raw()));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.raw().is_array() && m.raw().size() == 2 && m.raw()[0].is_string() && m.raw()[1].is_string()) {
      left = m.raw()[0].get<std::string>();
      right = m.raw()[1].get<std::string>();
    } else {
      m.fail("must be \"left right\" or [left, right], got " + json_excerpt(m.raw()));
    }
    const int32_t left_id = token_id(m, left), right_id = token_id(m, right);
    t.merges.emplace_back(left_id, right_id, token_id(m, left + right));
  }
  sum.merges = static_cast<uint32_t>(t.merges.size());
  t.merge_max_probe = build_table(
      t.merges.size(), [&](size_t i) { return detail::hf_merge_hash(t.merges[i].left(), t.merges[i].right()); },
      [](size_t i) { return static_cast<uint32_t>(i); },
      [&](uint32_t j, size_t i) { return t.merges[j].left() == t.merges[i].left() && t.merges[j].right() == t.merges[i].right(); },
      t.merge_slots, file + ": model.merges");
  // Tokens are inserted in id order: the slots, and so the file's bytes, must not depend
  // on the map's (per-process keyed) iteration order.
  std::vector<std::pair<int32_t, const std::string*>> by_id;
  by_id.reserve(t.id_of.size());
  for (const auto& entry : t.id_of) by_id.emplace_back(entry.second, &entry.first);
  std::sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : *a.second < *b.second;  // an added token may share an id
  });
  t.token_max_probe = build_table(
      by_id.size(), [&](size_t e) { return detail::hf_token_hash(*by_id[e].second); },
      [&](size_t e) { return static_cast<uint32_t>(by_id[e].first); },
      [&](uint32_t id, size_t e) { return t.vocab[id] == *by_id[e].second; }, t.token_slots,
      file + ": the vocabulary");

  // tokenizer_config.json: clean-up and the extra special tokens.
  bool clean_up_spaces = true;  // transformers.js's default
  std::vector<int32_t> special_ids;
  for (const Added& a : added_tokens)
    if (a.special) special_ids.push_back(a.id);
  if (files.tokenizer_config) {
    const ConfigReader config(files.dir + "/tokenizer_config.json", *files.tokenizer_config);
    clean_up_spaces = config.flag("clean_up_tokenization_spaces", true);
    for (const std::string& token : config.token_list("additional_special_tokens"))
      if (auto it = t.id_of.find(token); it != t.id_of.end()) special_ids.push_back(it->second);
  }
  std::sort(special_ids.begin(), special_ids.end());
  special_ids.erase(std::unique(special_ids.begin(), special_ids.end()), special_ids.end());

  std::vector<std::string> pipeline;
  // Normalizers.
  std::vector<flatbuffers::Offset<fb::HfNormalizer>> normalizers;
  if (top.has("normalizer")) {
    for (const JsonAt& n : top.at("normalizer").steps("normalizers")) {
      const std::string type = n.type();
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, content;
      bool is_regex = false;
      if (type == "Replace") {
        auto [p, regex] = n.pattern();
        if (p.empty()) n.at("pattern").fail("must not be empty");
        is_regex = regex;
        if (regex) sum.regexes.emplace_back(n.at("pattern").path() + ".Regex", p);
        pattern = fbb.CreateString(p);
        content = fbb.CreateString(n.step_text("content"));
      } else if (type == "Prepend") {
        content = fbb.CreateString(n.step_text("prepend"));
      }
      // BertNormalizer: transformers.js reads each flag as truthy (absent: false) and
      // strip_accents as null/absent (follow lowercase), false or true.
      fb::HfStripAccents strip_accents = fb::HfStripAccents::FollowLowercase;
      if (type == "BertNormalizer" && n.has("strip_accents"))
        strip_accents = n.flag("strip_accents", false) ? fb::HfStripAccents::Yes : fb::HfStripAccents::No;
      flatbuffers::Offset<flatbuffers::Vector<uint8_t>> charsmap;
      if (type == "Precompiled") {
        const std::optional<std::string> blob = decode_base64(n.text("precompiled_charsmap"));
        if (!blob) n.at("precompiled_charsmap").fail("is not base64 (RFC 4648, padded)");
        if (blob->empty()) n.at("precompiled_charsmap").fail("is empty (tokenizers cannot read it)");
        auto map = text::CharsMap::parse(*blob, "charsmap");
        if (!map) n.at("precompiled_charsmap").fail(map.error().message);
        // spm_precompiled refuses a map whose replacement strings are not UTF-8.
        const size_t trie_bytes = detail::load_le32(reinterpret_cast<const unsigned char*>(blob->data()));
        if (!detail::is_valid_utf8(std::string_view(*blob).substr(4 + trie_bytes)))
          n.at("precompiled_charsmap").fail("its replacement strings are not UTF-8");
        charsmap = fbb.CreateVector(reinterpret_cast<const uint8_t*>(blob->data()), blob->size());
      }
      static const std::map<std::string, fb::HfNormalizerKind> kinds = {
          {"NFC", fb::HfNormalizerKind::Nfc},         {"NFD", fb::HfNormalizerKind::Nfd},
          {"NFKC", fb::HfNormalizerKind::Nfkc},       {"NFKD", fb::HfNormalizerKind::Nfkd},
          {"Replace", fb::HfNormalizerKind::Replace}, {"Prepend", fb::HfNormalizerKind::Prepend},
          {"Strip", fb::HfNormalizerKind::Strip},     {"Lowercase", fb::HfNormalizerKind::Lowercase},
          {"BertNormalizer", fb::HfNormalizerKind::BertNormalizer}, {"Precompiled", fb::HfNormalizerKind::Precompiled}};
      auto kind = kinds.find(type);
      if (kind == kinds.end()) n.at("type").fail("normalizer '" + type + "' is not supported");
      fb::HfNormalizerBuilder nb(fbb);
      nb.add_kind(kind->second);
      if (!pattern.IsNull()) nb.add_pattern(pattern);
      nb.add_pattern_is_regex(is_regex);
      if (!content.IsNull()) nb.add_content(content);
      nb.add_strip_left(type == "Strip" && n.flag("strip_left", false));
      nb.add_strip_right(type == "Strip" && n.flag("strip_right", false));
      if (type == "BertNormalizer") {
        nb.add_clean_text(n.flag("clean_text", false));
        nb.add_handle_chinese_chars(n.flag("handle_chinese_chars", false));
        nb.add_strip_accents(strip_accents);
        nb.add_lowercase(n.flag("lowercase", false));
      }
      if (!charsmap.IsNull()) nb.add_precompiled_charsmap(charsmap);
      normalizers.push_back(nb.Finish());
    }
  }
  pipeline.push_back("|");

  // Pre-tokenizers.
  std::vector<flatbuffers::Offset<fb::HfPreTokenizer>> pre_tokenizers;
  if (top.has("pre_tokenizer")) {
    bool byte_level = false;
    for (const JsonAt& p : top.at("pre_tokenizer").steps("pretokenizers")) {
      const std::string type = p.type();
      if (byte_level) p.fail("a pre-tokenizer after ByteLevel is not supported");
      byte_level = type == "ByteLevel";
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, replacement;
      bool is_regex = false;
      fb::HfSplitBehavior behavior = fb::HfSplitBehavior::Isolated;
      fb::HfPrependScheme scheme = fb::HfPrependScheme::Always;
      fb::HfPreTokenizerKind kind;
      bool metaspace_split = false, prefix_space = false;
      if (type == "Split") {
        kind = fb::HfPreTokenizerKind::Split;
        auto [text, regex] = p.pattern();
        if (text.empty()) p.at("pattern").fail("must not be empty");
        pattern = fbb.CreateString(text);
        is_regex = regex;
        if (regex) sum.regexes.emplace_back(p.at("pattern").path() + ".Regex", text);
        static const std::map<std::string, fb::HfSplitBehavior> behaviors = {
            {"Removed", fb::HfSplitBehavior::Removed},
            {"Isolated", fb::HfSplitBehavior::Isolated},
            {"MergedWithPrevious", fb::HfSplitBehavior::MergedWithPrevious},
            {"MergedWithNext", fb::HfSplitBehavior::MergedWithNext},
            {"Contiguous", fb::HfSplitBehavior::Contiguous}};
        auto b = behaviors.find(p.text("behavior", "Isolated"));
        if (b == behaviors.end()) p.at("behavior").fail("unknown value " + json_excerpt(p.at("behavior").raw()));
        behavior = b->second;
      } else if (type == "ByteLevel") {
        kind = fb::HfPreTokenizerKind::ByteLevel;
      } else if (type == "Metaspace") {
        kind = fb::HfPreTokenizerKind::Metaspace;
        replacement = fbb.CreateString(p.step_text("replacement"));
        scheme = prepend_scheme(p);
        const std::string r = p.text("replacement");
        if (unigram && (r.empty() || detail::utf8_sequence(r, 0) != r.size()))
          p.at("replacement").fail("must be one character (Rust's Metaspace holds a char)");
        if (unigram) {
          metaspace_split = p.flag("split", true);  // Rust's default
          if (rust_metaspace_prefix(p, scheme)) prefix_space = true;
        } else if (p.flag("split", false)) {
          p.at("split").fail("Metaspace with split: true is not supported (for a BPE model)");
        }
      } else if (type == "Digits") {
        kind = fb::HfPreTokenizerKind::Digits;
      } else if (type == "WhitespaceSplit") {
        kind = fb::HfPreTokenizerKind::WhitespaceSplit;
      } else if (type == "Whitespace") {
        kind = fb::HfPreTokenizerKind::Whitespace;
      } else if (type == "BertPreTokenizer") {
        kind = fb::HfPreTokenizerKind::BertPreTokenizer;
      } else if (type == "Punctuation") {
        // transformers.js keeps runs of punctuation together whatever the behavior says.
        if (p.text("behavior", "Isolated") != "Isolated" && p.text("behavior", "Isolated") != "Contiguous")
          p.at("behavior").fail("Punctuation with behavior '" + p.text("behavior") + "' is not supported");
        kind = fb::HfPreTokenizerKind::Punctuation;
      } else {
        p.at("type").fail("pre-tokenizer '" + type + "' is not supported");
      }
      fb::HfPreTokenizerBuilder b(fbb);
      b.add_kind(kind);
      if (!pattern.IsNull()) b.add_pattern(pattern);
      b.add_pattern_is_regex(is_regex);
      b.add_behavior(behavior);
      b.add_invert(p.flag("invert", false));
      // transformers.js reads Metaspace's add_prefix_space (absent: false); prepend_scheme decides when.
      // Rust (a Unigram tokenizer's): prepend unless add_prefix_space is false or the scheme never.
      b.add_add_prefix_space(unigram && type == "Metaspace" ? prefix_space : p.flag("add_prefix_space", false));
      b.add_split(metaspace_split);
      b.add_use_regex(p.flag("use_regex", true));
      if (!replacement.IsNull()) b.add_replacement(replacement);
      b.add_prepend_scheme(scheme);
      b.add_individual_digits(p.flag("individual_digits", false));
      pre_tokenizers.push_back(b.Finish());
    }
  }
  pipeline.push_back(wordpiece ? "| WordPiece |" : unigram ? "| Unigram |" : "| BPE |");

  // The post-processor: special tokens around a single sequence.
  std::vector<int32_t> prefix_ids, suffix_ids;
  if (top.has("post_processor")) {
    for (const JsonAt& p : top.at("post_processor").steps("processors")) {
      const std::string type = p.type();
      if (type == "ByteLevel") continue;  // offsets only
      if (type == "BertProcessing" || type == "RobertaProcessing") {
        // [CLS] $A [SEP]: transformers.js adds the token strings cls[0] and sep[0]
        // through the vocabulary (their ids in the file are not read).
        for (const char* key : {"cls", "sep"}) {
          const JsonAt pair = p.at(key);
          if (!pair.raw().is_array() || pair.raw().empty() || !pair.raw()[0].is_string())
            pair.fail("must be [token, id], got " + json_excerpt(pair.raw()));
          const int32_t id = token_id(pair.at(size_t{0}), pair.raw()[0].get<std::string>());
          (key[0] == 'c' ? prefix_ids : suffix_ids).push_back(id);
        }
        pipeline.push_back(type);
        continue;
      }
      if (type != "TemplateProcessing") p.at("type").fail("post-processor '" + type + "' is not supported");
      const JsonAt single = p.at("single");
      if (!single.raw().is_array()) single.fail("must be a list");
      bool after = false;
      for (size_t i = 0; i < single.raw().size(); ++i) {
        const JsonAt item = single.at(i);
        if (item.has("Sequence")) {
          if (item.at("Sequence").text("id") != "A") item.fail("a single sequence template names sequence A only");
          if (after) item.fail("sequence A appears twice");
          after = true;
        } else if (item.has("SpecialToken")) {
          // transformers.js adds the SpecialToken's id string through the vocabulary.
          const JsonAt special = item.at("SpecialToken");
          const int32_t id = token_id(special, special.text("id"));
          (after ? suffix_ids : prefix_ids).push_back(id);
        } else {
          item.fail("must be a Sequence or a SpecialToken");
        }
      }
      pipeline.push_back("Template(" + std::to_string(prefix_ids.size()) + "+" + std::to_string(suffix_ids.size()) + ")");
    }
  }

  // Decoders.
  std::vector<flatbuffers::Offset<fb::HfDecoder>> decoders;
  if (top.has("decoder")) {
    for (const JsonAt& d : top.at("decoder").steps("decoders")) {
      const std::string type = d.type();
      pipeline.push_back(type);
      flatbuffers::Offset<flatbuffers::String> pattern, content, replacement, prefix;
      fb::HfDecoderKind kind;
      if (type == "ByteLevel") {
        kind = fb::HfDecoderKind::ByteLevel;
      } else if (type == "Replace") {
        kind = fb::HfDecoderKind::Replace;
        auto [p, regex] = d.pattern();
        if (regex) d.at("pattern").fail("a Replace decoder with a regex is not supported");
        if (p.empty()) d.at("pattern").fail("must not be empty");
        pattern = fbb.CreateString(p);
        content = fbb.CreateString(d.step_text("content"));
      } else if (type == "ByteFallback") {
        kind = fb::HfDecoderKind::ByteFallback;
      } else if (type == "Fuse") {
        kind = fb::HfDecoderKind::Fuse;
      } else if (type == "Strip") {
        kind = fb::HfDecoderKind::Strip;
        const std::string c = d.text("content");
        // transformers.js compares one UTF-16 unit of the token with it.
        if (c.empty() || detail::utf8_sequence(c, 0) != c.size() || c.size() == 4)
          d.at("content").fail("must be one character of the Basic Multilingual Plane");
        content = fbb.CreateString(c);
      } else if (type == "Metaspace") {
        kind = fb::HfDecoderKind::Metaspace;
        replacement = fbb.CreateString(d.step_text("replacement"));
      } else if (type == "WordPiece") {
        kind = fb::HfDecoderKind::WordPiece;
        prefix = fbb.CreateString(d.step_text("prefix"));
      } else {
        d.at("type").fail("decoder '" + type + "' is not supported");
      }
      fb::HfDecoderBuilder b(fbb);
      b.add_kind(kind);
      if (!pattern.IsNull()) b.add_pattern(pattern);
      if (!content.IsNull()) b.add_content(content);
      b.add_start(type == "Strip" ? d.count("start", 0) : 0);
      b.add_stop(type == "Strip" ? d.count("stop", 0) : 0);
      if (!replacement.IsNull()) b.add_replacement(replacement);
      // Rust's Metaspace decoder drops the first token's leading space unless the scheme is never.
      b.add_add_prefix_space(type == "Metaspace" &&
                             (unigram ? rust_metaspace_prefix(d, prepend_scheme(d)) : d.flag("add_prefix_space", false)));
      if (!prefix.IsNull()) b.add_prefix(prefix);
      b.add_cleanup(type == "WordPiece" && d.flag("cleanup", false));
      decoders.push_back(b.Finish());
    }
  }

  std::vector<flatbuffers::Offset<fb::HfAddedToken>> added_offsets;
  std::vector<std::string_view> added_contents;
  for (const Added& a : added_tokens) {
    added_offsets.push_back(fb::CreateHfAddedToken(fbb, a.id, fbb.CreateString(a.content), a.special, a.lstrip, a.rstrip,
                                                   a.single_word, a.normalized));
    if (!a.normalized) added_contents.push_back(a.content);
  }
  text::PieceTrie added_trie;
  added_trie.build(added_contents);  // distinct contents: no duplicate to report

  int32_t unk_id = -1;
  if (unigram) {
    if (model.has("unk_id")) {
      const json& u = model.raw()["unk_id"];
      if (!u.is_number_unsigned() || u.get<uint64_t>() >= scores.size())
        model.at("unk_id").fail("must be the id of one of the " + std::to_string(scores.size()) + " pieces, got " +
                                json_excerpt(u));
      unk_id = u.get<int32_t>();
    }
  } else if (model.has("unk_token")) {
    auto it = t.id_of.find(model.text("unk_token"));
    if (it == t.id_of.end()) model.at("unk_token").fail("is not in the vocabulary");
    unk_id = it->second;
  }

  auto added_vector = fbb.CreateVector(added_offsets);
  auto normalizer_vector = fbb.CreateVector(normalizers);
  auto pre_vector = fbb.CreateVector(pre_tokenizers);
  auto decoder_vector = fbb.CreateVector(decoders);
  auto special_vector = fbb.CreateVector(special_ids);
  auto prefix_vector = fbb.CreateVector(prefix_ids);
  auto suffix_vector = fbb.CreateVector(suffix_ids);
  auto merge_vector = fbb.CreateVectorOfStructs(t.merges);
  auto merge_slots = fbb.CreateVector(t.merge_slots);
  auto token_slots = fbb.CreateVector(t.token_slots);
  flatbuffers::Offset<flatbuffers::Vector<const fb::PieceTrieNode*>> added_trie_nodes;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> added_trie_labels;
  if (!added_contents.empty()) {
    added_trie_nodes = fbb.CreateVectorOfStructs(reinterpret_cast<const fb::PieceTrieNode*>(added_trie.nodes()),
                                                 added_trie.node_count());
    added_trie_labels = fbb.CreateVector(added_trie.labels(), added_trie.node_count());
  }
  flatbuffers::Offset<flatbuffers::String> prefix_string;
  if (wordpiece) prefix_string = fbb.CreateString(continuing_prefix);
  flatbuffers::Offset<flatbuffers::Vector<double>> score_vector;
  if (unigram) score_vector = fbb.CreateVector(scores);
  fb::HfTokenizerBuilder hb(fbb);
  hb.add_model(wordpiece ? fb::HfModelKind::WordPiece : unigram ? fb::HfModelKind::Unigram : fb::HfModelKind::Bpe);
  if (wordpiece) {
    hb.add_continuing_subword_prefix(prefix_string);
    hb.add_max_input_chars_per_word(max_input_chars);
  }
  if (unigram) {
    hb.add_scores(score_vector);
    hb.add_max_piece_bytes(max_piece_bytes);
  }
  hb.add_normalizers(normalizer_vector);
  hb.add_pre_tokenizers(pre_vector);
  hb.add_decoders(decoder_vector);
  hb.add_added_tokens(added_vector);
  hb.add_special_ids(special_vector);
  hb.add_prefix_ids(prefix_vector);
  hb.add_suffix_ids(suffix_vector);
  hb.add_unk_id(unk_id);
  hb.add_byte_fallback(model.flag("byte_fallback", false));
  hb.add_fuse_unk(!unigram && model.flag("fuse_unk", false));  // Unigram fuses in the model, per word
  hb.add_ignore_merges(model.flag("ignore_merges", false));
  hb.add_clean_up_spaces(clean_up_spaces);
  hb.add_merges(merge_vector);
  hb.add_merge_slots(merge_slots);
  hb.add_merge_max_probe(t.merge_max_probe);
  hb.add_token_slots(token_slots);
  hb.add_token_max_probe(t.token_max_probe);
  if (!added_contents.empty()) {
    hb.add_added_trie_nodes(added_trie_nodes);
    hb.add_added_trie_labels(added_trie_labels);
  }
  const auto hf = hb.Finish();

  TokenizerStrings strings(fbb, StringLayout::kSpans);
  const TokenizerStrings::Table vocab_table = strings.add(t.vocab);
  const auto blob = strings.blob();
  fb::TokenizerBuilder b(fbb);
  b.add_kind(fb::TokenizerKind::HuggingFace);
  TokenizerStrings::add_vocab(b, vocab_table);
  TokenizerStrings::add_blob(b, blob);
  b.add_unk_id(unk_id);
  b.add_hf(hf);
  if (summary != nullptr) {
    for (const std::string& step : pipeline) sum.pipeline += (sum.pipeline.empty() ? "" : " ") + step;
    *summary = sum;
  }
  return b.Finish();
}

void check_hf_regexes(const HfTokenizerFiles& files, const HfTokenizerSummary& summary) {
  for (const auto& [path, pattern] : summary.regexes) {
    auto compiled = text::SplitRegex::compile(pattern);
    if (!compiled) throw ConvertError(files.dir + "/tokenizer.json: " + path + ": " + compiled.error().message);
  }
}

HfTokenizerFiles read_hf_tokenizer_files(const std::string& dir) {
  HfTokenizerFiles files;
  files.dir = dir;
  files.tokenizer_json = read_text(dir + "/tokenizer.json", "");
  const std::string config = dir + "/tokenizer_config.json";
  if (file_exists(config)) files.tokenizer_config = read_text(config, "");
  return files;
}

std::vector<uint8_t> hf_tokenizer_buffer(const HfTokenizerFiles& files, uint32_t vocab_size,
                                         HfTokenizerSummary* summary) {
  flatbuffers::FlatBufferBuilder fbb(1 << 20);
  fbb.Finish(write_hf_tokenizer(fbb, files, vocab_size, summary));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

}  // namespace petrel::convert
