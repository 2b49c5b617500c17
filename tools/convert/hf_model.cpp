// tokenizer.json's model for write_hf_tokenizer (hf_tokenizer_parts.h): BPE, Unigram or
// WordPiece with its options, the vocabulary and the added tokens over it, the merges,
// and the hash tables of merges and tokens the engine probes.
#include <algorithm>
#include <cmath>

#include "convert/hf_tokenizer_parts.h"

namespace petrel::convert::hf_tokenizer_detail {
namespace {

const json kNoAddedTokens = json::array();

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

// An id of the vocabulary or of an added token.
uint32_t id_value(const JsonAt& at, const json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxTokens)
    at.fail("ids must be integers 0.." + std::to_string(kMaxTokens - 1) + ", got " + json_excerpt(v));
  return v.get<uint32_t>();
}

// WordPiece: transformers.js reads continuing_subword_prefix as it is (absent: the
// text "undefined"; refused) and max_input_chars_per_word (absent: 100).
void read_model_options(const JsonAt& model, bool unigram, bool wordpiece, std::string& continuing_prefix,
                        uint32_t& max_input_chars) {
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
}

// Ids: the model's vocabulary, then the added tokens over it (as transformers.js).
void read_vocabulary(const JsonAt& vocab, const JsonAt& added, bool unigram, uint32_t& vocab_size, Tokenizer& t,
                     std::vector<double>& scores, uint32_t& max_piece_bytes) {
  uint32_t largest = 0;
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
}

// The added tokens of ids below vocab_size (over the vocabulary's tokens; the others
// are counted in sum.dropped_added), one per content.
std::vector<Added> read_added_tokens(const JsonAt& added, uint32_t vocab_size, Tokenizer& t, HfTokenizerSummary& sum) {
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
  return added_tokens;
}

// Merges: "left right" strings (tokenizers < 0.20) or [left, right] pairs. Then their hash table.
void read_merges(const std::string& file, const JsonAt& model, bool unigram, bool wordpiece, Tokenizer& t,
                 HfTokenizerSummary& sum) {
  const json no_merges = json::array();
  const JsonAt merges = unigram || wordpiece ? JsonAt(file, no_merges, "model.merges") : model.at("merges");
  if (!merges.raw().is_array()) merges.fail("must be a list");
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
    const int32_t left_id = token_id(t, m, left), right_id = token_id(t, m, right);
    t.merges.emplace_back(left_id, right_id, token_id(t, m, left + right));
  }
  sum.merges = static_cast<uint32_t>(t.merges.size());
  t.merge_max_probe = build_table(
      t.merges.size(), [&](size_t i) { return detail::hf_merge_hash(t.merges[i].left(), t.merges[i].right()); },
      [](size_t i) { return static_cast<uint32_t>(i); },
      [&](uint32_t j, size_t i) { return t.merges[j].left() == t.merges[i].left() && t.merges[j].right() == t.merges[i].right(); },
      t.merge_slots, file + ": model.merges");
}

// The tokens' hash table. Tokens are inserted in id order: the slots, and so the file's
// bytes, must not depend on the map's (per-process keyed) iteration order.
void index_tokens(const std::string& file, Tokenizer& t) {
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
}

}  // namespace

HfModel read_model(const std::string& file, const JsonAt& top, const JsonAt& model, uint32_t vocab_size,
                   HfTokenizerSummary& sum) {
  HfModel m;
  const std::string model_type = model.has("type") ? model.text("type") : "";
  const bool unigram = model_type == "Unigram", wordpiece = model_type == "WordPiece";
  if (model_type != "BPE" && !unigram && !wordpiece)
    model.at("type").fail("'" + model_type + "' is not supported (only BPE, Unigram and WordPiece)");
  m.unigram = unigram;
  m.wordpiece = wordpiece;
  read_model_options(model, unigram, wordpiece, m.continuing_prefix, m.max_input_chars);

  const JsonAt vocab = model.at("vocab");
  if (!unigram && !vocab.raw().is_object()) vocab.fail("must map tokens to ids");
  // Unigram: [[piece, score], ...], the id the index (Rust's Unigram::from).
  if (unigram) {
    if (!vocab.raw().is_array() || vocab.raw().empty()) vocab.fail("must be a non-empty list of [piece, score] pairs");
    if (vocab.raw().size() > kMaxTokens) vocab.fail("more than " + std::to_string(kMaxTokens) + " pieces");
  }
  const JsonAt added = top.has("added_tokens") ? top.at("added_tokens") : JsonAt(file, kNoAddedTokens, "added_tokens");
  if (!added.raw().is_array()) added.fail("must be a list");
  read_vocabulary(vocab, added, unigram, vocab_size, m.t, m.scores, m.max_piece_bytes);
  m.added_tokens = read_added_tokens(added, vocab_size, m.t, sum);
  read_merges(file, model, unigram, wordpiece, m.t, sum);
  index_tokens(file, m.t);
  return m;
}

int32_t token_id(const Tokenizer& t, const JsonAt& at, const std::string& token) {
  auto it = t.id_of.find(token);
  if (it == t.id_of.end()) at.fail("token '" + detail::to_valid_utf8(token) + "' is not in the vocabulary");
  return it->second;
}

int32_t read_unk_id(const JsonAt& model, bool unigram, const std::vector<double>& scores, const Tokenizer& t) {
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
  return unk_id;
}

}  // namespace petrel::convert::hf_tokenizer_detail
